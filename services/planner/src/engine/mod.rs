//! The planner's decisions. Each message is one transaction, a [`Unit`]: lock
//! what changes (job → parent → session, always in that order), apply the pure
//! transitions of `dialectic_core::job` and `dialectic_core::session`, write
//! follow-up messages to the outbox, commit, then publish progress. A
//! duplicate or stale message finds nothing to do.
//!
//! Where to read what:
//! - `outcome`: a worker's report on a job (started, succeeded, failed);
//! - `apply`: one job transition and the effects core's job machine returns;
//! - `session`: one session transition and every effect the session machine returns;
//! - `stage`: a stage's root jobs, and a stage's completion;
//! - `plan`: the steps a root job plans next; `spawn`: the jobs it inserts;
//! - `sweep`: leases, due retries, credited wallets and idle sessions;
//! - `unit`: the transaction and the follow-up work it runs before committing.

mod apply;
mod outcome;
mod plan;
mod published;
mod roles;
mod session;
mod spawn;
mod stage;
mod sweep;
#[cfg(test)]
mod testing;
mod unit;

pub use crate::error::PlannerError;
pub(crate) use session::EffectInputs;
pub use sweep::SweepReport;
pub(crate) use unit::{Apply, Unit};

use dialectic_cache::{Cache, ProgressEvent};
use dialectic_config::PlannerConfig;
use dialectic_core::ids::{InvalidId, JobId, SessionId};
use dialectic_core::job::JobType;
use dialectic_core::progress::EventKind;
use dialectic_runtime::Courier;
use dialectic_store::jobs::{self, JobRow};
use dialectic_store::{Store, StoreError, outbox, sessions};
use std::sync::{Arc, OnceLock};

pub struct Engine {
    pub(crate) store: Store,
    pub(crate) blob: dialectic_blob::BlobStore,
    pub(crate) config: PlannerConfig,
    cache: Arc<OnceLock<Cache>>,
    courier: Courier,
}

impl Engine {
    pub fn new(
        store: Store,
        blob: dialectic_blob::BlobStore,
        config: PlannerConfig,
        cache: Arc<OnceLock<Cache>>,
    ) -> Self {
        Self {
            store,
            blob,
            config,
            cache,
            courier: Courier::default(),
        }
    }

    /// Publishes what each unit enqueued right after its commit; without one,
    /// the relay publishes everything.
    pub fn with_courier(mut self, courier: Courier) -> Self {
        self.courier = courier;
        self
    }

    /// Queues the job's dispatch in the outbox (sent after the commit).
    pub(crate) async fn dispatch(
        &self,
        unit: &mut Unit,
        job_id: JobId,
        job_type: JobType,
    ) -> Result<(), PlannerError> {
        let row = outbox::enqueue(
            &mut unit.tx,
            job_type.dispatch_routing_key(),
            &dialectic_queue::job_dispatch(&job_id.to_string()),
            unit.traceparent.as_deref(),
        )
        .await?;
        unit.sent.push(row);
        Ok(())
    }

    /// Queues a StartStage command for `stage` in the outbox: the stage's
    /// root jobs are planned by the planner that takes it, in a unit of its own.
    async fn send_start_stage(
        &self,
        unit: &mut Unit,
        session_id: SessionId,
        stage: &str,
        iteration: i32,
    ) -> Result<(), PlannerError> {
        let command = dialectic_queue::start_stage_command(
            &session_id.to_string(),
            stage,
            iteration.max(1) as u32,
        );
        let row = outbox::enqueue(
            &mut unit.tx,
            dialectic_queue::keys::PLANNER_COMMAND,
            &command,
            unit.traceparent.as_deref(),
        )
        .await?;
        unit.sent.push(row);
        Ok(())
    }

    /// An event about `job`; its stage's percent is filled in as of the
    /// unit's commit (all of a unit's events go out together after it).
    pub(crate) async fn job_event(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        kind: EventKind,
    ) -> Result<ProgressEvent, PlannerError> {
        unit.report_percent_of(job);
        let model = job
            .payload()
            .map(|p| p.model_api_identifier)
            .unwrap_or_default();
        Ok(ProgressEvent {
            stage_slug: job.stage_slug.clone(),
            job_id: job.id.to_string(),
            job_type: job.job_type.clone(),
            document_key: job.document_key.clone().unwrap_or_default(),
            model,
            at_ms: now_ms(),
            ..ProgressEvent::new(kind, job.session_id.to_string())
        })
    }
}

/// Locks a command's session; None (logged) when it does not exist, since a
/// command for a deleted session has nothing left to do.
pub(crate) async fn lock_known_session(
    unit: &mut Unit,
    session_id: SessionId,
) -> Result<Option<sessions::SessionRow>, PlannerError> {
    match sessions::lock_session(&mut unit.tx, session_id).await {
        Ok(s) => Ok(Some(s)),
        Err(missing @ StoreError::NotFound { .. }) => {
            tracing::warn!(%missing, "command for an unknown session; ignoring");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Locks the job an outcome reports on; None (logged) when it does not
/// exist, since an outcome for a deleted job has nothing left to change.
async fn lock_known_job(unit: &mut Unit, job_id: JobId) -> Result<Option<JobRow>, PlannerError> {
    match jobs::lock(&mut unit.tx, job_id).await {
        Ok(j) => Ok(Some(j)),
        Err(missing @ StoreError::NotFound { .. }) => {
            tracing::warn!(%missing, "outcome for an unknown job; ignoring");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub(crate) fn parse_id<T>(value: &str) -> Result<T, PlannerError>
where
    T: std::str::FromStr<Err = InvalidId>,
{
    value
        .parse()
        .map_err(|e: InvalidId| PlannerError::BadMessage(e.to_string()))
}

/// A progress event about the session itself, with its status as stored now.
pub(crate) fn session_event(session: &sessions::SessionRow, kind: EventKind) -> ProgressEvent {
    ProgressEvent {
        session_status: session.status.clone(),
        stage_slug: session
            .state()
            .ok()
            .and_then(|s| s.effective().stage().map(str::to_string))
            .unwrap_or_default(),
        at_ms: now_ms(),
        ..ProgressEvent::new(kind, session.id.to_string())
    }
}
