//! The job status machine of seed 000 ("Job Status Lifecycle"), encoded once.
//! The planner applies it inside a transaction under a row lock; workers use
//! `claimable` for their compare-and-set claim.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobType {
    Plan,
    Execute,
    Render,
}

impl JobType {
    pub const fn as_str(self) -> &'static str {
        match self {
            JobType::Plan => "PLAN",
            JobType::Execute => "EXECUTE",
            JobType::Render => "RENDER",
        }
    }

    /// Routing key of the dispatch message for this job type.
    pub const fn dispatch_routing_key(self) -> &'static str {
        match self {
            JobType::Plan => "job.plan",
            JobType::Execute => "job.execute",
            JobType::Render => "job.render",
        }
    }
}

impl fmt::Display for JobType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobType {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        match s {
            "PLAN" => Ok(JobType::Plan),
            "EXECUTE" => Ok(JobType::Execute),
            "RENDER" => Ok(JobType::Render),
            other => Err(UnknownValue::new("job type", other)),
        }
    }
}

/// A stored enum value that this build does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}")]
pub struct UnknownValue {
    pub kind: &'static str,
    pub value: String,
}

impl UnknownValue {
    pub fn new(kind: &'static str, value: &str) -> Self {
        Self {
            kind,
            value: value.chars().take(64).collect(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Pending,
    Processing,
    WaitingForPrerequisite,
    WaitingForChildren,
    PendingNextStep,
    PendingContinuation,
    Retrying,
    Completed,
    Failed,
    RetryLoopFailed,
    /// The wallet could not afford the job's next model call; no call was made.
    PausedNsf,
    /// A regeneration of the job's document replaced it: whatever it still
    /// reports is discarded, and nothing ever moves it again.
    Superseded,
}

impl JobStatus {
    pub const ALL: [JobStatus; 12] = [
        JobStatus::Pending,
        JobStatus::Processing,
        JobStatus::WaitingForPrerequisite,
        JobStatus::WaitingForChildren,
        JobStatus::PendingNextStep,
        JobStatus::PendingContinuation,
        JobStatus::Retrying,
        JobStatus::Completed,
        JobStatus::Failed,
        JobStatus::RetryLoopFailed,
        JobStatus::PausedNsf,
        JobStatus::Superseded,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "pending",
            JobStatus::Processing => "processing",
            JobStatus::WaitingForPrerequisite => "waiting_for_prerequisite",
            JobStatus::WaitingForChildren => "waiting_for_children",
            JobStatus::PendingNextStep => "pending_next_step",
            JobStatus::PendingContinuation => "pending_continuation",
            JobStatus::Retrying => "retrying",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::RetryLoopFailed => "retry_loop_failed",
            JobStatus::PausedNsf => "paused_nsf",
            JobStatus::Superseded => "superseded",
        }
    }

    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Completed
                | JobStatus::Failed
                | JobStatus::RetryLoopFailed
                | JobStatus::Superseded
        )
    }

    /// Terminal statuses as stored, for SQL that must agree with `is_terminal`.
    pub const TERMINAL: [&'static str; 4] =
        ["completed", "failed", "retry_loop_failed", "superseded"];

    pub const fn is_failure(self) -> bool {
        matches!(self, JobStatus::Failed | JobStatus::RetryLoopFailed)
    }

    /// Statuses from which a worker may claim a job (compare-and-set source set).
    pub const fn claimable() -> &'static [JobStatus] {
        &[
            JobStatus::Pending,
            JobStatus::PendingContinuation,
            JobStatus::Retrying,
        ]
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobStatus {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        JobStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownValue::new("job status", s))
    }
}

/// Error code of an attempt the wallet could not afford; the planner pauses the
/// job instead of failing it.
pub const INSUFFICIENT_BALANCE: &str = "insufficient_balance";

/// Separates a job's natural key from a regeneration's suffix: the jobs that
/// rewrite a finished stage's document carry it (their continuations do not).
pub const REGENERATION_KEY_MARK: &str = ":regen:";

/// Error code of a job that failed because one of its children did (its own
/// work had succeeded): a retry of that child reopens it.
pub const CHILD_FAILED: &str = "child_failed";

/// Error code of a job that failed because its prerequisite did (it never
/// ran): a retry of the prerequisite reopens it.
pub const PREREQUISITE_FAILED: &str = "prerequisite_failed";

/// Something that happened to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEvent {
    /// A worker claimed the job (its compare-and-set succeeded).
    Claimed,
    /// The job cannot start before its prerequisite job completes.
    AwaitPrerequisite,
    PrerequisiteCompleted,
    PrerequisiteFailed,
    /// The planner created child jobs for this job's next ready steps.
    ChildrenSpawned,
    /// Every non-RENDER child reached `completed`.
    ChildrenCompleted,
    /// A non-RENDER child ended in `failed` or `retry_loop_failed`.
    ChildFailed,
    /// The attempt produced its output, or a woken parent has no steps left.
    Succeeded,
    /// The attempt failed. `retryable` failures go through `retrying`.
    Failed {
        retryable: bool,
    },
    /// The worker's lease ran out without an outcome (the worker died or hung).
    LeaseExpired,
    /// The wallet refused the hold for the model call; the attempt made no call.
    InsufficientBalance,
    /// The wallet was credited: a paused job may try again.
    Resumed,
    /// A `retrying` job is due for its next attempt; `attempts_used` counts claims so far.
    RetryDue {
        attempts_used: u32,
        max_attempts: u32,
    },
    /// A regeneration of the document this job produces (or renders) replaced it.
    Superseded,
    /// The user asked for a failed job to run again (RetryStage): it starts
    /// over with a fresh attempt budget.
    ManualRetry,
    /// A job that failed only because a child failed, now that the child runs
    /// again: it waits for its children once more.
    ChildRetried,
    /// A job that failed only because its prerequisite failed, now that the
    /// prerequisite runs again: it waits for it once more.
    PrerequisiteRetried,
}

/// What the planner must do after a transition, in the same transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEffect {
    /// Publish a dispatch message (through the outbox) so a worker claims the job.
    Dispatch,
    /// Re-evaluate the parent: are all its children done?
    CheckParent,
    /// Wake or fail the jobs waiting for this one as their prerequisite.
    ReleaseDependents,
    /// A root job ended: is the stage complete?
    CheckStage,
    /// Expand the job's next ready recipe steps (or complete it when none are left).
    PlanNextSteps,
    /// Schedule the next attempt after a back-off.
    ScheduleRetry,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub to: JobStatus,
    pub effects: Vec<JobEffect>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job cannot go from {from} on {event:?}")]
pub struct InvalidTransition {
    pub from: JobStatus,
    pub event: JobEvent,
}

fn terminal_effects() -> Vec<JobEffect> {
    vec![
        JobEffect::CheckParent,
        JobEffect::ReleaseDependents,
        JobEffect::CheckStage,
    ]
}

/// The lifecycle. Every arrow of seed 000's diagram is here, plus
/// `processing → waiting_for_children` and `pending_next_step → waiting_for_children`
/// (a PLAN job whose own model call produced the header_context and which now
/// waits for the steps it spawned) and `pending_next_step → completed` (no steps left):
/// in this system the planner, not a second worker pass, expands the next steps.
pub fn transition(from: JobStatus, event: JobEvent) -> Result<Transition, InvalidTransition> {
    use JobEffect as E;
    use JobEvent as Ev;
    use JobStatus as S;
    let t = |to, effects: Vec<JobEffect>| Ok(Transition { to, effects });
    match (from, event) {
        (S::Pending | S::PendingContinuation | S::Retrying | S::PendingNextStep, Ev::Claimed) => {
            t(S::Processing, vec![])
        }
        (S::Pending, Ev::AwaitPrerequisite) => t(S::WaitingForPrerequisite, vec![]),
        (S::WaitingForPrerequisite, Ev::PrerequisiteCompleted) => t(S::Pending, vec![E::Dispatch]),
        (S::WaitingForPrerequisite, Ev::PrerequisiteFailed) => t(S::Failed, terminal_effects()),
        (S::Pending | S::Processing | S::PendingNextStep, Ev::ChildrenSpawned) => {
            t(S::WaitingForChildren, vec![])
        }
        (S::WaitingForChildren, Ev::ChildrenCompleted) => {
            t(S::PendingNextStep, vec![E::PlanNextSteps])
        }
        (S::WaitingForChildren, Ev::ChildFailed) => t(S::Failed, terminal_effects()),
        (S::Processing | S::PendingNextStep, Ev::Succeeded) => t(S::Completed, terminal_effects()),
        (S::Processing, Ev::Failed { retryable: true }) => t(S::Retrying, vec![E::ScheduleRetry]),
        // A root whose next steps cannot be planned (no source documents) fails from pending_next_step.
        (S::Processing | S::PendingNextStep, Ev::Failed { retryable: false }) => {
            t(S::Failed, terminal_effects())
        }
        (S::Processing, Ev::LeaseExpired) => t(S::Retrying, vec![E::ScheduleRetry]),
        (S::Processing, Ev::InsufficientBalance) => t(S::PausedNsf, vec![]),
        (S::PausedNsf, Ev::Resumed) => t(S::Pending, vec![E::Dispatch]),
        (
            S::Retrying,
            Ev::RetryDue {
                attempts_used,
                max_attempts,
            },
        ) => {
            if attempts_used >= max_attempts {
                t(S::RetryLoopFailed, terminal_effects())
            } else {
                t(S::Retrying, vec![E::Dispatch])
            }
        }
        // A finished document may be regenerated, and so may one still being
        // written (the earlier regeneration loses instead of racing). No effects:
        // the replacement job takes the superseded one's place under the same
        // parent, and nothing waits on a superseded job (a regeneration is
        // refused once the next stage's root jobs exist). A failed job stays
        // failed: it produced nothing to replace.
        (from, Ev::Superseded) if from != S::Superseded && !from.is_failure() => {
            t(S::Superseded, vec![])
        }
        // A manual retry is the only way out of a failure. The jobs that failed
        // because of the retried one wait again, without effects: the retried
        // job's own outcome wakes them as if it had never failed.
        (S::Failed | S::RetryLoopFailed, Ev::ManualRetry) => t(S::Pending, vec![E::Dispatch]),
        (S::Failed, Ev::ChildRetried) => t(S::WaitingForChildren, vec![]),
        (S::Failed, Ev::PrerequisiteRetried) => t(S::WaitingForPrerequisite, vec![]),
        (from, event) => Err(InvalidTransition { from, event }),
    }
}

/// What a retry of its stage does to a failed job, from its status and the
/// code its failure recorded: a job that failed because a child or its
/// prerequisite did waits for it again; any other failure runs again. None
/// for a job that has not failed.
pub fn retry_event(status: JobStatus, error_code: Option<&str>) -> Option<JobEvent> {
    match (status, error_code) {
        (JobStatus::Failed, Some(CHILD_FAILED)) => Some(JobEvent::ChildRetried),
        (JobStatus::Failed, Some(PREREQUISITE_FAILED)) => Some(JobEvent::PrerequisiteRetried),
        (status, _) if status.is_failure() => Some(JobEvent::ManualRetry),
        _ => None,
    }
}

/// Exponential back-off for attempt `attempts_used` (1-based), capped.
pub fn retry_backoff_ms(attempts_used: u32, base_ms: u64, cap_ms: u64) -> u64 {
    let exp = attempts_used.saturating_sub(1).min(16);
    base_ms.saturating_mul(1u64 << exp).min(cap_ms)
}

/// Whether all children are done, and how, ignoring RENDER jobs which never block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildrenState {
    Outstanding,
    AllCompleted,
    AnyFailed,
}

/// Children as (job type, status). RENDER children are side effects and never count.
pub fn children_state(children: &[(JobType, JobStatus)]) -> ChildrenState {
    let relevant = children.iter().filter(|(ty, _)| *ty != JobType::Render);
    let mut outstanding = false;
    for (_, status) in relevant {
        if status.is_failure() {
            return ChildrenState::AnyFailed;
        }
        // A superseded child was replaced by a sibling, which is counted itself.
        if !matches!(status, JobStatus::Completed | JobStatus::Superseded) {
            outstanding = true;
        }
    }
    if outstanding {
        ChildrenState::Outstanding
    } else {
        ChildrenState::AllCompleted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use JobEvent as Ev;
    use JobStatus as S;

    #[test]
    fn statuses_round_trip_through_text() {
        for status in S::ALL {
            assert_eq!(status.as_str().parse::<S>().unwrap(), status);
        }
        assert!("bogus".parse::<S>().is_err());
        for ty in [JobType::Plan, JobType::Execute, JobType::Render] {
            assert_eq!(ty.as_str().parse::<JobType>().unwrap(), ty);
        }
    }

    /// Every arrow of the seed 000 lifecycle diagram, plus the planner-side arrows.
    #[test]
    fn lifecycle_table() {
        let cases: &[(S, Ev, S)] = &[
            (S::Pending, Ev::Claimed, S::Processing),
            (S::Pending, Ev::AwaitPrerequisite, S::WaitingForPrerequisite),
            (S::Pending, Ev::ChildrenSpawned, S::WaitingForChildren),
            (
                S::WaitingForPrerequisite,
                Ev::PrerequisiteCompleted,
                S::Pending,
            ),
            (S::WaitingForPrerequisite, Ev::PrerequisiteFailed, S::Failed),
            (
                S::WaitingForChildren,
                Ev::ChildrenCompleted,
                S::PendingNextStep,
            ),
            (S::WaitingForChildren, Ev::ChildFailed, S::Failed),
            (S::PendingNextStep, Ev::Claimed, S::Processing),
            (S::PendingContinuation, Ev::Claimed, S::Processing),
            (S::Processing, Ev::Succeeded, S::Completed),
            (S::Processing, Ev::Failed { retryable: false }, S::Failed),
            (S::Processing, Ev::Failed { retryable: true }, S::Retrying),
            (S::Processing, Ev::LeaseExpired, S::Retrying),
            (S::Retrying, Ev::Claimed, S::Processing),
            (
                S::Retrying,
                Ev::RetryDue {
                    attempts_used: 3,
                    max_attempts: 3,
                },
                S::RetryLoopFailed,
            ),
            (
                S::Retrying,
                Ev::RetryDue {
                    attempts_used: 1,
                    max_attempts: 3,
                },
                S::Retrying,
            ),
            (S::Processing, Ev::ChildrenSpawned, S::WaitingForChildren),
            (
                S::PendingNextStep,
                Ev::ChildrenSpawned,
                S::WaitingForChildren,
            ),
            (S::PendingNextStep, Ev::Succeeded, S::Completed),
        ];
        for (from, event, to) in cases {
            let got = transition(*from, *event).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got.to, *to, "{from} on {event:?}");
        }
    }

    #[test]
    fn terminal_states_accept_nothing() {
        let events = [
            Ev::Claimed,
            Ev::Succeeded,
            Ev::Failed { retryable: true },
            Ev::LeaseExpired,
            Ev::ChildrenCompleted,
            Ev::ChildFailed,
            Ev::PrerequisiteCompleted,
        ];
        for status in [S::Completed, S::Failed, S::RetryLoopFailed] {
            for event in events {
                assert!(
                    transition(status, event).is_err(),
                    "{status} accepted {event:?}"
                );
            }
        }
    }

    #[test]
    fn duplicate_outcomes_are_rejected_not_reapplied() {
        // A second Succeeded for a job already completed must not fire effects twice.
        let first = transition(S::Processing, Ev::Succeeded).unwrap();
        assert!(first.effects.contains(&JobEffect::CheckParent));
        assert!(transition(first.to, Ev::Succeeded).is_err());
    }

    #[test]
    fn terminal_transitions_check_parent_dependents_and_stage() {
        for (from, event) in [
            (S::Processing, Ev::Succeeded),
            (S::Processing, Ev::Failed { retryable: false }),
            (S::WaitingForChildren, Ev::ChildFailed),
            (
                S::Retrying,
                Ev::RetryDue {
                    attempts_used: 5,
                    max_attempts: 5,
                },
            ),
        ] {
            let t = transition(from, event).unwrap();
            assert!(t.to.is_terminal());
            assert_eq!(t.effects, terminal_effects());
        }
    }

    /// A retried stage: the job that ran out of attempts starts over and is
    /// dispatched; its parent, failed by it, waits for its children again and
    /// goes on when the retried child completes, as if nothing had failed.
    #[test]
    fn a_manual_retry_starts_the_failed_job_over_and_reopens_its_parent() {
        use JobEffect as E;
        let retried = transition(S::RetryLoopFailed, Ev::ManualRetry).unwrap();
        assert_eq!(
            (retried.to, retried.effects),
            (S::Pending, vec![E::Dispatch])
        );
        let claimed = transition(S::Pending, Ev::Claimed).unwrap();
        let done = transition(claimed.to, Ev::Succeeded).unwrap();
        assert_eq!(done.to, S::Completed);
        assert!(done.effects.contains(&E::CheckParent));

        let reopened = transition(S::Failed, Ev::ChildRetried).unwrap();
        assert_eq!(
            (reopened.to, reopened.effects),
            (S::WaitingForChildren, vec![])
        );
        let woken = transition(reopened.to, Ev::ChildrenCompleted).unwrap();
        assert_eq!(woken.to, S::PendingNextStep);

        let waiting = transition(S::Failed, Ev::PrerequisiteRetried).unwrap();
        assert_eq!(
            (waiting.to, waiting.effects),
            (S::WaitingForPrerequisite, vec![])
        );
        assert_eq!(
            transition(waiting.to, Ev::PrerequisiteCompleted)
                .unwrap()
                .to,
            S::Pending
        );
    }

    /// Only failures are retried: a completed (or superseded, or live) job
    /// never runs again, and a job still running is never reopened.
    #[test]
    fn nothing_but_a_failure_takes_a_retry() {
        for from in S::ALL.into_iter().filter(|s| !s.is_failure()) {
            for event in [Ev::ManualRetry, Ev::ChildRetried, Ev::PrerequisiteRetried] {
                assert!(transition(from, event).is_err(), "{from} on {event:?}");
            }
        }
        // A job that ran out of attempts was never waiting for anything.
        assert!(transition(S::RetryLoopFailed, Ev::ChildRetried).is_err());
        assert!(transition(S::RetryLoopFailed, Ev::PrerequisiteRetried).is_err());
    }

    /// What a retry does to each job of its stage, by status and the code its
    /// failure recorded.
    #[test]
    fn retry_event_table() {
        let cases: &[(S, Option<&str>, Option<Ev>)] = &[
            (
                S::RetryLoopFailed,
                Some("malformed_json"),
                Some(Ev::ManualRetry),
            ),
            (S::RetryLoopFailed, None, Some(Ev::ManualRetry)),
            // A retry loop that ended on a child's code is still the job's own failure.
            (
                S::RetryLoopFailed,
                Some(CHILD_FAILED),
                Some(Ev::ManualRetry),
            ),
            (S::Failed, Some("context_window"), Some(Ev::ManualRetry)),
            (S::Failed, None, Some(Ev::ManualRetry)),
            (S::Failed, Some(CHILD_FAILED), Some(Ev::ChildRetried)),
            (
                S::Failed,
                Some(PREREQUISITE_FAILED),
                Some(Ev::PrerequisiteRetried),
            ),
            (S::Completed, Some(CHILD_FAILED), None),
            (S::Completed, None, None),
            (S::Superseded, None, None),
            (S::Processing, Some("malformed_json"), None),
            (S::Retrying, Some("model_transient"), None),
            (S::WaitingForChildren, Some(CHILD_FAILED), None),
        ];
        for (status, code, want) in cases {
            assert_eq!(retry_event(*status, *code), *want, "{status} {code:?}");
            if let Some(event) = want {
                assert!(
                    transition(*status, *event).is_ok(),
                    "{status} takes {event:?}"
                );
            }
        }
    }

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(retry_backoff_ms(1, 100, 10_000), 100);
        assert_eq!(retry_backoff_ms(2, 100, 10_000), 200);
        assert_eq!(retry_backoff_ms(4, 100, 10_000), 800);
        assert_eq!(retry_backoff_ms(40, 100, 10_000), 10_000);
    }

    /// Every event variant the planner can raise, with retry budgets on both
    /// sides of the limit.
    fn all_events() -> Vec<Ev> {
        let mut events = vec![
            Ev::Claimed,
            Ev::AwaitPrerequisite,
            Ev::PrerequisiteCompleted,
            Ev::PrerequisiteFailed,
            Ev::ChildrenSpawned,
            Ev::ChildrenCompleted,
            Ev::ChildFailed,
            Ev::Succeeded,
            Ev::Failed { retryable: true },
            Ev::Failed { retryable: false },
            Ev::LeaseExpired,
            Ev::InsufficientBalance,
            Ev::Resumed,
            Ev::Superseded,
            Ev::ManualRetry,
            Ev::ChildRetried,
            Ev::PrerequisiteRetried,
        ];
        for (attempts_used, max_attempts) in [(0, 0), (0, 3), (1, 3), (2, 3), (3, 3), (7, 3)] {
            events.push(Ev::RetryDue {
                attempts_used,
                max_attempts,
            });
        }
        events
    }

    /// The expected lifecycle, written out independently of `transition`:
    /// None means the pair must be rejected.
    fn expected(from: S, event: Ev) -> Option<(S, Vec<JobEffect>)> {
        use JobEffect as E;
        match event {
            Ev::Claimed => matches!(
                from,
                S::Pending | S::PendingContinuation | S::Retrying | S::PendingNextStep
            )
            .then(|| (S::Processing, vec![])),
            Ev::AwaitPrerequisite => {
                (from == S::Pending).then(|| (S::WaitingForPrerequisite, vec![]))
            }
            Ev::PrerequisiteCompleted => {
                (from == S::WaitingForPrerequisite).then(|| (S::Pending, vec![E::Dispatch]))
            }
            Ev::PrerequisiteFailed => {
                (from == S::WaitingForPrerequisite).then(|| (S::Failed, terminal_effects()))
            }
            Ev::ChildrenSpawned => matches!(from, S::Pending | S::Processing | S::PendingNextStep)
                .then(|| (S::WaitingForChildren, vec![])),
            Ev::ChildrenCompleted => (from == S::WaitingForChildren)
                .then(|| (S::PendingNextStep, vec![E::PlanNextSteps])),
            Ev::ChildFailed => {
                (from == S::WaitingForChildren).then(|| (S::Failed, terminal_effects()))
            }
            Ev::Succeeded => matches!(from, S::Processing | S::PendingNextStep)
                .then(|| (S::Completed, terminal_effects())),
            Ev::Failed { retryable: true } => {
                (from == S::Processing).then(|| (S::Retrying, vec![E::ScheduleRetry]))
            }
            Ev::Failed { retryable: false } => matches!(from, S::Processing | S::PendingNextStep)
                .then(|| (S::Failed, terminal_effects())),
            Ev::LeaseExpired => {
                (from == S::Processing).then(|| (S::Retrying, vec![E::ScheduleRetry]))
            }
            Ev::InsufficientBalance => (from == S::Processing).then(|| (S::PausedNsf, vec![])),
            Ev::Resumed => (from == S::PausedNsf).then(|| (S::Pending, vec![E::Dispatch])),
            Ev::Superseded => (!matches!(from, S::Superseded | S::Failed | S::RetryLoopFailed))
                .then(|| (S::Superseded, vec![])),
            Ev::ManualRetry => matches!(from, S::Failed | S::RetryLoopFailed)
                .then(|| (S::Pending, vec![E::Dispatch])),
            Ev::ChildRetried => (from == S::Failed).then(|| (S::WaitingForChildren, vec![])),
            Ev::PrerequisiteRetried => {
                (from == S::Failed).then(|| (S::WaitingForPrerequisite, vec![]))
            }
            Ev::RetryDue {
                attempts_used,
                max_attempts,
            } => (from == S::Retrying).then(|| {
                if attempts_used >= max_attempts {
                    (S::RetryLoopFailed, terminal_effects())
                } else {
                    (S::Retrying, vec![E::Dispatch])
                }
            }),
        }
    }

    /// The whole table JobStatus::ALL × events: every valid pair lands where
    /// the lifecycle says with exactly its effects, every other pair is an
    /// `InvalidTransition` naming the pair.
    #[test]
    fn transition_table_over_every_status_and_event() {
        let mut valid = 0;
        for from in S::ALL {
            for event in all_events() {
                match (expected(from, event), transition(from, event)) {
                    (Some((to, effects)), Ok(got)) => {
                        valid += 1;
                        assert_eq!(got.to, to, "{from} on {event:?}");
                        assert_eq!(got.effects, effects, "effects of {from} on {event:?}");
                    }
                    (None, Err(e)) => {
                        assert_eq!(e, InvalidTransition { from, event });
                        assert!(e.to_string().contains(from.as_str()), "{e}");
                    }
                    (Some(_), Err(e)) => panic!("{from} on {event:?} rejected: {e}"),
                    (None, Ok(t)) => panic!("{from} on {event:?} accepted, went to {}", t.to),
                }
            }
        }
        // 4 claims + 1 + 1 + 1 + 3 spawns + 1 + 1 + 2 successes + 1 + 2 + 1 + 6 retry-dues
        // + pausing on an unaffordable call and resuming + superseding from the
        // nine statuses that are neither failed nor superseded already + a
        // manual retry of either failure and the two reopenings of `failed`.
        assert_eq!(valid, 39);
    }

    /// Terminal states must be absorbing: no event of the table leaves them,
    /// except that a completed job's document may be regenerated (superseded)
    /// and a failed job may be retried by the user (or reopened for one).
    #[test]
    fn terminal_states_reject_every_event() {
        for from in S::ALL.into_iter().filter(|s| s.is_terminal()) {
            for event in all_events() {
                let retry = matches!(
                    event,
                    Ev::ManualRetry | Ev::ChildRetried | Ev::PrerequisiteRetried
                );
                let allowed = (from == S::Completed && event == Ev::Superseded)
                    || (from.is_failure() && retry && transition(from, event).is_ok());
                assert_eq!(
                    transition(from, event).is_ok(),
                    allowed,
                    "{from} on {event:?}"
                );
            }
        }
    }

    /// Nothing leaves `superseded`: a late outcome, a lease expiry, a retry, a
    /// credit or a second regeneration all find it final.
    #[test]
    fn superseded_is_final_and_reached_from_any_live_or_completed_status() {
        for event in all_events() {
            assert!(
                transition(S::Superseded, event).is_err(),
                "superseded on {event:?}"
            );
        }
        for from in S::ALL {
            let got = transition(from, Ev::Superseded);
            if matches!(from, S::Superseded | S::Failed | S::RetryLoopFailed) {
                assert!(got.is_err(), "{from}");
            } else {
                let t = got.unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(t.to, S::Superseded);
                assert!(t.effects.is_empty(), "{from}: {:?}", t.effects);
            }
        }
        assert!(S::Superseded.is_terminal() && !S::Superseded.is_failure());
        assert!(!S::claimable().contains(&S::Superseded));
        let stored: Vec<&str> = S::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(stored, S::TERMINAL);
    }

    /// Only the statuses a worker may claim are claimable; a waiting parent or
    /// a finished job never is.
    #[test]
    fn claimable_statuses_all_accept_a_claim() {
        for status in S::claimable() {
            assert_eq!(transition(*status, Ev::Claimed).unwrap().to, S::Processing);
        }
        for status in [
            S::Processing,
            S::WaitingForChildren,
            S::WaitingForPrerequisite,
            S::Completed,
        ] {
            assert!(!S::claimable().contains(&status), "{status}");
        }
    }

    #[test]
    fn terminal_and_failure_predicates() {
        for status in S::ALL {
            let terminal = matches!(
                status,
                S::Completed | S::Failed | S::RetryLoopFailed | S::Superseded
            );
            assert_eq!(status.is_terminal(), terminal, "{status}");
            assert_eq!(
                status.is_failure(),
                matches!(status, S::Failed | S::RetryLoopFailed),
                "{status}"
            );
        }
    }

    #[test]
    fn backoff_table() {
        let cases: &[(u32, u64, u64, u64)] = &[
            // (attempts_used, base, cap, expected)
            (0, 100, 10_000, 100),
            (1, 100, 10_000, 100),
            (3, 100, 10_000, 400),
            (7, 100, 10_000, 6_400),
            (8, 100, 10_000, 10_000),
            (2, 100, 150, 150),
            (1, 500, 100, 100),
            (5, 0, 10_000, 0),
            // The exponent stops growing at 2^16.
            (17, 1, u64::MAX, 1 << 16),
            (u32::MAX, 1, u64::MAX, 1 << 16),
            // Overflow saturates instead of wrapping, then the cap applies.
            (17, u64::MAX / 2, 60_000, 60_000),
            (17, u64::MAX / 2, u64::MAX, u64::MAX),
        ];
        for (attempts, base, cap, want) in cases {
            assert_eq!(
                retry_backoff_ms(*attempts, *base, *cap),
                *want,
                "attempt {attempts}, base {base}, cap {cap}"
            );
        }
        let mut previous = 0;
        for attempt in 1..30 {
            let delay = retry_backoff_ms(attempt, 100, 30_000);
            assert!(delay >= previous, "back-off never shrinks");
            previous = delay;
        }
    }

    /// One non-RENDER child in each status, alone and next to RENDER children
    /// in every status: RENDER never changes the answer.
    #[test]
    fn children_state_table_ignores_render_in_every_status() {
        use JobType::*;
        for status in S::ALL {
            let want = if matches!(status, S::Completed | S::Superseded) {
                ChildrenState::AllCompleted
            } else if status.is_failure() {
                ChildrenState::AnyFailed
            } else {
                ChildrenState::Outstanding
            };
            for ty in [Plan, Execute] {
                assert_eq!(children_state(&[(ty, status)]), want, "{ty} {status}");
                for render in S::ALL {
                    assert_eq!(
                        children_state(&[(Render, render), (ty, status), (Render, render)]),
                        want,
                        "{ty} {status} with a {render} render"
                    );
                }
            }
        }
    }

    #[test]
    fn children_state_edge_cases() {
        use JobType::*;
        // Nothing (or only side effects) to wait for.
        assert_eq!(children_state(&[]), ChildrenState::AllCompleted);
        assert_eq!(
            children_state(&[(Render, S::Pending), (Render, S::RetryLoopFailed)]),
            ChildrenState::AllCompleted
        );
        // A failure wins over outstanding siblings, whatever the order.
        assert_eq!(
            children_state(&[(Execute, S::Processing), (Execute, S::Failed)]),
            ChildrenState::AnyFailed
        );
        assert_eq!(
            children_state(&[
                (Execute, S::Completed),
                (Plan, S::WaitingForChildren),
                (Execute, S::RetryLoopFailed)
            ]),
            ChildrenState::AnyFailed
        );
        // A retrying child is still outstanding, not failed.
        assert_eq!(
            children_state(&[(Execute, S::Completed), (Execute, S::Retrying)]),
            ChildrenState::Outstanding
        );
        // A superseded child is replaced by a sibling: it neither waits nor fails.
        assert_eq!(
            children_state(&[(Execute, S::Superseded), (Execute, S::Completed)]),
            ChildrenState::AllCompleted
        );
        assert_eq!(
            children_state(&[(Execute, S::Superseded), (Execute, S::Processing)]),
            ChildrenState::Outstanding
        );
        let many: Vec<(JobType, S)> = (0..16).map(|_| (Execute, S::Completed)).collect();
        assert_eq!(children_state(&many), ChildrenState::AllCompleted);
    }

    #[test]
    fn children_state_ignores_render_jobs() {
        use JobType::*;
        assert_eq!(
            children_state(&[(Execute, S::Completed), (Render, S::Pending)]),
            ChildrenState::AllCompleted
        );
        assert_eq!(
            children_state(&[(Execute, S::Completed), (Render, S::Failed)]),
            ChildrenState::AllCompleted
        );
        assert_eq!(
            children_state(&[(Execute, S::Completed), (Execute, S::Processing)]),
            ChildrenState::Outstanding
        );
        assert_eq!(
            children_state(&[(Execute, S::RetryLoopFailed), (Execute, S::Processing)]),
            ChildrenState::AnyFailed
        );
    }
}
