//! Stage 4 of an attempt: keep the reply. Its JSON becomes one raw chunk in
//! S3 (under `_work/` while a document is still being continued), the last
//! chunk of a continued document also assembles the whole at its root path,
//! and the contribution row, the lease release and the outcome commit
//! together. An attempt that lost its job meanwhile removes what it wrote.

use crate::attempt::Attempt;
use crate::call::Reply;
use crate::chain::Chain;
use crate::{Executor, INVALID_REPLY, compress, permanent, retryable};
use dialectic_core::fact_check::{SourceText, check_claims};
use dialectic_core::ids::ContributionId;
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::paths::{DocumentName, FileKind, Lineage};
use dialectic_core::recipe::RecipeStep;
use dialectic_core::sanitize::{parse_cut_off_json, parse_model_json};
use dialectic_core::shape::{self, CONTINUATION_FLAG, SkipStep};
use dialectic_core::{blackboard, clarify, gate};
use dialectic_llm::{ChatResponse, FinishReason};
use dialectic_proto::v1::queue::{
    BoardEntry as QueueBoardEntry, ClarificationRequest as QueueClarification, JobSucceeded,
    SkipStep as QueueSkipStep,
};
use dialectic_runtime::worker::{self, AttemptError, Recorded};
use dialectic_store::StoreError;
use dialectic_store::contributions::{self, NewContribution};
use serde_json::Value;
use tracing::{Instrument, info_span};

/// Where this reply stands in its document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Turn {
    /// 0 for a document's first chunk.
    pub number: u32,
    /// Capped by `max_continuations`: assembled from what exists and marked so.
    pub incomplete: bool,
    /// Another turn follows.
    pub continuation_needed: bool,
}

impl Turn {
    pub(crate) fn of(
        step: &RecipeStep,
        response: &ChatResponse,
        value: &Value,
        earlier_chunks: usize,
        max_continuations: u32,
    ) -> Self {
        let number = earlier_chunks as u32;
        let unfinished = step.job_type == JobType::Execute && was_cut_off(response, value);
        // Seed 001: a capped document is assembled from what exists and marked incomplete.
        let incomplete = unfinished && number >= max_continuations;
        Turn {
            number,
            incomplete,
            continuation_needed: unfinished && !incomplete,
        }
    }

    /// A chunk of a multi-turn document lives under `_work/`; a whole one at the root path.
    fn in_work(self) -> bool {
        self.number > 0 || self.continuation_needed
    }
}

/// A turn that stopped on length or says it needs more was cut off and is
/// continued (seed 001 "Limits and honest failure"); a whole reply that
/// lacks a key is refused instead ([`RecipeStep::check_reply`]).
pub(crate) fn was_cut_off(response: &ChatResponse, value: &Value) -> bool {
    let flagged = value
        .get(CONTINUATION_FLAG)
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    response.finish_reason == FinishReason::Length || flagged
}

/// An output's `mean`: the engine's figure replaces the model's arithmetic
/// before the reply is stored.
fn engine_mean(step: &RecipeStep, reply: &mut Value) {
    if let Some(rule) = step.own_output().and_then(|o| o.mean.as_ref()) {
        let mean = dialectic_core::output_record::apply_mean(reply, rule);
        tracing::info!(figure = %rule.into, ?mean, "the engine computed a mean");
    }
}

/// A finished reply (the whole document, for a continued one) must have the
/// shape its step asks for; a refused one is retried with the reason.
fn check_shape(step: &RecipeStep, document: &Value, turn: Turn) -> Result<(), AttemptError> {
    if turn.continuation_needed || turn.incomplete {
        return Ok(());
    }
    step.check_reply(document)
        .map_err(|e| retryable(INVALID_REPLY, format!("{}: {e}", step.output_type)))
}

fn encode(value: &impl serde::Serialize) -> Result<Vec<u8>, AttemptError> {
    serde_json::to_vec_pretty(value).map_err(|e| permanent("encode", e))
}

/// Seed 001 Phase 4: the whole document merged from every chunk, with how
/// many chunks made it and whether it was capped.
pub(crate) fn assembled(
    whole: &Value,
    chunks: usize,
    incomplete: bool,
) -> Result<Vec<u8>, AttemptError> {
    let mut whole = whole.clone();
    if let Some(fields) = whole.as_object_mut() {
        fields.insert("chunks".into(), Value::from(chunks));
        fields.insert("incomplete".into(), Value::from(incomplete));
    }
    encode(&whole)
}

/// The chain a contribution belongs to (its document identity) and, for a
/// continuation, its turn.
pub(crate) fn relationships(
    stage: &str,
    chain: Option<&Chain>,
    own_id: ContributionId,
    turn: u32,
    seed_prompt: Option<&str>,
) -> Value {
    let mut map = serde_json::Map::new();
    let identity = chain.map_or(own_id, |c| c.identity);
    map.insert(stage.to_string(), Value::String(identity.to_string()));
    if chain.is_some() {
        map.insert("turn".into(), Value::from(turn));
    }
    if let Some(key) = seed_prompt {
        map.insert("seed_prompt".into(), Value::String(key.to_string()));
    }
    Value::Object(map)
}

/// The steps a PLAN reply skips (seed 004 adaptive execution); a malformed
/// `skip_steps` is refused like any other bad reply, before anything is written.
fn planned_skips(step: &RecipeStep, reply: &Value) -> Result<Vec<SkipStep>, AttemptError> {
    if step.job_type != JobType::Plan {
        return Ok(Vec::new());
    }
    shape::skip_steps(reply)
        .map_err(|reason| retryable(INVALID_REPLY, format!("{}: {reason}", step.step_key)))
}

/// The blackboard entries a finished reply publishes (seed 004 §1); a type its
/// step does not declare is refused like any other bad reply.
fn published_entries(
    step: &RecipeStep,
    reply: &Value,
    turn: Turn,
) -> Result<Vec<QueueBoardEntry>, AttemptError> {
    let declared = step
        .own_output()
        .map_or(&[][..], |o| o.publishes.as_slice());
    if declared.is_empty() || turn.continuation_needed {
        return Ok(Vec::new());
    }
    let entries = blackboard::entries(reply, declared)
        .map_err(|reason| retryable(INVALID_REPLY, format!("{}: {reason}", step.step_key)))?;
    Ok(entries
        .into_iter()
        .map(|e| QueueBoardEntry {
            entry_type: e.entry_type,
            data_json: e.data.to_string(),
        })
        .collect())
}

/// A gated step's finished reply states its confidence (its output rule
/// requires the key, so the shape check has seen it).
fn stated_confidence(step: &RecipeStep, reply: &Value, turn: Turn) -> Option<f64> {
    let gated = step
        .own_output()
        .is_some_and(|o| o.confidence_gate.is_some());
    (gated && !turn.continuation_needed)
        .then(|| gate::confidence_of(reply))
        .flatten()
}

/// The questions a finished reply asks earlier steps (seed 004
/// `needs_clarification`); a malformed list is refused like any bad reply.
fn asked_clarifications(
    step: &RecipeStep,
    reply: &Value,
    turn: Turn,
) -> Result<Vec<QueueClarification>, AttemptError> {
    if turn.continuation_needed {
        return Ok(Vec::new());
    }
    let asked = clarify::requests(reply)
        .map_err(|reason| retryable(INVALID_REPLY, format!("{}: {reason}", step.step_key)))?;
    Ok(asked
        .into_iter()
        .map(|a| QueueClarification {
            step_key: a.step_key,
            question: a.question,
        })
        .collect())
}

/// What the attempt wrote to S3, to remove if it lost its job.
struct Written {
    chunk: String,
    assembled: Option<String>,
}

impl Executor {
    pub(crate) async fn persist(
        &self,
        attempt: &Attempt<'_>,
        worker: &str,
        chain: Option<&Chain>,
        kept: Kept,
    ) -> Result<Recorded, AttemptError> {
        let Kept {
            reply,
            compressed,
            seed_prompt,
        } = kept;
        // A reply cut off at its token limit is the chunk so far, closed
        // where it stopped, and a continuation writes the rest.
        let read = match reply.response.finish_reason {
            FinishReason::Length => parse_cut_off_json,
            _ => parse_model_json,
        };
        let (mut value, sanitized) = read(&reply.response.text).map_err(|e| {
            tracing::debug!(excerpt = %e.excerpt, "the malformed reply began");
            retryable("malformed_json", e)
        })?;
        if sanitized.was_sanitized {
            tracing::info!(
                structurally_fixed = sanitized.was_structurally_fixed,
                "model JSON needed sanitising"
            );
        }
        let earlier = chain.map_or(0, |c| c.chunks.len());
        let turn = Turn::of(
            &attempt.step,
            &reply.response,
            &value,
            earlier,
            self.max_continuations,
        );
        // A continued document's last turn: merged once, checked, then stored.
        let mut whole = chain
            .filter(|_| !turn.continuation_needed)
            .map(|c| c.whole_with(&value));
        check_shape(&attempt.step, whole.as_ref().unwrap_or(&value), turn)?;
        if !turn.continuation_needed {
            let reply = whole.as_mut().unwrap_or(&mut value);
            self.verify_claims(attempt, reply).await?;
            engine_mean(&attempt.step, reply);
        }
        let skip_steps = planned_skips(&attempt.step, &value)?;
        let reply_whole = whole.as_ref().unwrap_or(&value);
        let blackboard = published_entries(&attempt.step, reply_whole, turn)?;
        let confidence = stated_confidence(&attempt.step, reply_whole, turn);
        let clarifications = asked_clarifications(&attempt.step, reply_whole, turn)?;
        let (written, size) = self
            .write_chunks(attempt, chain, &value, whole.as_ref(), turn)
            .instrument(info_span!("chunks"))
            .await?;
        let saved = Saved {
            chain,
            reply: &reply,
            compressed: &compressed,
            turn,
            size,
            key: &written.chunk,
            seed_prompt: seed_prompt.as_deref(),
            skip_steps,
            blackboard,
            confidence,
            clarifications,
        };
        let recorded = self
            .record(attempt, worker, &saved)
            .instrument(info_span!("record"))
            .await;
        match recorded {
            Ok(Some((id, recorded))) => {
                tracing::info!(contribution_id = %id, key = %written.chunk, turn = turn.number,
                    continuation_needed = turn.continuation_needed, incomplete = turn.incomplete, "chunk saved");
                Ok(recorded)
            }
            Ok(None) => {
                self.discard(attempt, written).await;
                Err(AttemptError::Lost)
            }
            Err(e) => {
                self.remove_unrecorded(attempt, &written.chunk).await;
                Err(e)
            }
        }
    }

    /// A step whose output says `verify_claims`: its claims are held against
    /// the session's sources before anything is stored, so a claim is stored
    /// verified only with a quote a source holds.
    async fn verify_claims(
        &self,
        attempt: &Attempt<'_>,
        reply: &mut Value,
    ) -> Result<(), AttemptError> {
        let Some(items) = attempt
            .step
            .own_output()
            .and_then(|o| o.verify_claims.as_deref())
        else {
            return Ok(());
        };
        let texts = self.source_texts(attempt.job.session_id).await?;
        let sources: Vec<SourceText<'_>> = texts
            .iter()
            .map(|(name, text)| SourceText { name, text })
            .collect();
        let tally = check_claims(reply, items, &sources, &self.quote_rules);
        tracing::info!(
            verified = tally.verified,
            deferred = tally.deferred,
            sources = sources.len(),
            "claims checked against the sources"
        );
        Ok(())
    }

    /// The record failed, so the retry writes its chunk under the next
    /// attempt's name and this one would be left behind. A commit whose reply
    /// was lost may have stored the row after all: the chunk goes only once
    /// the database says no row names it. (A continued document's assembly
    /// stays: the retry writes the same root key.)
    async fn remove_unrecorded(&self, attempt: &Attempt<'_>, key: &str) {
        let job = attempt.job;
        match contributions::contribution_recorded(self.store.pool(), job.id, job.attempt_count)
            .await
        {
            Ok(false) => {
                tracing::info!(%key, "the chunk was never recorded; removing it");
                if let Err(e) = self.blob.delete(key).await {
                    tracing::warn!(error = %e, %key, "could not remove an unrecorded chunk");
                }
            }
            Ok(true) => {}
            Err(e) => {
                tracing::warn!(error = %e, %key, "cannot tell whether the chunk was recorded; keeping it");
            }
        }
    }

    fn key(
        attempt: &Attempt<'_>,
        name: &DocumentName,
        continuation: Option<u32>,
    ) -> Result<String, AttemptError> {
        attempt.storage_key(FileKind::RawChunk {
            name: name.clone(),
            continuation,
        })
    }

    /// Stores the chunk and, after a continued document's last turn, the whole.
    async fn write_chunks(
        &self,
        attempt: &Attempt<'_>,
        chain: Option<&Chain>,
        value: &Value,
        whole: Option<&Value>,
        turn: Turn,
    ) -> Result<(Written, i64), AttemptError> {
        let own_name = DocumentName {
            model_slug: attempt.payload.model_slug.clone(),
            attempt: (attempt.job.attempt_count - 1).max(0) as u32,
            document_key: attempt.step.output_type.clone(),
            lineage: attempt.payload.lineage.clone().unwrap_or(Lineage::Plain),
        };
        let name = chain.map_or(own_name, |c| c.root_name.clone());
        let key = Self::key(attempt, &name, turn.in_work().then_some(turn.number))?;
        let body = encode(value)?;
        let size = body.len() as i64;
        self.put(&key, body).await?;
        let mut written = Written {
            chunk: key,
            assembled: None,
        };
        if let (Some(chain), Some(whole)) = (chain, whole) {
            let root_key = Self::key(attempt, &name, None)?;
            let body = assembled(whole, chain.chunks.len() + 1, turn.incomplete)?;
            self.put(&root_key, body).await?;
            written.assembled = Some(root_key);
        }
        Ok((written, size))
    }

    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), AttemptError> {
        self.blob
            .put(key, body, "application/json")
            .await
            .map_err(|e| retryable("storage", e))
    }

    /// The contribution, its provenance and the outcome in one transaction;
    /// None when the attempt no longer owns its job (nothing committed).
    async fn record(
        &self,
        attempt: &Attempt<'_>,
        worker: &str,
        saved: &Saved<'_>,
    ) -> Result<Option<(ContributionId, Recorded)>, AttemptError> {
        let job = attempt.job;
        let mut tx = self.store.begin().await?;
        let stored_id =
            contributions::insert_contribution(&mut tx, &self.contribution(attempt, saved)).await?;
        if !saved.compressed.is_empty() {
            let provenance =
                serde_json::to_value(saved.compressed).map_err(|e| permanent("encode", e))?;
            contributions::set_compressed_inputs(&mut tx, stored_id, &provenance).await?;
        }
        if let Some(previous) = job.target_contribution_id {
            // Seed 000 function 5: the newest chunk is the chain's latest.
            contributions::supersede(&mut tx, previous).await?;
        }
        let outcome = JobSucceeded {
            contribution_id: stored_id.to_string(),
            resource_id: String::new(),
            finish_reason: saved.reply.response.finish_reason.as_str().to_string(),
            continuation_needed: saved.turn.continuation_needed,
            skip_steps: saved
                .skip_steps
                .iter()
                .map(|s| QueueSkipStep {
                    step_key: s.step_key.clone(),
                    reason: s.reason.clone(),
                })
                .collect(),
            blackboard: saved.blackboard.clone(),
            confidence: saved.confidence,
            clarifications: saved.clarifications.clone(),
        };
        let Some(recorded) = worker::record_success(&mut tx, job, worker, outcome).await? else {
            return Ok(None);
        };
        tx.commit().await.map_err(StoreError::from)?;
        Ok(Some((stored_id, recorded)))
    }

    fn contribution<'a>(
        &'a self,
        attempt: &'a Attempt<'_>,
        saved: &'a Saved<'_>,
    ) -> NewContribution<'a> {
        let job = attempt.job;
        let id = ContributionId::new();
        let (dir, file_name) = saved.key.rsplit_once('/').unwrap_or(("", saved.key));
        let response = &saved.reply.response;
        NewContribution {
            id,
            session_id: attempt.session.id,
            job_id: Some(job.id),
            attempt: job.attempt_count,
            edit_version: 1,
            user_id: job.user_id,
            // The lineage the document belongs to (a confidence rerun on
            // another model stays in its root's); the name says who wrote it.
            model_id: attempt.payload.lineage_model_id.unwrap_or(attempt.model.id),
            model_name: &attempt.model.api_identifier,
            stage_slug: &job.stage_slug,
            iteration: job.iteration_number,
            document_key: &attempt.step.output_type,
            contribution_type: &attempt.step.output_type,
            bucket: self.blob.bucket(),
            storage_path: dir,
            file_name,
            size_bytes: saved.size,
            tokens_in: response.input_tokens as i64,
            tokens_out: response.output_tokens as i64,
            processing_ms: saved.reply.processing_ms,
            finish_reason: response.finish_reason.as_str(),
            target_contribution_id: job.target_contribution_id,
            document_relationships: relationships(
                &job.stage_slug,
                saved.chain,
                id,
                saved.turn.number,
                saved.seed_prompt,
            ),
            is_intermediate: !attempt.step.renders_markdown(),
            is_incomplete: saved.turn.incomplete,
        }
    }

    /// Superseded by a regeneration, or taken away after a lease expiry: the
    /// outcome is discarded and the chunk must not outlive it.
    async fn discard(&self, attempt: &Attempt<'_>, written: Written) {
        tracing::info!(key = %written.chunk, "the attempt no longer owns its job; discarding its chunk");
        if let Err(e) = self.blob.delete(&written.chunk).await {
            tracing::warn!(error = %e, key = %written.chunk, "could not remove the orphaned chunk");
        }
        // A superseded job's last turn assembled a document of a regenerated
        // chain that nothing writes again, so it goes too; after a lease
        // expiry the retry writes the same file, so it stays.
        let Some(root_key) = written.assembled else {
            return;
        };
        let superseded = dialectic_store::jobs::get(self.store.pool(), attempt.job.id)
            .await
            .is_ok_and(|j| j.status == JobStatus::Superseded.as_str());
        if superseded && let Err(e) = self.blob.delete(&root_key).await {
            tracing::warn!(error = %e, %root_key, "could not remove a superseded document's assembly");
        }
    }
}

/// What an attempt brings to `persist`.
pub(crate) struct Kept {
    pub reply: Reply,
    pub compressed: Vec<compress::Step>,
    /// The stage's `seed_prompt.md`, when this call opened the stage.
    pub seed_prompt: Option<String>,
}

/// What `record` stores about a reply.
struct Saved<'a> {
    chain: Option<&'a Chain>,
    reply: &'a Reply,
    compressed: &'a [compress::Step],
    turn: Turn,
    size: i64,
    key: &'a str,
    seed_prompt: Option<&'a str>,
    skip_steps: Vec<SkipStep>,
    blackboard: Vec<QueueBoardEntry>,
    confidence: Option<f64>,
    clarifications: Vec<QueueClarification>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::Chunk;
    use dialectic_core::recipe::OutputRule;
    use uuid::Uuid;

    fn step(job_type: &str, required: &[&str]) -> RecipeStep {
        let mut step: RecipeStep = serde_json::from_value(serde_json::json!({
            "id": Uuid::nil(), "step_key": "s", "step_name": "s", "job_type": job_type,
            "prompt_type": "Turn", "prompt_template": null, "output_type": "risk_register",
            "granularity": "all_to_one", "inputs_required": [], "inputs_relevance": [],
            "outputs_required": [], "order": 1, "is_skipped": false
        }))
        .expect("step");
        step.outputs_required = vec![OutputRule {
            document_key: "risk_register".into(),
            file_type: Some("json".into()),
            template_filename: None,
            required_keys: required.iter().map(|k| k.to_string()).collect(),
            key_types: Default::default(),
            publishes: vec![],
            confidence_gate: None,
            schema: None,
            verify_claims: None,
            record: None,
            mean: None,
        }];
        step
    }

    fn reply(finish_reason: FinishReason) -> ChatResponse {
        ChatResponse {
            text: String::new(),
            finish_reason,
            input_tokens: 0,
            output_tokens: 0,
            cached_input_tokens: 0,
            cache_write_input_tokens: 0,
            usage_estimated: true,
            time_to_first_token: None,
            response_model: None,
            raw: Value::Null,
        }
    }

    fn chain(contents: &[&str]) -> Chain {
        Chain {
            identity: ContributionId::from_u128(7),
            root_name: DocumentName {
                model_slug: "m".into(),
                attempt: 0,
                document_key: "risk_register".into(),
                lineage: Lineage::Plain,
            },
            chunks: contents
                .iter()
                .map(|c| Chunk {
                    id: ContributionId::new(),
                    raw: serde_json::json!({ "content": c }).to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_turn_continues_only_when_cut_off_or_flagged() {
        let done = serde_json::json!({"content": "x"});
        assert!(!was_cut_off(&reply(FinishReason::Stop), &done));
        assert!(was_cut_off(&reply(FinishReason::Length), &done));
        let flagged = serde_json::json!({"content": "x", "continuation_needed": true});
        assert!(was_cut_off(&reply(FinishReason::Stop), &flagged));
    }

    #[test]
    fn a_finished_reply_missing_a_key_is_refused_naming_it() {
        let execute = step("EXECUTE", &["content", "risks"]);
        let whole = Turn::of(&execute, &reply(FinishReason::Stop), &Value::Null, 0, 2);
        let missing = serde_json::json!({"content": "x"});
        let err = check_shape(&execute, &missing, whole).expect_err("refused");
        assert!(
            matches!(&err, AttemptError::Retryable { code: INVALID_REPLY, message }
                if message.contains("`risks`")),
            "{err}"
        );
        // A continued document is judged whole: the key came in an earlier chunk.
        let earlier = Chain {
            chunks: vec![Chunk {
                id: ContributionId::new(),
                raw: serde_json::json!({"content": "A", "risks": []}).to_string(),
            }],
            ..chain(&[])
        };
        assert!(check_shape(&execute, &earlier.whole_with(&missing), whole).is_ok());
        let cut = Turn::of(&execute, &reply(FinishReason::Length), &missing, 0, 2);
        assert!(check_shape(&execute, &missing, cut).is_ok());
    }

    #[test]
    fn turns_continue_until_the_cap_then_end_incomplete() {
        let cut = reply(FinishReason::Length);
        let value = serde_json::json!({"content": "x"});
        let execute = step("EXECUTE", &[]);
        let first = Turn::of(&execute, &cut, &value, 0, 2);
        assert_eq!(
            (first.number, first.continuation_needed, first.incomplete),
            (0, true, false)
        );
        assert!(
            first.in_work(),
            "a first chunk that continues goes under _work/"
        );
        let capped = Turn::of(&execute, &cut, &value, 2, 2);
        assert_eq!(
            (capped.continuation_needed, capped.incomplete),
            (false, true)
        );
        let whole = Turn::of(&execute, &reply(FinishReason::Stop), &value, 0, 2);
        assert!(
            !whole.in_work(),
            "a document done in one turn lives at its root path"
        );
        // A PLAN step's header context is never continued.
        let plan = Turn::of(&step("PLAN", &[]), &cut, &value, 0, 2);
        assert!(!plan.continuation_needed && !plan.incomplete);
    }

    #[test]
    fn the_last_turn_assembles_every_chunk_in_order_as_json() {
        let last = serde_json::json!({"content": "C", "risks": ["r2"]});
        let mut earlier = chain(&["A", "B"]);
        earlier.chunks[1].raw = serde_json::json!({"content": "B", "risks": ["r1"]}).to_string();
        let body = assembled(&earlier.whole_with(&last), 3, false).expect("assembles");
        let whole: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(whole["content"], "ABC");
        assert_eq!(whole["risks"], serde_json::json!(["r1", "r2"]));
        assert_eq!(whole["chunks"], 3);
        assert_eq!(whole["incomplete"], false);
    }

    #[test]
    fn relationships_name_the_document_identity() {
        let own = ContributionId::from_u128(1);
        assert_eq!(
            relationships("thesis", None, own, 0, None),
            serde_json::json!({"thesis": own.to_string()})
        );
        assert_eq!(
            relationships("thesis", None, own, 0, Some("p/1_thesis/seed_prompt.md")),
            serde_json::json!({"thesis": own.to_string(), "seed_prompt": "p/1_thesis/seed_prompt.md"})
        );
        let continued = chain(&["A"]);
        assert_eq!(
            relationships("thesis", Some(&continued), own, 1, None),
            serde_json::json!({"thesis": continued.identity.to_string(), "turn": 1})
        );
    }
}
