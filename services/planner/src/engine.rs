//! The planner's decisions. Each message is one transaction: lock what changes
//! (job → parent → session, always in that order), apply the pure transitions of
//! `dialectic_core::job`, write follow-up messages to the outbox, commit, then
//! publish progress. A duplicate or stale message finds nothing to do.

use dialectic_cache::{Cache, ProgressEvent};
use dialectic_config::PlannerConfig;
use dialectic_core::blackboard::BoardEntry;
use dialectic_core::clarify::{Clarification, ClarificationRequest};
use dialectic_core::error::{ErrorCode, ErrorContract};
use dialectic_core::fanout::{Anchor, FanOutJob, SourceDoc, fan_out};
use dialectic_core::ids::{ContributionId, InvalidId, JobId, ProjectId, SessionId, StepId};
use dialectic_core::job::{
    CHILD_FAILED, ChildrenState, INSUFFICIENT_BALANCE, JobEffect, JobEvent, JobStatus, JobType,
    PREREQUISITE_FAILED, REGENERATION_KEY_MARK, children_state, retry_backoff_ms, transition,
};
use dialectic_core::paths::Lineage;
use dialectic_core::payload::{JobPayload, RenderPayload};
use dialectic_core::recipe::{Granularity, Recipe, RecipeStep};
use dialectic_core::session::{
    InvalidTransition, SessionEffect, SessionEvent, StageCompletion, stage_completion,
    transition as session_transition,
};
use dialectic_core::shape::SkipStep;
use dialectic_core::slug::slugify;
use dialectic_proto::v1::queue::{
    BoardEntry as QueueBoardEntry, JobOutcome, JobSucceeded, ResumeSession,
    SkipStep as QueueSkipStep, StartStage, job_outcome,
};
use dialectic_runtime::{Courier, error_status};
use dialectic_store::jobs::{self, JobRow, NewJob};
use dialectic_store::{
    Store, StoreError, Tx, blackboard, clarifications, inputs, outbox, project_documents, recipes,
    records, skips,
};
use serde_json::json;
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, OnceLock};
use tracing::{Instrument, info_span};

#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid message: {0}")]
    BadMessage(String),
    #[error("cannot plan stage {stage}: {reason}")]
    Recipe { stage: String, reason: String },
    /// A command the session's (or job's) state does not take.
    #[error("{0}")]
    Refused(String),
    /// Rows kept changing under a command; the caller may try again.
    #[error("{0}")]
    Unavailable(String),
    /// A retry found no failed job in its stage.
    #[error("nothing failed in stage {stage} of this iteration; there is nothing to retry")]
    NothingToRetry { stage: String },
    #[error("{0}")]
    Blob(#[from] dialectic_blob::BlobError),
}

impl PlannerError {
    pub fn is_transient(&self) -> bool {
        matches!(self, PlannerError::Store(e) if e.is_transient())
    }
}

impl From<InvalidTransition> for PlannerError {
    fn from(e: InvalidTransition) -> Self {
        PlannerError::Refused(e.to_string())
    }
}

impl ErrorContract for PlannerError {
    fn code(&self) -> ErrorCode {
        match self {
            PlannerError::Store(e) => e.code(),
            PlannerError::Blob(e) => e.code(),
            PlannerError::Refused(_) | PlannerError::NothingToRetry { .. } => {
                ErrorCode::FailedPrecondition
            }
            PlannerError::Unavailable(_) => ErrorCode::Unavailable,
            PlannerError::BadMessage(_) => ErrorCode::InvalidArgument,
            PlannerError::Recipe { .. } => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            PlannerError::Store(e) => e.reason(),
            PlannerError::Blob(e) => e.reason(),
            PlannerError::Refused(_) => "TRANSITION_REFUSED",
            PlannerError::Unavailable(_) => "CONCURRENT_UPDATE",
            PlannerError::NothingToRetry { .. } => "NOTHING_TO_RETRY",
            PlannerError::BadMessage(_) => "INVALID_COMMAND",
            PlannerError::Recipe { .. } => "RECIPE_UNPLANNABLE",
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            PlannerError::Store(e) => e.metadata(),
            PlannerError::Blob(e) => e.metadata(),
            PlannerError::Recipe { stage, .. } | PlannerError::NothingToRetry { stage } => {
                vec![("stage", stage.clone())]
            }
            _ => Vec::new(),
        }
    }
}

impl From<PlannerError> for tonic::Status {
    fn from(e: PlannerError) -> Self {
        error_status::status(&e)
    }
}

/// Follow-up work inside one transaction, processed in order.
/// The job a transition applies to.
enum JobRef {
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

impl JobRef {
    fn locked(row: &JobRow) -> Self {
        JobRef::Locked(Box::new(row.clone()))
    }
}

enum Work {
    Apply {
        job: JobRef,
        event: JobEvent,
        error: Option<serde_json::Value>,
        results: Option<serde_json::Value>,
    },
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
    Release {
        prerequisite: JobId,
        succeeded: bool,
        /// Set when the prerequisite is a RENDER job or a regeneration of this
        /// session, which a later stage's root jobs may wait for.
        render_of: Option<SessionId>,
    },
}

pub(crate) struct Unit {
    pub(crate) tx: Tx<'static>,
    pub(crate) events: Vec<ProgressEvent>,
    /// Projects whose cached reads this unit makes stale (dropped after commit).
    pub(crate) stale_projects: Vec<ProjectId>,
    /// Blackboard entries this unit recorded (copied to Redis after commit).
    board: Vec<(SessionId, blackboard::Recorded)>,
    /// Sessions whose blackboard copy this unit makes stale (cleared after commit).
    pub(crate) cleared_boards: Vec<SessionId>,
    work: VecDeque<Work>,
    traceparent: Option<String>,
    /// Outbox rows this unit wrote, handed to the courier after commit.
    sent: Vec<outbox::OutboxRow>,
    /// The stages (session, slug, iteration) whose job events carry the
    /// stage's percent, read once per stage just before the commit.
    percent_of: Vec<(SessionId, String, i32)>,
}

impl Unit {
    /// Queues `event` for a job this unit has locked; it is applied, with
    /// its effects, in order when the unit finishes.
    pub(crate) fn apply_later(&mut self, job: JobId, event: JobEvent) {
        self.work.push_back(Work::Apply {
            job: job.into(),
            event,
            error: None,
            results: None,
        });
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SweepReport {
    pub expired_leases: u32,
    pub retries_dispatched: u32,
    /// Jobs paused for funds whose wallet has been credited since.
    pub resumed: u32,
    /// Sessions that paused themselves after `planner.idle_pause_secs` idle.
    pub idle_paused: u32,
    /// Sessions warned that they will be abandoned, and sessions abandoned.
    pub idle_warned: u32,
    pub abandoned: u32,
}

pub struct Engine {
    pub(crate) store: Store,
    pub(crate) blob: dialectic_blob::BlobStore,
    pub(crate) config: PlannerConfig,
    cache: Arc<OnceLock<Cache>>,
    courier: Courier,
}

/// Locks a command's session; None (logged) when it does not exist, since a
/// command for a deleted session has nothing left to do.
pub(crate) async fn lock_known_session(
    unit: &mut Unit,
    session_id: SessionId,
) -> Result<Option<records::SessionRow>, PlannerError> {
    match records::lock_session(&mut unit.tx, session_id).await {
        Ok(s) => Ok(Some(s)),
        Err(missing @ StoreError::NotFound { .. }) => {
            tracing::warn!(%missing, "command for an unknown session; ignoring");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Output types of every step downstream of `step`: what a PLAN step's header context plans.
fn descendant_outputs(recipe: &Recipe, step: &RecipeStep) -> Vec<String> {
    let mut outputs: Vec<String> = Vec::new();
    for id in recipe.descendants(step.id) {
        if let Some(s) = recipe
            .step(id)
            .filter(|s| !s.is_skipped && !outputs.contains(&s.output_type))
        {
            outputs.push(s.output_type.clone());
        }
    }
    outputs
}

/// What a child job is planned with besides its step and sources.
struct Child<'a> {
    /// For PLAN steps: the outputs downstream of it, which its header plans.
    planned_documents: Vec<String>,
    /// The stage's newest clarification round, when it had one.
    round: Option<&'a Clarification>,
    /// The step is the one the round asked, or downstream of it.
    asked: bool,
    /// The job planned just before this one for the same step (a `sequential`
    /// job waits for it).
    previous: Option<JobId>,
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

    pub(crate) async fn finish(&self, mut unit: Unit) -> Result<(), PlannerError> {
        self.run(&mut unit).instrument(info_span!("run")).await?;
        self.fill_percents(&mut unit).await?;
        unit.tx
            .commit()
            .instrument(info_span!("commit"))
            .await
            .map_err(StoreError::from)?;
        self.courier.post(unit.sent);
        if let Some(cache) = self.cache.get() {
            for session in &unit.cleared_boards {
                if let Err(e) = cache.board_clear(&session.to_string()).await {
                    // Readers compare the copy with Postgres and rebuild it.
                    tracing::warn!(error = %e, %session, "could not clear the blackboard copy");
                }
            }
            for (session, recorded) in &unit.board {
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
            if let Err(e) = cache.publish(&unit.events).await {
                tracing::warn!(error = %e, "could not publish progress");
            }
            unit.stale_projects.sort_unstable();
            unit.stale_projects.dedup();
            for project in &unit.stale_projects {
                // Entries expire by themselves (gateway read cache TTL), so a
                // missed invalidation is bounded, not permanent.
                if let Err(e) = cache.invalidate_project(&project.to_string()).await {
                    tracing::warn!(error = %e, %project, "could not drop cached reads");
                }
            }
        }
        Ok(())
    }

    /// Seed 000 §4.1: create one root PLAN job per selected model for the stage.
    pub async fn start_stage(
        &self,
        command: &StartStage,
        traceparent: Option<&str>,
    ) -> Result<(), PlannerError> {
        let session_id = parse_id::<SessionId>(&command.session_id)?;
        let stage = command.stage_slug.as_str();
        let iteration = command.iteration.max(1) as i32;
        let mut unit = self.begin(traceparent).await?;
        let Some(session) = lock_known_session(&mut unit, session_id).await? else {
            return Ok(());
        };
        let event = SessionEvent::StartStage {
            stage: stage.to_string(),
        };
        if let Err(refused) = self
            .apply_session_event(&mut unit, &session, &event)
            .await?
        {
            tracing::info!(%refused, "stage already started or not next; nothing to do");
            return Ok(());
        }
        let stage_row = records::stage_in_process(&mut *unit.tx, session_id, stage).await?;
        let recipe = recipes::recipe_of_stage(&mut unit.tx, stage_row.id, &stage_row.slug).await?;
        let root_step = recipe
            .entry_steps()
            .into_iter()
            .find(|s| s.job_type == JobType::Plan)
            .cloned()
            .ok_or_else(|| PlannerError::Recipe {
                stage: stage.to_string(),
                reason: "the recipe has no PLAN step without predecessors".into(),
            })?;
        let planned_documents = descendant_outputs(&recipe, &root_step);
        // RENDER jobs do not gate their own stage, but this stage reads the
        // earlier stages' rendered documents: its root jobs wait for them, and
        // for a regeneration still writing a document they would read.
        let renders_pending = jobs::outstanding_input_work(&mut unit.tx, session_id, stage).await?;
        if let Some(prerequisite) = renders_pending {
            tracing::info!(%prerequisite, stage, "earlier documents still rendering or regenerating; the stage's root jobs wait for them");
        }
        let models = records::models_by_id(&mut *unit.tx, &session.selected_model_ids).await?;
        // A stage re-run after a revisit gets new root jobs: the key carries the revision.
        let revision = match session.revision {
            0 => String::new(),
            n => format!(":r{n}"),
        };
        for model_id in &session.selected_model_ids {
            let Some(model) = models.iter().find(|m| m.id == *model_id) else {
                return Err(PlannerError::Recipe {
                    stage: stage.to_string(),
                    reason: format!("model {model_id} no longer exists"),
                });
            };
            let payload = JobPayload {
                step: Some(root_step.clone()),
                model_api_identifier: model.api_identifier.clone(),
                model_slug: slugify(&model.api_identifier, 40, "model"),
                stage_number: stage_row.stage_number.max(0) as u32,
                planned_documents: planned_documents.clone(),
                render: None,
                recipe: Some(recipe.clone()),
                sources: Vec::new(),
                lineage: None,
                lineage_model_id: None,
                clarification: None,
            };
            let job_id = JobId::new();
            let inserted = jobs::insert(
                &mut unit.tx,
                &NewJob {
                    id: job_id,
                    job_key: format!("{session_id}:{stage}:{iteration}:{model_id}{revision}"),
                    session_id,
                    user_id: session.user_id,
                    stage_slug: stage,
                    iteration,
                    job_type: JobType::Plan,
                    status: if renders_pending.is_some() {
                        JobStatus::WaitingForPrerequisite
                    } else {
                        JobStatus::Pending
                    },
                    step_id: Some(root_step.id.0),
                    step_key: Some(&root_step.step_key),
                    model_id: Some(model.id),
                    document_key: Some(&root_step.output_type),
                    payload: &payload,
                    parent_job_id: None,
                    prerequisite_job_id: renders_pending,
                    target_contribution_id: None,
                    max_attempts: self.config.max_attempts as i32,
                },
            )
            .await?;
            if let (Some(id), None) = (inserted, renders_pending) {
                self.dispatch(&mut unit, id, JobType::Plan).await?;
            }
        }
        unit.events.push(ProgressEvent {
            session_id: session_id.to_string(),
            kind: "stage_started".into(),
            session_status: session.status.clone(),
            stage_slug: stage.to_string(),
            message: format!("{} root job(s) planned", session.selected_model_ids.len()),
            at_ms: now_ms(),
            ..Default::default()
        });
        self.finish(unit).await
    }

    /// A resume sent over the queue by a gateway of the previous release:
    /// the planner's ResumeSession RPC does the same in one step now.
    pub async fn resume_session(
        &self,
        command: &ResumeSession,
        traceparent: Option<&str>,
    ) -> Result<(), PlannerError> {
        let session_id = parse_id::<SessionId>(&command.session_id)?;
        let mut unit = self.begin(traceparent).await?;
        let Some(session) = lock_known_session(&mut unit, session_id).await? else {
            return Ok(());
        };
        match self
            .apply_session_event(&mut unit, &session, &SessionEvent::Resume)
            .await?
        {
            Ok(applied) => unit.events.push(session_event(&applied, "session_resumed")),
            Err(refused) => tracing::info!(%refused, "nothing to resume"),
        }
        self.finish(unit).await
    }

    /// Applies `event` to a locked session through core's machine: stores the
    /// new state and does the session-level effects; the caller does its own
    /// (root jobs, a regeneration). A refused event changes nothing.
    pub(crate) async fn apply_session_event(
        &self,
        unit: &mut Unit,
        session: &records::SessionRow,
        event: &SessionEvent,
    ) -> Result<Result<records::SessionRow, InvalidTransition>, PlannerError> {
        let from = session.state()?;
        let transition = match session_transition(&from, event) {
            Ok(t) => t,
            Err(refused) => return Ok(Err(refused)),
        };
        let mut row = session.clone();
        if transition.changes(&from) {
            row = records::write_session_state(&mut unit.tx, session.id, &transition.to).await?;
        }
        for effect in &transition.effects {
            match effect {
                SessionEffect::BeginIteration => {
                    records::begin_iteration(&mut unit.tx, row.id).await?;
                    row.iteration_count += 1;
                }
                SessionEffect::BeginRevision => {
                    records::begin_revision(&mut unit.tx, row.id).await?;
                    row.revision += 1;
                }
                SessionEffect::StartStage { stage } => {
                    self.command_start_stage(unit, row.id, stage, row.iteration_count)
                        .await?
                }
                SessionEffect::DispatchWaiting => {
                    for (job, job_type) in jobs::awaiting_dispatch(&mut unit.tx, row.id).await? {
                        self.dispatch(unit, job, job_type).await?;
                    }
                }
                SessionEffect::PlanRootJobs { .. } | SessionEffect::RegenerateDocument => {}
            }
        }
        Ok(Ok(row))
    }

    pub async fn on_outcome(
        &self,
        outcome: &JobOutcome,
        traceparent: Option<&str>,
    ) -> Result<(), PlannerError> {
        let job_id = parse_id::<JobId>(&outcome.job_id)?;
        let Some(result) = &outcome.result else {
            return Err(PlannerError::BadMessage(
                "job outcome without a result".into(),
            ));
        };
        let mut unit = self.begin(traceparent).await?;
        let job = match jobs::lock(&mut unit.tx, job_id).await {
            Ok(j) => j,
            Err(missing @ StoreError::NotFound { .. }) => {
                tracing::warn!(%missing, "outcome for an unknown job; ignoring");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let current_attempt =
            job.status()? == JobStatus::Processing && job.attempt_count as u32 == outcome.attempt;
        match result {
            job_outcome::Result::Started(started) => {
                if job.parent_job_id.is_none() && job.job_type()? == JobType::Plan {
                    self.root_plan_started(&mut unit, &job).await?;
                }
                let mut event = self.job_event(&mut unit, &job, "job_started").await?;
                event.message = format!("attempt {} on {}", outcome.attempt, started.worker);
                unit.events.push(event);
            }
            job_outcome::Result::Succeeded(done) => {
                if !current_attempt {
                    tracing::info!(job_id = %job.id, status = %job.status, "stale success outcome; ignoring");
                    return Ok(());
                }
                self.on_success(&mut unit, &job, done).await?;
            }
            job_outcome::Result::Failed(failed) => {
                if !current_attempt {
                    tracing::info!(job_id = %job.id, status = %job.status, "stale failure outcome; ignoring");
                    return Ok(());
                }
                if failed.error_code == INSUFFICIENT_BALANCE {
                    self.pause_for_funds(&mut unit, &job, &failed.message)
                        .await?;
                    return self.finish(unit).await;
                }
                unit.work.push_back(Work::Apply {
                    job: JobRef::locked(&job),
                    event: JobEvent::Failed {
                        retryable: failed.retryable,
                    },
                    error: Some(json!({
                        "code": failed.error_code,
                        "message": failed.message,
                        "attempt": outcome.attempt,
                    })),
                    results: None,
                });
            }
        }
        self.finish(unit).await
    }

    /// A job's current attempt succeeded: what its reply asks for (skips,
    /// blackboard entries, a gate, a render or continuation, clarification),
    /// then the job's own transition.
    async fn on_success(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        done: &JobSucceeded,
    ) -> Result<(), PlannerError> {
        let results = json!({
            "contribution_id": done.contribution_id,
            "resource_id": done.resource_id,
            "finish_reason": done.finish_reason,
        });
        if !done.skip_steps.is_empty() {
            self.record_skips(unit, job, &done.skip_steps).await?;
        }
        if !done.blackboard.is_empty() {
            self.record_board(unit, job, &done.blackboard).await?;
        }
        let payload = job.payload()?;
        match job.job_type()? {
            JobType::Plan if payload.recipe.is_some() => {
                jobs::set_status(
                    &mut unit.tx,
                    job.id,
                    JobStatus::Processing,
                    None,
                    Some(&results),
                )
                .await?;
                unit.work.push_back(Work::PlanNext(job.id));
            }
            job_type => {
                // A reply below its confidence gate runs again instead of rendering.
                let rerun = job_type == JobType::Execute
                    && !done.continuation_needed
                    && self.apply_gate(unit, job, &payload, done).await?;
                if job_type == JobType::Execute
                    && !rerun
                    && payload
                        .step
                        .as_ref()
                        .is_some_and(RecipeStep::renders_markdown)
                    && !done.contribution_id.is_empty()
                {
                    let contribution = parse_id::<ContributionId>(&done.contribution_id)?;
                    self.spawn_render(unit, job, &payload, contribution).await?;
                }
                if job_type == JobType::Render {
                    // Seed 000 function 7: tell watchers the document's latest text is out.
                    let mut event = self.job_event(unit, job, "render_completed").await?;
                    event.message = done.resource_id.clone();
                    unit.events.push(event);
                    let project = records::project_of_session(&mut unit.tx, job.session_id).await?;
                    unit.stale_projects.push(project);
                }
                if job_type == JobType::Execute && done.continuation_needed {
                    let contribution = parse_id::<ContributionId>(&done.contribution_id)?;
                    self.spawn_continuation(unit, job, &payload, contribution)
                        .await?;
                }
                unit.work.push_back(Work::Apply {
                    job: JobRef::locked(job),
                    event: JobEvent::Succeeded,
                    error: None,
                    results: Some(results),
                });
            }
        }
        if !done.clarifications.is_empty() {
            unit.work.push_back(Work::Clarify {
                job: job.id,
                asked: done
                    .clarifications
                    .iter()
                    .map(|c| ClarificationRequest {
                        step_key: c.step_key.clone(),
                        question: c.question.clone(),
                    })
                    .collect(),
            });
        }
        Ok(())
    }

    /// Seed 004 adaptive execution: the steps a plan skips, for this session
    /// only. A step of another pipeline, or one already skipped, changes
    /// nothing; watchers see each skip and each ignored name.
    async fn record_skips(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        asked: &[QueueSkipStep],
    ) -> Result<(), PlannerError> {
        let known = skips::known_step_keys(&mut unit.tx, job.session_id).await?;
        let (valid, unknown): (Vec<SkipStep>, Vec<SkipStep>) = asked
            .iter()
            .map(|s| SkipStep {
                step_key: s.step_key.clone(),
                reason: s.reason.clone(),
            })
            .partition(|s| known.contains(&s.step_key));
        let added = skips::record(
            &mut unit.tx,
            job.session_id,
            job.iteration_number,
            job.id,
            &valid,
        )
        .await?;
        for skip in added {
            let mut event = self.job_event(unit, job, "step_skipped").await?;
            event.message = format!("{}: {}", skip.step_key, skip.reason);
            unit.events.push(event);
        }
        for skip in unknown {
            let mut event = self.job_event(unit, job, "skip_ignored").await?;
            event.message = format!("{}: no such step in this pipeline", skip.step_key);
            unit.events.push(event);
        }
        Ok(())
    }

    /// Seed 004 §1: records what a reply published on the blackboard.
    async fn record_board(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        published: &[QueueBoardEntry],
    ) -> Result<(), PlannerError> {
        let entries = published
            .iter()
            .map(|e| {
                Ok(BoardEntry {
                    entry_type: e.entry_type.clone(),
                    data: serde_json::from_str(&e.data_json)
                        .map_err(|e| PlannerError::BadMessage(format!("blackboard entry: {e}")))?,
                })
            })
            .collect::<Result<Vec<_>, PlannerError>>()?;
        self.publish(unit, job, &entries).await
    }

    /// Records blackboard entries as published by `job` and tells watchers;
    /// the Redis copy follows the commit.
    pub(crate) async fn publish(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        entries: &[BoardEntry],
    ) -> Result<(), PlannerError> {
        let payload = job.payload()?;
        let by = blackboard::Publisher {
            session_id: job.session_id,
            iteration: job.iteration_number,
            stage_slug: &job.stage_slug,
            step_key: job.step_key.as_deref().unwrap_or_default(),
            model_slug: &payload.model_slug,
            job_id: job.id,
        };
        for recorded in blackboard::record(&mut unit.tx, &by, entries).await? {
            let mut event = self.job_event(unit, job, "blackboard_entry").await?;
            event.document_key = recorded.entry.entry_type.clone();
            event.message = recorded.entry.data.to_string();
            unit.events.push(event);
            unit.board.push((job.session_id, recorded));
        }
        Ok(())
    }

    /// Seed 000 §4.1: a root PLAN job starting moves `pending_<stage>` to `running_<stage>`.
    async fn root_plan_started(&self, unit: &mut Unit, job: &JobRow) -> Result<(), PlannerError> {
        let session = records::lock_session(&mut unit.tx, job.session_id).await?;
        let event = SessionEvent::RootPlanStarted {
            stage: job.stage_slug.clone(),
        };
        if let Ok(applied) = self.apply_session_event(unit, &session, &event).await?
            && applied.status != session.status
        {
            unit.events.push(session_event(&applied, "session_status"));
        }
        Ok(())
    }

    /// The wallet refused the call: the job waits in `paused_nsf`. The session
    /// hears about it once, when its first job pauses.
    async fn pause_for_funds(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        reason: &str,
    ) -> Result<(), PlannerError> {
        let already_paused = jobs::paused_in_session(&mut unit.tx, job.session_id).await?;
        unit.work.push_back(Work::Apply {
            job: JobRef::locked(job),
            event: JobEvent::InsufficientBalance,
            error: Some(json!({"code": INSUFFICIENT_BALANCE, "message": reason})),
            results: None,
        });
        if already_paused == 0 {
            let session = records::lock_session(&mut unit.tx, job.session_id).await?;
            unit.events.push(ProgressEvent {
                session_id: job.session_id.to_string(),
                kind: "wallet_insufficient".into(),
                session_status: session.status,
                stage_slug: job.stage_slug.clone(),
                message: format!(
                    "paused: {reason}; credit the wallet and the work resumes by itself"
                ),
                at_ms: now_ms(),
                ..Default::default()
            });
        }
        Ok(())
    }

    /// Moves jobs whose lease ran out back to `retrying`, and dispatches retries that are due.
    pub async fn sweep(&self) -> Result<SweepReport, PlannerError> {
        let mut report = SweepReport::default();
        let mut unit = self.begin(None).await?;
        for id in jobs::expired_leases(&mut unit.tx, 100).await? {
            report.expired_leases += 1;
            tracing::warn!(job_id = %id, "lease expired; the worker is gone");
            unit.work.push_back(Work::Apply {
                job: id.into(),
                event: JobEvent::LeaseExpired,
                error: Some(json!({"code": "lease_expired", "message": "the worker stopped renewing its lease"})),
                results: None,
            });
        }
        self.finish(unit).await?;
        let mut unit = self.begin(None).await?;
        for id in jobs::due_retries(&mut unit.tx, 100).await? {
            let job = jobs::lock(&mut unit.tx, id).await?;
            report.retries_dispatched += 1;
            unit.work.push_back(Work::Apply {
                job: id.into(),
                event: JobEvent::RetryDue {
                    attempts_used: job.attempt_count.max(0) as u32,
                    max_attempts: job.max_retries.max(1) as u32,
                },
                error: None,
                results: None,
            });
        }
        self.finish(unit).await?;
        let mut unit = self.begin(None).await?;
        for id in jobs::resumable_after_credit(&mut unit.tx, 100).await? {
            report.resumed += 1;
            unit.work.push_back(Work::Apply {
                job: id.into(),
                event: JobEvent::Resumed,
                error: None,
                results: None,
            });
        }
        self.finish(unit).await?;
        if self.config.idle_pause_secs > 0 {
            let mut unit = self.begin(None).await?;
            let idle = self.config.idle_pause_secs;
            for session in records::lock_idle_sessions(&mut unit.tx, idle, 100).await? {
                let Ok(applied) = self
                    .apply_session_event(&mut unit, &session, &SessionEvent::IdlePause)
                    .await?
                else {
                    continue;
                };
                report.idle_paused += 1;
                tracing::info!(session_id = %session.id, idle_secs = idle, "idle session paused");
                let mut event = session_event(&applied, "session_paused");
                event.message = format!(
                    "paused after {idle} s without activity; resume the session to continue"
                );
                unit.events.push(event);
            }
            self.finish(unit).await?;
        }
        if self.config.abandon_warn_secs > 0 {
            self.expire_idle_sessions(&mut report).await?;
        }
        Ok(report)
    }

    /// Seed 003 "Session Expiration": a session idle for `abandon_warn_secs`
    /// gets an `idle_warning` event; idle `abandon_after_warn_secs` more, it
    /// is abandoned (core's machine: like a cancel), its objects kept.
    async fn expire_idle_sessions(&self, report: &mut SweepReport) -> Result<(), PlannerError> {
        let (warn, grace) = (
            self.config.abandon_warn_secs,
            self.config.abandon_after_warn_secs,
        );
        let mut unit = self.begin(None).await?;
        for session in records::lock_sessions_to_warn(&mut unit.tx, warn, 100).await? {
            records::mark_idle_warned(&mut unit.tx, session.id).await?;
            report.idle_warned += 1;
            let mut event = session_event(&session, "idle_warning");
            event.message = format!(
                "no activity for {warn} s; the session is abandoned (its documents kept) after {grace} s more unless it moves"
            );
            unit.events.push(event);
        }
        self.finish(unit).await?;
        let mut unit = self.begin(None).await?;
        for session in records::lock_sessions_to_abandon(&mut unit.tx, grace, 100).await? {
            let Ok(applied) = self
                .apply_session_event(&mut unit, &session, &SessionEvent::Cancel)
                .await?
            else {
                continue;
            };
            report.abandoned += 1;
            tracing::info!(session_id = %session.id, "idle session abandoned");
            let mut event = session_event(&applied, "session_abandoned");
            event.message = format!("abandoned after {} s without activity", warn + grace);
            unit.events.push(event);
        }
        self.finish(unit).await
    }

    async fn run(&self, unit: &mut Unit) -> Result<(), PlannerError> {
        while let Some(work) = unit.work.pop_front() {
            match work {
                Work::Apply {
                    job,
                    event,
                    error,
                    results,
                } => self.apply(unit, job, event, error, results).await?,
                Work::CheckParent(parent) => self.check_parent(unit, parent).await?,
                Work::Clarify { job, asked } => self.clarify(unit, job, &asked).await?,
                Work::CheckStage {
                    session,
                    stage,
                    iteration,
                } => self.check_stage(unit, session, &stage, iteration).await?,
                Work::PlanNext(job) => self.plan_next(unit, job).await?,
                Work::Release {
                    prerequisite,
                    render_of: Some(session),
                    ..
                } => {
                    self.release_render_waiters(unit, prerequisite, session)
                        .await?
                }
                Work::Release {
                    prerequisite,
                    succeeded,
                    render_of: None,
                } => {
                    for waiting in jobs::waiting_on(&mut unit.tx, prerequisite).await? {
                        unit.work.push_back(Work::Apply {
                            job: waiting.into(),
                            event: if succeeded {
                                JobEvent::PrerequisiteCompleted
                            } else {
                                JobEvent::PrerequisiteFailed
                            },
                            error: (!succeeded).then(|| json!({"code": PREREQUISITE_FAILED})),
                            results: None,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    async fn apply(
        &self,
        unit: &mut Unit,
        job: JobRef,
        event: JobEvent,
        error: Option<serde_json::Value>,
        results: Option<serde_json::Value>,
    ) -> Result<(), PlannerError> {
        let job = match job {
            JobRef::Locked(row) => *row,
            JobRef::Id(id) => jobs::lock(&mut unit.tx, id).await?,
        };
        let from = job.status()?;
        let t = match transition(from, event) {
            Ok(t) => t,
            Err(e) => {
                tracing::info!(job_id = %job.id, error = %e, "transition not applicable; ignoring");
                return Ok(());
            }
        };
        jobs::set_status(&mut unit.tx, job.id, t.to, error.as_ref(), results.as_ref()).await?;
        let mut progress = self.job_event(unit, &job, "job_status").await?;
        progress.message = t.to.as_str().to_string();
        if let Some(e) = &error {
            progress.message = format!("{} ({})", t.to.as_str(), e);
        }
        unit.events.push(progress);
        for effect in t.effects {
            match effect {
                JobEffect::Dispatch => {
                    if t.to == JobStatus::Retrying {
                        jobs::clear_next_attempt(&mut unit.tx, job.id).await?;
                    }
                    self.dispatch(unit, job.id, job.job_type()?).await?;
                }
                JobEffect::ScheduleRetry => {
                    let delay = retry_backoff_ms(
                        job.attempt_count.max(1) as u32,
                        self.config.retry_base_ms,
                        self.config.retry_cap_ms,
                    );
                    jobs::schedule_retry(&mut unit.tx, job.id, delay).await?;
                }
                JobEffect::CheckParent => {
                    if let Some(parent) = job.parent_job_id {
                        unit.work.push_back(Work::CheckParent(parent));
                    }
                }
                JobEffect::ReleaseDependents => {
                    // A regeneration (or its continuation) hangs under a PLAN job
                    // that completed long ago; a next stage's roots may wait for it.
                    // Its key says so; only a continuation needs its parent read.
                    let gates_stage = match job.job_type()? {
                        JobType::Render => true,
                        JobType::Execute if job.job_key.contains(REGENERATION_KEY_MARK) => true,
                        JobType::Execute if job.target_contribution_id.is_some() => {
                            match job.parent_job_id {
                                Some(parent) => {
                                    jobs::get(&mut *unit.tx, parent).await?.status()?
                                        == JobStatus::Completed
                                }
                                None => false,
                            }
                        }
                        JobType::Execute | JobType::Plan => false,
                    };
                    unit.work.push_back(Work::Release {
                        prerequisite: job.id,
                        succeeded: t.to == JobStatus::Completed,
                        render_of: gates_stage.then_some(job.session_id),
                    })
                }
                JobEffect::CheckStage => {
                    if job.parent_job_id.is_none() {
                        unit.work.push_back(Work::CheckStage {
                            session: job.session_id,
                            stage: job.stage_slug.clone(),
                            iteration: job.iteration_number,
                        });
                    }
                }
                JobEffect::PlanNextSteps => unit.work.push_back(Work::PlanNext(job.id)),
            }
        }
        Ok(())
    }

    /// A stage's root jobs wait while earlier stages still render or regenerate
    /// (see `start_stage`). When one ends they wait for the next outstanding one,
    /// or start. The session lock orders this after a concurrent `start_stage`
    /// (which holds it while it reads the outstanding renders), so a root job
    /// that commits waiting on this render is seen here. A render that failed
    /// for good releases them too: the executor then names any input it lacks.
    async fn release_render_waiters(
        &self,
        unit: &mut Unit,
        render: JobId,
        session_id: SessionId,
    ) -> Result<(), PlannerError> {
        records::lock_session(&mut unit.tx, session_id).await?;
        let waiting = jobs::waiting_on(&mut unit.tx, render).await?;
        let Some(first) = waiting.first() else {
            return Ok(());
        };
        let stage = jobs::get(&mut *unit.tx, *first).await?.stage_slug;
        match jobs::outstanding_input_work(&mut unit.tx, session_id, &stage).await? {
            Some(next) => {
                for job in waiting {
                    jobs::set_prerequisite(&mut unit.tx, job, next).await?;
                }
            }
            None => {
                for job in waiting {
                    unit.work.push_back(Work::Apply {
                        job: job.into(),
                        event: JobEvent::PrerequisiteCompleted,
                        error: None,
                        results: None,
                    });
                }
            }
        }
        Ok(())
    }

    async fn check_parent(&self, unit: &mut Unit, parent_id: JobId) -> Result<(), PlannerError> {
        let parent = jobs::lock(&mut unit.tx, parent_id).await?;
        if parent.status()? != JobStatus::WaitingForChildren {
            return Ok(());
        }
        let children: Vec<(JobType, JobStatus)> = jobs::children(&mut unit.tx, parent_id)
            .await?
            .into_iter()
            .map(|(t, s, _)| (t, s))
            .collect();
        let event = match children_state(&children) {
            ChildrenState::Outstanding => return Ok(()),
            ChildrenState::AllCompleted => JobEvent::ChildrenCompleted,
            ChildrenState::AnyFailed => JobEvent::ChildFailed,
        };
        unit.work.push_back(Work::Apply {
            job: parent_id.into(),
            event,
            error: (event == JobEvent::ChildFailed)
                .then(|| json!({"code": CHILD_FAILED, "message": "a child job failed"})),
            results: None,
        });
        Ok(())
    }

    /// Seed 002 "Worker Orchestration": spawn the recipe steps whose
    /// predecessors are done, or complete the root job when none are left.
    async fn plan_next(&self, unit: &mut Unit, job_id: JobId) -> Result<(), PlannerError> {
        let job = jobs::lock(&mut unit.tx, job_id).await?;
        if !matches!(
            job.status()?,
            JobStatus::Processing | JobStatus::PendingNextStep
        ) {
            return Ok(());
        }
        let payload = job.payload()?;
        let Some(recipe) = payload.recipe.as_ref() else {
            unit.work.push_back(Work::Apply {
                job: job.id.into(),
                event: JobEvent::Succeeded,
                error: None,
                results: None,
            });
            return Ok(());
        };
        let children = jobs::children(&mut unit.tx, job.id).await?;
        let mut done: HashSet<StepId> = HashSet::new();
        let mut started: HashSet<StepId> = HashSet::new();
        if let Some(step) = &payload.step {
            done.insert(step.id);
        }
        for (job_type, status, step) in children {
            // A superseded child (a clarification round replaced it) is planned again.
            let (Some(step), false) = (
                step,
                job_type == JobType::Render || status == JobStatus::Superseded,
            ) else {
                continue;
            };
            started.insert(StepId(step));
            if status == JobStatus::Completed {
                done.insert(StepId(step));
            }
        }
        let skipped =
            skips::skipped_keys(&mut unit.tx, job.session_id, job.iteration_number).await?;
        // A step a plan skipped never starts (unless it had already); the
        // steps after it still wait for what it would have waited for.
        let ready: Vec<RecipeStep> = recipe
            .with_skipped(&skipped, &started)
            .ready_steps(&done, &started)
            .into_iter()
            .cloned()
            .collect();
        if ready.is_empty() {
            unit.work.push_back(Work::Apply {
                job: job.id.into(),
                event: JobEvent::Succeeded,
                error: None,
                results: None,
            });
            return Ok(());
        }
        let mut planned = Vec::new();
        for step in &ready {
            let anchors = self.anchors(unit, &job, step).await?;
            match fan_out(step.granularity, &anchors) {
                Ok(jobs) => planned.push((step, jobs)),
                Err(e) => {
                    tracing::warn!(job_id = %job.id, step = %step.step_key, error = %e, "cannot plan step");
                    unit.work.push_back(Work::Apply {
                        job: job.id.into(),
                        event: JobEvent::Failed { retryable: false },
                        error: Some(json!({
                            "code": "cannot_plan_step",
                            "message": format!("step {}: {e}", step.step_key),
                        })),
                        results: None,
                    });
                    return Ok(());
                }
            }
        }
        let round = clarifications::latest(
            &mut unit.tx,
            job.session_id,
            job.iteration_number,
            &job.stage_slug,
        )
        .await?;
        let asked = round.as_ref().and_then(|r| {
            let step = recipe.steps.iter().find(|s| s.step_key == r.step_key)?;
            let mut ids = recipe.descendants(step.id);
            ids.push(step.id);
            Some(ids)
        });
        for (step, jobs) in planned {
            let mut child = Child {
                planned_documents: descendant_outputs(recipe, step),
                round: round.as_ref(),
                asked: asked.as_ref().is_some_and(|ids| ids.contains(&step.id)),
                previous: None,
            };
            for fan in jobs {
                child.previous = self
                    .spawn_child(unit, &job, &payload, step, fan, &child)
                    .await?;
            }
        }
        unit.work.push_back(Work::Apply {
            job: job.id.into(),
            event: JobEvent::ChildrenSpawned,
            error: None,
            results: None,
        });
        Ok(())
    }

    /// The documents a fanning-out step's anchor rules match (its first two
    /// `document` or `project_document` rules), as its jobs will read them
    /// (`inputs::rule_documents`, `project_documents::for_rule`).
    async fn anchors(
        &self,
        unit: &mut Unit,
        root: &JobRow,
        step: &RecipeStep,
    ) -> Result<Vec<Anchor>, PlannerError> {
        if matches!(
            step.granularity,
            Granularity::AllToOne | Granularity::PerModel
        ) {
            return Ok(Vec::new());
        }
        // A root a retry moved to another model still fans out over its lineage's artifacts.
        let lineage = root.payload()?.lineage_model_id.or(root.model_id);
        let mut anchors = Vec::new();
        for (index, rule) in step
            .inputs_required
            .iter()
            .enumerate()
            .filter(|(_, r)| r.kind == "document" || r.kind == "project_document")
            .take(2)
        {
            let docs = if rule.kind == "project_document" {
                project_documents::for_rule(
                    &mut *unit.tx,
                    root.session_id,
                    rule.document_key.as_deref(),
                )
                .await?
            } else {
                let query = inputs::DocumentQuery::for_rule(
                    root.session_id,
                    &root.stage_slug,
                    lineage,
                    root.iteration_number,
                    rule,
                );
                match query {
                    Some(query) => inputs::rule_documents(&mut unit.tx, &query).await?,
                    None => Vec::new(),
                }
            };
            // The step's object_filter narrows what it fans out over, as it
            // narrows what each job reads.
            let mut sources: Vec<SourceDoc> = docs
                .iter()
                .map(|d| SourceDoc::from_key(d.id.to_string(), &d.storage_key, &d.document_key))
                .filter(|d| step.filter.admits(&d.document_key, &d.author))
                .collect();
            if let Some(key) = rule.items.as_deref() {
                for source in &mut sources {
                    source.items = Some(self.count_items(&source.key, key).await?);
                }
            }
            anchors.push((index, sources));
        }
        Ok(anchors)
    }

    /// How many items the JSON array `key` of a stored document holds (0 when
    /// it is not JSON or has no such array).
    async fn count_items(&self, object: &str, key: &str) -> Result<usize, PlannerError> {
        let text = self.blob.get_string(object).await?;
        Ok(serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get(key).and_then(|a| a.as_array()).map(Vec::len))
            .unwrap_or(0))
    }

    async fn spawn_child(
        &self,
        unit: &mut Unit,
        parent: &JobRow,
        parent_payload: &JobPayload,
        step: &RecipeStep,
        fan: FanOutJob,
        child: &Child<'_>,
    ) -> Result<Option<JobId>, PlannerError> {
        // A sequential job after the first waits for the one before it.
        let wait_for = child.previous.filter(|_| fan.after_previous);
        let mut job_key = if fan.discriminator.is_empty() {
            format!("{}:{}", parent.id, step.step_key)
        } else {
            format!("{}:{}:{}", parent.id, step.step_key, fan.discriminator)
        };
        // After a clarification round the superseded jobs keep their keys.
        if let Some(round) = child.round {
            job_key.push_str(&format!(":clarified{}", round.round));
        }
        let payload = JobPayload {
            step: Some(step.clone()),
            model_api_identifier: parent_payload.model_api_identifier.clone(),
            model_slug: parent_payload.model_slug.clone(),
            stage_number: parent_payload.stage_number,
            planned_documents: if step.job_type == JobType::Plan {
                child.planned_documents.clone()
            } else {
                Vec::new()
            },
            render: None,
            recipe: None,
            sources: fan.sources,
            lineage: (fan.lineage != Lineage::Plain).then_some(fan.lineage),
            // A root moved to another model by a retry keeps its lineage.
            lineage_model_id: parent_payload.lineage_model_id,
            clarification: child.round.filter(|_| child.asked).cloned(),
        };
        let job_id = JobId::new();
        let inserted = jobs::insert(
            &mut unit.tx,
            &NewJob {
                id: job_id,
                job_key,
                session_id: parent.session_id,
                user_id: parent.user_id,
                stage_slug: &parent.stage_slug,
                iteration: parent.iteration_number,
                job_type: step.job_type,
                status: if wait_for.is_some() {
                    JobStatus::WaitingForPrerequisite
                } else {
                    JobStatus::Pending
                },
                step_id: Some(step.id.0),
                step_key: Some(&step.step_key),
                model_id: parent.model_id,
                document_key: Some(&step.output_type),
                payload: &payload,
                parent_job_id: Some(parent.id),
                prerequisite_job_id: wait_for,
                target_contribution_id: None,
                max_attempts: self.config.max_attempts as i32,
            },
        )
        .await?;
        if let Some(id) = inserted {
            if child.round.is_some() {
                clarifications::continue_attempts(&mut unit.tx, id, parent.id, step.id.0).await?;
            }
            if wait_for.is_none() {
                self.dispatch(unit, id, step.job_type).await?;
            }
            // Watchers see a step's jobs when they are planned (workers do not
            // report their claims): the stage's percent as the step begins.
            let mut planned = self.job_event(unit, parent, "job_status").await?;
            planned.job_id = id.to_string();
            planned.job_type = step.job_type.as_str().to_string();
            planned.document_key = step.output_type.clone();
            planned.message = match wait_for {
                Some(_) => JobStatus::WaitingForPrerequisite,
                None => JobStatus::Pending,
            }
            .as_str()
            .to_string();
            unit.events.push(planned);
        }
        Ok(inserted)
    }

    /// Seed 001: an unfinished chunk gets a new job for the next turn, under the
    /// same parent (which keeps waiting), pointing at the chunk it continues.
    async fn spawn_continuation(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        payload: &JobPayload,
        contribution_id: ContributionId,
    ) -> Result<(), PlannerError> {
        // Lock the parent before adding a child to it: the insert's foreign-key
        // share lock, upgraded later by CheckParent, would deadlock with a
        // sibling doing the same.
        if let Some(parent) = job.parent_job_id {
            jobs::lock(&mut unit.tx, parent).await?;
        }
        let inserted = jobs::insert(
            &mut unit.tx,
            &NewJob {
                id: JobId::new(),
                job_key: format!("{contribution_id}:continue"),
                session_id: job.session_id,
                user_id: job.user_id,
                stage_slug: &job.stage_slug,
                iteration: job.iteration_number,
                job_type: JobType::Execute,
                status: JobStatus::PendingContinuation,
                step_id: job.recipe_step_id,
                step_key: job.step_key.as_deref(),
                model_id: job.model_id,
                document_key: job.document_key.as_deref(),
                payload,
                parent_job_id: job.parent_job_id,
                prerequisite_job_id: None,
                target_contribution_id: Some(contribution_id),
                max_attempts: self.config.max_attempts as i32,
            },
        )
        .await?;
        if let Some(id) = inserted {
            self.dispatch(unit, id, JobType::Execute).await?;
            let mut event = self.job_event(unit, job, "continuation_queued").await?;
            event.job_id = id.to_string();
            unit.events.push(event);
        }
        Ok(())
    }

    /// Seed 000 function 7: a markdown chunk queues a RENDER job for its document
    /// chain. RENDER jobs hang under the EXECUTE job, so they never gate a parent or a stage.
    async fn spawn_render(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        payload: &JobPayload,
        contribution_id: ContributionId,
    ) -> Result<(), PlannerError> {
        let contribution = records::contribution(&mut *unit.tx, contribution_id).await?;
        let identity = contribution
            .document_relationships
            .as_ref()
            .and_then(|r| r.0.get(&job.stage_slug))
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| contribution_id.to_string());
        let render_payload = JobPayload {
            step: None,
            model_api_identifier: payload.model_api_identifier.clone(),
            model_slug: payload.model_slug.clone(),
            stage_number: payload.stage_number,
            planned_documents: Vec::new(),
            render: Some(RenderPayload {
                document_identity: identity,
                source_contribution_id: contribution_id.to_string(),
                document_key: contribution.document_key.clone(),
            }),
            recipe: None,
            sources: Vec::new(),
            lineage: None,
            lineage_model_id: None,
            clarification: None,
        };
        let inserted = jobs::insert(
            &mut unit.tx,
            &NewJob {
                id: JobId::new(),
                job_key: format!("{contribution_id}:render"),
                session_id: job.session_id,
                user_id: job.user_id,
                stage_slug: &job.stage_slug,
                iteration: job.iteration_number,
                job_type: JobType::Render,
                status: JobStatus::Pending,
                step_id: None,
                step_key: None,
                model_id: job.model_id,
                document_key: Some(&contribution.document_key),
                payload: &render_payload,
                parent_job_id: Some(job.id),
                prerequisite_job_id: None,
                target_contribution_id: Some(contribution_id),
                max_attempts: self.config.max_attempts as i32,
            },
        )
        .await?;
        if let Some(id) = inserted {
            self.dispatch(unit, id, JobType::Render).await?;
        }
        Ok(())
    }

    /// Seed 000 §§2–3: when every root PLAN job of the stage is done, the
    /// session moves to the next stage's `pending_` status (or review).
    async fn check_stage(
        &self,
        unit: &mut Unit,
        session_id: SessionId,
        stage: &str,
        iteration: i32,
    ) -> Result<(), PlannerError> {
        let session = records::lock_session(&mut unit.tx, session_id).await?;
        let roots = jobs::root_jobs(&mut unit.tx, session_id, stage, iteration).await?;
        let base = ProgressEvent {
            session_id: session_id.to_string(),
            stage_slug: stage.to_string(),
            at_ms: now_ms(),
            ..Default::default()
        };
        match stage_completion(&roots) {
            StageCompletion::Incomplete => {}
            StageCompletion::Failed => {
                tracing::warn!(%session_id, stage, "stage failed: a root job failed");
                unit.events.push(ProgressEvent {
                    kind: "stage_failed".into(),
                    session_status: session.status.clone(),
                    message: "a root job failed; the stage does not advance".into(),
                    ..base
                });
            }
            StageCompletion::Complete => {
                let stage_row = records::stage_in_process(&mut *unit.tx, session_id, stage).await?;
                let event = SessionEvent::StageCompleted {
                    stage: stage.to_string(),
                    next: stage_row.next_stage_slug,
                    auto_advance: session.auto_advance,
                };
                // Refused when the session already moved on (a duplicate check).
                let Ok(applied) = self.apply_session_event(unit, &session, &event).await? else {
                    return Ok(());
                };
                let status = applied.status;
                tracing::info!(%session_id, stage, %status, "stage complete");
                unit.events.push(ProgressEvent {
                    kind: "stage_completed".into(),
                    session_status: status,
                    stage_percent: 100,
                    ..base
                });
            }
        }
        Ok(())
    }

    async fn command_start_stage(
        &self,
        unit: &mut Unit,
        session_id: SessionId,
        stage: &str,
        iteration: i32,
    ) -> Result<(), PlannerError> {
        let row = outbox::enqueue(
            &mut unit.tx,
            dialectic_queue::keys::PLANNER_COMMAND,
            &dialectic_queue::start_stage_command(
                &session_id.to_string(),
                stage,
                iteration.max(1) as u32,
            ),
            unit.traceparent.as_deref(),
        )
        .await?;
        unit.sent.push(row);
        Ok(())
    }

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

    /// An event about `job`; its stage's percent is filled in as of the
    /// unit's commit (all of a unit's events go out together after it).
    pub(crate) async fn job_event(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        kind: &str,
    ) -> Result<ProgressEvent, PlannerError> {
        let stage = (job.session_id, job.stage_slug.clone(), job.iteration_number);
        if !unit.percent_of.contains(&stage) {
            unit.percent_of.push(stage);
        }
        let model = job
            .payload()
            .map(|p| p.model_api_identifier)
            .unwrap_or_default();
        Ok(ProgressEvent {
            session_id: job.session_id.to_string(),
            kind: kind.to_string(),
            stage_slug: job.stage_slug.clone(),
            job_id: job.id.to_string(),
            job_type: job.job_type.clone(),
            document_key: job.document_key.clone().unwrap_or_default(),
            model,
            at_ms: now_ms(),
            ..Default::default()
        })
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
}

/// A progress event about the session itself, with its status as stored now.
pub(crate) fn session_event(session: &records::SessionRow, kind: &str) -> ProgressEvent {
    ProgressEvent {
        session_id: session.id.to_string(),
        kind: kind.to_string(),
        session_status: session.status.clone(),
        stage_slug: session
            .state()
            .ok()
            .and_then(|s| s.effective().stage().map(str::to_string))
            .unwrap_or_default(),
        at_ms: now_ms(),
        ..Default::default()
    }
}
