//! What every job worker does around its own work: claim by compare-and-set
//! (recording `JobStarted` in the same transaction when the claim starts a
//! stage: a root PLAN job), keep the lease alive, and record the outcome only
//! while it still owns the attempt. Outcome messages go out through the
//! worker's courier right after their commit.

use crate::{CancellationToken, Courier};
use dialectic_core::error::{ErrorCode, ErrorContract, Reason};
use dialectic_core::ids::JobId;
use dialectic_core::job::{INSUFFICIENT_BALANCE, JobType};
use dialectic_proto::ENVELOPE_VERSION;
use dialectic_proto::v1::queue::{
    Envelope, JobFailed, JobOutcome, JobStarted, JobSucceeded, envelope::Body, job_outcome,
};
use dialectic_queue::keys;
use dialectic_store::jobs::{self, ClaimRead, ClaimScope, Claimed, JobRow};
use dialectic_store::outbox::{self, OutboxRow};
use dialectic_store::{Conn, Store, StoreError, Tx};
use std::time::Duration;
use tokio::task::JoinHandle;

fn outcome(job: &JobRow, result: job_outcome::Result) -> Vec<u8> {
    dialectic_queue::encode(&Envelope {
        version: ENVELOPE_VERSION,
        body: Some(Body::JobOutcome(JobOutcome {
            job_id: job.id.to_string(),
            attempt: job.attempt_count.max(0) as u32,
            result: Some(result),
        })),
    })
}

/// Claims the job for `worker`, reading what `reads` asks in the same
/// statement; None when another worker has it or it is not claimable any
/// more (a duplicate or stale dispatch). Only a root PLAN job's start is news
/// to the planner (it moves the session to `running_<stage>`), recorded in the
/// claim's transaction; every other claim is one statement, tried first
/// because nearly every job is one.
pub async fn claim<R: ClaimRead>(
    store: &Store,
    courier: &Courier,
    job_id: JobId,
    job_types: &[JobType],
    worker: &str,
    lease_secs: u64,
) -> Result<Option<Claimed<R>>, StoreError> {
    let quiet = jobs::claim(
        store.pool(),
        job_id,
        job_types,
        ClaimScope::NoStageStart,
        worker,
        lease_secs,
    )
    .await?;
    if quiet.is_some() || !job_types.contains(&JobType::Plan) {
        return Ok(quiet);
    }
    let mut tx = store.begin().await?;
    let scope = ClaimScope::StageStarts;
    let claimed = jobs::claim::<R>(&mut *tx, job_id, job_types, scope, worker, lease_secs);
    let Some(claimed) = claimed.await? else {
        return Ok(None);
    };
    let started = outcome(
        &claimed.job,
        job_outcome::Result::Started(JobStarted {
            worker: worker.to_string(),
        }),
    );
    let traceparent = dialectic_telemetry::current_traceparent();
    let started =
        outbox::enqueue(&mut tx, keys::JOB_EVENT, &started, traceparent.as_deref()).await?;
    tx.commit().await?;
    courier.post([started]);
    Ok(Some(claimed))
}

/// Renews the lease every third of its length until `stop`; cancels `lost`
/// when the job was taken away, so the worker can abandon the attempt.
pub fn spawn_heartbeat(
    store: Store,
    job: &JobRow,
    worker: String,
    lease_secs: u64,
    stop: CancellationToken,
    lost: CancellationToken,
) -> JoinHandle<()> {
    let (id, attempt) = (job.id, job.attempt_count);
    tokio::spawn(async move {
        let every = Duration::from_millis((lease_secs * 1000 / 3).max(100));
        while crate::sleep_or_shutdown(every, &stop).await {
            match jobs::heartbeat(store.pool(), id, attempt, &worker, lease_secs).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(job_id = %id, "lease lost; abandoning this attempt");
                    lost.cancel();
                    return;
                }
                Err(e) => tracing::warn!(job_id = %id, error = %e, "heartbeat failed"),
            }
        }
    })
}

/// An attempt's success, recorded in a transaction that has committed: the
/// outcome message the worker publishes. Only [`record_success`] makes one.
#[must_use = "the attempt returns it, so the worker publishes its outcome"]
pub struct Recorded(OutboxRow);

/// Records success inside the caller's transaction (which also writes the
/// job's product); return the [`Recorded`] from the attempt once that
/// transaction commits. None: the attempt is no longer ours; roll back.
pub async fn record_success(
    tx: &mut Tx<'_>,
    job: &JobRow,
    worker: &str,
    succeeded: JobSucceeded,
) -> Result<Option<Recorded>, StoreError> {
    let message = outcome(job, job_outcome::Result::Succeeded(succeeded));
    Ok(release_lease(tx, job, worker, &message)
        .await?
        .map(Recorded))
}

/// Drops the attempt's lease and writes its outcome message, if `worker`
/// still owns the attempt.
async fn release_lease(
    conn: &mut Conn,
    job: &JobRow,
    worker: &str,
    message: &[u8],
) -> Result<Option<OutboxRow>, StoreError> {
    let traceparent = dialectic_telemetry::current_traceparent();
    let (id, attempt, key) = (job.id, job.attempt_count, keys::JOB_EVENT);
    jobs::release_lease(
        conn,
        id,
        attempt,
        worker,
        key,
        message,
        traceparent.as_deref(),
    )
    .await
}

/// Records a failed attempt; the planner decides between retry and failure.
pub async fn record_failure(
    store: &Store,
    courier: &Courier,
    job: &JobRow,
    worker: &str,
    code: &str,
    message: &str,
    retryable: bool,
) -> Result<bool, StoreError> {
    let message = outcome(
        job,
        job_outcome::Result::Failed(JobFailed {
            error_code: code.to_string(),
            message: message.to_string(),
            retryable,
        }),
    );
    let mut conn = store.pool().acquire().await?;
    let Some(row) = release_lease(&mut conn, job, worker, &message).await? else {
        return Ok(false);
    };
    courier.post([row]);
    Ok(true)
}

/// Reads the job id out of a dispatch message; Err is a reason to dead-letter.
pub fn dispatched_job(data: &[u8]) -> Result<JobId, String> {
    let envelope = dialectic_queue::decode(data).map_err(|e| e.to_string())?;
    match envelope.body {
        Some(Body::JobDispatch(d)) => JobId::parse(&d.job_id).map_err(|e| e.to_string()),
        _ => Err("expected a job dispatch".into()),
    }
}

/// Why an attempt did not produce its product.
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    #[error("{code}: {message}")]
    Permanent { code: &'static str, message: String },
    #[error("{code}: {message}")]
    Retryable { code: &'static str, message: String },
    #[error("the lease was lost to another attempt")]
    Lost,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AttemptError {
    pub fn permanent(code: &'static str, message: impl ToString) -> Self {
        AttemptError::Permanent {
            code,
            message: message.to_string(),
        }
    }

    pub fn retryable(code: &'static str, message: impl ToString) -> Self {
        AttemptError::Retryable {
            code,
            message: message.to_string(),
        }
    }
}

/// For the attempts a client waits on (a query's model calls): a short
/// balance reads as the ledger's own failure, anything else names the job
/// error code in the metadata.
impl ErrorContract for AttemptError {
    fn code(&self) -> ErrorCode {
        match self {
            AttemptError::Permanent { .. } => ErrorCode::FailedPrecondition,
            AttemptError::Retryable { .. } | AttemptError::Lost => ErrorCode::Unavailable,
            AttemptError::Store(e) => e.code(),
        }
    }

    fn reason(&self) -> Reason {
        match self {
            AttemptError::Permanent { code, .. } if *code == INSUFFICIENT_BALANCE => {
                Reason::InsufficientFunds
            }
            AttemptError::Permanent { .. } => Reason::AttemptRefused,
            AttemptError::Retryable { .. } => Reason::AttemptRetryable,
            AttemptError::Lost => Reason::LeaseLost,
            AttemptError::Store(e) => e.reason(),
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            AttemptError::Permanent { code, .. } | AttemptError::Retryable { code, .. } => {
                vec![("job_error", code.to_string())]
            }
            AttemptError::Lost => Vec::new(),
            AttemptError::Store(e) => e.metadata(),
        }
    }
}

/// The job-specific part of a worker: one attempt at one claimed job. It
/// records its success through [`record_success`] in the transaction that saves
/// its product and returns what that gave once committed, or `Lost` when it
/// reports the attempt is no longer its own.
#[async_trait::async_trait]
pub trait JobWork: Send + Sync + 'static {
    /// What the claim reads for the attempt besides the job.
    type Rows: ClaimRead;

    async fn attempt(
        &self,
        job: &JobRow,
        rows: Self::Rows,
        worker: &str,
    ) -> Result<Recorded, AttemptError>;
}

#[derive(Default)]
pub struct WorkerStats {
    pub busy: std::sync::atomic::AtomicU32,
    pub completed: std::sync::atomic::AtomicU64,
}

/// A queue handler that claims, heartbeats, runs the attempt and records a
/// failure; duplicate and stale dispatches are acked as no-ops.
pub struct JobWorker<W> {
    pub store: Store,
    pub worker: String,
    pub lease_secs: u64,
    pub job_types: &'static [JobType],
    pub work: W,
    pub stats: std::sync::Arc<WorkerStats>,
    /// Publishes claims' and outcomes' messages right after their commit.
    pub courier: Courier,
}

#[async_trait::async_trait]
impl<W: JobWork> crate::Handler for JobWorker<W> {
    async fn handle(&self, delivery: &dialectic_queue::Delivery) -> crate::Disposition {
        use tracing::Instrument;
        let job_id = match dispatched_job(&delivery.data) {
            Ok(id) => id,
            Err(reason) => return crate::Disposition::DeadLetter(reason),
        };
        let span = tracing::info_span!("job", %job_id, job_type = ?self.job_types, session_id = tracing::field::Empty, trace_id = tracing::field::Empty);
        dialectic_telemetry::adopt_traceparent(
            &span,
            dialectic_queue::header(delivery, dialectic_queue::TRACEPARENT_HEADER).as_deref(),
        );
        self.handle_job(job_id, delivery).instrument(span).await
    }
}

impl<W: JobWork> JobWorker<W> {
    async fn handle_job(
        &self,
        job_id: JobId,
        delivery: &dialectic_queue::Delivery,
    ) -> crate::Disposition {
        use std::sync::atomic::Ordering;
        use tracing::Instrument;
        let Claimed { job, rows } = match claim::<W::Rows>(
            &self.store,
            &self.courier,
            job_id,
            self.job_types,
            &self.worker,
            self.lease_secs,
        )
        .instrument(tracing::info_span!("claim"))
        .await
        {
            Ok(Some(claimed)) => claimed,
            Ok(None) => {
                tracing::info!("job not claimable (duplicate or stale dispatch); dropping message");
                return crate::Disposition::Ack;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim yet");
                return crate::Disposition::Requeue;
            }
        };
        tracing::Span::current().record("session_id", tracing::field::display(job.session_id));
        // The claim and its lease now guard the job, so the message is done: a
        // model call may outlast the broker's consumer_timeout, which would close
        // the channel of an unacked delivery and hand the job to a second worker.
        if let Err(e) = dialectic_queue::ack(delivery).await {
            tracing::warn!(error = %e, "could not ack the claimed dispatch; its redelivery will be a no-op");
        }
        self.stats.busy.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let stop = CancellationToken::new();
        let lost = CancellationToken::new();
        let heartbeat = spawn_heartbeat(
            self.store.clone(),
            &job,
            self.worker.clone(),
            self.lease_secs,
            stop.clone(),
            lost.clone(),
        );
        let result = tokio::select! {
            r = self.work.attempt(&job, rows, &self.worker) => r,
            _ = lost.cancelled() => Err(AttemptError::Lost),
        };
        stop.cancel();
        let _ = heartbeat.await;
        self.stats.busy.fetch_sub(1, Ordering::Relaxed);
        let result_label = match &result {
            Ok(_) => "succeeded",
            Err(AttemptError::Lost) => "lost",
            Err(AttemptError::Permanent { code, .. })
            | Err(AttemptError::Retryable { code, .. }) => code,
            Err(AttemptError::Store(_)) => "store",
        };
        dialectic_telemetry::metrics::JOB_DURATION.observe(
            &[&job.job_type, &job.stage_slug, result_label],
            started.elapsed().as_secs_f64(),
        );
        let (code, message, can_retry) = match result {
            Ok(Recorded(outcome)) => {
                self.courier.post([outcome]);
                self.stats.completed.fetch_add(1, Ordering::Relaxed);
                return crate::Disposition::Settled;
            }
            Err(AttemptError::Lost) => return crate::Disposition::Settled,
            Err(AttemptError::Permanent { code, message }) => (code, message, false),
            Err(AttemptError::Retryable { code, message }) => (code, message, true),
            Err(AttemptError::Store(e)) => ("store", e.to_string(), true),
        };
        tracing::warn!(code, %message, retryable = can_retry, "attempt failed");
        let recorded = record_failure(
            &self.store,
            &self.courier,
            &job,
            &self.worker,
            code,
            &message,
            can_retry,
        );
        if let Err(e) = recorded.await {
            // The lease will expire and the planner will retry the job.
            tracing::warn!(error = %e, "could not record the failure");
        }
        crate::Disposition::Settled
    }
}
