//! Model-call spans as OpenTelemetry's GenAI semantic conventions name them
//! (<https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/>,
//! status Development): an inference span named `chat {model}`, of kind
//! CLIENT, carrying `gen_ai.operation.name`, `gen_ai.provider.name`
//! (`openai` and `anthropic` are the conventions' own values, see
//! <https://opentelemetry.io/docs/specs/semconv/gen-ai/openai/> and
//! `.../gen-ai/anthropic/`; other providers keep the model row's name),
//! the request's model, output limit and temperature, and once the reply is
//! in, the answering model, the token usage and the finish reasons. A
//! failed call gets `error.type` and an error status, as the conventions'
//! "Recording Errors" asks.

use opentelemetry::{Array, StringValue, Value};
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// What a model call asks for, known before it is sent.
#[derive(Debug, Clone, Copy)]
pub struct ChatCall<'a> {
    /// The model row's provider (`openai`, `anthropic`, ...).
    pub provider: &'a str,
    /// The model as the request names it.
    pub model: &'a str,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
}

/// What the provider answered.
#[derive(Debug, Clone, Copy)]
pub struct ChatReply<'a> {
    /// The model the provider says answered, when it says.
    pub model: Option<&'a str>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub finish_reason: &'a str,
}

/// The span of one model call; enter it (or instrument the call's future
/// with it) and record its end with [`record_reply`] or [`record_error`].
pub fn chat_span(call: &ChatCall<'_>) -> tracing::Span {
    let span = tracing::info_span!(
        "chat",
        otel.name = %format_args!("chat {}", call.model),
        otel.kind = "client",
        otel.status_code = Empty,
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = call.provider,
        "gen_ai.request.model" = call.model,
        "gen_ai.request.max_tokens" = i64::from(call.max_tokens),
        "gen_ai.request.temperature" = Empty,
        "gen_ai.response.model" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "error.type" = Empty,
    );
    if let Some(temperature) = call.temperature {
        span.record("gen_ai.request.temperature", temperature);
    }
    span
}

/// The reply's model, usage and finish reason on the call's span.
pub fn record_reply(span: &tracing::Span, reply: &ChatReply<'_>) {
    if let Some(model) = reply.model {
        span.record("gen_ai.response.model", model);
    }
    span.record("gen_ai.usage.input_tokens", int(reply.input_tokens));
    span.record("gen_ai.usage.output_tokens", int(reply.output_tokens));
    // A string array in the conventions, which a tracing field cannot hold.
    span.set_attribute(
        "gen_ai.response.finish_reasons",
        Value::Array(Array::String(vec![StringValue::from(
            reply.finish_reason.to_string(),
        )])),
    );
}

/// An OTLP int: tracing-opentelemetry sends a u64 field as a string.
fn int(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A failed call: `error_type` is a low-cardinality reason (a metric's
/// `reason` label), never the message.
pub fn record_error(span: &tracing::Span, error_type: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "error");
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
    use std::collections::BTreeMap;
    use tracing_subscriber::layer::SubscriberExt;

    /// The spans `work` ends, as an OTLP exporter would be handed them.
    fn exported(work: impl FnOnce()) -> Vec<SpanData> {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, work);
        exporter.get_finished_spans().expect("finished spans")
    }

    fn attributes(span: &SpanData) -> BTreeMap<String, Value> {
        span.attributes
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.clone()))
            .collect()
    }

    const CALL: ChatCall<'static> = ChatCall {
        provider: "openai",
        model: "gpt-test",
        max_tokens: 512,
        temperature: Some(0.25),
    };

    #[test]
    fn a_replied_call_carries_the_request_usage_and_finish_reasons() {
        let spans = exported(|| {
            let span = chat_span(&CALL);
            record_reply(
                &span,
                &ChatReply {
                    model: Some("gpt-test-2026-01-01"),
                    input_tokens: 1200,
                    output_tokens: 345,
                    finish_reason: "stop",
                },
            );
        });
        let [span] = spans.as_slice() else {
            panic!("one span: {spans:?}");
        };
        assert_eq!(span.name, "chat gpt-test");
        assert_eq!(span.span_kind, SpanKind::Client);
        assert_eq!(span.status, Status::Unset);
        let attributes = attributes(span);
        let expected: BTreeMap<String, Value> = [
            ("gen_ai.operation.name", Value::from("chat")),
            ("gen_ai.provider.name", Value::from("openai")),
            ("gen_ai.request.model", Value::from("gpt-test")),
            ("gen_ai.request.max_tokens", Value::I64(512)),
            ("gen_ai.request.temperature", Value::F64(0.25)),
            ("gen_ai.response.model", Value::from("gpt-test-2026-01-01")),
            ("gen_ai.usage.input_tokens", Value::I64(1200)),
            ("gen_ai.usage.output_tokens", Value::I64(345)),
            (
                "gen_ai.response.finish_reasons",
                Value::Array(Array::String(vec!["stop".into()])),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (key, value) in &expected {
            assert_eq!(attributes.get(key), Some(value), "{key}: {attributes:#?}");
        }
        assert!(!attributes.contains_key("error.type"), "{attributes:#?}");
    }

    #[test]
    fn a_failed_call_carries_its_error_type_and_an_error_status() {
        let spans = exported(|| {
            let span = chat_span(&ChatCall {
                temperature: None,
                ..CALL
            });
            record_error(&span, "rate_limited");
        });
        let [span] = spans.as_slice() else {
            panic!("one span: {spans:?}");
        };
        let attributes = attributes(span);
        assert_eq!(
            attributes.get("error.type"),
            Some(&Value::from("rate_limited"))
        );
        assert!(
            matches!(span.status, Status::Error { .. }),
            "{:?}",
            span.status
        );
        // No temperature asked for, none claimed; no reply, no usage.
        for absent in ["gen_ai.request.temperature", "gen_ai.usage.input_tokens"] {
            assert!(
                !attributes.contains_key(absent),
                "{absent}: {attributes:#?}"
            );
        }
    }
}
