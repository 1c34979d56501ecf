//! Stage 2 of an attempt: the request a job sends. Its step's inputs become a
//! prompt (seed 001 Phase 2), earlier chunks of a continued document become
//! the history, and compression makes it fit the model's window (Phase 3).

use crate::attempt::Attempt;
use crate::chain::Chain;
use crate::{CONTINUE_INSTRUCTION, Executor, INVALID_REPLY, compress, now_ms, permanent};
use dialectic_cache::{Cache, ProgressEvent};
use dialectic_core::context::Context;
use dialectic_core::payload::JobPayload;
use dialectic_core::progress::EventKind;
use dialectic_core::prompt::{
    ChatRequest, Message, PromptConstructionPayload, PromptSettings, REJECTED_REPLY,
    fill_step_prompt,
};
use dialectic_core::recipe::{OutputRule, RecipeStep};
use dialectic_core::structured;
use dialectic_runtime::worker::AttemptError;
use dialectic_store::jobs::JobRow;
use dialectic_tokenizer::Encoding;

pub(crate) struct Prepared {
    pub request: ChatRequest,
    /// The compression steps that made it fit, recorded on the contribution.
    pub compressed: Vec<compress::Step>,
}

impl Executor {
    pub(crate) async fn request(
        &self,
        attempt: &Attempt<'_>,
        chain: Option<&Chain>,
    ) -> Result<Prepared, AttemptError> {
        let context = self.context(attempt, chain).await?;
        let services = compress::Services {
            counter: &self.counter,
            indexer: self
                .indexer
                .as_ref()
                .map(|i| i as &dyn compress::ContextIndexer),
            wallet: self
                .billing
                .as_ref()
                .map(|b| &**b as &dyn compress::ContextWallet),
        };
        let mut report = reporter(self.cache.get().cloned(), attempt);
        let fitted = compress::fit(
            context,
            &self.limits(attempt)?,
            &payer(attempt.job),
            &services,
            &mut report,
        )
        .await?;
        if !fitted.steps.is_empty() {
            tracing::info!(
                initial_tokens = fitted.initial_tokens,
                final_tokens = fitted.final_tokens,
                steps = fitted.steps.len(),
                "prompt compressed to fit the context window"
            );
        }
        let mut request = fitted.request;
        if let Some(own) = attempt.step.own_output() {
            request.required_keys = own.required_keys.clone();
            request.key_types = own.key_types.clone();
            request.publishes = own.publishes.clone();
            request.response_schema = Some(turn_schema(own, chain));
        }
        request.job_id = Some(attempt.job.id.to_string());
        Ok(Prepared {
            request,
            compressed: fitted.steps,
        })
    }

    async fn context(
        &self,
        attempt: &Attempt<'_>,
        chain: Option<&Chain>,
    ) -> Result<Context, AttemptError> {
        let step = &attempt.step;
        let continued = match chain {
            Some(chain) => chain.document_keys(attempt)?,
            None => Vec::new(),
        };
        let resources = self
            .gather_inputs(
                attempt.job,
                &attempt.payload,
                step,
                &attempt.project.initial_user_prompt,
                &continued,
            )
            .await?;
        let original = PromptConstructionPayload {
            system_instruction: attempt.stage.system_prompt.clone(),
            conversation_history: Vec::new(),
            resource_documents: resources,
            current_user_prompt: with_retry_note(
                with_clarification(step_prompt(attempt), &attempt.payload),
                attempt.job,
            ),
        };
        // Seed 001: the original request, then one assistant message per chunk.
        let chunks = chain.map_or_else(Vec::new, |c| {
            c.chunks
                .iter()
                .map(|c| Message::assistant(c.raw.clone(), Some(c.id.to_string())))
                .collect()
        });
        Ok(Context {
            original,
            chunks,
            continue_instruction: CONTINUE_INSTRUCTION.into(),
        })
    }

    fn limits(&self, attempt: &Attempt<'_>) -> Result<compress::Limits, AttemptError> {
        let model = &attempt.model;
        let encoding = Encoding::from_name(&model.tokenizer)
            .map_err(|e| permanent("unsupported_tokenizer", e))?;
        Ok(compress::Limits {
            model: model.api_identifier.clone(),
            max_tokens: attempt
                .step
                .effective_config()
                .max_tokens(model.max_output_tokens.max(1) as u32),
            temperature: attempt.step.effective_config().temperature,
            output_type: attempt.step.output_type.clone(),
            hints: hints(&attempt.payload.planned_documents, &attempt.step),
            encoding,
            context_window: model.context_window_tokens.max(1) as u64,
            input_rate: model.input_token_cost_rate,
            embedder: model
                .config
                .0
                .get("embedder")
                .and_then(|v| v.as_str())
                .unwrap_or(&self.embedder)
                .to_string(),
        })
    }
}

/// The shape this turn's reply must have: the output's whole schema, or for a
/// turn continuing a cut-off reply the same keys, requiring those the chunks
/// so far lack.
fn turn_schema(rule: &OutputRule, chain: Option<&Chain>) -> serde_json::Value {
    let schema = structured::reply_schema(rule);
    match chain {
        Some(chain) if !chain.chunks.is_empty() => {
            structured::continuation_schema(&schema, &chain.written())
        }
        _ => schema,
    }
}

/// A step a clarification round re-runs is told what was asked.
fn with_clarification(prompt: String, payload: &JobPayload) -> String {
    match &payload.clarification {
        Some(round) => prompt + &round.prompt_note(),
        None => prompt,
    }
}

/// The documents the reply should cover: what a PLAN step plans, or the step's own output.
fn hints(planned_documents: &[String], step: &RecipeStep) -> Vec<String> {
    if planned_documents.is_empty() {
        vec![step.output_type.clone()]
    } else {
        planned_documents.to_vec()
    }
}

/// Failures the model can mend by answering again: its last reply was not
/// JSON, or not the JSON its step asked for.
const MENDABLE: [&str; 2] = ["malformed_json", INVALID_REPLY];

/// The step's prompt, with the session's settings (`{{ pushback }}`) filled in.
fn step_prompt(attempt: &Attempt<'_>) -> String {
    let step = &attempt.step;
    let settings = PromptSettings {
        pushback: attempt.session.pushback,
    };
    match &step.prompt_template {
        Some(prompt) => fill_step_prompt(prompt, settings),
        None => format!("Write the {} document as JSON.", step.output_type),
    }
}

/// A retry after a refused reply tells the model why it was refused.
fn with_retry_note(prompt: String, job: &JobRow) -> String {
    let Some(details) = job.error_details.as_ref().map(|d| &d.0) else {
        return prompt;
    };
    let code = details.get("code").and_then(|c| c.as_str()).unwrap_or("");
    let previous = details.get("attempt").and_then(|a| a.as_i64());
    if !MENDABLE.contains(&code) || previous != Some(i64::from(job.attempt_count) - 1) {
        return prompt;
    }
    let reason = details
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or(code);
    format!(
        "{prompt}\n\n{REJECTED_REPLY} {reason}. Reply again with one JSON object that has every \
         required key, each with the type asked for."
    )
}

fn payer(job: &JobRow) -> compress::Payer {
    compress::Payer {
        user_id: job.user_id,
        session_id: job.session_id,
        job_id: job.id,
        attempt: job.attempt_count,
    }
}

/// Logs, counts and announces every compression step as it happens.
fn reporter<'a>(
    cache: Option<Cache>,
    attempt: &'a Attempt<'_>,
) -> impl FnMut(&compress::Step) + Send + 'a {
    let job = attempt.job;
    let job_type = format!("{:?}", attempt.step.job_type).to_uppercase();
    move |step: &compress::Step| {
        tracing::info!(
            candidate = %step.id,
            kind = step.kind,
            tokens_before = step.tokens_before,
            tokens_after = step.tokens_after,
            embedding_tokens = step.embedding_tokens,
            cost = step.cost,
            request_tokens = step.request_tokens_after,
            "compressed a context candidate"
        );
        dialectic_telemetry::metrics::COMPRESSION_STEPS.inc(&[step.kind]);
        let Some(cache) = cache.clone() else {
            return;
        };
        let event = ProgressEvent {
            stage_slug: job.stage_slug.clone(),
            job_id: job.id.to_string(),
            job_type: job_type.clone(),
            document_key: attempt.step.output_type.clone(),
            model: attempt.model.api_identifier.clone(),
            message: format!(
                "compressed {} {}: {} -> {} tokens, {} embedding tokens, cost {}",
                step.kind,
                step.id,
                step.tokens_before,
                step.tokens_after,
                step.embedding_tokens,
                step.cost
            ),
            at_ms: now_ms(),
            ..ProgressEvent::new(EventKind::ContextCompressed, job.session_id.to_string())
        };
        // Progress is best effort: a missed event never fails the job.
        tokio::spawn(async move {
            if let Err(e) = cache.notify(&event).await {
                tracing::debug!(error = %e, "progress event not published");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_core::job::JobType;
    use dialectic_core::recipe::Granularity;

    fn step(outputs: Vec<OutputRule>) -> RecipeStep {
        RecipeStep {
            progress: None,
            skip_only_when: None,
            id: dialectic_core::ids::StepId::new(),
            step_key: "s".into(),
            step_name: "s".into(),
            job_type: JobType::Execute,
            prompt_type: "Turn".into(),
            prompt_template: None,
            output_type: "business_case".into(),
            granularity: Granularity::PerModel,
            inputs_required: vec![],
            inputs_relevance: serde_json::Value::Array(vec![]),
            outputs_required: outputs,
            order: 1,
            is_skipped: false,
            config: Default::default(),
            role: None,
            filter: Default::default(),
        }
    }

    #[test]
    fn hints_are_the_planned_documents_or_the_steps_output() {
        assert_eq!(hints(&[], &step(vec![])), vec!["business_case"]);
        let planned = vec!["a".to_string(), "b".to_string()];
        assert_eq!(hints(&planned, &step(vec![])), planned);
    }
}
