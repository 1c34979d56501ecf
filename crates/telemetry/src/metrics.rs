//! Prometheus metrics: a small process-wide registry (counters, gauges and
//! histograms with labels) rendered in the text exposition format. Hand-rolled
//! because the services need only these three kinds and the text format; the
//! whole thing is smaller than the dependency it replaces.
//!
//! Metrics are process-wide, like Prometheus scrapes them: when `dialecticd`
//! runs several services in one process they share one `/metrics`, and the
//! series carry a `service` label where it matters (gRPC).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

type Labels = Vec<String>;

fn key(labels: &[&str]) -> Labels {
    labels.iter().map(|l| (*l).to_string()).collect()
}

/// A monotonically increasing count per label set.
pub struct Counter {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    values: Mutex<BTreeMap<Labels, f64>>,
}

impl Counter {
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Self {
            name,
            help,
            labels,
            values: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn inc(&self, labels: &[&str]) {
        self.add(labels, 1.0);
    }

    pub fn add(&self, labels: &[&str], by: f64) {
        if by < 0.0 || labels.len() != self.labels.len() {
            return; // a counter never goes down; a wrong label count is a bug, not a panic
        }
        if let Ok(mut values) = self.values.lock() {
            *values.entry(key(labels)).or_insert(0.0) += by;
        }
    }

    pub fn get(&self, labels: &[&str]) -> f64 {
        self.values
            .lock()
            .ok()
            .and_then(|v| v.get(&key(labels)).copied())
            .unwrap_or(0.0)
    }

    fn render(&self, out: &mut String) {
        header(out, self.name, self.help, "counter");
        if let Ok(values) = self.values.lock() {
            for (labels, value) in values.iter() {
                sample(out, self.name, "", self.labels, labels, None, *value);
            }
        }
    }
}

/// A value that goes up and down per label set.
pub struct Gauge {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    values: Mutex<BTreeMap<Labels, f64>>,
}

impl Gauge {
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Self {
            name,
            help,
            labels,
            values: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn set(&self, labels: &[&str], value: f64) {
        if labels.len() != self.labels.len() {
            return;
        }
        if let Ok(mut values) = self.values.lock() {
            values.insert(key(labels), value);
        }
    }

    /// Replaces every series at once (e.g. counts per status read from the
    /// database), so a status that no longer occurs drops to zero.
    pub fn replace_all(&self, series: &[(Vec<String>, f64)]) {
        if let Ok(mut values) = self.values.lock() {
            for value in values.values_mut() {
                *value = 0.0;
            }
            for (labels, value) in series {
                if labels.len() == self.labels.len() {
                    values.insert(labels.clone(), *value);
                }
            }
        }
    }

    pub fn get(&self, labels: &[&str]) -> f64 {
        self.values
            .lock()
            .ok()
            .and_then(|v| v.get(&key(labels)).copied())
            .unwrap_or(0.0)
    }

    fn render(&self, out: &mut String) {
        header(out, self.name, self.help, "gauge");
        if let Ok(values) = self.values.lock() {
            for (labels, value) in values.iter() {
                sample(out, self.name, "", self.labels, labels, None, *value);
            }
        }
    }
}

#[derive(Clone, Default)]
struct HistogramData {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// Observations in cumulative buckets per label set.
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    buckets: &'static [f64],
    values: Mutex<BTreeMap<Labels, HistogramData>>,
}

/// Seconds, from a fast gRPC call to a long model call.
pub const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

impl Histogram {
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
        buckets: &'static [f64],
    ) -> Self {
        Self {
            name,
            help,
            labels,
            buckets,
            values: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn observe(&self, labels: &[&str], value: f64) {
        if labels.len() != self.labels.len() || !value.is_finite() {
            return;
        }
        if let Ok(mut values) = self.values.lock() {
            let data = values.entry(key(labels)).or_insert_with(|| HistogramData {
                counts: vec![0; self.buckets.len()],
                ..Default::default()
            });
            for (i, bound) in self.buckets.iter().enumerate() {
                if value <= *bound {
                    data.counts[i] += 1;
                }
            }
            data.sum += value;
            data.count += 1;
        }
    }

    pub fn count(&self, labels: &[&str]) -> u64 {
        self.values
            .lock()
            .ok()
            .and_then(|v| v.get(&key(labels)).map(|d| d.count))
            .unwrap_or(0)
    }

    fn render(&self, out: &mut String) {
        header(out, self.name, self.help, "histogram");
        if let Ok(values) = self.values.lock() {
            for (labels, data) in values.iter() {
                for (bound, count) in self.buckets.iter().zip(&data.counts) {
                    let le = format_value(*bound);
                    sample(
                        out,
                        self.name,
                        "_bucket",
                        self.labels,
                        labels,
                        Some(&le),
                        *count as f64,
                    );
                }
                sample(
                    out,
                    self.name,
                    "_bucket",
                    self.labels,
                    labels,
                    Some("+Inf"),
                    data.count as f64,
                );
                sample(out, self.name, "_sum", self.labels, labels, None, data.sum);
                sample(
                    out,
                    self.name,
                    "_count",
                    self.labels,
                    labels,
                    None,
                    data.count as f64,
                );
            }
        }
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    names: &[&str],
    values: &[String],
    le: Option<&str>,
    value: f64,
) {
    let mut pairs: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", escape(v)))
        .collect();
    if let Some(le) = le {
        pairs.push(format!("le=\"{le}\""));
    }
    let labels = if pairs.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", pairs.join(","))
    };
    let _ = writeln!(out, "{name}{suffix}{labels} {}", format_value(value));
}

// ---- The metrics every service may record -------------------------------------

pub static GRPC_REQUESTS: Counter = Counter::new(
    "dialectic_grpc_requests_total",
    "gRPC requests served, by service, method and gRPC status code",
    &["service", "method", "code"],
);
pub static GRPC_DURATION: Histogram = Histogram::new(
    "dialectic_grpc_request_duration_seconds",
    "Time to the response headers of a gRPC request (the whole call for unary RPCs)",
    &["service", "method"],
    DURATION_BUCKETS,
);
pub static QUEUE_LAG: Histogram = Histogram::new(
    "dialectic_queue_lag_seconds",
    "Time a message spent in RabbitMQ, from publish to delivery to a consumer",
    &["queue"],
    DURATION_BUCKETS,
);
pub static MESSAGES_CONSUMED: Counter = Counter::new(
    "dialectic_messages_consumed_total",
    "Deliveries handled, by queue and disposition (ack, requeue, dead_letter, settled)",
    &["queue", "disposition"],
);
pub static OUTBOX_PENDING: Gauge = Gauge::new(
    "dialectic_outbox_pending",
    "Outbox rows not yet published to RabbitMQ (read by the planner)",
    &[],
);
pub static JOBS: Gauge = Gauge::new(
    "dialectic_jobs",
    "Jobs by type and status (read from Postgres by the planner every few seconds)",
    &["job_type", "status"],
);
pub static JOB_DURATION: Histogram = Histogram::new(
    "dialectic_job_duration_seconds",
    "One attempt of a job, from claim to recorded outcome, by job type, stage and result",
    &["job_type", "stage", "result"],
    DURATION_BUCKETS,
);
pub static MODEL_CALLS: Counter = Counter::new(
    "dialectic_model_calls_total",
    "Model calls, by model and result (ok or an error code)",
    &["model", "result"],
);
pub static MODEL_TOKENS: Counter = Counter::new(
    "dialectic_model_tokens_total",
    "Tokens reported by the model provider, by model and direction (input, output)",
    &["model", "direction"],
);
pub static MODEL_COST: Counter = Counter::new(
    "dialectic_model_cost_total",
    "Cost of model calls in wallet units, by model",
    &["model"],
);
pub static WALLET_OPERATIONS: Counter = Counter::new(
    "dialectic_wallet_operations_total",
    "Wallet ledger operations, by operation (hold, capture, release, credit, expire) and result",
    &["operation", "result"],
);
pub static WALLET_HELD: Gauge = Gauge::new(
    "dialectic_wallet_held",
    "Wallet units held by open holds across all wallets (read by the wallet service)",
    &[],
);
pub static COMPRESSION_STEPS: Counter = Counter::new(
    "dialectic_compression_steps_total",
    "Context compression steps applied to oversized prompts, by kind",
    &["kind"],
);
pub static DOCUMENTS_RENDERED: Counter = Counter::new(
    "dialectic_documents_rendered_total",
    "Documents rendered by the renderer, by stage",
    &["stage"],
);

/// The whole registry in the Prometheus text format (version 0.0.4).
pub fn render() -> String {
    let mut out = String::with_capacity(8 * 1024);
    GRPC_REQUESTS.render(&mut out);
    GRPC_DURATION.render(&mut out);
    QUEUE_LAG.render(&mut out);
    MESSAGES_CONSUMED.render(&mut out);
    OUTBOX_PENDING.render(&mut out);
    JOBS.render(&mut out);
    JOB_DURATION.render(&mut out);
    MODEL_CALLS.render(&mut out);
    MODEL_TOKENS.render(&mut out);
    MODEL_COST.render(&mut out);
    WALLET_OPERATIONS.render(&mut out);
    WALLET_HELD.render(&mut out);
    COMPRESSION_STEPS.render(&mut out);
    DOCUMENTS_RENDERED.render(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_cumulative_buckets() {
        static C: Counter = Counter::new("t_total", "a counter", &["a"]);
        static H: Histogram = Histogram::new("t_seconds", "a histogram", &["a"], &[0.1, 1.0]);
        static G: Gauge = Gauge::new("t_gauge", "a gauge", &["s"]);
        C.inc(&["x\"y"]);
        C.add(&["x\"y"], 2.0);
        C.add(&["x\"y"], -5.0);
        C.inc(&["too", "many"]);
        H.observe(&["x"], 0.0625);
        H.observe(&["x"], 0.5);
        H.observe(&["x"], 5.0);
        G.replace_all(&[(vec!["running".into()], 3.0), (vec!["done".into()], 1.0)]);
        G.replace_all(&[(vec!["done".into()], 2.0)]);
        let mut out = String::new();
        C.render(&mut out);
        H.render(&mut out);
        G.render(&mut out);
        assert!(out.contains("# TYPE t_total counter\n"), "{out}");
        assert!(out.contains("t_total{a=\"x\\\"y\"} 3\n"), "{out}");
        assert!(
            out.contains("t_seconds_bucket{a=\"x\",le=\"0.1\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("t_seconds_bucket{a=\"x\",le=\"1\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("t_seconds_bucket{a=\"x\",le=\"+Inf\"} 3\n"),
            "{out}"
        );
        assert!(out.contains("t_seconds_sum{a=\"x\"} 5.5625\n"), "{out}");
        assert!(out.contains("t_seconds_count{a=\"x\"} 3\n"), "{out}");
        assert!(out.contains("t_gauge{s=\"running\"} 0\n"), "{out}");
        assert!(out.contains("t_gauge{s=\"done\"} 2\n"), "{out}");
        assert_eq!(C.get(&["too", "many"]), 0.0);
    }
}
