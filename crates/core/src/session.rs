//! Session statuses and the stage completion rules of seed 000 §§1–5.

use crate::job::{JobStatus, JobType, UnknownValue};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SessionStatus {
    Pending(String),
    Running(String),
    IterationCompletePendingReview,
    Paused,
    Abandoned,
}

impl SessionStatus {
    pub fn stage(&self) -> Option<&str> {
        match self {
            SessionStatus::Pending(s) | SessionStatus::Running(s) => Some(s),
            _ => None,
        }
    }

    /// States in which a watcher's stream ends: nothing more happens without the user.
    pub fn awaits_user(&self) -> bool {
        matches!(
            self,
            SessionStatus::IterationCompletePendingReview
                | SessionStatus::Abandoned
                | SessionStatus::Paused
                | SessionStatus::Pending(_)
        )
    }

    pub fn parse(value: &str) -> Result<Self, UnknownValue> {
        if let Some(stage) = value.strip_prefix("pending_") {
            return Ok(SessionStatus::Pending(stage.to_string()));
        }
        if let Some(stage) = value.strip_prefix("running_") {
            return Ok(SessionStatus::Running(stage.to_string()));
        }
        match value {
            "iteration_complete_pending_review" => {
                Ok(SessionStatus::IterationCompletePendingReview)
            }
            "paused" => Ok(SessionStatus::Paused),
            "abandoned" => Ok(SessionStatus::Abandoned),
            other => Err(UnknownValue::new("session status", other)),
        }
    }
}

impl fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionStatus::Pending(s) => write!(f, "pending_{s}"),
            SessionStatus::Running(s) => write!(f, "running_{s}"),
            SessionStatus::IterationCompletePendingReview => {
                f.write_str("iteration_complete_pending_review")
            }
            SessionStatus::Paused => f.write_str("paused"),
            SessionStatus::Abandoned => f.write_str("abandoned"),
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

/// Seed 000 §3: `pending_<next>` or, at a terminal stage, review.
pub fn status_after_stage(next_stage: Option<&str>) -> SessionStatus {
    match next_stage {
        Some(next) => SessionStatus::Pending(next.to_string()),
        None => SessionStatus::IterationCompletePendingReview,
    }
}

/// Seed 000 §4.1: a root PLAN job starting moves `pending_<stage>` to `running_<stage>`;
/// any other combination changes nothing.
pub fn status_on_root_plan_started(current: &SessionStatus, stage: &str) -> Option<SessionStatus> {
    match current {
        SessionStatus::Pending(s) if s == stage => Some(SessionStatus::Running(stage.to_string())),
        _ => None,
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
            "iteration_complete_pending_review",
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

    #[test]
    fn next_status_and_terminal_stage() {
        assert_eq!(
            status_after_stage(Some("antithesis")).to_string(),
            "pending_antithesis"
        );
        assert_eq!(
            status_after_stage(None).to_string(),
            "iteration_complete_pending_review"
        );
    }

    #[test]
    fn running_is_set_only_from_matching_pending() {
        let pending = SessionStatus::Pending("thesis".into());
        assert_eq!(
            status_on_root_plan_started(&pending, "thesis"),
            Some(SessionStatus::Running("thesis".into()))
        );
        assert_eq!(status_on_root_plan_started(&pending, "antithesis"), None);
        let running = SessionStatus::Running("thesis".into());
        assert_eq!(status_on_root_plan_started(&running, "thesis"), None);
    }
}
