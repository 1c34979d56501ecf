//! The unit of work: one transaction, and the follow-up work a message
//! causes inside it.
//!
//! A transition's effects cause more transitions: a child's completion wakes
//! its parent, whose completion may complete the stage, which moves the
//! session. Those steps are not called directly; each is queued on the unit
//! (the `*_later` methods: `apply_later`, `check_parent_later`,
//! `plan_next_later`, `check_stage_later`, `release_later`, `clarify_later`)
//! and [`Engine::finish`] runs the queue in order, first in first out, before
//! it commits. That keeps three things true:
//! - whatever queued a step has written its own rows first, so the step
//!   (which locks and re-reads what it needs) sees them;
//! - locks are taken job → parent → session, as every unit takes them, since
//!   a job's effects are queued after the job itself is done with;
//! - no async recursion: a chain of wake-ups is a loop, however long.

use super::{Engine, PlannerError};
use dialectic_cache::{Cache, ProgressEvent};
use dialectic_core::clarify::ClarificationRequest;
use dialectic_core::ids::{JobId, ProjectId, SessionId};
use dialectic_core::job::JobEvent;
use dialectic_store::jobs::{self, JobRow};
use dialectic_store::{StoreError, Tx, blackboard, outbox};
use std::collections::VecDeque;
use tracing::{Instrument, info_span};

/// The job a transition applies to.
pub(crate) enum JobRef {
    Id(JobId),
    /// The row as this unit locked it, queued before anything in the unit
    /// could write it: applying needs no second lock and read.
    Locked(Box<JobRow>),
}

impl From<JobId> for JobRef {
    fn from(id: JobId) -> Self {
        JobRef::Id(id)
    }
}

impl From<&JobRow> for JobRef {
    fn from(row: &JobRow) -> Self {
        JobRef::Locked(Box::new(row.clone()))
    }
}

/// A job event to apply through core's job machine, with what is stored
/// beside the new status.
pub(crate) struct Apply {
    pub(super) job: JobRef,
    pub(super) event: JobEvent,
    pub(super) error: Option<serde_json::Value>,
    pub(super) results: Option<serde_json::Value>,
}

impl Apply {
    pub(crate) fn new(job: impl Into<JobRef>, event: JobEvent) -> Self {
        Apply {
            job: job.into(),
            event,
            error: None,
            results: None,
        }
    }

    /// The job's `error_details` (why it failed, or waits).
    pub(crate) fn with_error(mut self, error: serde_json::Value) -> Self {
        self.error = Some(error);
        self
    }

    /// The job's `results` (what its reply produced).
    pub(crate) fn with_results(mut self, results: serde_json::Value) -> Self {
        self.results = Some(results);
        self
    }
}

/// A job that ended, and whom it releases.
pub(super) struct Release {
    pub(super) prerequisite: JobId,
    pub(super) succeeded: bool,
    /// Set when the prerequisite is a RENDER job or a regeneration of this
    /// session, which a later stage's root jobs may wait for.
    pub(super) render_of: Option<SessionId>,
}

/// Follow-up work inside one transaction, processed in order.
enum Work {
    Apply(Apply),
    CheckParent(JobId),
    /// After the asking job's success is applied: a reply's clarification requests.
    Clarify {
        job: JobId,
        asked: Vec<ClarificationRequest>,
    },
    CheckStage {
        session: SessionId,
        stage: String,
        iteration: i32,
    },
    PlanNext(JobId),
    Release(Release),
}

pub(crate) struct Unit {
    pub(crate) tx: Tx<'static>,
    pub(crate) events: Vec<ProgressEvent>,
    /// Projects whose cached reads this unit makes stale (dropped after commit).
    pub(crate) stale_projects: Vec<ProjectId>,
    /// Blackboard entries this unit recorded (copied to Redis after commit).
    pub(super) board: Vec<(SessionId, blackboard::Recorded)>,
    /// Sessions whose blackboard copy this unit makes stale (cleared after commit).
    pub(crate) cleared_boards: Vec<SessionId>,
    work: VecDeque<Work>,
    pub(super) traceparent: Option<String>,
    /// Outbox rows this unit wrote, handed to the courier after commit.
    pub(super) sent: Vec<outbox::OutboxRow>,
    /// The stages (session, slug, iteration) whose job events carry the
    /// stage's percent, read once per stage just before the commit.
    percent_of: Vec<(SessionId, String, i32)>,
}

impl Unit {
    /// Queues a job transition; it is applied, with its effects, in order
    /// when the unit finishes.
    pub(crate) fn apply_later(&mut self, apply: Apply) {
        self.work.push_back(Work::Apply(apply));
    }

    /// Queues a look at a parent's children: all done wakes it, one failed fails it.
    pub(super) fn check_parent_later(&mut self, parent: JobId) {
        self.work.push_back(Work::CheckParent(parent));
    }

    /// Queues the planning of a root job's next steps (or its completion).
    pub(super) fn plan_next_later(&mut self, job: JobId) {
        self.work.push_back(Work::PlanNext(job));
    }

    /// Queues a look at a stage's root jobs: all done moves the session on.
    pub(super) fn check_stage_later(&mut self, session: SessionId, stage: &str, iteration: i32) {
        self.work.push_back(Work::CheckStage {
            session,
            stage: stage.to_string(),
            iteration,
        });
    }

    /// Queues the release of the jobs waiting for a prerequisite that ended.
    pub(super) fn release_later(&mut self, release: Release) {
        self.work.push_back(Work::Release(release));
    }

    /// Queues a reply's clarification requests, after its job's own transition.
    pub(super) fn clarify_later(&mut self, job: JobId, asked: Vec<ClarificationRequest>) {
        self.work.push_back(Work::Clarify { job, asked });
    }

    /// Marks `job`'s stage as one whose percent the unit's events carry.
    pub(super) fn report_percent_of(&mut self, job: &JobRow) {
        let stage = (job.session_id, job.stage_slug.clone(), job.iteration_number);
        if !self.percent_of.contains(&stage) {
            self.percent_of.push(stage);
        }
    }
}

impl Engine {
    pub(crate) async fn begin(&self, traceparent: Option<&str>) -> Result<Unit, PlannerError> {
        Ok(Unit {
            tx: self.store.begin().await?,
            events: Vec::new(),
            stale_projects: Vec::new(),
            board: Vec::new(),
            cleared_boards: Vec::new(),
            work: VecDeque::new(),
            traceparent: traceparent.map(str::to_string),
            sent: Vec::new(),
            percent_of: Vec::new(),
        })
    }

    /// Runs the unit's queued work, commits, then hands on what the commit
    /// made true: outbox rows to the courier, progress and copies to Redis.
    pub(crate) async fn finish(&self, mut unit: Unit) -> Result<(), PlannerError> {
        self.run(&mut unit).instrument(info_span!("run")).await?;
        self.fill_percents(&mut unit).await?;
        let Unit {
            tx,
            events,
            mut stale_projects,
            board,
            cleared_boards,
            sent,
            ..
        } = unit;
        tx.commit()
            .instrument(info_span!("commit"))
            .await
            .map_err(StoreError::from)?;
        self.courier.post(sent);
        if let Some(cache) = self.cache.get() {
            self.mirror_boards(cache, &cleared_boards, &board).await;
            if let Err(e) = cache.publish(&events).await {
                tracing::warn!(error = %e, "could not publish progress");
            }
            drop_stale_reads(cache, &mut stale_projects).await;
        }
        Ok(())
    }

    async fn run(&self, unit: &mut Unit) -> Result<(), PlannerError> {
        while let Some(work) = unit.work.pop_front() {
            match work {
                Work::Apply(apply) => self.apply(unit, apply).await?,
                Work::CheckParent(parent) => self.check_parent(unit, parent).await?,
                Work::Clarify { job, asked } => self.clarify(unit, job, &asked).await?,
                Work::CheckStage {
                    session,
                    stage,
                    iteration,
                } => self.check_stage(unit, session, &stage, iteration).await?,
                Work::PlanNext(job) => self.plan_next(unit, job).await?,
                Work::Release(release) => self.release(unit, release).await?,
            }
        }
        Ok(())
    }

    /// One percent query per stage the unit's job events name, however many
    /// events (a fan-out plans dozens of jobs in one unit).
    async fn fill_percents(&self, unit: &mut Unit) -> Result<(), PlannerError> {
        for (session, stage, iteration) in std::mem::take(&mut unit.percent_of) {
            let percent = jobs::stage_percent(&mut unit.tx, session, &stage, iteration).await?;
            let session = session.to_string();
            for event in unit.events.iter_mut().filter(|e| {
                !e.job_id.is_empty() && e.session_id == session && e.stage_slug == stage
            }) {
                event.stage_percent = percent;
            }
        }
        Ok(())
    }

    /// The Redis copy of the blackboard follows what the unit committed.
    async fn mirror_boards(
        &self,
        cache: &Cache,
        cleared: &[SessionId],
        board: &[(SessionId, blackboard::Recorded)],
    ) {
        for session in cleared {
            if let Err(e) = cache.board_clear(&session.to_string()).await {
                // Readers compare the copy with Postgres and rebuild it.
                tracing::warn!(error = %e, %session, "could not clear the blackboard copy");
            }
        }
        for (session, recorded) in board {
            let copied = dialectic_runtime::blackboard::mirror(
                &self.store,
                cache,
                *session,
                &recorded.entry,
                recorded.count,
            );
            if let Err(e) = copied.await {
                // Readers compare the copy with Postgres and rebuild it.
                tracing::warn!(error = %e, %session, "could not copy a blackboard entry");
            }
        }
    }
}

async fn drop_stale_reads(cache: &Cache, projects: &mut Vec<ProjectId>) {
    projects.sort_unstable();
    projects.dedup();
    for project in projects.iter() {
        // Entries expire by themselves (gateway read cache TTL), so a
        // missed invalidation is bounded, not permanent.
        if let Err(e) = cache.invalidate_project(&project.to_string()).await {
            tracing::warn!(error = %e, %project, "could not drop cached reads");
        }
    }
}
