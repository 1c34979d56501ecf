//! RegenerateDocument: write one document of a finished stage again. The jobs
//! that wrote it are superseded in the same transaction that inserts and
//! dispatches the new job; the renderer archives the old document when the
//! new one renders (see `dialectic_store::regenerate`). The gateway has
//! already found the document and checked the caller owns it; this re-checks
//! everything that can change under the locks.

use super::lock_session;
use crate::engine::{EffectInputs, Engine, PlannerError, Unit, now_ms, parse_id};
use dialectic_cache::ProgressEvent;
use dialectic_core::ids::{
    ContributionId, JobId, ModelId, RegenerationId, ResourceId, SessionId, UserId,
};
use dialectic_core::job::{JobEvent, JobStatus, JobType, REGENERATION_KEY_MARK, transition};
use dialectic_core::progress::EventKind;
use dialectic_core::session::SessionEvent;
use dialectic_proto::v1::planner::{RegenerateDocumentCommand, RegenerateDocumentResult};
use dialectic_store::StoreError;
use dialectic_store::jobs::JobRow;
use dialectic_store::regenerate::{self, NewRegeneration};
use dialectic_store::sessions::SessionRow;
use dialectic_store::stages;

/// Attempts a regeneration gets when the original job's budget cannot be read.
const DEFAULT_ATTEMPTS: i32 = 3;

struct Asked {
    session_id: SessionId,
    user_id: UserId,
    model_id: ModelId,
    resource_id: ResourceId,
    identity: ContributionId,
    template: JobId,
    request_id: Option<String>,
}

fn asked(command: &RegenerateDocumentCommand) -> Result<Asked, PlannerError> {
    Ok(Asked {
        session_id: parse_id::<SessionId>(&command.session_id)?,
        user_id: parse_id::<UserId>(&command.user_id)?,
        model_id: parse_id::<ModelId>(&command.model_id)?,
        resource_id: parse_id::<ResourceId>(&command.resource_id)?,
        identity: parse_id::<ContributionId>(&command.document_identity)?,
        template: parse_id::<JobId>(&command.template_job_id)?,
        request_id: Some(command.client_request_id.trim().to_string()).filter(|r| !r.is_empty()),
    })
}

/// A regeneration as its command asks for it, carried into the session
/// machine's `RegenerateDocument` effect, and the command's answer.
pub(crate) struct Regeneration {
    asked: Asked,
    command: RegenerateDocumentCommand,
    /// The document's jobs, locked.
    slot: Vec<JobRow>,
    /// Set by the effect.
    answer: Option<Answer>,
}

/// What the command answers, and whether its unit commits.
enum Answer {
    /// The regeneration started: commit.
    Commit(RegenerateDocumentResult),
    /// An identical call answered first: change nothing.
    Discard(RegenerateDocumentResult),
}

pub(crate) async fn regenerate(
    engine: &Engine,
    command: RegenerateDocumentCommand,
) -> Result<RegenerateDocumentResult, PlannerError> {
    let asked = asked(&command)?;
    let mut unit = engine
        .begin(dialectic_telemetry::current_traceparent().as_deref())
        .await?;
    // Jobs before the session: the planner locks a job, then its parent, then
    // the session, and so does this.
    let slot = match regenerate::lock_slot(&mut unit.tx, asked.template, asked.identity).await {
        // The planner kept adding jobs to the document: a retry will see them settle.
        Err(StoreError::Invalid(reason)) => return Err(PlannerError::Unavailable(reason)),
        other => other?,
    };
    let session = lock_session(&mut unit, asked.session_id).await?;
    let stage = stages::stage_in_process(&mut *unit.tx, session.id, &command.stage_slug).await?;
    let event = SessionEvent::RegenerateDocument {
        stage: stage.slug.clone(),
        next: stage.next_stage_slug.clone(),
    };
    let mut order = Regeneration {
        asked,
        command,
        slot,
        answer: None,
    };
    let mut inputs = EffectInputs {
        regeneration: Some(&mut order),
    };
    engine
        .apply_session_event_with(&mut unit, &session, &event, &mut inputs)
        .await?;
    match order.answer {
        Some(Answer::Commit(result)) => {
            engine.finish(unit).await?;
            tracing::info!(regeneration_id = %result.regeneration_id, job_id = %result.job_id, superseded = result.superseded_job_ids.len(), document_key = %order.command.document_key, "document regeneration started");
            Ok(result)
        }
        Some(Answer::Discard(result)) => Ok(result),
        None => Err(PlannerError::Refused(
            "the session took the regeneration without carrying it out".into(),
        )),
    }
}

/// The session machine's `RegenerateDocument` effect: re-checks what may
/// have changed under the locks, supersedes the document's jobs and inserts
/// and dispatches the job that writes it again.
pub(crate) async fn carry_out(
    engine: &Engine,
    unit: &mut Unit,
    session: &SessionRow,
    order: &mut Regeneration,
) -> Result<(), PlannerError> {
    let (asked, command) = (&order.asked, &order.command);
    if let Some(earlier) = still_open(unit, session, asked, command).await? {
        order.answer = Some(Answer::Discard(earlier));
        return Ok(());
    }
    let plan = plan(&order.slot, asked.template)?;
    let regeneration_id = RegenerationId::new();
    let job_id = JobId::new();
    regenerate::insert_job(
        &mut unit.tx,
        asked.template,
        job_id,
        &format!("{}{REGENERATION_KEY_MARK}{regeneration_id}", plan.base_key),
        plan.attempt_base,
        plan.budget,
    )
    .await?;
    regenerate::supersede(&mut unit.tx, &plan.superseding, regeneration_id).await?;
    let inserted = regenerate::insert(
        &mut unit.tx,
        &NewRegeneration {
            id: regeneration_id,
            session_id: session.id,
            user_id: asked.user_id,
            client_request_id: asked.request_id.as_deref(),
            stage_slug: &command.stage_slug,
            iteration: session.iteration_count.max(1),
            model_id: asked.model_id,
            document_key: &command.document_key,
            resource_id: asked.resource_id,
            new_job_id: job_id,
            superseded: &plan.superseded,
        },
    )
    .await?;
    if !inserted {
        // The unique request id lost a race to a concurrent identical call.
        order.answer = Some(Answer::Discard(not_created()));
        return Ok(());
    }
    engine.dispatch(unit, job_id, JobType::Execute).await?;
    let superseding = plan.superseding.len();
    unit.events
        .push(started_event(session, command, job_id, superseding));
    unit.stale_projects.push(session.project_id);
    order.answer = Some(Answer::Commit(RegenerateDocumentResult {
        created: true,
        regeneration_id: regeneration_id.to_string(),
        job_id: job_id.to_string(),
        superseded_job_ids: plan.superseded.iter().map(ToString::to_string).collect(),
    }));
    Ok(())
}

fn not_created() -> RegenerateDocumentResult {
    RegenerateDocumentResult {
        created: false,
        ..Default::default()
    }
}

/// Checks what may have changed while this call waited for the locks. Some
/// answer: a concurrent call with the same request id committed first.
async fn still_open(
    unit: &mut Unit,
    session: &SessionRow,
    asked: &Asked,
    command: &RegenerateDocumentCommand,
) -> Result<Option<RegenerateDocumentResult>, PlannerError> {
    let started = regenerate::live_root_jobs(&mut unit.tx, session.id).await?;
    if !started.is_empty() {
        return Err(PlannerError::Refused(format!(
            "stage {} has already started (its responses were submitted); the documents it reads can no longer be regenerated",
            started.join(", ")
        )));
    }
    if let Some(request_id) = &asked.request_id
        && regenerate::by_request(&mut *unit.tx, asked.user_id, request_id)
            .await?
            .is_some()
    {
        return Ok(Some(not_created()));
    }
    // A render that committed before the locks may have replaced the document.
    let still_current = regenerate::current_documents(
        &mut *unit.tx,
        session.id,
        &command.stage_slug,
        session.iteration_count.max(1),
        asked.model_id,
        &command.document_key,
    )
    .await?
    .iter()
    .any(|d| d.id == asked.resource_id);
    if !still_current {
        return Err(PlannerError::Refused(format!(
            "document {} changed while this call waited; list the stage's documents and try again",
            command.document_key
        )));
    }
    Ok(None)
}

struct Plan {
    /// Jobs to supersede now.
    superseding: Vec<JobId>,
    /// Every job of the document that is (or is about to be) superseded: an
    /// earlier regeneration may have superseded the writer of the document
    /// still current, which this one replaces too.
    superseded: Vec<JobId>,
    /// Files are named by attempt: the new job's attempts continue after every
    /// earlier writer's, so it never writes (or, losing, deletes) their paths.
    attempt_base: i32,
    base_key: String,
    budget: i32,
}

fn plan(slot: &[JobRow], template: JobId) -> Result<Plan, PlannerError> {
    let mut superseding = Vec::new();
    let mut superseded = Vec::new();
    for job in slot {
        let status = job.status()?;
        if transition(status, JobEvent::Superseded).is_ok() {
            superseding.push(job.id);
            superseded.push(job.id);
        } else if status == JobStatus::Superseded {
            superseded.push(job.id);
        }
    }
    let template_key = slot
        .iter()
        .find(|j| j.id == template)
        .map(|j| j.job_key.clone())
        .ok_or_else(|| PlannerError::Refused("the document's job is gone".into()))?;
    let base_key = template_key
        .split(REGENERATION_KEY_MARK)
        .next()
        .unwrap_or(&template_key)
        .to_string();
    let writers = slot
        .iter()
        .filter(|j| j.job_type == JobType::Execute.as_str() && j.target_contribution_id.is_none());
    Ok(Plan {
        attempt_base: writers.map(|j| j.attempt_count).max().unwrap_or(0),
        budget: slot
            .iter()
            .find(|j| j.job_key == base_key)
            .map_or(DEFAULT_ATTEMPTS, |j| j.max_retries.max(1)),
        base_key,
        superseding,
        superseded,
    })
}

fn started_event(
    session: &SessionRow,
    command: &RegenerateDocumentCommand,
    job_id: JobId,
    superseding: usize,
) -> ProgressEvent {
    ProgressEvent {
        session_status: session.status.clone(),
        stage_slug: command.stage_slug.clone(),
        job_id: job_id.to_string(),
        job_type: JobType::Execute.as_str().into(),
        document_key: command.document_key.clone(),
        model: command.model_name.clone(),
        message: format!(
            "regenerating {}; {superseding} earlier job(s) superseded",
            command.document_key
        ),
        at_ms: now_ms(),
        ..ProgressEvent::new(
            EventKind::DocumentRegenerationStarted,
            session.id.to_string(),
        )
    }
}
