//! A worker's report on a job: started, succeeded or failed. What follows is
//! decided from the job's row and the report alone (`react`, `after_success`);
//! the engine then carries it out inside the outcome's unit.

use super::{Apply, Engine, PlannerError, Unit, lock_known_job, now_ms, parse_id, session_event};
use dialectic_cache::ProgressEvent;
use dialectic_core::clarify::ClarificationRequest;
use dialectic_core::ids::{ContributionId, JobId};
use dialectic_core::job::{INSUFFICIENT_BALANCE, JobEvent, JobStatus, JobType};
use dialectic_core::payload::JobPayload;
use dialectic_core::progress::EventKind;
use dialectic_core::recipe::RecipeStep;
use dialectic_core::session::{SessionEvent, credit_command};
use dialectic_proto::v1::queue::{JobFailed, JobOutcome, JobSucceeded, job_outcome};
use dialectic_store::jobs::{self, JobRow};
use dialectic_store::sessions;
use serde_json::json;

/// What an outcome asks of the planner, given the job it reports on.
#[derive(Debug)]
enum Reaction<'a> {
    /// Watchers hear of the start; a root PLAN job's also moves its session
    /// to `running_<stage>`.
    Started {
        worker: &'a str,
        moves_session: bool,
    },
    /// A report on an attempt that is no longer the job's current one.
    Stale,
    Succeeded(&'a JobSucceeded),
    /// The wallet refused the call: the job waits for funds.
    PauseForFunds {
        reason: &'a str,
    },
    Failed(&'a JobFailed),
}

/// The job as its outcome finds it.
#[derive(Debug, Clone, Copy)]
struct Reported {
    job_type: JobType,
    status: JobStatus,
    attempt_count: i32,
    root: bool,
}

impl Reported {
    fn of(job: &JobRow) -> Result<Self, PlannerError> {
        Ok(Reported {
            job_type: job.job_type()?,
            status: job.status()?,
            attempt_count: job.attempt_count,
            root: job.parent_job_id.is_none(),
        })
    }
}

fn react(job: Reported, attempt: u32, result: &job_outcome::Result) -> Reaction<'_> {
    let current = job.status == JobStatus::Processing && job.attempt_count as u32 == attempt;
    match result {
        job_outcome::Result::Started(started) => Reaction::Started {
            worker: &started.worker,
            moves_session: job.root && job.job_type == JobType::Plan,
        },
        _ if !current => Reaction::Stale,
        job_outcome::Result::Succeeded(done) => Reaction::Succeeded(done),
        job_outcome::Result::Failed(failed) if failed.error_code == INSUFFICIENT_BALANCE => {
            Reaction::PauseForFunds {
                reason: &failed.message,
            }
        }
        job_outcome::Result::Failed(failed) => Reaction::Failed(failed),
    }
}

/// What a job's success leads to besides its own transition.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct AfterSuccess {
    /// A root PLAN job (it carries the recipe) plans its next steps, and
    /// stays processing meanwhile instead of completing.
    plans_next: bool,
    /// The step's confidence gate is consulted: a whole EXECUTE reply.
    gated: bool,
    /// A markdown EXECUTE reply gets a RENDER job (unless its gate runs the step again).
    renders: bool,
    /// A reply cut off by the token limit gets a continuation job.
    continues: bool,
    /// A RENDER job's document is out: watchers hear, cached reads drop.
    rendered: bool,
}

fn after_success(job_type: JobType, payload: &JobPayload, done: &JobSucceeded) -> AfterSuccess {
    let execute = job_type == JobType::Execute;
    if job_type == JobType::Plan && payload.recipe.is_some() {
        return AfterSuccess {
            plans_next: true,
            ..Default::default()
        };
    }
    AfterSuccess {
        plans_next: false,
        gated: execute && !done.continuation_needed,
        renders: execute
            && payload
                .step
                .as_ref()
                .is_some_and(RecipeStep::renders_markdown)
            && !done.contribution_id.is_empty(),
        continues: execute && done.continuation_needed,
        rendered: job_type == JobType::Render,
    }
}

/// What is stored as the job's `results`.
fn results_of(done: &JobSucceeded) -> serde_json::Value {
    json!({
        "contribution_id": done.contribution_id,
        "resource_id": done.resource_id,
        "finish_reason": done.finish_reason,
    })
}

impl Engine {
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
        let Some(job) = lock_known_job(&mut unit, job_id).await? else {
            return Ok(());
        };
        match react(Reported::of(&job)?, outcome.attempt, result) {
            Reaction::Started {
                worker,
                moves_session,
            } => {
                if moves_session {
                    self.root_plan_started(&mut unit, &job).await?;
                }
                let mut event = self
                    .job_event(&mut unit, &job, EventKind::JobStarted)
                    .await?;
                event.message = format!("attempt {} on {worker}", outcome.attempt);
                unit.events.push(event);
            }
            Reaction::Stale => {
                tracing::info!(job_id = %job.id, status = %job.status, "stale outcome; ignoring");
                return Ok(());
            }
            Reaction::Succeeded(done) => self.on_success(&mut unit, &job, done).await?,
            Reaction::PauseForFunds { reason } => {
                self.pause_for_funds(&mut unit, &job, reason).await?
            }
            Reaction::Failed(failed) => unit.apply_later(
                Apply::new(
                    &job,
                    JobEvent::Failed {
                        retryable: failed.retryable,
                    },
                )
                .with_error(json!({
                    "code": failed.error_code,
                    "message": failed.message,
                    "attempt": outcome.attempt,
                })),
            ),
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
        self.record_published(unit, job, done).await?;
        let payload = job.payload()?;
        let after = after_success(job.job_type()?, &payload, done);
        let results = results_of(done);
        if after.plans_next {
            jobs::set_status(
                &mut unit.tx,
                job.id,
                JobStatus::Processing,
                None,
                Some(&results),
            )
            .await?;
            unit.plan_next_later(job.id);
        } else {
            self.follow_reply(unit, job, &payload, done, after).await?;
            unit.apply_later(Apply::new(job, JobEvent::Succeeded).with_results(results));
        }
        if !done.clarifications.is_empty() {
            let asked = done
                .clarifications
                .iter()
                .map(|c| ClarificationRequest {
                    step_key: c.step_key.clone(),
                    question: c.question.clone(),
                })
                .collect();
            unit.clarify_later(job.id, asked);
        }
        Ok(())
    }

    /// The jobs a reply leads to: a rerun below its gate, a render, a continuation.
    async fn follow_reply(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        payload: &JobPayload,
        done: &JobSucceeded,
        after: AfterSuccess,
    ) -> Result<(), PlannerError> {
        // A reply below its confidence gate runs again instead of rendering.
        let rerun = after.gated && self.apply_gate(unit, job, payload, done).await?;
        if after.renders && !rerun {
            let contribution = parse_id::<ContributionId>(&done.contribution_id)?;
            self.spawn_render(unit, job, payload, contribution).await?;
        }
        if after.rendered {
            // Seed 000 function 7: tell watchers the document's latest text is out.
            let mut event = self
                .job_event(unit, job, EventKind::RenderCompleted)
                .await?;
            event.message = done.resource_id.clone();
            unit.events.push(event);
            let project = sessions::project_of_session(&mut unit.tx, job.session_id).await?;
            unit.stale_projects.push(project);
        }
        if after.continues {
            let contribution = parse_id::<ContributionId>(&done.contribution_id)?;
            self.spawn_continuation(unit, job, payload, contribution)
                .await?;
        }
        Ok(())
    }

    /// Seed 000 §4.1: a root PLAN job starting moves `pending_<stage>` to `running_<stage>`.
    async fn root_plan_started(&self, unit: &mut Unit, job: &JobRow) -> Result<(), PlannerError> {
        let session = sessions::lock_session(&mut unit.tx, job.session_id).await?;
        let event = SessionEvent::RootPlanStarted {
            stage: job.stage_slug.clone(),
        };
        if let Some(applied) = self.try_session_event(unit, &session, &event).await?
            && applied.status != session.status
        {
            unit.events
                .push(session_event(&applied, EventKind::SessionStatus));
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
        unit.apply_later(
            Apply::new(job, JobEvent::InsufficientBalance)
                .with_error(json!({"code": INSUFFICIENT_BALANCE, "message": reason})),
        );
        if already_paused == 0 {
            let session = sessions::lock_session(&mut unit.tx, job.session_id).await?;
            unit.events.push(ProgressEvent {
                session_status: session.status,
                stage_slug: job.stage_slug.clone(),
                message: format!(
                    "paused: {reason}; the work resumes by itself once the wallet is credited ({})",
                    credit_command(&job.user_id.to_string())
                ),
                at_ms: now_ms(),
                ..ProgressEvent::new(EventKind::WalletInsufficient, job.session_id.to_string())
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
