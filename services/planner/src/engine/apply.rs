//! One job transition through core's job machine, and every effect it
//! returns carried out: dispatches and retries go to the outbox, wake-ups of
//! parents, dependents and stages are queued on the unit.

use super::unit::{JobRef, Release};
use super::{Apply, Engine, PlannerError, Unit};
use dialectic_core::ids::{JobId, SessionId};
use dialectic_core::job::{
    CHILD_FAILED, ChildrenState, JobEffect, JobEvent, JobStatus, JobType, PREREQUISITE_FAILED,
    REGENERATION_KEY_MARK, Transition, children_state, retry_backoff_ms, transition,
};
use dialectic_core::progress::EventKind;
use dialectic_store::jobs::{self, JobRow};
use dialectic_store::sessions;
use serde_json::json;

/// Whether a job that ended releases a later stage's root jobs (which wait
/// for the documents earlier stages render or regenerate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GatesStage {
    Yes,
    No,
    /// A continuation: only when its parent completed long ago (it then
    /// continues a regeneration, not a stage still running).
    IfParentCompleted,
}

fn gates_stage(job_type: JobType, job_key: &str, continues: bool) -> GatesStage {
    match job_type {
        JobType::Render => GatesStage::Yes,
        JobType::Execute if job_key.contains(REGENERATION_KEY_MARK) => GatesStage::Yes,
        JobType::Execute if continues => GatesStage::IfParentCompleted,
        JobType::Execute | JobType::Plan => GatesStage::No,
    }
}

/// What a parent waiting for its children hears from them, if anything yet.
fn parent_wakes(parent: JobId, children: &[(JobType, JobStatus)]) -> Option<Apply> {
    match children_state(children) {
        ChildrenState::Outstanding => None,
        ChildrenState::AllCompleted => Some(Apply::new(parent, JobEvent::ChildrenCompleted)),
        ChildrenState::AnyFailed => Some(
            Apply::new(parent, JobEvent::ChildFailed)
                .with_error(json!({"code": CHILD_FAILED, "message": "a child job failed"})),
        ),
    }
}

impl Engine {
    /// Applies an event to a job; one the job's status does not take is
    /// ignored (a duplicate or late message).
    pub(super) async fn apply(&self, unit: &mut Unit, apply: Apply) -> Result<(), PlannerError> {
        let job = match apply.job {
            JobRef::Locked(row) => *row,
            JobRef::Id(id) => jobs::lock(&mut unit.tx, id).await?,
        };
        let t = match transition(job.status()?, apply.event) {
            Ok(t) => t,
            Err(e) => {
                tracing::info!(job_id = %job.id, error = %e, "transition not applicable; ignoring");
                return Ok(());
            }
        };
        let (error, results) = (apply.error.as_ref(), apply.results.as_ref());
        jobs::set_status(&mut unit.tx, job.id, t.to, error, results).await?;
        let mut progress = self.job_event(unit, &job, EventKind::JobStatus).await?;
        progress.job_status = Some(t.to);
        progress.message = match error {
            Some(e) => format!("{} ({})", t.to.as_str(), e),
            None => t.to.as_str().to_string(),
        };
        unit.events.push(progress);
        for effect in &t.effects {
            self.carry_out(unit, &job, &t, *effect).await?;
        }
        Ok(())
    }

    /// One effect of a job transition.
    async fn carry_out(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        t: &Transition,
        effect: JobEffect,
    ) -> Result<(), PlannerError> {
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
                    unit.check_parent_later(parent);
                }
            }
            JobEffect::ReleaseDependents => {
                let render_of = self.gates_stage(unit, job).await?.then_some(job.session_id);
                unit.release_later(Release {
                    prerequisite: job.id,
                    succeeded: t.to == JobStatus::Completed,
                    render_of,
                });
            }
            JobEffect::CheckStage => {
                if job.parent_job_id.is_none() {
                    unit.check_stage_later(job.session_id, &job.stage_slug, job.iteration_number);
                }
            }
            JobEffect::PlanNextSteps => unit.plan_next_later(job.id),
        }
        Ok(())
    }

    /// A regeneration (or its continuation) hangs under a PLAN job that
    /// completed long ago; a next stage's roots may wait for it. Its key says
    /// so; only a continuation needs its parent read.
    async fn gates_stage(&self, unit: &mut Unit, job: &JobRow) -> Result<bool, PlannerError> {
        let continues = job.target_contribution_id.is_some();
        Ok(
            match gates_stage(job.job_type()?, &job.job_key, continues) {
                GatesStage::Yes => true,
                GatesStage::No => false,
                GatesStage::IfParentCompleted => match job.parent_job_id {
                    Some(parent) => {
                        jobs::get(&mut *unit.tx, parent).await?.status()? == JobStatus::Completed
                    }
                    None => false,
                },
            },
        )
    }

    /// The jobs waiting for a prerequisite that ended move on (or fail with it).
    pub(super) async fn release(
        &self,
        unit: &mut Unit,
        release: Release,
    ) -> Result<(), PlannerError> {
        if let Some(session) = release.render_of {
            return self
                .release_render_waiters(unit, release.prerequisite, session)
                .await;
        }
        for waiting in jobs::waiting_on(&mut unit.tx, release.prerequisite).await? {
            let next = if release.succeeded {
                Apply::new(waiting, JobEvent::PrerequisiteCompleted)
            } else {
                Apply::new(waiting, JobEvent::PrerequisiteFailed)
                    .with_error(json!({"code": PREREQUISITE_FAILED}))
            };
            unit.apply_later(next);
        }
        Ok(())
    }

    /// A stage's root jobs wait while earlier stages still render or regenerate
    /// (see `plan_root_jobs`). When one ends they wait for the next outstanding
    /// one, or start. The session lock orders this after a concurrent stage
    /// start (which holds it while it reads the outstanding renders), so a root
    /// job that commits waiting on this render is seen here. A render that
    /// failed for good releases them too: the executor then names any input it lacks.
    async fn release_render_waiters(
        &self,
        unit: &mut Unit,
        render: JobId,
        session_id: SessionId,
    ) -> Result<(), PlannerError> {
        sessions::lock_session(&mut unit.tx, session_id).await?;
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
                    unit.apply_later(Apply::new(job, JobEvent::PrerequisiteCompleted));
                }
            }
        }
        Ok(())
    }

    /// A parent waiting for its children wakes when all completed, and fails
    /// when one failed.
    pub(super) async fn check_parent(
        &self,
        unit: &mut Unit,
        parent_id: JobId,
    ) -> Result<(), PlannerError> {
        let parent = jobs::lock(&mut unit.tx, parent_id).await?;
        if parent.status()? != JobStatus::WaitingForChildren {
            return Ok(());
        }
        let children: Vec<(JobType, JobStatus)> = jobs::children(&mut unit.tx, parent_id)
            .await?
            .into_iter()
            .map(|(t, s, _)| (t, s))
            .collect();
        if let Some(wake) = parent_wakes(parent_id, &children) {
            unit.apply_later(wake);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_regenerations_release_a_later_stage_and_a_continuation_only_of_a_done_parent() {
        let regen = format!("root:draft{REGENERATION_KEY_MARK}42");
        let cases = [
            (JobType::Render, "c:render", false, GatesStage::Yes),
            (JobType::Execute, regen.as_str(), false, GatesStage::Yes),
            (JobType::Execute, regen.as_str(), true, GatesStage::Yes),
            (
                JobType::Execute,
                "c:continue",
                true,
                GatesStage::IfParentCompleted,
            ),
            (JobType::Execute, "root:draft", false, GatesStage::No),
            (JobType::Plan, "s:thesis:1:m", false, GatesStage::No),
        ];
        for (job_type, key, continues, expected) in cases {
            assert_eq!(
                gates_stage(job_type, key, continues),
                expected,
                "{job_type:?} {key}"
            );
        }
    }

    #[test]
    fn a_parent_wakes_when_all_its_children_completed_and_fails_when_one_failed() {
        let parent = JobId::new();
        let (done, running) = (
            (JobType::Execute, JobStatus::Completed),
            (JobType::Execute, JobStatus::Processing),
        );
        assert!(parent_wakes(parent, &[done, running]).is_none());
        let woken = parent_wakes(parent, &[done, done]).expect("woken");
        assert_eq!(woken.event, JobEvent::ChildrenCompleted);
        assert!(woken.error.is_none());
        let failed = (JobType::Execute, JobStatus::RetryLoopFailed);
        let failing = parent_wakes(parent, &[done, failed, running]).expect("failed");
        assert_eq!(failing.event, JobEvent::ChildFailed);
        assert_eq!(failing.error.expect("why")["code"], CHILD_FAILED);
    }
}
