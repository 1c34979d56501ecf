//! Configuration, layered as defaults → TOML file → `DIALECTIC_*` environment
//! (`__` nests: `DIALECTIC_DATABASE__URL`) → `--set key=value` flags. The
//! environment's `DIALECTIC_MODEL_KEY_*` variables are model keys, never
//! settings (`dialectic_core::secrets::MODEL_KEY_PREFIX`).

use clap::Args;
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

mod redact;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("--set expects key=value, got {0:?}")]
    BadOverride(String),
    #[error("could not render configuration: {0}")]
    Render(String),
}

impl From<figment::Error> for ConfigError {
    fn from(e: figment::Error) -> Self {
        ConfigError::Invalid(e.to_string())
    }
}

#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DatabaseConfig {
    pub url: String,
    pub max_connections: u32,
    pub connect_timeout_ms: u64,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: "postgres://postgres@127.0.0.1:5432/dialectic".into(),
            max_connections: 10,
            connect_timeout_ms: 3000,
        }
    }
}

#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AmqpConfig {
    pub url: String,
    /// Prefix of the exchange and queue names, so several installs (or test runs) share a broker.
    pub prefix: String,
    /// Deliveries after which a message goes to the dead-letter queue.
    pub delivery_limit: u32,
    /// A delivery that waits this long for a free worker slot is re-published at
    /// the back of its queue; keep it well under the broker's `consumer_timeout`.
    pub recycle_after_ms: u64,
    /// A writer publishes its outbox rows itself right after the commit; a row
    /// still there this long after it was written is the relay's (its writer
    /// died, or the broker refused it). 0: no fast path, the relay publishes all.
    pub relay_after_ms: u64,
}

impl Default for AmqpConfig {
    fn default() -> Self {
        Self {
            url: "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
            prefix: "dialectic".into(),
            delivery_limit: 5,
            recycle_after_ms: 300_000,
            relay_after_ms: 1000,
        }
    }
}

#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RedisConfig {
    pub url: String,
    pub progress_ttl_secs: u64,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:6379".into(),
            progress_ttl_secs: 86_400,
        }
    }
}

/// How the services of one deployment know each other.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct InternalConfig {
    /// A directory of service keys (`dialecticd keys generate DIR`): this
    /// service's own `{service}.key` (its Ed25519 private key) and every
    /// service's `{service}.pub`. Each service then signs with a key no other
    /// service holds. Empty: every key is derived from `token_secret`.
    pub key_dir: String,
    /// Without `key_dir`, every service's key is derived from this secret, so
    /// whoever holds it can sign as any service: fine for one process running
    /// every service (`dialecticd run`) or a trusted machine. Empty: a random
    /// one for this process.
    pub token_secret: String,
    /// How often a caller resolves the name of each service it calls again,
    /// so calls follow replicas as they come and go (a headless Service
    /// answers with every ready pod).
    pub resolve_interval_ms: u64,
    /// A hosts(5)-format file consulted before DNS on every resolution: pins
    /// internal names to addresses where there is no DNS for them. Empty: DNS only.
    pub hosts_file: String,
    /// For one release's rolling upgrade: also accept the previous release's
    /// service tokens (v3: caller, audience and expiry, bound to no call and
    /// replayable within their minute), and send one beside each token so
    /// previous-release pods accept this one's calls. Off (the default):
    /// only tokens bound to their call. OPERATIONS.md, "Upgrading across the
    /// token change".
    pub accept_previous_tokens: bool,
}

impl Default for InternalConfig {
    fn default() -> Self {
        Self {
            key_dir: String::new(),
            token_secret: String::new(),
            resolve_interval_ms: 5_000,
            hosts_file: String::new(),
            accept_previous_tokens: false,
        }
    }
}

#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct S3Config {
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    pub access_key: String,
    pub secret_key: String,
    pub force_path_style: bool,
}

impl Default for S3Config {
    fn default() -> Self {
        Self {
            endpoint: "http://127.0.0.1:9000".into(),
            bucket: "dialectic".into(),
            region: "us-east-1".into(),
            access_key: "dialectic".into(),
            secret_key: "dialectic-secret".into(),
            force_path_style: true,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TelemetryConfig {
    /// `tracing_subscriber` filter, e.g. `info,dialectic=debug`.
    pub log_filter: String,
    /// `text` or `json`.
    pub log_format: String,
    /// OTLP/gRPC endpoint; empty disables export. `OTEL_EXPORTER_OTLP_ENDPOINT` also enables it.
    pub otlp_endpoint: String,
    /// Address of the Prometheus `/metrics` listener (one per process); empty: none.
    pub metrics_listen: String,
    /// Log each span's busy and idle time when it closes (a profile of every
    /// attempt's stages in the logs); off by default: one line per span.
    pub span_timings: bool,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            log_filter: "info".into(),
            log_format: "text".into(),
            otlp_endpoint: String::new(),
            metrics_listen: String::new(),
            span_timings: false,
        }
    }
}

#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GatewayConfig {
    pub listen: String,
    /// The seeded local administrator: the user `bootstrap_key` acts as, and
    /// the default owner of keys made by `dialecticd admin create-key`.
    pub default_user_id: String,
    /// A key accepted for `default_user_id` without a database row, for local
    /// use and first setup (`deploy/stack.sh env` sets one); empty turns it off.
    pub bootstrap_key: String,
    pub max_prompt_bytes: usize,
    /// Largest request message the public API decodes; a bigger one is
    /// RESOURCE_EXHAUSTED before any handler runs.
    pub max_message_bytes: usize,
    /// Most documents one project may hold (`AddProjectDocument`); every
    /// uncached `Query` reads them all, so an unbounded project is a cost any
    /// tenant could impose. The next upload is RESOURCE_EXHAUSTED.
    pub max_documents_per_project: u64,
    /// Most bytes of uploaded documents one project may hold, counted as the
    /// stored text; an upload that would pass it is RESOURCE_EXHAUSTED.
    pub max_document_bytes_per_project: u64,
    /// Most projects one user may hold (deleted ones not counted), so one
    /// tenant cannot grow the catalog without bound; the next
    /// `CreateProject` is RESOURCE_EXHAUSTED. Counted in Postgres, so it
    /// holds across every gateway replica. 0: no cap.
    pub max_projects_per_user: u64,
    /// Most bytes of uploaded documents one user may hold across all their
    /// projects (deleted ones not counted), as `max_document_bytes_per_project`
    /// counts them; an upload that would pass it is RESOURCE_EXHAUSTED.
    /// Counted in Postgres, across every replica. 0: no cap.
    pub max_document_bytes_per_user: u64,
    /// Most pages a PDF upload may have; a longer one is refused, naming the
    /// file, and nothing is stored.
    pub max_upload_pages: u32,
    /// Most bytes a PDF or DOCX upload may unpack to (a PDF's decompressed
    /// page content, a DOCX's unzipped parts), counted as they are read, so a
    /// zip bomb is refused before it is: memory stays bounded by this.
    pub max_upload_unpacked_bytes: u64,
    /// Most `WatchSession` streams one user may hold open at once in one
    /// gateway process: each replica counts its own, in memory, so a user
    /// may hold replicas × this many in all (16 on each of 10 replicas:
    /// 160). The next is RESOURCE_EXHAUSTED until one ends. 0: no cap.
    pub max_watches_per_user: u32,
    /// Seconds a `WatchSession` stream may stay quiet before the gateway
    /// sends a heartbeat event (SESSION_EVENT_KIND_HEARTBEAT), so a proxy
    /// that cuts idle streams (ingress-nginx: 60 s) keeps it open. Keep it
    /// under the shortest idle timeout between clients and the gateway.
    /// 0 is taken as 1.
    pub watch_heartbeat_secs: u64,
    /// Largest export archive of one project (`ExportProject`,
    /// `GetExportUrl`), in bytes, as the zip would be: a bigger one is
    /// RESOURCE_EXHAUSTED before any byte is sent. Exports stream, so this
    /// bounds what one request may make the gateway read and send, not its
    /// memory.
    pub max_export_bytes: u64,
    /// Most exports (`ExportProject`, `GetExportUrl`) one user may have in
    /// progress at once in one gateway process (each replica counts its
    /// own, so a user may run replicas × this many in all); the next is
    /// RESOURCE_EXHAUSTED `EXPORT_LIMIT_REACHED` until one ends. Each export
    /// reads and writes up to `max_export_bytes`. 0: no cap.
    pub max_exports_per_user: u32,
    /// For how long after Postgres last confirmed them the gateway may still
    /// use which user an API key belongs to and which sessions a user owns,
    /// for `WatchSession` only and only while its readiness loop finds
    /// Postgres down (not on a busy pool): progress streams keep answering
    /// through a failover. A revoked key is refused all the same (the
    /// revocation is published to Redis, which the gateway asks first).
    /// 0: no such memory (every call needs Postgres).
    pub last_known_secs: u64,
    /// For how long a mutating call's answer is kept under the caller's
    /// `client_request_id`: a retry with the same id within it gets the first
    /// answer instead of acting again. Counted in Postgres, across replicas.
    pub idempotency_window_secs: u64,
    /// Origins whose web pages may call the API through gRPC-Web (served
    /// beside gRPC on `listen`), comma-separated: `https://app.example.com`.
    /// Empty: no cross-origin page may (CORS refuses them).
    pub web_origins: String,
    /// Serve every unary RPC as Connect's unary call on `listen` too: HTTP
    /// POST of JSON (or `application/proto`) to `/dialectic.v1.DialecticService/<Method>`,
    /// so `curl` reaches the API; HTTP/1.1 is spoken for it. false: the port
    /// speaks HTTP/2 gRPC only (and gRPC-Web with `web_origins`).
    pub json_api: bool,
    /// PEM file of the certificate chain (leaf first) `listen` serves TLS
    /// with; set together with `tls_key`. Both empty: plaintext, for a
    /// gateway behind a proxy that terminates TLS, or on loopback.
    pub tls_cert: String,
    /// PEM file of `tls_cert`'s private key (PKCS#8, PKCS#1 or SEC1).
    pub tls_key: String,
    /// Also serve `grpc.health.v1` alone, in plaintext, on this address: for
    /// probes that cannot speak TLS (the kubelet's gRPC probes). Empty: none.
    pub health_listen: String,
    /// The planner's gRPC address: the gateway sends it every command that
    /// changes a session (the planner is the only writer of job and session state).
    pub planner_url: String,
    /// The wallet service, for administrators' credits (`CreditWallet`).
    pub wallet_url: String,
    /// The indexer, which indexes uploaded project documents (`AddProjectDocument`).
    pub indexer_url: String,
    /// An executor, which makes the model calls of `Query`.
    pub executor_url: String,
    /// Deadlines and caps of each connection to `listen` (the internal
    /// services' ports keep these defaults).
    pub connections: ConnectionConfig,
}

/// What one connection to a gRPC port may hold, and for how long: a client
/// that connects and then sends nothing, half a request or only an HTTP/2
/// preface is closed, so quiet connections cannot pile up. The defaults
/// follow nginx's and Envoy's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ConnectionConfig {
    /// From accept (with TLS: from the handshake's end) to the first
    /// request's headers; a connection with no request by then is closed.
    pub first_request_timeout_ms: u64,
    /// A connection with no request in flight for this long is closed
    /// (HTTP/2: GOAWAY first; a client's next call opens a new one).
    pub idle_timeout_ms: u64,
    /// HTTP/1.1 (gRPC-Web): a request's headers arrive whole within this, or
    /// the connection is closed.
    pub header_read_timeout_ms: u64,
    /// HTTP/2: the server PINGs every connection this often, and closes one
    /// whose answer takes longer than `keepalive_timeout_ms`.
    pub keepalive_interval_ms: u64,
    pub keepalive_timeout_ms: u64,
    /// After this long a connection is told to go (HTTP/2 GOAWAY) and takes
    /// no new calls; those in flight finish. Clients reconnect, so load
    /// spreads over new replicas. 0: no limit.
    pub max_connection_age_secs: u64,
    /// Calls one HTTP/2 connection may have open at once (advertised in its
    /// SETTINGS; one more is refused with REFUSED_STREAM).
    pub max_concurrent_streams: u32,
    /// TLS: a handshake, waiting for a free slot included, ends within this.
    pub tls_handshake_timeout_ms: u64,
    /// TLS: handshakes in progress at once past the client's hello; more
    /// wait for a slot (inside their timeout).
    pub max_tls_handshakes: u32,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            first_request_timeout_ms: 10_000,
            idle_timeout_ms: 120_000,
            header_read_timeout_ms: 10_000,
            keepalive_interval_ms: 60_000,
            keepalive_timeout_ms: 20_000,
            max_connection_age_secs: 1800,
            max_concurrent_streams: 128,
            tls_handshake_timeout_ms: 10_000,
            max_tls_handshakes: 256,
        }
    }
}

impl ConnectionConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("first_request_timeout_ms", self.first_request_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("keepalive_interval_ms", self.keepalive_interval_ms),
            ("keepalive_timeout_ms", self.keepalive_timeout_ms),
            ("tls_handshake_timeout_ms", self.tls_handshake_timeout_ms),
            ("max_tls_handshakes", self.max_tls_handshakes.into()),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError::Invalid(format!(
                "gateway.connections.{name} must be above 0"
            )));
        }
        if !(1..=1000).contains(&self.max_concurrent_streams) {
            return Err(ConfigError::Invalid(
                "gateway.connections.max_concurrent_streams must be between 1 and 1000".into(),
            ));
        }
        Ok(())
    }
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            // Below Linux's ephemeral range (32768+), so a client socket never holds the port.
            listen: "127.0.0.1:7051".into(),
            default_user_id: "00000000-0000-0000-0000-000000000001".into(),
            bootstrap_key: String::new(),
            max_prompt_bytes: 256 * 1024,
            max_message_bytes: 4 * 1024 * 1024,
            max_documents_per_project: 1000,
            max_document_bytes_per_project: 256 * 1024 * 1024,
            max_projects_per_user: 1000,
            max_document_bytes_per_user: 1024 * 1024 * 1024,
            max_upload_pages: 1000,
            max_upload_unpacked_bytes: 64 * 1024 * 1024,
            max_watches_per_user: 16,
            watch_heartbeat_secs: 20,
            max_export_bytes: 1024 * 1024 * 1024,
            max_exports_per_user: 2,
            last_known_secs: 120,
            idempotency_window_secs: 24 * 60 * 60,
            web_origins: String::new(),
            json_api: true,
            tls_cert: String::new(),
            tls_key: String::new(),
            health_listen: String::new(),
            planner_url: "http://127.0.0.1:7052".into(),
            wallet_url: "http://127.0.0.1:7056".into(),
            indexer_url: "http://127.0.0.1:7055".into(),
            executor_url: "http://127.0.0.1:7053".into(),
            connections: ConnectionConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PlannerConfig {
    pub listen: String,
    pub sweep_interval_ms: u64,
    pub outbox_batch: i64,
    pub retry_base_ms: u64,
    pub retry_cap_ms: u64,
    /// Claims a job may use before it ends in `retry_loop_failed`.
    pub max_attempts: u32,
    /// A pending or running session with no job activity for this long pauses
    /// itself (seed 003 "Session Expiration"); 0 turns it off.
    pub idle_pause_secs: u64,
    /// A session (paused or waiting included) with no activity for this long
    /// gets an `idle_warning` event (seed 003: 7 days); 0 turns abandonment off.
    pub abandon_warn_secs: u64,
    /// With no activity for this long after the warning, the session is
    /// abandoned; its documents and objects are kept.
    pub abandon_after_warn_secs: u64,
    /// Clarification rounds a session may run (seed 004 `needs_clarification`):
    /// a reply's request after these is ignored, with an event saying so.
    pub max_clarification_rounds: u32,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:7052".into(),
            sweep_interval_ms: 1000,
            outbox_batch: 200,
            retry_base_ms: 500,
            retry_cap_ms: 30_000,
            max_attempts: 3,
            idle_pause_secs: 24 * 3600,
            abandon_warn_secs: 7 * 24 * 3600,
            abandon_after_warn_secs: 7 * 24 * 3600,
            max_clarification_rounds: 2,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct WorkerConfig {
    pub listen: String,
    /// Concurrent jobs; also the consumer prefetch.
    pub slots: u16,
    /// How long a claim lasts without a heartbeat.
    pub lease_secs: u64,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            listen: String::new(),
            slots: 4,
            lease_secs: 30,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ExecutorConfig {
    #[serde(flatten)]
    pub worker: WorkerConfig,
    /// Simulated provider: delay per call, to model a real provider's latency.
    pub simulated_latency_ms: u64,
    /// Simulated provider: fail this share of calls (0..=1) to exercise retries.
    pub simulated_failure_rate: f64,
    /// Continuation turns one document may take before it is assembled as incomplete.
    pub max_continuations: u32,
    /// Simulated provider: keep every request in memory (for tests and debugging).
    pub simulated_record_requests: bool,
    /// Simulated provider: append one line per call that returned a reply to
    /// this file (empty: off), so a fault run can count the calls that really
    /// happened across process restarts.
    pub simulated_call_log: String,
    /// The wallet service every model call is held and captured against; empty turns billing off.
    pub wallet_url: String,
    /// `live` calls providers; `record` calls them and keeps every exchange in S3;
    /// `replay` serves recorded exchanges and never calls a provider.
    pub provider_mode: String,
    /// The indexer service that compresses oversized prompts; empty turns
    /// compression off (an oversized prompt then fails with `context_window`).
    pub indexer_url: String,
    /// Embedder for compression when the model row's `config.embedder` names none:
    /// `local` (hashed n-grams, no network) or `openai`.
    pub embedder: String,
    /// The model (API identifier) that answers `Query` when the request names none.
    pub query_model: String,
    /// The fewest characters a `Query` citation's quote may have; a shorter
    /// one (a heading, a clause number) is removed like a fabricated one
    /// (default: `dialectic_core::query::DEFAULT_MIN_QUOTE_CHARS`).
    pub query_min_quote_chars: usize,
    /// Prefixes a model row's key variable (`secret_name`) must start with,
    /// case and all, e.g. `["DIALECTIC_MODEL_KEY_"]`: a row naming any other
    /// variable gets no key and its calls fail for good. Empty: any name but
    /// the platform's own (`DIALECTIC_*`, `AWS_*`). From the environment, a
    /// comma-separated list.
    #[serde(deserialize_with = "prefix_list")]
    pub model_key_prefixes: Vec<String>,
    /// The longest line of a provider's streamed reply, in bytes; past it
    /// the call fails for good as "reply too large".
    pub max_reply_line_bytes: u64,
    /// The most bytes a provider's reply may have, streamed or whole.
    pub max_reply_bytes: u64,
    /// The most events a provider's streamed reply may have.
    pub max_reply_events: u64,
    /// The most bytes of a provider's refusal (a non-2xx status) read.
    pub max_error_body_bytes: u64,
}

impl ExecutorConfig {
    /// The reply caps, each at least 1 (0 would refuse every reply).
    fn check_reply_caps(&self) -> Result<(), ConfigError> {
        let caps = [
            ("max_reply_line_bytes", self.max_reply_line_bytes),
            ("max_reply_bytes", self.max_reply_bytes),
            ("max_reply_events", self.max_reply_events),
            ("max_error_body_bytes", self.max_error_body_bytes),
        ];
        match caps.into_iter().find(|(_, cap)| *cap == 0) {
            Some((name, _)) => Err(ConfigError::Invalid(format!(
                "executor.{name} must be at least 1 (it caps what a provider may send)"
            ))),
            None => Ok(()),
        }
    }
}

/// A list of prefixes as TOML gives it, or comma-separated as one
/// environment variable can: `A_,B_` (blanks dropped).
fn prefix_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Prefixes {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Prefixes::deserialize(d)? {
        Prefixes::List(list) => list.into_iter().map(|p| p.trim().to_string()).collect(),
        Prefixes::Text(text) => text
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            worker: WorkerConfig {
                listen: "127.0.0.1:7053".into(),
                slots: 4,
                lease_secs: 30,
            },
            simulated_latency_ms: 0,
            simulated_failure_rate: 0.0,
            max_continuations: 5,
            simulated_record_requests: false,
            simulated_call_log: String::new(),
            wallet_url: "http://127.0.0.1:7056".into(),
            provider_mode: "live".into(),
            indexer_url: "http://127.0.0.1:7055".into(),
            embedder: "local".into(),
            query_model: "simulated".into(),
            query_min_quote_chars: 20,
            model_key_prefixes: Vec::new(),
            max_reply_line_bytes: 8 << 20,
            max_reply_bytes: 32 << 20,
            max_reply_events: 200_000,
            max_error_body_bytes: 64 << 10,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RendererConfig {
    #[serde(flatten)]
    pub worker: WorkerConfig,
}

impl Default for RendererConfig {
    fn default() -> Self {
        Self {
            worker: WorkerConfig {
                listen: "127.0.0.1:7054".into(),
                slots: 4,
                lease_secs: 30,
            },
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct WalletConfig {
    pub listen: String,
    /// How often holds past their expiry are released.
    pub hold_sweep_interval_ms: u64,
}

impl Default for WalletConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:7056".into(),
            hold_sweep_interval_ms: 5000,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ListenConfig {
    pub listen: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct IndexerConfig {
    pub listen: String,
    /// Largest chunk, in tokens, a text is split into for embedding and retrieval.
    pub chunk_tokens: u32,
    /// OpenAI-compatible embeddings endpoint (`…/v1`) for the `openai` embedder;
    /// empty leaves only the local embedder.
    pub embeddings_base_url: String,
    pub embeddings_model: String,
    /// Name of the environment variable holding the embeddings API key (never the key).
    pub embeddings_secret_name: String,
    /// Uploads (PDF, DOCX) one indexer converts at once, each on a core of
    /// its own; more wait for a slot.
    pub conversion_slots: usize,
}

impl Default for IndexerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:7055".into(),
            chunk_tokens: 256,
            embeddings_base_url: String::new(),
            embeddings_model: "text-embedding-3-small".into(),
            embeddings_secret_name: "OPENAI_API_KEY".into(),
            conversion_slots: 2,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Settings {
    pub internal: InternalConfig,
    pub database: DatabaseConfig,
    pub amqp: AmqpConfig,
    pub redis: RedisConfig,
    pub s3: S3Config,
    pub telemetry: TelemetryConfig,
    pub gateway: GatewayConfig,
    pub planner: PlannerConfig,
    pub executor: ExecutorConfig,
    pub renderer: RendererConfig,
    pub indexer: IndexerConfig,
    pub wallet: WalletConfig,
    /// In-flight work gets this long to finish on SIGTERM.
    pub shutdown_grace_secs: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            internal: InternalConfig::default(),
            database: DatabaseConfig::default(),
            amqp: AmqpConfig::default(),
            redis: RedisConfig::default(),
            s3: S3Config::default(),
            telemetry: TelemetryConfig::default(),
            gateway: GatewayConfig::default(),
            planner: PlannerConfig::default(),
            executor: ExecutorConfig::default(),
            renderer: RendererConfig::default(),
            indexer: IndexerConfig::default(),
            wallet: WalletConfig::default(),
            shutdown_grace_secs: 30,
        }
    }
}

/// The prefix of the environment variables that are settings.
const ENV_PREFIX: &str = "DIALECTIC_";

/// Whether the variable `DIALECTIC_{key}` is a setting: all but the model
/// keys' own (`DIALECTIC_MODEL_KEY_*`), which stay out of the settings so no
/// setting, and no platform secret, can ever be one of them (the executor
/// may read them for a model, `dialectic_core::secrets`).
fn is_setting_variable(key: &str) -> bool {
    !dialectic_core::secrets::is_model_key_name(&format!("{ENV_PREFIX}{key}"))
}

/// Flags every dialectic binary accepts.
#[derive(Debug, Clone, Default, Args)]
pub struct ConfigArgs {
    /// TOML configuration file.
    #[arg(long, short = 'c', env = "DIALECTIC_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Override one setting, e.g. `--set executor.slots=8` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", global = true)]
    pub overrides: Vec<String>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long, global = true)]
    pub dump_config: bool,
}

impl ConfigArgs {
    pub fn load(&self) -> Result<Settings, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Settings::default()));
        if let Some(path) = &self.config {
            figment = figment.merge(Toml::file_exact(path));
        }
        figment = figment.merge(
            Env::prefixed(ENV_PREFIX)
                .filter(|key| is_setting_variable(key.as_str()))
                .split("__")
                .ignore(&["config"]),
        );
        for item in &self.overrides {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| ConfigError::BadOverride(item.clone()))?;
            // Values are read as TOML so numbers and booleans keep their types.
            let parsed: toml::Value = toml::from_str::<toml::Table>(&format!("v = {value}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(value.to_string()));
            figment = figment.merge(Serialized::global(key.trim(), parsed));
        }
        let mut settings: Settings = figment.extract()?;
        if settings.internal.token_secret.is_empty() {
            settings.internal.token_secret = dialectic_core::ids::random_secret();
        }
        settings.validate()?;
        Ok(settings)
    }
}

impl Settings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        if self.executor.worker.slots == 0 || self.renderer.worker.slots == 0 {
            return bad("executor.slots and renderer.slots must be at least 1");
        }
        if self.planner.max_attempts == 0 {
            return bad("planner.max_attempts must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.executor.simulated_failure_rate) {
            return bad("executor.simulated_failure_rate must be between 0 and 1");
        }
        // One without the other would silently serve plaintext on a port the
        // operator meant to protect.
        if self.gateway.tls_cert.trim().is_empty() != self.gateway.tls_key.trim().is_empty() {
            return bad(
                "gateway.tls_cert and gateway.tls_key are set together (both PEM files) or not at all",
            );
        }
        self.gateway.connections.validate()?;
        for prefix in &self.executor.model_key_prefixes {
            check_model_key_prefix(prefix)?;
        }
        self.executor.check_reply_caps()?;
        if self.amqp.prefix.is_empty()
            || !self
                .amqp
                .prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return bad(
                "amqp.prefix must be non-empty and use only letters, digits, '-', '_' and '.'",
            );
        }
        Ok(())
    }

    /// TOML with secrets masked, for `--dump-config`.
    pub fn dump(&self) -> Result<String, ConfigError> {
        let mut masked = self.clone();
        masked.s3.secret_key = "***".into();
        masked.internal.token_secret = "***".into();
        if !masked.gateway.bootstrap_key.is_empty() {
            masked.gateway.bootstrap_key = "***".into();
        }
        masked.database.url = mask_url_password(&masked.database.url);
        masked.amqp.url = mask_url_password(&masked.amqp.url);
        masked.redis.url = mask_url_password(&masked.redis.url);
        toml::to_string_pretty(&masked).map_err(|e| ConfigError::Render(e.to_string()))
    }
}

/// One of `executor.model_key_prefixes`: the start of a variable name, and
/// not the platform's own (those are never read for a model, whatever the
/// list says, so such a prefix would only mislead).
fn check_model_key_prefix(prefix: &str) -> Result<(), ConfigError> {
    let bad = |why: String| {
        Err(ConfigError::Invalid(format!(
            "executor.model_key_prefixes: {prefix:?} {why}"
        )))
    };
    let mut chars = prefix.chars();
    let plausible = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !plausible {
        return bad(
            "is not the start of an environment variable name (letters, digits and _)".into(),
        );
    }
    if let Some(platform) = dialectic_core::secrets::platform_prefix(prefix) {
        return bad(format!(
            "lies in the platform's own variables ({platform}*), which no model may read; use {} or a prefix of your own",
            dialectic_core::secrets::MODEL_KEY_PREFIX
        ));
    }
    Ok(())
}

/// `scheme://user:secret@host` → `scheme://user:***@host`.
pub fn mask_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((creds, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match creds.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_cap_of_zero_is_refused_naming_it() {
        let load = |set: &str| {
            ConfigArgs {
                overrides: vec![set.to_string()],
                ..Default::default()
            }
            .load()
        };
        let refused = load("executor.max_reply_events=0").expect_err("zero");
        assert!(
            refused.to_string().contains("executor.max_reply_events"),
            "{refused}"
        );
        let s = load("executor.max_reply_bytes=1048576").expect("a cap");
        assert_eq!(s.executor.max_reply_bytes, 1 << 20);
        assert_eq!(s.executor.max_reply_line_bytes, 8 << 20);
    }

    #[test]
    fn layers_apply_in_order() {
        let args = ConfigArgs {
            overrides: vec!["executor.slots=9".into(), "gateway.listen=0.0.0.0:1".into()],
            ..Default::default()
        };
        let s = args.load().unwrap();
        assert_eq!(s.executor.worker.slots, 9);
        assert_eq!(s.gateway.listen, "0.0.0.0:1");
        assert!(
            ConfigArgs {
                overrides: vec!["executor.slots=0".into()],
                ..Default::default()
            }
            .load()
            .is_err()
        );
        assert!(
            ConfigArgs {
                overrides: vec!["gateway.tls_cert=/etc/dialectic/tls.crt".into()],
                ..Default::default()
            }
            .load()
            .is_err(),
            "a certificate without its key"
        );
        assert!(
            ConfigArgs {
                overrides: vec!["nonsense".into()],
                ..Default::default()
            }
            .load()
            .is_err()
        );
    }

    #[test]
    fn model_key_variables_are_never_settings() {
        // Keys as the loader sees them: the prefix stripped, in any case.
        assert!(!is_setting_variable("MODEL_KEY_OPENAI"));
        assert!(!is_setting_variable("model_key_openai"));
        assert!(!is_setting_variable("MODEL_KEY__NESTED"));
        assert!(is_setting_variable("EXECUTOR__MODEL_KEY_PREFIXES"));
        assert!(is_setting_variable("S3__SECRET_KEY"));
        assert!(is_setting_variable("MODEL_KEYS"));
    }

    #[test]
    fn model_key_prefixes_are_a_list_or_comma_separated() {
        let load = |value: &str| {
            ConfigArgs {
                overrides: vec![format!("executor.model_key_prefixes={value}")],
                ..Default::default()
            }
            .load()
            .map(|s| s.executor.model_key_prefixes)
        };
        let both = vec!["DIALECTIC_MODEL_KEY_".to_string(), "ACME_".to_string()];
        assert_eq!(
            load(r#"["DIALECTIC_MODEL_KEY_", "ACME_"]"#).ok(),
            Some(both.clone())
        );
        assert_eq!(load("DIALECTIC_MODEL_KEY_, ACME_").ok(), Some(both));
        assert_eq!(load("[]").ok(), Some(Vec::new()));
        for refused in [
            r#"[""]"#,
            "DIALECTIC_",
            "DIALECTIC_MODEL_",
            "AWS_",
            "aws_",
            "MY-KEY",
        ] {
            let error = load(refused).err().map(|e| e.to_string());
            assert!(
                error
                    .as_deref()
                    .is_some_and(|e| e.contains("executor.model_key_prefixes")),
                "{refused}: {error:?}"
            );
        }
        assert_eq!(
            Settings::default().executor.model_key_prefixes,
            Vec::<String>::new(),
            "off by default: existing setups keep working"
        );
    }

    #[test]
    fn dump_masks_secrets() {
        let mut s = Settings::default();
        s.amqp.url = "amqp://guest:hunter2@h/".into();
        s.gateway.bootstrap_key = "dlk_bootstrap_secret".into();
        let text = s.dump().unwrap();
        assert!(!text.contains("hunter2") && !text.contains("dialectic-secret"));
        assert!(!text.contains("dlk_bootstrap_secret"));
    }
}
