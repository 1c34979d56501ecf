//! What a model call shows of itself, whoever makes it (a job, a question):
//! a GenAI span (`dialectic_telemetry::genai`) and the per-model metrics,
//! labelled by the model row's `api_identifier` and, for errors, a reason
//! from a fixed set, so neither a request nor a provider's message can add
//! a series.

use crate::billing;
use crate::provider::Provider;
use dialectic_core::prompt::ChatRequest;
use dialectic_llm::{ChatResponse, LlmError};
use dialectic_store::models::ModelRow;
use dialectic_telemetry::genai::{self, ChatCall, ChatReply};
use dialectic_telemetry::metrics;
use std::time::Instant;
use tracing::Instrument;

/// `provider.chat(request)` for `model`, observed.
pub(crate) async fn chat(
    provider: &Provider,
    model: &ModelRow,
    request: &ChatRequest,
) -> Result<ChatResponse, LlmError> {
    let span = genai::chat_span(&ChatCall {
        provider: &model.provider,
        model: &request.model,
        max_tokens: request.max_tokens,
        temperature: request.temperature.filter(|_| !is_reasoning(model)),
    });
    let started = Instant::now();
    let outcome = provider.chat(request).instrument(span.clone()).await;
    let seconds = started.elapsed().as_secs_f64();
    let label = model.api_identifier.as_str();
    match &outcome {
        Ok(response) => {
            genai::record_reply(
                &span,
                &ChatReply {
                    model: response.response_model.as_deref(),
                    input_tokens: response.input_tokens,
                    output_tokens: response.output_tokens,
                    finish_reason: response.finish_reason.as_str(),
                },
            );
            count_reply(model, response, seconds);
        }
        Err(error) => {
            let reason = error.reason().as_str();
            genai::record_error(&span, reason);
            let result = if error.retryable() {
                "transient"
            } else {
                "failed"
            };
            metrics::MODEL_CALLS.inc(&[label, result]);
            metrics::MODEL_CALL_DURATION.observe(&[label, result], seconds);
            metrics::MODEL_ERRORS.inc(&[label, reason]);
        }
    }
    outcome
}

/// A reasoning model is sent no temperature (`dialectic_llm`'s OpenAI
/// dialect), so its span claims none.
fn is_reasoning(model: &ModelRow) -> bool {
    model.config.0.get("reasoning").and_then(|v| v.as_bool()) == Some(true)
}

/// The call, its latency, its first token and its tokens, counted as the
/// wallet records them (`billing::usage`), so the two always agree.
fn count_reply(model: &ModelRow, response: &ChatResponse, seconds: f64) {
    let label = model.api_identifier.as_str();
    metrics::MODEL_CALLS.inc(&[label, "ok"]);
    metrics::MODEL_CALL_DURATION.observe(&[label, "ok"], seconds);
    if let Some(first) = response.time_to_first_token {
        metrics::MODEL_TIME_TO_FIRST_TOKEN.observe(&[label], first.as_secs_f64());
    }
    let usage = billing::usage(model, response);
    for (direction, tokens) in [
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
        ("cache_read", usage.cached_input_tokens),
        ("cache_write", usage.cache_write_input_tokens),
    ] {
        metrics::MODEL_TOKENS.add(&[label, direction], tokens as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_core::ids::ModelId;
    use dialectic_llm::{FinishReason, ModelProvider};
    use dialectic_store::models::PriceColumns;
    use std::sync::Arc;
    use std::time::Duration;

    /// A provider that answers every call the same way.
    struct Answers(Result<ChatResponse, LlmError>);

    #[async_trait::async_trait]
    impl ModelProvider for Answers {
        async fn chat(&self, _: &ChatRequest) -> Result<ChatResponse, LlmError> {
            self.0.clone()
        }
    }

    /// A model row named `name` (each test its own, as metrics are process-wide).
    fn row(name: &str) -> ModelRow {
        ModelRow {
            id: ModelId::from_u128(1),
            api_identifier: name.into(),
            name: name.into(),
            provider: "openai".into(),
            context_window_tokens: 8192,
            max_output_tokens: 1024,
            input_token_cost_rate: 1.0,
            output_token_cost_rate: 1.0,
            tokenizer: "cl100k_base".into(),
            secret_name: None,
            config: sqlx::types::Json(serde_json::json!({})),
            prices: PriceColumns::default(),
        }
    }

    fn request(model: &str) -> ChatRequest {
        ChatRequest {
            model: model.into(),
            max_tokens: 64,
            ..Default::default()
        }
    }

    async fn call(model: &ModelRow, answer: Result<ChatResponse, LlmError>) {
        let provider: Provider = Arc::new(Answers(answer));
        let _ = chat(&provider, model, &request(&model.api_identifier)).await;
    }

    #[tokio::test]
    async fn failed_calls_are_counted_by_reason_under_their_model() {
        let model = row("errors-by-reason");
        let auth = "provider authentication failed (401 Unauthorized): {}";
        for _ in 0..2 {
            call(&model, Err(LlmError::Permanent(auth.into()))).await;
        }
        let throttled = "gave up after 4 attempts: provider throttled (429 Too Many Requests)";
        call(&model, Err(LlmError::Transient(throttled.into()))).await;
        let count =
            |metric: &metrics::Counter, second: &str| metric.get(&[&model.api_identifier, second]);
        assert_eq!(count(&metrics::MODEL_ERRORS, "auth"), 2.0);
        assert_eq!(count(&metrics::MODEL_ERRORS, "rate_limited"), 1.0);
        assert_eq!(count(&metrics::MODEL_CALLS, "failed"), 2.0);
        assert_eq!(count(&metrics::MODEL_CALLS, "transient"), 1.0);
        assert_eq!(count(&metrics::MODEL_CALLS, "ok"), 0.0);
        let page = metrics::render();
        for (result, calls) in [("failed", 2), ("transient", 1)] {
            let line = format!(
                "dialectic_model_call_duration_seconds_count{{model=\"errors-by-reason\",result=\"{result}\"}} {calls}\n"
            );
            assert!(page.contains(&line), "{line}");
        }
    }

    #[tokio::test]
    async fn a_streamed_reply_times_its_first_token_under_its_model() {
        let model = row("first-token");
        let streamed = ChatResponse {
            text: "{}".into(),
            finish_reason: FinishReason::Stop,
            input_tokens: 100,
            output_tokens: 20,
            cached_input_tokens: 40,
            cache_write_input_tokens: 50,
            usage_estimated: false,
            time_to_first_token: Some(Duration::from_millis(250)),
            response_model: None,
            raw: serde_json::Value::Null,
        };
        call(&model, Ok(streamed.clone())).await;
        // A reply that came whole has no first token to time.
        call(
            &model,
            Ok(ChatResponse {
                time_to_first_token: None,
                ..streamed
            }),
        )
        .await;
        let page = metrics::render();
        for line in [
            "dialectic_model_time_to_first_token_seconds_count{model=\"first-token\"} 1\n",
            "dialectic_model_time_to_first_token_seconds_sum{model=\"first-token\"} 0.25\n",
            "dialectic_model_call_duration_seconds_count{model=\"first-token\",result=\"ok\"} 2\n",
        ] {
            assert!(page.contains(line), "{line}");
        }
        let tokens = |direction| metrics::MODEL_TOKENS.get(&["first-token", direction]);
        assert_eq!(
            [
                tokens("input"),
                tokens("output"),
                tokens("cache_read"),
                tokens("cache_write")
            ],
            [200.0, 40.0, 80.0, 100.0]
        );
    }
}
