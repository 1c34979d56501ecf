//! RetryStage: the failed jobs of the session's current stage run again.
//!
//! A job whose own attempts failed (`retry_loop_failed`, or `failed` for its
//! own reason) goes back to `pending` with a fresh attempt budget and is
//! dispatched through the outbox. The jobs that failed only because of it —
//! a parent failed by its child (`child_failed`), a job failed by its
//! prerequisite (`prerequisite_failed`) — wait for it again. What completed
//! is kept; the retried jobs' outcomes then wake the rest through the usual
//! checks, as if nothing had failed, and the stage completes by itself.
//!
//! With a model, every job put back (the failed ones and those waiting on
//! them, so later steps they plan too) runs on it from now on, as a
//! confidence gate's `rerun_model` does: the documents stay in the lineage
//! of the model they were planned for, and record who wrote them. The
//! session's model list does not change, so later stages run as chosen.

use crate::engine::{Apply, Engine, PlannerError, Unit, now_ms, parse_id, session_event};
use dialectic_core::ids::{SessionId, UserId};
use dialectic_core::job::{JobEvent, JobType, retry_event};
use dialectic_core::payload::JobPayload;
use dialectic_core::progress::EventKind;
use dialectic_core::session::SessionEvent;
use dialectic_proto::v1::planner::{RetryStageCommand, RetryStageResult};
use dialectic_store::jobs::{self, JobRow};
use dialectic_store::models::{self, ModelRow};
use dialectic_store::regenerate;
use dialectic_store::sessions::{self, SessionRow};

/// The stage's failed jobs, by what the retry does to them.
#[derive(Default)]
struct Plan {
    /// Failed for their own reason: they run again.
    retried: Vec<JobRow>,
    /// Failed because a child or prerequisite did: they wait again.
    reopened: Vec<(JobRow, JobEvent)>,
}

impl Plan {
    fn of(failed: Vec<JobRow>) -> Result<Self, PlannerError> {
        let mut plan = Plan::default();
        for job in failed {
            let code = job
                .error_details
                .as_ref()
                .and_then(|e| e.0.get("code").and_then(|c| c.as_str()).map(str::to_string));
            match retry_event(job.status()?, code.as_deref()) {
                Some(JobEvent::ManualRetry) => plan.retried.push(job),
                Some(event) => plan.reopened.push((job, event)),
                None => {}
            }
        }
        Ok(plan)
    }
}

pub(crate) async fn retry(
    engine: &Engine,
    command: RetryStageCommand,
) -> Result<RetryStageResult, PlannerError> {
    let session_id = parse_id::<SessionId>(&command.session_id)?;
    let user_id = parse_id::<UserId>(&command.user_id)?;
    let mut unit = engine
        .begin(dialectic_telemetry::current_traceparent().as_deref())
        .await?;
    // Jobs before the session, as every unit locks them: read where the
    // session is, lock the stage's failed jobs, then lock the session and
    // check that it is still there.
    let seen = sessions::session_for_user(&mut *unit.tx, user_id, session_id).await?;
    let stage = stage_to_retry(&seen, &command.stage_slug)?;
    let model = match command.model.trim() {
        "" => None,
        name => Some(models::model_by_identifier(&mut *unit.tx, name).await?),
    };
    let failed =
        jobs::lock_failed_in_stage(&mut unit.tx, session_id, &stage, seen.iteration_count).await?;
    let session = sessions::lock_session(&mut unit.tx, session_id).await?;
    if session.iteration_count != seen.iteration_count {
        return Err(PlannerError::Unavailable(
            "the session moved to another iteration meanwhile; try again".into(),
        ));
    }
    let event = SessionEvent::RetryStage {
        stage: stage.clone(),
    };
    let session = engine
        .apply_session_event(&mut unit, &session, &event)
        .await?;
    let plan = Plan::of(failed)?;
    if plan.retried.is_empty() {
        return Err(PlannerError::NothingToRetry { stage });
    }
    put_back(engine, &mut unit, &plan, model.as_ref()).await?;
    unit.events
        .push(retried_event(&session, &stage, &plan, model.as_ref()));
    engine.finish(unit).await?;
    tracing::info!(stage, retried = plan.retried.len(), reopened = plan.reopened.len(), model = ?model.as_ref().map(|m| &m.api_identifier), "stage retried");
    Ok(RetryStageResult {
        session_id: session.id.to_string(),
        status: session.status,
        retried_job_ids: plan.retried.iter().map(|j| j.id.to_string()).collect(),
        reopened_jobs: u32::try_from(plan.reopened.len()).unwrap_or(u32::MAX),
        stage_slug: stage,
    })
}

/// The stage named, else the one the session is at (through a pause).
fn stage_to_retry(session: &SessionRow, named: &str) -> Result<String, PlannerError> {
    if !named.trim().is_empty() {
        return Ok(named.trim().to_string());
    }
    let state = session.state()?;
    state
        .effective()
        .stage()
        .map(str::to_string)
        .ok_or_else(|| {
            PlannerError::Refused(format!(
                "the session is {} and has no current stage to retry",
                session.status
            ))
        })
}

/// Fresh budgets and the new model for the retried jobs, the new model for
/// the reopened ones, and each one's transition queued (applied, with the
/// dispatches it implies, when the unit finishes).
async fn put_back(
    engine: &Engine,
    unit: &mut Unit,
    plan: &Plan,
    model: Option<&ModelRow>,
) -> Result<(), PlannerError> {
    let attempts = i32::try_from(engine.config.max_attempts).unwrap_or(i32::MAX);
    for job in &plan.retried {
        jobs::renew_attempts(&mut unit.tx, job.id, attempts).await?;
        move_to(unit, job, model).await?;
        tracing::info!(job_id = %job.id, attempts_used = job.attempt_count, "failed job runs again");
        unit.apply_later(Apply::new(job.id, JobEvent::ManualRetry));
    }
    for (job, event) in &plan.reopened {
        move_to(unit, job, model).await?;
        tracing::info!(job_id = %job.id, ?event, "job waits again");
        unit.apply_later(Apply::new(job.id, *event));
    }
    Ok(())
}

/// Moves a model-calling job to `model`, keeping the lineage it was planned
/// in (the model whose documents it reads and under which it writes).
async fn move_to(
    unit: &mut Unit,
    job: &JobRow,
    model: Option<&ModelRow>,
) -> Result<(), PlannerError> {
    let Some(model) = model else { return Ok(()) };
    if job.model_id == Some(model.id) || job.job_type()? == JobType::Render {
        return Ok(());
    }
    let payload = job.payload()?;
    let moved = JobPayload {
        model_api_identifier: model.api_identifier.clone(),
        lineage_model_id: payload.lineage_model_id.or(job.model_id),
        ..payload
    };
    let moved =
        serde_json::to_value(&moved).map_err(|e| PlannerError::BadMessage(e.to_string()))?;
    regenerate::set_model(&mut unit.tx, job.id, model.id, &moved).await?;
    Ok(())
}

fn retried_event(
    session: &SessionRow,
    stage: &str,
    plan: &Plan,
    model: Option<&ModelRow>,
) -> dialectic_cache::ProgressEvent {
    let mut event = session_event(session, EventKind::StageRetried);
    event.stage_slug = stage.to_string();
    event.at_ms = now_ms();
    event.message = format!(
        "{} failed job(s) run again{}; {} job(s) wait for them again",
        plan.retried.len(),
        model.map_or(String::new(), |m| format!(" on {}", m.api_identifier)),
        plan.reopened.len()
    );
    if let Some(m) = model {
        event.model = m.api_identifier.clone();
    }
    event
}
