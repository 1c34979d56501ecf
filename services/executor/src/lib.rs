//! The executor: claims PLAN and EXECUTE jobs, gathers their inputs, makes
//! exactly one model call per job, and saves the reply as one raw JSON chunk
//! in S3 plus one contribution row. The chunk is written before the row; the
//! row, the lease release and the outcome message commit together.

mod attempt;
pub mod billing;
mod call;
pub use call::HANDED_BACK;
mod chain;
pub mod compress;
mod gather;
pub mod limits;
mod model_call;
mod persist;
mod provider;
mod query;
mod request;
mod seed_prompt;

use billing::Billing;
use dialectic_blob::BlobStore;
use dialectic_cache::Cache;
use dialectic_config::Settings;
use dialectic_core::job::JobType;
use dialectic_core::service_auth::ServiceName;
use dialectic_llm::{ExchangeStore, SimulatedSettings};
use dialectic_proto::v1::executor::executor_service_server::{
    ExecutorService, ExecutorServiceServer,
};
use dialectic_proto::v1::executor::{AnswerRequest, AnswerResponse, StatusRequest, StatusResponse};
use dialectic_queue::keys;
use dialectic_runtime::service_auth::{ServiceKey, internal_client};
use dialectic_runtime::worker::{AttemptError, JobWork, JobWorker, Recorded, WorkerStats};
use dialectic_runtime::{
    CancellationToken, ConsumerOptions, Courier, Dependencies, Handler, Running, RuntimeError,
    run_consumer, supervise,
};
use dialectic_store::attempts::AttemptRows;
use dialectic_store::jobs::JobRow;
use dialectic_store::{Store, StoreError};
use dialectic_tokenizer::TokenCounter;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use tracing::{Instrument, info_span};

pub const SERVICE_NAME: &str = "dialectic.v1.executor.ExecutorService";

struct Executor {
    store: Store,
    blob: BlobStore,
    simulated: SimulatedSettings,
    max_continuations: u32,
    /// None when billing is off (`executor.wallet_url` empty).
    billing: Option<Arc<Billing>>,
    /// Redis, for call limits shared across replicas (connected in the background).
    cache: Arc<OnceLock<Cache>>,
    lease_secs: u64,
    provider_mode: String,
    /// Counts every request with the model's tokenizer (cached in Redis).
    counter: TokenCounter,
    /// None when compression is off (`executor.indexer_url` empty).
    indexer: Option<compress::GrpcIndexer>,
    /// Default embedder when a model row names none.
    embedder: String,
    /// Cancelled when the shutdown grace is over: a model call still running
    /// is abandoned and its hold released, so its job reruns elsewhere unpaid.
    hand_back: CancellationToken,
    /// The model that answers questions when a request names none.
    query_model: String,
    /// What a question's citations must quote.
    quote_rules: dialectic_core::query::QuoteRules,
    /// `executor.model_key_prefixes`: the variables a model row may name
    /// for its key (empty: any but the platform's own).
    model_key_prefixes: Vec<String>,
    /// `executor.max_reply_*`: how much of a provider's reply is read.
    reply_limits: dialectic_llm::ReplyLimits,
}

/// `executor.max_reply_*` as the client takes them.
fn reply_limits(executor: &dialectic_config::ExecutorConfig) -> dialectic_llm::ReplyLimits {
    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    dialectic_llm::ReplyLimits {
        max_line_bytes: size(executor.max_reply_line_bytes),
        max_reply_bytes: size(executor.max_reply_bytes),
        max_events: size(executor.max_reply_events),
        max_error_body_bytes: size(executor.max_error_body_bytes),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Recorded provider exchanges, kept in the bucket under `recordings/`.
struct BlobExchanges(BlobStore);

#[async_trait::async_trait]
impl ExchangeStore for BlobExchanges {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        match self.0.get(key).await {
            Ok(body) => Ok(Some(body)),
            Err(dialectic_blob::BlobError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), String> {
        self.0
            .put(key, body, "application/json")
            .await
            .map_err(|e| e.to_string())
    }
}

fn permanent(code: &'static str, message: impl ToString) -> AttemptError {
    AttemptError::permanent(code, message)
}

fn retryable(code: &'static str, message: impl ToString) -> AttemptError {
    AttemptError::retryable(code, message)
}

/// The executor as the job worker runs it; the gRPC API shares it.
struct Jobs(Arc<Executor>);

#[async_trait::async_trait]
impl JobWork for Jobs {
    type Rows = Result<AttemptRows, StoreError>;

    async fn attempt(
        &self,
        job: &JobRow,
        rows: Self::Rows,
        worker: &str,
    ) -> Result<Recorded, AttemptError> {
        self.0.attempt(job, rows, worker).await
    }
}

impl Executor {
    /// One model call for one job, in stages: what it works from, the provider,
    /// the request (inputs, history, compression), the paid call, and the
    /// reply kept (or continued).
    async fn attempt(
        &self,
        job: &JobRow,
        rows: Result<AttemptRows, StoreError>,
        worker: &str,
    ) -> Result<Recorded, AttemptError> {
        let attempt = attempt::Attempt::from_claim(job, rows)?;
        let provider = self.provider(&attempt.model, Some(job)).await?;
        let chain = match job.target_contribution_id {
            Some(target) => Some(self.chain_of(job, target).await?),
            None => None,
        };
        let prepared = self
            .request(&attempt, chain.as_ref())
            .instrument(info_span!("request"))
            .await?;
        // Before the call: a failed write then costs no model call.
        let seed_prompt = self
            .keep_seed_prompt(&attempt, chain.as_ref(), &prepared.request)
            .instrument(info_span!("seed_prompt"))
            .await?;
        let reply = self
            .call(
                job,
                &attempt.model,
                &provider,
                &prepared.request,
                attempt.step.effective_config().timeout(),
            )
            .await?;
        let kept = persist::Kept {
            reply,
            compressed: prepared.compressed,
            seed_prompt,
        };
        self.persist(&attempt, worker, chain.as_ref(), kept).await
    }
}

/// A reply that parsed but lacks a key its step requires, or has one of the
/// wrong type: retried with the reason, then `retry_loop_failed`.
const INVALID_REPLY: &str = "invalid_reply";

const CONTINUE_INSTRUCTION: &str = "Continue exactly where your previous reply stopped. Reply with the same JSON shape, \
     holding only the text that comes next.";

struct Api {
    slots: u32,
    stats: Arc<WorkerStats>,
    executor: Arc<Executor>,
}

#[tonic::async_trait]
impl ExecutorService for Api {
    async fn status(
        &self,
        _request: tonic::Request<StatusRequest>,
    ) -> Result<tonic::Response<StatusResponse>, tonic::Status> {
        Ok(tonic::Response::new(StatusResponse {
            slots: self.slots,
            busy: self.stats.busy.load(Ordering::Relaxed),
            jobs_completed: self.stats.completed.load(Ordering::Relaxed),
        }))
    }

    async fn answer(
        &self,
        request: tonic::Request<AnswerRequest>,
    ) -> Result<tonic::Response<AnswerResponse>, tonic::Status> {
        let request = request.into_inner();
        // The question's text stays out of the logs: it may be confidential.
        let span = tracing::info_span!("answer", project_id = %request.project_id, query_id = %request.query_id);
        let answer = tracing::Instrument::instrument(self.executor.answer(request), span).await?;
        Ok(tonic::Response::new(answer))
    }
}

pub fn start(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> BoxFuture<'static, Result<Running, RuntimeError>> {
    Box::pin(start_executor(settings, shutdown))
}

/// The wallet client, or None when billing is off. A URL that cannot be
/// used stops the start: running unbilled by accident would give model
/// calls away.
fn billing(settings: &Settings) -> Result<Option<Arc<Billing>>, RuntimeError> {
    let url = settings.executor.wallet_url.trim();
    if url.is_empty() {
        tracing::warn!("executor.wallet_url is empty: model calls are not billed");
        return Ok(None);
    }
    let channel = internal_client(settings, url, ServiceName::Executor)?;
    Ok(Some(Arc::new(Billing::new(channel))))
}

/// The indexer client for compression, or None when compression is off.
fn indexer(settings: &Settings) -> Result<Option<compress::GrpcIndexer>, RuntimeError> {
    let url = settings.executor.indexer_url.trim();
    if url.is_empty() {
        tracing::warn!(
            "executor.indexer_url is empty: oversized prompts fail instead of being compressed"
        );
        return Ok(None);
    }
    let channel = internal_client(settings, url, ServiceName::Executor)?;
    Ok(Some(compress::GrpcIndexer::new(channel)))
}

async fn start_executor(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> Result<Running, RuntimeError> {
    let store = dialectic_runtime::store(&settings)?;
    let blob = dialectic_runtime::blob(&settings);
    let key = ServiceKey::from_settings(&settings, ServiceName::Executor)?;
    let stats = Arc::new(WorkerStats::default());
    let slots = settings.executor.worker.slots.max(1);
    let cache = Arc::new(OnceLock::new());
    let hand_back = CancellationToken::new();
    let executor = Arc::new(Executor {
        store: store.clone(),
        blob: blob.clone(),
        simulated: SimulatedSettings {
            latency_ms: settings.executor.simulated_latency_ms,
            failure_rate: settings.executor.simulated_failure_rate,
            record_requests: settings.executor.simulated_record_requests,
            call_log: Some(settings.executor.simulated_call_log.trim())
                .filter(|p| !p.is_empty())
                .map(std::path::PathBuf::from),
            paragraphs: 3,
        },
        max_continuations: settings.executor.max_continuations,
        billing: billing(&settings)?,
        cache: cache.clone(),
        lease_secs: settings.executor.worker.lease_secs,
        provider_mode: settings.executor.provider_mode.trim().to_string(),
        counter: TokenCounter::new(cache.clone()),
        indexer: indexer(&settings)?,
        embedder: settings.executor.embedder.trim().to_string(),
        hand_back: hand_back.clone(),
        query_model: settings.executor.query_model.trim().to_string(),
        quote_rules: dialectic_core::query::QuoteRules {
            min_chars: settings.executor.query_min_quote_chars,
        },
        model_key_prefixes: settings.executor.model_key_prefixes.clone(),
        reply_limits: reply_limits(&settings.executor),
    });
    let server = dialectic_runtime::start_grpc(
        SERVICE_NAME,
        &settings.executor.worker.listen,
        tonic::service::Routes::new(ExecutorServiceServer::new(Api {
            slots: u32::from(slots),
            stats: stats.clone(),
            executor: executor.clone(),
        })),
        key,
        shutdown.clone(),
    )
    .await?;
    let work_shutdown = shutdown.child_token();
    let (courier, courier_task) = Courier::from_settings(&store, &settings, &work_shutdown);
    let handler: Arc<dyn Handler> = Arc::new(JobWorker {
        store: store.clone(),
        worker: dialectic_core::ids::instance_name("executor"),
        lease_secs: settings.executor.worker.lease_secs.max(1),
        job_types: &[JobType::Plan, JobType::Execute],
        work: Jobs(executor),
        stats,
        courier,
    });
    let mut dependencies = Dependencies {
        store: Some(store),
        blob: Some(blob),
        cache: Some(cache),
        ..Default::default()
    };
    let mut tasks: Vec<_> = courier_task.into_iter().collect();
    for key in [keys::JOB_PLAN, keys::JOB_EXECUTE] {
        tasks.push(tokio::spawn(run_consumer(
            ConsumerOptions {
                hand_back: hand_back.clone(),
                ..ConsumerOptions::new(&settings, key, slots, "executor")
            },
            handler.clone(),
            dependencies.broker_flag(),
            work_shutdown.clone(),
        )));
    }
    Ok(supervise(
        "executor",
        &settings,
        server,
        dependencies,
        work_shutdown,
        tasks,
    ))
}
