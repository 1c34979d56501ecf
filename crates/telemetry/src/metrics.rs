//! Prometheus metrics: one process-wide `prometheus-client` registry with the
//! counters, gauges and histograms every service may record, each a family
//! keyed by its label values, rendered in the Prometheus text format (0.0.4).
//!
//! The statics below keep call sites short (`GRPC_REQUESTS.inc(&[..])`): each
//! names its series as Prometheus exposes them, declares its label names once
//! and takes label values in that order. A wrong number of values is a bug in
//! the caller, and is ignored rather than turned into a panic.
//!
//! Metrics are process-wide, like Prometheus scrapes them: when `dialecticd`
//! runs several services in one process they share one `/metrics`, and the
//! series carry a `service` label where it matters (gRPC).

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, prometheus_text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter as CounterMetric;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge as GaugeMetric;
use prometheus_client::metrics::histogram::Histogram as HistogramMetric;
use prometheus_client::registry::Registry;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::{LazyLock, Mutex, OnceLock};

/// `Content-Type` of what [`render`] returns.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// One series' labels: each declared name with its value, in declared order.
type LabelSet = Vec<(&'static str, String)>;

fn label_set(names: &'static [&'static str], values: &[&str]) -> Option<LabelSet> {
    (names.len() == values.len()).then(|| {
        names
            .iter()
            .zip(values)
            .map(|(name, value)| (*name, (*value).to_string()))
            .collect()
    })
}

/// A family registered so that its `# HELP` and `# TYPE` lines appear even
/// before its first series does (a registry leaves out empty families): every
/// service's `/metrics` declares every metric, whichever it records.
#[derive(Debug)]
struct Declared<F>(F);

impl<F: EncodeMetric> EncodeMetric for Declared<F> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// A monotonically increasing count per label set. `name` is the exposed
/// series name, `_total` included: the registry adds that suffix itself, so
/// it is registered without it.
pub struct Counter {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    family: OnceLock<Family<LabelSet, CounterMetric<f64, AtomicU64>>>,
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
            family: OnceLock::new(),
        }
    }

    fn family(&self) -> &Family<LabelSet, CounterMetric<f64, AtomicU64>> {
        self.family.get_or_init(Family::default)
    }

    pub fn inc(&self, labels: &[&str]) {
        self.add(labels, 1.0);
    }

    pub fn add(&self, labels: &[&str], by: f64) {
        if by.is_nan() || by < 0.0 {
            return; // a counter never goes down (and NaN is no count)
        }
        if let Some(set) = label_set(self.labels, labels) {
            self.family().get_or_create(&set).inc_by(by);
        }
    }

    pub fn get(&self, labels: &[&str]) -> f64 {
        label_set(self.labels, labels)
            .and_then(|set| self.family().get(&set).map(|c| c.get()))
            .unwrap_or(0.0)
    }

    pub fn register(&self, registry: &mut Registry) {
        let name = self.name.strip_suffix("_total").unwrap_or(self.name);
        registry.register(name, self.help, Declared(self.family().clone()));
    }
}

/// A value that goes up and down per label set.
pub struct Gauge {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    family: OnceLock<Family<LabelSet, GaugeMetric<f64, AtomicU64>>>,
    /// Every label set ever set, so [`Gauge::replace_all`] can zero the ones
    /// it does not mention (the family cannot be listed).
    known: Mutex<BTreeSet<LabelSet>>,
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
            family: OnceLock::new(),
            known: Mutex::new(BTreeSet::new()),
        }
    }

    fn family(&self) -> &Family<LabelSet, GaugeMetric<f64, AtomicU64>> {
        self.family.get_or_init(Family::default)
    }

    pub fn set(&self, labels: &[&str], value: f64) {
        let Some(set) = label_set(self.labels, labels) else {
            return;
        };
        if let Ok(mut known) = self.known.lock() {
            self.family().get_or_create(&set).set(value);
            known.insert(set);
        }
    }

    /// Replaces every series at once (e.g. counts per status read from the
    /// database), so a status that no longer occurs drops to zero.
    pub fn replace_all(&self, series: &[(Vec<String>, f64)]) {
        let Ok(mut known) = self.known.lock() else {
            return;
        };
        let mut fresh = BTreeSet::new();
        for (values, value) in series {
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            if let Some(set) = label_set(self.labels, &values) {
                self.family().get_or_create(&set).set(*value);
                fresh.insert(set);
            }
        }
        for stale in known.difference(&fresh) {
            self.family().get_or_create(stale).set(0.0);
        }
        known.extend(fresh);
    }

    pub fn get(&self, labels: &[&str]) -> f64 {
        label_set(self.labels, labels)
            .and_then(|set| self.family().get(&set).map(|g| g.get()))
            .unwrap_or(0.0)
    }

    pub fn register(&self, registry: &mut Registry) {
        registry.register(self.name, self.help, Declared(self.family().clone()));
    }
}

/// Builds each series' histogram with the metric's buckets.
#[derive(Clone, Copy)]
struct Buckets(&'static [f64]);

impl MetricConstructor<HistogramMetric> for Buckets {
    fn new_metric(&self) -> HistogramMetric {
        HistogramMetric::new(self.0.iter().copied())
    }
}

/// Observations in cumulative buckets per label set.
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    buckets: &'static [f64],
    family: OnceLock<Family<LabelSet, HistogramMetric, Buckets>>,
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
            family: OnceLock::new(),
        }
    }

    fn family(&self) -> &Family<LabelSet, HistogramMetric, Buckets> {
        self.family
            .get_or_init(|| Family::new_with_constructor(Buckets(self.buckets)))
    }

    pub fn observe(&self, labels: &[&str], value: f64) {
        if !value.is_finite() {
            return;
        }
        if let Some(set) = label_set(self.labels, labels) {
            self.family().get_or_create(&set).observe(value);
        }
    }

    pub fn register(&self, registry: &mut Registry) {
        registry.register(self.name, self.help, Declared(self.family().clone()));
    }
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
// The grpc-ecosystem names and labels (go-grpc-middleware's Prometheus
// provider), which off-the-shelf gRPC dashboards and SLOs read; the
// `dialectic_grpc_*` series above stay for one release beside them.
pub static GRPC_SERVER_STARTED: Counter = Counter::new(
    "grpc_server_started_total",
    "RPCs started on the server",
    &["grpc_type", "grpc_service", "grpc_method"],
);
pub static GRPC_SERVER_HANDLED: Counter = Counter::new(
    "grpc_server_handled_total",
    "RPCs completed on the server, by gRPC status code name (streams when their response opened)",
    &["grpc_type", "grpc_service", "grpc_method", "grpc_code"],
);
pub static GRPC_SERVER_HANDLING_SECONDS: Histogram = Histogram::new(
    "grpc_server_handling_seconds",
    "Time to the response headers of an RPC (the whole call for unary RPCs)",
    &["grpc_type", "grpc_service", "grpc_method"],
    DURATION_BUCKETS,
);

/// The name of a gRPC status code given as its number (`0` is `OK`), as
/// the grpc-ecosystem metrics label it; anything else is `Unknown`.
pub fn grpc_code_name(code: &str) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    code.parse::<usize>()
        .ok()
        .and_then(|n| NAMES.get(n).copied())
        .unwrap_or("Unknown")
}

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
    "Tokens reported by the model provider, by model and direction (input, output; \
     cache_read and cache_write are the parts of input read from and written to the prompt cache)",
    &["model", "direction"],
);
pub static MODEL_CALL_DURATION: Histogram = Histogram::new(
    "dialectic_model_call_duration_seconds",
    "A model call from request to whole reply, the client's retries and any wait for a call \
     slot included, by model and result (ok, transient, failed)",
    &["model", "result"],
    DURATION_BUCKETS,
);
pub static MODEL_TIME_TO_FIRST_TOKEN: Histogram = Histogram::new(
    "dialectic_model_time_to_first_token_seconds",
    "From sending a model call to the first text of its streamed reply, by model",
    &["model"],
    DURATION_BUCKETS,
);
pub static MODEL_ERRORS: Counter = Counter::new(
    "dialectic_model_errors_total",
    "Failed model calls, by model and reason (timeout, connection, rate_limited, \
     quota_exhausted, auth, unsupported_parameter, context_length, rejected, server_error, \
     reply_too_large, bad_reply, call_limiter, config, replay, other)",
    &["model", "reason"],
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

pub static DEPENDENCY_UP: Gauge = Gauge::new(
    "dialectic_dependency_up",
    "1 while the dependency (postgres, rabbitmq, redis, s3) answers this process's checks, else 0",
    &["dependency"],
);

pub static BUILD_INFO: Gauge = Gauge::new(
    "dialectic_build_info",
    "1, labelled with the release and the commit this process was built from",
    &["version", "commit"],
);

/// Sets [`BUILD_INFO`] once a process knows what it is.
pub fn set_build_info(version: &str, commit: &str) {
    BUILD_INFO.set(&[version, commit], 1.0);
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let mut registry = Registry::default();
    GRPC_REQUESTS.register(&mut registry);
    GRPC_DURATION.register(&mut registry);
    GRPC_SERVER_STARTED.register(&mut registry);
    GRPC_SERVER_HANDLED.register(&mut registry);
    GRPC_SERVER_HANDLING_SECONDS.register(&mut registry);
    QUEUE_LAG.register(&mut registry);
    MESSAGES_CONSUMED.register(&mut registry);
    OUTBOX_PENDING.register(&mut registry);
    JOBS.register(&mut registry);
    JOB_DURATION.register(&mut registry);
    MODEL_CALLS.register(&mut registry);
    MODEL_TOKENS.register(&mut registry);
    MODEL_CALL_DURATION.register(&mut registry);
    MODEL_TIME_TO_FIRST_TOKEN.register(&mut registry);
    MODEL_ERRORS.register(&mut registry);
    MODEL_COST.register(&mut registry);
    WALLET_OPERATIONS.register(&mut registry);
    WALLET_HELD.register(&mut registry);
    COMPRESSION_STEPS.register(&mut registry);
    DOCUMENTS_RENDERED.register(&mut registry);
    DEPENDENCY_UP.register(&mut registry);
    BUILD_INFO.register(&mut registry);
    registry.register_collector(Box::new(crate::process::ProcessCollector));
    registry
});

/// The process-wide registry holding every metric above.
pub fn registry() -> &'static Registry {
    &REGISTRY
}

/// The whole registry in the Prometheus text format (version 0.0.4, see
/// [`CONTENT_TYPE`]).
pub fn render() -> String {
    encode(registry())
}

fn encode(registry: &Registry) -> String {
    let mut out = String::with_capacity(8 * 1024);
    // Writing to a String cannot fail, nor can encoding these metric types.
    let _ = prometheus_text::encode(&mut out, registry);
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
        static U: Gauge = Gauge::new("t_plain", "an unlabelled gauge", &[]);
        C.inc(&["x\"y"]);
        C.add(&["x\"y"], 2.0);
        C.add(&["x\"y"], -5.0);
        C.add(&["x\"y"], f64::NAN);
        C.inc(&["too", "many"]);
        H.observe(&["x"], 0.0625);
        H.observe(&["x"], 0.5);
        H.observe(&["x"], 5.0);
        H.observe(&["x"], f64::INFINITY);
        G.replace_all(&[(vec!["running".into()], 3.0), (vec!["done".into()], 1.0)]);
        G.replace_all(&[(vec!["done".into()], 2.0)]);
        U.set(&[], 7.0);
        let mut registry = Registry::default();
        C.register(&mut registry);
        H.register(&mut registry);
        G.register(&mut registry);
        U.register(&mut registry);
        let out = encode(&registry);
        assert!(out.contains("# HELP t_total a counter"), "{out}");
        assert!(out.contains("# TYPE t_total counter\n"), "{out}");
        assert!(out.contains("t_total{a=\"x\\\"y\"} 3"), "{out}");
        assert!(!out.contains("t_total_total"), "{out}");
        assert!(out.contains("# TYPE t_seconds histogram\n"), "{out}");
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
        assert!(out.contains("# TYPE t_gauge gauge\n"), "{out}");
        assert!(out.contains("t_gauge{s=\"running\"} 0"), "{out}");
        assert!(out.contains("t_gauge{s=\"done\"} 2"), "{out}");
        assert!(out.contains("\nt_plain 7"), "{out}");
        assert_eq!(C.get(&["x\"y"]), 3.0);
        assert_eq!(C.get(&["too", "many"]), 0.0);
        assert_eq!(G.get(&["running"]), 0.0);
    }

    #[test]
    fn grpc_codes_are_named_as_grpc_names_them() {
        assert_eq!(grpc_code_name("0"), "OK");
        assert_eq!(grpc_code_name("5"), "NotFound");
        assert_eq!(grpc_code_name("14"), "Unavailable");
        assert_eq!(grpc_code_name("16"), "Unauthenticated");
        for other in ["17", "-1", "transport", ""] {
            assert_eq!(grpc_code_name(other), "Unknown", "{other}");
        }
    }

    #[test]
    fn the_registry_exposes_every_metric_under_its_documented_name() {
        GRPC_REQUESTS.inc(&["svc", "/m", "0"]);
        let out = render();
        for (name, kind) in [
            ("dialectic_grpc_requests_total", "counter"),
            ("dialectic_grpc_request_duration_seconds", "histogram"),
            ("dialectic_queue_lag_seconds", "histogram"),
            ("dialectic_messages_consumed_total", "counter"),
            ("dialectic_outbox_pending", "gauge"),
            ("dialectic_jobs", "gauge"),
            ("dialectic_job_duration_seconds", "histogram"),
            ("dialectic_model_calls_total", "counter"),
            ("dialectic_model_tokens_total", "counter"),
            ("dialectic_model_call_duration_seconds", "histogram"),
            ("dialectic_model_time_to_first_token_seconds", "histogram"),
            ("dialectic_model_errors_total", "counter"),
            ("dialectic_model_cost_total", "counter"),
            ("dialectic_wallet_operations_total", "counter"),
            ("dialectic_wallet_held", "gauge"),
            ("dialectic_compression_steps_total", "counter"),
            ("dialectic_documents_rendered_total", "counter"),
            ("dialectic_build_info", "gauge"),
            ("grpc_server_started_total", "counter"),
            ("grpc_server_handled_total", "counter"),
            ("grpc_server_handling_seconds", "histogram"),
            ("process_cpu_seconds_total", "counter"),
            ("process_resident_memory_bytes", "gauge"),
            ("process_start_time_seconds", "gauge"),
            ("process_open_fds", "gauge"),
        ] {
            assert!(
                out.contains(&format!("# TYPE {name} {kind}\n")),
                "{name}: {out}"
            );
        }
        assert!(
            out.contains(
                "\ndialectic_grpc_requests_total{service=\"svc\",method=\"/m\",code=\"0\"} 1"
            ),
            "{out}"
        );
    }
}
