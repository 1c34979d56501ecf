//! Session statuses and the stage completion rules of seed 000 §§1–5.

use crate::job::{JobStatus, JobType, UnknownValue};
use std::fmt;

mod machine;
mod notice;
pub use machine::{
    InvalidTransition, SessionEffect, SessionEvent, SessionState, Transition, transition,
    waits_right_after,
};
pub use notice::{
    DeadLetterWait, FailedJob, SlotWait, credit_command, dead_letter_holds_job, dead_letter_notice,
    failed_stage_notice, funds_notice, idle_abandoned_notice, replay_command, retry_command,
    slot_notice,
};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SessionStatus {
    Pending(String),
    Running(String),
    /// A job of the stage failed for good and nothing else of it is left to
    /// run: the session waits for RetryStage (or a cancel).
    Failed(String),
    IterationCompletePendingReview,
    /// The user ended a finished session (CompleteSession): read-only, still
    /// listed, exported and queried, never paused or abandoned on a timer.
    Completed,
    Paused,
    /// Cancelled (for good), or left idle unfinished (then `paused_from`
    /// keeps where it was, and a resume returns there).
    Abandoned,
}

impl SessionStatus {
    /// Stored names, for SQL that must agree with `parse` and `Display`.
    pub const PENDING_PREFIX: &'static str = "pending_";
    pub const RUNNING_PREFIX: &'static str = "running_";
    pub const FAILED_PREFIX: &'static str = "failed_";
    pub const REVIEW: &'static str = "iteration_complete_pending_review";
    pub const COMPLETED: &'static str = "completed";
    pub const PAUSED: &'static str = "paused";
    pub const ABANDONED: &'static str = "abandoned";

    pub fn stage(&self) -> Option<&str> {
        match self {
            SessionStatus::Pending(s) | SessionStatus::Running(s) | SessionStatus::Failed(s) => {
                Some(s)
            }
            _ => None,
        }
    }

    /// States in which a watcher's stream ends: nothing more happens without the user.
    pub fn awaits_user(&self) -> bool {
        matches!(
            self,
            SessionStatus::IterationCompletePendingReview
                | SessionStatus::Completed
                | SessionStatus::Abandoned
                | SessionStatus::Paused
                | SessionStatus::Pending(_)
                | SessionStatus::Failed(_)
        )
    }

    pub fn parse(value: &str) -> Result<Self, UnknownValue> {
        if let Some(stage) = value.strip_prefix(Self::PENDING_PREFIX) {
            return Ok(SessionStatus::Pending(stage.to_string()));
        }
        if let Some(stage) = value.strip_prefix(Self::RUNNING_PREFIX) {
            return Ok(SessionStatus::Running(stage.to_string()));
        }
        if let Some(stage) = value.strip_prefix(Self::FAILED_PREFIX) {
            return Ok(SessionStatus::Failed(stage.to_string()));
        }
        match value {
            Self::REVIEW => Ok(SessionStatus::IterationCompletePendingReview),
            Self::COMPLETED => Ok(SessionStatus::Completed),
            Self::PAUSED => Ok(SessionStatus::Paused),
            Self::ABANDONED => Ok(SessionStatus::Abandoned),
            other => Err(UnknownValue::new("session status", other)),
        }
    }
}

impl fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionStatus::Pending(s) => write!(f, "{}{s}", Self::PENDING_PREFIX),
            SessionStatus::Running(s) => write!(f, "{}{s}", Self::RUNNING_PREFIX),
            SessionStatus::Failed(s) => write!(f, "{}{s}", Self::FAILED_PREFIX),
            SessionStatus::IterationCompletePendingReview => f.write_str(Self::REVIEW),
            SessionStatus::Completed => f.write_str(Self::COMPLETED),
            SessionStatus::Paused => f.write_str(Self::PAUSED),
            SessionStatus::Abandoned => f.write_str(Self::ABANDONED),
        }
    }
}

/// A root job of a stage, read from the job table's own columns (never the payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootJob {
    pub job_type: JobType,
    pub status: JobStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageCompletion {
    /// Every root PLAN job completed and nothing else is outstanding.
    Complete,
    /// Work remains (or no PLAN job exists yet).
    Incomplete,
    /// A root PLAN job failed: the stage does not advance.
    Failed,
}

/// Seed 000 §2: only root jobs; RENDER and waiting_for_prerequisite excluded;
/// all PLAN jobs completed (and at least one); no other root job outstanding.
pub fn stage_completion(root_jobs: &[RootJob]) -> StageCompletion {
    let considered = root_jobs
        .iter()
        .filter(|j| j.job_type != JobType::Render && j.status != JobStatus::WaitingForPrerequisite);
    let (mut plans, mut completed_plans, mut outstanding, mut failed_plan) = (0, 0, 0, false);
    for job in considered {
        if !job.status.is_terminal() {
            outstanding += 1;
        }
        if job.job_type == JobType::Plan {
            plans += 1;
            if job.status == JobStatus::Completed {
                completed_plans += 1;
            } else if job.status.is_failure() {
                failed_plan = true;
            }
        } else if job.status.is_failure() {
            // A failed root EXECUTE job also fails the stage.
            failed_plan = true;
        }
    }
    if failed_plan && outstanding == 0 {
        return StageCompletion::Failed;
    }
    if plans > 0 && completed_plans == plans && outstanding == 0 && !failed_plan {
        StageCompletion::Complete
    } else {
        StageCompletion::Incomplete
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use JobStatus as S;
    use JobType::*;

    fn job(job_type: JobType, status: JobStatus) -> RootJob {
        RootJob { job_type, status }
    }

    #[test]
    fn status_text_round_trips() {
        for text in [
            "pending_thesis",
            "running_synthesis",
            "failed_synthesis",
            "iteration_complete_pending_review",
            "completed",
            "paused",
            "abandoned",
        ] {
            assert_eq!(SessionStatus::parse(text).unwrap().to_string(), text);
        }
        assert!(SessionStatus::parse("weird").is_err());
    }

    /// The cases of seed 000 §6 "Testing Requirements", as a table.
    #[test]
    fn stage_completion_table() {
        let cases: &[(&str, Vec<RootJob>, StageCompletion)] = &[
            (
                "21.b.i advance after thesis",
                vec![job(Plan, S::Completed)],
                StageCompletion::Complete,
            ),
            (
                "21.b.iv execute and render complete",
                vec![job(Plan, S::Completed), job(Render, S::Completed)],
                StageCompletion::Complete,
            ),
            (
                "21.b.v stuck render does not block",
                vec![
                    job(Plan, S::Completed),
                    job(Render, S::Pending),
                    job(Render, S::Failed),
                ],
                StageCompletion::Complete,
            ),
            (
                "plan still running",
                vec![job(Plan, S::WaitingForChildren)],
                StageCompletion::Incomplete,
            ),
            (
                "failed plan blocks",
                vec![job(Plan, S::Failed)],
                StageCompletion::Failed,
            ),
            (
                "retry loop failed plan blocks",
                vec![job(Plan, S::RetryLoopFailed)],
                StageCompletion::Failed,
            ),
            (
                "multi-plan needs all plans",
                vec![job(Plan, S::Completed), job(Plan, S::Processing)],
                StageCompletion::Incomplete,
            ),
            (
                "multi-plan all completed",
                vec![job(Plan, S::Completed), job(Plan, S::Completed)],
                StageCompletion::Complete,
            ),
            (
                "one of two plans failed",
                vec![job(Plan, S::Completed), job(Plan, S::Failed)],
                StageCompletion::Failed,
            ),
            (
                "waiting_for_prerequisite plan excluded",
                vec![
                    job(Plan, S::Completed),
                    job(Plan, S::WaitingForPrerequisite),
                ],
                StageCompletion::Complete,
            ),
            (
                "root execute outstanding",
                vec![job(Plan, S::Completed), job(Execute, S::Processing)],
                StageCompletion::Incomplete,
            ),
            ("no plan yet", vec![], StageCompletion::Incomplete),
            (
                "only renders",
                vec![job(Render, S::Completed)],
                StageCompletion::Incomplete,
            ),
        ];
        for (name, jobs, expected) in cases {
            assert_eq!(stage_completion(jobs), *expected, "{name}");
        }
    }

    /// Seed 000 §6, 21.b.iv: root EXECUTE jobs and RENDER jobs all completed
    /// next to the completed PLAN jobs advance the stage.
    #[test]
    fn advances_when_execute_and_render_jobs_complete() {
        let jobs = [
            job(Plan, S::Completed),
            job(Execute, S::Completed),
            job(Execute, S::Completed),
            job(Render, S::Completed),
            job(Render, S::Completed),
        ];
        assert_eq!(stage_completion(&jobs), StageCompletion::Complete);
    }

    /// Seed 000 §6, 21.b.v: a RENDER job in any status, stuck or failed,
    /// never holds back (or fails) a stage whose PLAN jobs completed; and
    /// RENDER jobs never complete a stage on their own.
    #[test]
    fn render_jobs_in_every_status_never_block_the_stage() {
        for render in S::ALL {
            assert_eq!(
                stage_completion(&[job(Render, render), job(Plan, S::Completed)]),
                StageCompletion::Complete,
                "render {render}"
            );
            assert_eq!(
                stage_completion(&[job(Render, render), job(Plan, S::Processing)]),
                StageCompletion::Incomplete,
                "render {render} next to a running plan"
            );
            assert_eq!(
                stage_completion(&[job(Render, render)]),
                StageCompletion::Incomplete,
                "render {render} alone"
            );
        }
    }

    /// Each status of a single root PLAN job: only `completed` advances, only
    /// the failures fail, `waiting_for_prerequisite` is not counted at all.
    #[test]
    fn single_plan_status_table() {
        for status in S::ALL {
            let want = match status {
                S::Completed => StageCompletion::Complete,
                S::Failed | S::RetryLoopFailed => StageCompletion::Failed,
                _ => StageCompletion::Incomplete,
            };
            assert_eq!(stage_completion(&[job(Plan, status)]), want, "{status}");
        }
    }

    /// Failed PLAN jobs block progression: while another root job is still
    /// running the stage is merely incomplete, and once everything ended it
    /// failed — it never becomes complete.
    #[test]
    fn failed_plan_blocks_progression() {
        let cases: &[(&str, Vec<RootJob>, StageCompletion)] = &[
            (
                "failed plan next to a running plan",
                vec![job(Plan, S::Failed), job(Plan, S::WaitingForChildren)],
                StageCompletion::Incomplete,
            ),
            (
                "failed plan after the other completed",
                vec![job(Plan, S::Failed), job(Plan, S::Completed)],
                StageCompletion::Failed,
            ),
            (
                "retry loop failed plan after the others completed",
                vec![
                    job(Plan, S::Completed),
                    job(Plan, S::RetryLoopFailed),
                    job(Plan, S::Completed),
                ],
                StageCompletion::Failed,
            ),
            (
                "failed root execute job fails the stage",
                vec![job(Plan, S::Completed), job(Execute, S::Failed)],
                StageCompletion::Failed,
            ),
            (
                "root execute retrying is outstanding, not failed",
                vec![job(Plan, S::Completed), job(Execute, S::Retrying)],
                StageCompletion::Incomplete,
            ),
        ];
        for (name, jobs, want) in cases {
            assert_eq!(stage_completion(jobs), *want, "{name}");
        }
    }

    /// A synthesis-like stage with two sequential PLAN jobs per model: the
    /// stage completes only after the last of them, in whichever order.
    #[test]
    fn multi_plan_stage_needs_every_plan_completed() {
        let mut jobs = vec![
            job(Plan, S::Pending),
            job(Plan, S::Pending),
            job(Plan, S::Pending),
            job(Plan, S::Pending),
        ];
        let order = [2, 0, 3, 1];
        for (n, index) in order.iter().enumerate() {
            jobs[*index].status = S::WaitingForChildren;
            assert_eq!(stage_completion(&jobs), StageCompletion::Incomplete);
            jobs[*index].status = S::Completed;
            let want = if n + 1 == order.len() {
                StageCompletion::Complete
            } else {
                StageCompletion::Incomplete
            };
            assert_eq!(stage_completion(&jobs), want, "after {} plan(s)", n + 1);
        }
    }

    /// Jobs waiting for a prerequisite are not ready yet and are excluded from
    /// the check (seed 000 §2c) — whatever their type; but they never count as
    /// the stage's PLAN job either.
    #[test]
    fn waiting_for_prerequisite_jobs_are_excluded() {
        assert_eq!(
            stage_completion(&[
                job(Plan, S::Completed),
                job(Execute, S::WaitingForPrerequisite),
            ]),
            StageCompletion::Complete
        );
        assert_eq!(
            stage_completion(&[job(Plan, S::WaitingForPrerequisite)]),
            StageCompletion::Incomplete
        );
        assert_eq!(
            stage_completion(&[job(Plan, S::WaitingForPrerequisite), job(Plan, S::Failed),]),
            StageCompletion::Failed
        );
    }
}
