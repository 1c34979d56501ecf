//! Logging and distributed tracing. Spans always get OpenTelemetry ids, so a
//! `traceparent` can cross gRPC and AMQP even when no collector is configured;
//! OTLP export is on when an endpoint is set (or `OTEL_EXPORTER_OTLP_ENDPOINT`),
//! over gRPC or HTTP/protobuf, with TLS for an `https://` endpoint ([`otlp`]).

pub mod genai;
mod json_log;
pub mod metrics;
pub mod otlp;
mod process;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::collections::HashMap;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("invalid log filter {0:?}: {1}")]
    Filter(String, String),
    #[error("OTLP exporter: {0}")]
    Exporter(String),
    #[error("a global subscriber is already installed")]
    AlreadyInstalled,
}

pub struct TelemetrySettings<'a> {
    pub service_name: &'a str,
    pub log_filter: &'a str,
    pub json: bool,
    pub otlp_endpoint: Option<&'a str>,
    /// Log every span's busy and idle time when it closes: a call-by-call
    /// profile from plain logs, without a trace collector.
    pub span_timings: bool,
}

/// Flushes spans on drop; keep it alive for the life of the process.
pub struct TelemetryGuard {
    provider: SdkTracerProvider,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        let _ = self.provider.shutdown();
    }
}

pub fn init(settings: TelemetrySettings<'_>) -> Result<TelemetryGuard, TelemetryError> {
    let filter = EnvFilter::try_from_env("RUST_LOG")
        .or_else(|_| EnvFilter::try_new(settings.log_filter))
        .map_err(|e| TelemetryError::Filter(settings.log_filter.to_string(), e.to_string()))?;
    let endpoint = settings
        .otlp_endpoint
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .or_else(|| {
            std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
                .ok()
                .filter(|e| !e.is_empty())
        });
    // The standard OTEL_SERVICE_NAME wins over the name the binary gives itself.
    let service_name = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| settings.service_name.to_string());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service_name)
        .build();
    let mut builder = SdkTracerProvider::builder().with_resource(resource);
    if let Some(endpoint) = endpoint {
        let exporter = otlp::span_exporter(&endpoint, &otlp::ExportSettings::from_env()?)?;
        builder = builder.with_batch_exporter(exporter);
    }
    let provider = builder.build();
    let tracer = provider.tracer("dialectic");
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    opentelemetry::global::set_tracer_provider(provider.clone());
    let otel = tracing_opentelemetry::layer().with_tracer(tracer);
    let registry = tracing_subscriber::registry().with(filter).with(otel);
    let span_events = if settings.span_timings {
        FmtSpan::CLOSE
    } else {
        FmtSpan::NONE
    };
    let result = if settings.json {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_span_events(span_events)
                    .event_format(json_log::TopLevelJson::default()),
            )
            .try_init()
    } else {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_target(false)
                    .with_span_events(span_events),
            )
            .try_init()
    };
    result.map_err(|_| TelemetryError::AlreadyInstalled)?;
    Ok(TelemetryGuard { provider })
}

/// The W3C header (and gRPC metadata key) that carries trace context.
pub const TRACEPARENT: &str = "traceparent";

/// The W3C `traceparent` of the current span, to put into a message or metadata.
pub fn current_traceparent() -> Option<String> {
    let cx = tracing::Span::current().context();
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent")
}

/// Makes `span` a child of the remote span named by `traceparent`, and fills
/// its `trace_id` field (when it declares one) so plain logs carry the trace too.
pub fn adopt_traceparent(span: &tracing::Span, traceparent: Option<&str>) {
    if let Some(tp) = traceparent {
        let carrier: HashMap<String, String> = [("traceparent".to_string(), tp.to_string())].into();
        let cx = TraceContextPropagator::new().extract(&carrier);
        let _ = span.set_parent(cx);
    }
    let trace_id = traceparent
        .and_then(|tp| tp.split('-').nth(1).map(str::to_string))
        .or_else(|| span.in_scope(current_trace_id));
    if let Some(id) = trace_id {
        span.record("trace_id", id.as_str());
    }
}

/// The trace id of the current span (32 hex digits), for logs and tests.
pub fn current_trace_id() -> Option<String> {
    current_traceparent().and_then(|tp| tp.split('-').nth(1).map(str::to_string))
}
