//! JSON log lines a log store reads without parsing twice: `message`,
//! `level` and the event's other fields at the top level (`flatten_event`),
//! and `trace_id` there too, taken from the outermost span that carries one
//! (the spans that adopt a `traceparent` record it, see
//! [`crate::adopt_traceparent`]), so Grafana's trace-to-logs finds a line
//! by its trace id. The current span and the span list stay as they were.

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Json, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The stock JSON format, flattened, with `trace_id` lifted to the top.
pub struct TopLevelJson(Format<Json>);

impl Default for TopLevelJson {
    fn default() -> Self {
        Self(
            Format::default()
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(true),
        )
    }
}

impl<S, N> FormatEvent<S, N> for TopLevelJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        writer.write_str(&with_trace_id(line))
    }
}

/// `line` (one JSON object and a newline) with a top-level `trace_id` when
/// a span of it has one; unchanged otherwise.
fn with_trace_id(line: String) -> String {
    let Ok(serde_json::Value::Object(mut fields)) = serde_json::from_str(line.trim_end()) else {
        return line;
    };
    if fields.contains_key("trace_id") {
        return line;
    }
    let spans = fields.get("spans").and_then(|s| s.as_array());
    let trace_id = spans
        .into_iter()
        .flatten()
        .chain(fields.get("span"))
        .filter_map(|span| span.get("trace_id")?.as_str())
        .find(|id| !id.is_empty())
        .map(str::to_string);
    let Some(trace_id) = trace_id else {
        return line;
    };
    fields.insert("trace_id".into(), trace_id.into());
    let mut out = serde_json::Value::Object(fields).to_string();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lines").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The JSON lines `work` logs.
    fn logged(work: impl FnOnce()) -> Vec<serde_json::Value> {
        let lines = Lines::default();
        let sink = lines.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .json()
                .event_format(TopLevelJson::default())
                .with_writer(move || sink.clone()),
        );
        tracing::subscriber::with_default(subscriber, work);
        let text = String::from_utf8(lines.0.lock().expect("lines").clone()).expect("utf-8");
        text.lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    #[test]
    fn message_level_fields_and_the_trace_id_are_top_level() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let lines = logged(|| {
            let job = tracing::info_span!("job", trace_id = trace);
            let _job = job.enter();
            let _model = tracing::info_span!("chat").entered();
            tracing::warn!(attempt = 2, "retrying model call");
        });
        let [line] = lines.as_slice() else {
            panic!("one line: {lines:?}");
        };
        assert_eq!(line["message"], "retrying model call", "{line}");
        assert_eq!(line["level"], "WARN", "{line}");
        assert_eq!(line["trace_id"], trace, "{line}");
        assert_eq!(line["attempt"], 2, "{line}");
        assert!(line.get("fields").is_none(), "{line}");
        assert_eq!(line["span"]["name"], "chat", "{line}");
    }

    #[test]
    fn a_line_outside_any_traced_span_has_no_trace_id() {
        let lines = logged(|| tracing::info!("starting"));
        let [line] = lines.as_slice() else {
            panic!("one line: {lines:?}");
        };
        assert_eq!(line["message"], "starting");
        assert!(line.get("trace_id").is_none(), "{line}");
    }
}
