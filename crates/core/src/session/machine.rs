//! The session lifecycle as one pure function: `transition(state, event)`
//! gives the next state and what the planner must do about it. The planner is
//! the only caller that writes the result; every command and job outcome that
//! moves a session goes through here.

use super::SessionStatus;

/// What is stored for a session: its status and, while paused, the status a
/// resume returns to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionState {
    pub status: SessionStatus,
    pub paused_from: Option<SessionStatus>,
}

impl SessionState {
    pub fn new(status: SessionStatus) -> Self {
        Self {
            status,
            paused_from: None,
        }
    }

    /// The status that decides what the session does next: the stored one, or
    /// while paused, the one a resume returns to.
    pub fn effective(&self) -> &SessionStatus {
        match (&self.status, &self.paused_from) {
            (SessionStatus::Paused, Some(from)) => from,
            (status, _) => status,
        }
    }
}

/// Something that happened to a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// A StartStage command for `stage` arrived.
    StartStage {
        stage: String,
    },
    /// A root PLAN job of `stage` began processing.
    RootPlanStarted {
        stage: String,
    },
    /// Every root job of `stage` is over and one of them failed: the stage
    /// cannot complete until its failed jobs run again.
    StageFailed {
        stage: String,
    },
    /// Every root job of `stage` is done; `next` is the stage after it (None:
    /// the last). With `auto_advance` the next stage starts without the user.
    StageCompleted {
        stage: String,
        next: Option<String>,
        auto_advance: bool,
    },
    /// The user reviewed `stage`; `next` is the stage after it and `first` the
    /// process's first stage (a new iteration starts there after the last).
    ResponsesSubmitted {
        stage: String,
        next: Option<String>,
        first: String,
    },
    /// The user paused the session.
    Pause,
    /// Nothing happened in the session for the configured idle time.
    IdlePause,
    /// Idle past its warning: an unfinished session is abandoned, keeping
    /// where it was so that a resume can bring it back.
    IdleAbandon,
    Resume,
    Cancel,
    /// The user ends a session that finished its iteration (CompleteSession).
    Complete,
    /// A revisit of an earlier stage sends the session back to `to_stage`
    /// (moderate and major impact); `start_now` starts it without the user.
    Rewind {
        to_stage: String,
        start_now: bool,
    },
    /// A minor revisit: later stages are flagged for review, nothing moves.
    FlagForReview,
    /// A document of `stage` is written again; `next` is the stage after it.
    RegenerateDocument {
        stage: String,
        next: Option<String>,
    },
    /// The user runs the failed jobs of `stage` again (RetryStage). Only the
    /// stage the session is at takes one; a failed stage runs again.
    RetryStage {
        stage: String,
    },
}

/// What the planner does after a transition, in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEffect {
    /// Insert `stage`'s root jobs (idempotent by job key).
    PlanRootJobs { stage: String },
    /// Send a StartStage command for `stage` in the (new) current iteration.
    StartStage { stage: String },
    /// The iteration counter moves on by one.
    BeginIteration,
    /// The revision counter moves on by one (a stage re-run gets new root jobs).
    BeginRevision,
    /// Dispatch the jobs that waited while the session was paused.
    DispatchWaiting,
    /// Supersede the document's jobs and dispatch the job that writes it again.
    RegenerateDocument,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub to: SessionState,
    pub effects: Vec<SessionEffect>,
}

impl Transition {
    /// True when the stored state changes (a write is needed).
    pub fn changes(&self, from: &SessionState) -> bool {
        self.to != *from
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a session that is {from} cannot take {event}")]
pub struct InvalidTransition {
    pub from: String,
    pub event: String,
}

impl SessionEvent {
    fn describe(&self) -> String {
        match self {
            SessionEvent::StartStage { stage } => format!("a start of stage {stage}"),
            SessionEvent::RootPlanStarted { stage } => format!("a root job of {stage} starting"),
            SessionEvent::StageFailed { stage } => format!("the failure of {stage}"),
            SessionEvent::StageCompleted { stage, .. } => format!("the completion of {stage}"),
            SessionEvent::ResponsesSubmitted { stage, .. } => format!("responses for {stage}"),
            SessionEvent::Pause => "a pause".into(),
            SessionEvent::IdlePause => "an idle pause".into(),
            SessionEvent::IdleAbandon => "an idle abandonment".into(),
            SessionEvent::Resume => "a resume".into(),
            SessionEvent::Cancel => "a cancel".into(),
            SessionEvent::Complete => "a completion".into(),
            SessionEvent::Rewind { to_stage, .. } => format!("a rewind to {to_stage}"),
            SessionEvent::FlagForReview => "a revisit".into(),
            SessionEvent::RegenerateDocument { stage, .. } => {
                format!("a regeneration of a {stage} document")
            }
            SessionEvent::RetryStage { stage } => format!("a retry of stage {stage}"),
        }
    }
}

/// The session lifecycle (seed 000 §§3–4, seed 003's pause and abandon):
///
/// - `pending_<s>` → `running_<s>` when a root PLAN job of `s` starts;
/// - `pending_<s>`/`running_<s>` → `pending_<next>` or review when `s` completes;
/// - `pending_<s>`/`running_<s>` → `failed_<s>` when a job of `s` failed for
///   good and nothing else of it runs; a retry of `s` → `running_<s>`;
/// - review → `pending_<first>` of a new iteration when the user submits
///   responses, or → `completed` (read-only, final) when the user ends it;
/// - pending, running, failed → `paused` → back where it was; finished work
///   (review, completed) never pauses or is abandoned on a timer;
/// - an idle unfinished session → `abandoned` keeping where it was, and a
///   resume brings it back; anything but `completed` → `abandoned` for good
///   on a cancel.
///
/// A paused session still records what happens to it: a stage that completes
/// while paused moves `paused_from`, so a resume continues from there and a
/// pause never loses a completion (nor a completion a pause).
pub fn transition(
    from: &SessionState,
    event: &SessionEvent,
) -> Result<Transition, InvalidTransition> {
    let invalid = || InvalidTransition {
        from: from.status.to_string(),
        event: event.describe(),
    };
    match (&from.status, event) {
        (SessionStatus::Completed, _) => Err(invalid()),
        (SessionStatus::Abandoned, _) => abandoned(from, event).ok_or_else(invalid),
        (_, SessionEvent::Cancel) => Ok(to(SessionStatus::Abandoned, vec![])),
        (SessionStatus::Paused, _) => paused(from, event).ok_or_else(invalid),
        (status, event) => active(status, event).ok_or_else(invalid),
    }
}

/// Where an idle abandonment leaves an unfinished session: abandoned, with
/// the status a resume returns to. Finished work is never abandoned idle.
fn abandon_idle(status: &SessionStatus) -> Option<Transition> {
    use SessionStatus as S;
    match status {
        S::Pending(_) | S::Running(_) | S::Failed(_) => Some(Transition {
            to: SessionState {
                status: S::Abandoned,
                paused_from: Some(status.clone()),
            },
            effects: vec![],
        }),
        _ => None,
    }
}

/// An idle-abandoned session (it kept where it was) takes a resume, back
/// there, or a cancel, which ends it for good; a cancelled one takes nothing.
fn abandoned(from: &SessionState, event: &SessionEvent) -> Option<Transition> {
    let was = from.paused_from.as_ref()?;
    match event {
        SessionEvent::Resume => Some(Transition {
            to: SessionState::new(was.clone()),
            effects: vec![SessionEffect::DispatchWaiting],
        }),
        SessionEvent::Cancel => Some(to(SessionStatus::Abandoned, vec![])),
        _ => None,
    }
}

fn to(status: SessionStatus, effects: Vec<SessionEffect>) -> Transition {
    Transition {
        to: SessionState::new(status),
        effects,
    }
}

fn stay(from: &SessionState, effects: Vec<SessionEffect>) -> Transition {
    Transition {
        to: from.clone(),
        effects,
    }
}

/// Events on a session that is not paused (nor abandoned).
fn active(status: &SessionStatus, event: &SessionEvent) -> Option<Transition> {
    use SessionEffect as E;
    use SessionEvent as Ev;
    use SessionStatus as S;
    let here = SessionState::new(status.clone());
    match (status, event) {
        (S::Pending(s), Ev::StartStage { stage }) if s == stage => Some(stay(
            &here,
            vec![E::PlanRootJobs {
                stage: stage.clone(),
            }],
        )),
        (S::Pending(s), Ev::RootPlanStarted { stage }) if s == stage => {
            Some(to(S::Running(stage.clone()), vec![]))
        }
        (S::Running(s), Ev::RootPlanStarted { stage }) if s == stage => Some(stay(&here, vec![])),
        (S::Pending(s) | S::Running(s), Ev::StageFailed { stage }) if s == stage => {
            Some(to(S::Failed(stage.clone()), vec![]))
        }
        // A failed stage whose roots all completed after all goes on as any.
        (
            S::Pending(s) | S::Running(s) | S::Failed(s),
            Ev::StageCompleted {
                stage,
                next,
                auto_advance,
            },
        ) if s == stage => {
            let (status, effects) = completed(next, *auto_advance);
            Some(to(status, effects))
        }
        (_, Ev::ResponsesSubmitted { next, first, .. }) => submitted(status, next, first),
        (S::IterationCompletePendingReview, Ev::Complete) => Some(to(S::Completed, vec![])),
        (_, Ev::IdleAbandon) => abandon_idle(status),
        (S::Pending(_) | S::Running(_) | S::Failed(_), Ev::Pause | Ev::IdlePause) => {
            Some(Transition {
                to: SessionState {
                    status: S::Paused,
                    paused_from: Some(status.clone()),
                },
                effects: vec![],
            })
        }
        (
            S::Pending(_) | S::IterationCompletePendingReview,
            Ev::Rewind {
                to_stage,
                start_now,
            },
        ) => {
            let mut effects = vec![E::BeginRevision];
            if *start_now {
                effects.push(E::StartStage {
                    stage: to_stage.clone(),
                });
            }
            Some(to(S::Pending(to_stage.clone()), effects))
        }
        (S::Pending(_) | S::IterationCompletePendingReview, Ev::FlagForReview) => {
            Some(stay(&here, vec![]))
        }
        (_, Ev::RegenerateDocument { next, .. }) if waits_right_after(status, next) => {
            Some(stay(&here, vec![E::RegenerateDocument]))
        }
        (S::Pending(s) | S::Running(s), Ev::RetryStage { stage }) if s == stage => {
            Some(stay(&here, vec![]))
        }
        (S::Failed(s), Ev::RetryStage { stage }) if s == stage => {
            Some(to(S::Running(stage.clone()), vec![]))
        }
        _ => None,
    }
}

/// Events on a paused session: it keeps recording what its running jobs do,
/// in `paused_from`, and takes a resume or a new start of its stage.
fn paused(from: &SessionState, event: &SessionEvent) -> Option<Transition> {
    use SessionEvent as Ev;
    let was = from.paused_from.as_ref()?;
    match event {
        Ev::Resume => Some(Transition {
            to: SessionState::new(was.clone()),
            effects: vec![SessionEffect::DispatchWaiting],
        }),
        Ev::IdleAbandon => abandon_idle(was),
        // A session paused at review before review stopped pausing.
        Ev::Complete if *was == SessionStatus::IterationCompletePendingReview => {
            Some(to(SessionStatus::Completed, vec![]))
        }
        // The retried jobs are dispatched when the session resumes.
        Ev::RetryStage { .. }
        | Ev::StartStage { .. }
        | Ev::RootPlanStarted { .. }
        | Ev::StageFailed { .. }
        | Ev::StageCompleted { .. } => {
            let inner = active(was, event)?;
            Some(Transition {
                to: SessionState {
                    status: SessionStatus::Paused,
                    paused_from: Some(inner.to.status),
                },
                effects: inner.effects,
            })
        }
        _ => None,
    }
}

fn completed(next: &Option<String>, auto_advance: bool) -> (SessionStatus, Vec<SessionEffect>) {
    match next {
        Some(next) => {
            let effects = if auto_advance {
                vec![SessionEffect::StartStage {
                    stage: next.clone(),
                }]
            } else {
                vec![]
            };
            (SessionStatus::Pending(next.clone()), effects)
        }
        None => (SessionStatus::IterationCompletePendingReview, vec![]),
    }
}

/// Responses for a stage are taken when it has completed and the next has
/// not started: at `pending_<next>`, or at review after the last stage.
fn submitted(status: &SessionStatus, next: &Option<String>, first: &str) -> Option<Transition> {
    match (status, next) {
        (SessionStatus::Pending(pending), Some(next)) if pending == next => Some(stay(
            &SessionState::new(status.clone()),
            vec![SessionEffect::StartStage {
                stage: next.clone(),
            }],
        )),
        (SessionStatus::IterationCompletePendingReview, None) => Some(to(
            SessionStatus::Pending(first.to_string()),
            vec![
                SessionEffect::BeginIteration,
                SessionEffect::StartStage {
                    stage: first.to_string(),
                },
            ],
        )),
        _ => None,
    }
}

/// The session waits for the user right after the stage whose successor is `next`.
pub fn waits_right_after(status: &SessionStatus, next: &Option<String>) -> bool {
    match (status, next) {
        (SessionStatus::Pending(pending), Some(next)) => pending == next,
        (SessionStatus::IterationCompletePendingReview, None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SessionEffect as E;
    use SessionStatus as S;

    fn pending(s: &str) -> S {
        S::Pending(s.into())
    }
    fn running(s: &str) -> S {
        S::Running(s.into())
    }
    fn failed(s: &str) -> S {
        S::Failed(s.into())
    }
    fn state(status: S) -> SessionState {
        SessionState::new(status)
    }
    fn paused_from(status: S) -> SessionState {
        SessionState {
            status: S::Paused,
            paused_from: Some(status),
        }
    }
    fn abandoned_from(status: S) -> SessionState {
        SessionState {
            status: S::Abandoned,
            paused_from: Some(status),
        }
    }
    fn start(s: &str) -> E {
        E::StartStage { stage: s.into() }
    }

    /// Every state a session can be in, for a stage `b` between `a` and `c`.
    fn states() -> Vec<(&'static str, SessionState)> {
        vec![
            ("pending_b", state(pending("b"))),
            ("running_b", state(running("b"))),
            ("failed_b", state(failed("b"))),
            ("pending_c", state(pending("c"))),
            ("review", state(S::IterationCompletePendingReview)),
            ("paused from pending_b", paused_from(pending("b"))),
            ("paused from running_b", paused_from(running("b"))),
            ("paused from failed_b", paused_from(failed("b"))),
            (
                "paused from review",
                paused_from(S::IterationCompletePendingReview),
            ),
            ("abandoned", state(S::Abandoned)),
            (
                "abandoned idle from running_b",
                abandoned_from(running("b")),
            ),
            ("completed", state(S::Completed)),
        ]
    }

    /// Every event, named for the table.
    fn events() -> Vec<(&'static str, SessionEvent)> {
        use SessionEvent as Ev;
        vec![
            ("start b", Ev::StartStage { stage: "b".into() }),
            (
                "root of b started",
                Ev::RootPlanStarted { stage: "b".into() },
            ),
            ("b failed", Ev::StageFailed { stage: "b".into() }),
            (
                "b completed",
                Ev::StageCompleted {
                    stage: "b".into(),
                    next: Some("c".into()),
                    auto_advance: true,
                },
            ),
            (
                "responses for b",
                Ev::ResponsesSubmitted {
                    stage: "b".into(),
                    next: Some("c".into()),
                    first: "a".into(),
                },
            ),
            (
                "responses for last",
                Ev::ResponsesSubmitted {
                    stage: "c".into(),
                    next: None,
                    first: "a".into(),
                },
            ),
            ("pause", Ev::Pause),
            ("idle pause", Ev::IdlePause),
            ("idle abandon", Ev::IdleAbandon),
            ("resume", Ev::Resume),
            ("cancel", Ev::Cancel),
            ("complete", Ev::Complete),
            (
                "rewind to b",
                Ev::Rewind {
                    to_stage: "b".into(),
                    start_now: true,
                },
            ),
            ("flag for review", Ev::FlagForReview),
            (
                "regenerate a b document",
                Ev::RegenerateDocument {
                    stage: "b".into(),
                    next: Some("c".into()),
                },
            ),
            ("retry b", Ev::RetryStage { stage: "b".into() }),
        ]
    }

    type Expected = Option<(SessionState, Vec<SessionEffect>)>;

    /// The expected outcome of every (state, event) pair; None: refused.
    fn expected(state_name: &str, event_name: &str) -> Expected {
        let ok = |s: SessionState, e: Vec<SessionEffect>| Some((s, e));
        let plan_b = || E::PlanRootJobs { stage: "b".into() };
        match (state_name, event_name) {
            ("abandoned" | "completed", _) => None,
            ("abandoned idle from running_b", "resume") => {
                ok(state(running("b")), vec![E::DispatchWaiting])
            }
            ("abandoned idle from running_b", "cancel") => ok(state(S::Abandoned), vec![]),
            ("abandoned idle from running_b", _) => None,
            (_, "cancel") => ok(state(S::Abandoned), vec![]),
            ("review" | "paused from review", "complete") => ok(state(S::Completed), vec![]),
            ("pending_b" | "running_b" | "failed_b" | "pending_c", "idle abandon") => {
                let name_state = states().into_iter().find(|(n, _)| *n == state_name)?.1;
                ok(abandoned_from(name_state.status), vec![])
            }
            ("paused from pending_b", "idle abandon") => ok(abandoned_from(pending("b")), vec![]),
            ("paused from running_b", "idle abandon") => ok(abandoned_from(running("b")), vec![]),
            ("paused from failed_b", "idle abandon") => ok(abandoned_from(failed("b")), vec![]),
            ("pending_b", "start b") => ok(state(pending("b")), vec![plan_b()]),
            ("paused from pending_b", "start b") => ok(paused_from(pending("b")), vec![plan_b()]),
            ("pending_b", "root of b started") => ok(state(running("b")), vec![]),
            ("running_b", "root of b started") => ok(state(running("b")), vec![]),
            ("paused from pending_b" | "paused from running_b", "root of b started") => {
                ok(paused_from(running("b")), vec![])
            }
            ("pending_b" | "running_b" | "failed_b", "b completed") => {
                ok(state(pending("c")), vec![start("c")])
            }
            (
                "paused from pending_b" | "paused from running_b" | "paused from failed_b",
                "b completed",
            ) => ok(paused_from(pending("c")), vec![start("c")]),
            ("pending_b" | "running_b", "b failed") => ok(state(failed("b")), vec![]),
            ("paused from pending_b" | "paused from running_b", "b failed") => {
                ok(paused_from(failed("b")), vec![])
            }
            ("pending_c", "responses for b") => ok(state(pending("c")), vec![start("c")]),
            ("review", "responses for last") => {
                ok(state(pending("a")), vec![E::BeginIteration, start("a")])
            }
            ("pending_b" | "running_b" | "failed_b" | "pending_c", "pause") => {
                let name_state = states().into_iter().find(|(n, _)| *n == state_name)?.1;
                ok(paused_from(name_state.status), vec![])
            }
            ("pending_b" | "running_b" | "failed_b" | "pending_c", "idle pause") => {
                let name_state = states().into_iter().find(|(n, _)| *n == state_name)?.1;
                ok(paused_from(name_state.status), vec![])
            }
            ("paused from pending_b", "resume") => {
                ok(state(pending("b")), vec![E::DispatchWaiting])
            }
            ("paused from running_b", "resume") => {
                ok(state(running("b")), vec![E::DispatchWaiting])
            }
            ("paused from failed_b", "resume") => ok(state(failed("b")), vec![E::DispatchWaiting]),
            ("paused from review", "resume") => ok(
                state(S::IterationCompletePendingReview),
                vec![E::DispatchWaiting],
            ),
            ("pending_b" | "pending_c" | "review", "rewind to b") => {
                ok(state(pending("b")), vec![E::BeginRevision, start("b")])
            }
            ("pending_b", "flag for review") => ok(state(pending("b")), vec![]),
            ("pending_c", "flag for review") => ok(state(pending("c")), vec![]),
            ("review", "flag for review") => ok(state(S::IterationCompletePendingReview), vec![]),
            ("pending_c", "regenerate a b document") => {
                ok(state(pending("c")), vec![E::RegenerateDocument])
            }
            ("pending_b", "retry b") => ok(state(pending("b")), vec![]),
            ("running_b", "retry b") => ok(state(running("b")), vec![]),
            ("paused from pending_b", "retry b") => ok(paused_from(pending("b")), vec![]),
            ("paused from running_b", "retry b") => ok(paused_from(running("b")), vec![]),
            ("failed_b", "retry b") => ok(state(running("b")), vec![]),
            ("paused from failed_b", "retry b") => ok(paused_from(running("b")), vec![]),
            _ => None,
        }
    }

    #[test]
    fn every_status_and_event() {
        let mut checked = 0;
        for (state_name, from) in states() {
            for (event_name, event) in events() {
                let got = transition(&from, &event).ok().map(|t| (t.to, t.effects));
                assert_eq!(
                    got,
                    expected(state_name, event_name),
                    "{state_name} on {event_name}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, states().len() * events().len());
    }

    #[test]
    fn a_completion_without_auto_advance_waits_for_the_user() {
        let t = transition(
            &state(running("c")),
            &SessionEvent::StageCompleted {
                stage: "c".into(),
                next: None,
                auto_advance: true,
            },
        )
        .expect("completes");
        assert_eq!(t.to, state(S::IterationCompletePendingReview));
        assert!(t.effects.is_empty());
        let t = transition(
            &state(running("b")),
            &SessionEvent::StageCompleted {
                stage: "b".into(),
                next: Some("c".into()),
                auto_advance: false,
            },
        )
        .expect("completes");
        assert_eq!(t.to, state(pending("c")));
        assert!(t.effects.is_empty());
    }

    /// The race the planner must survive: a pause and a stage completion in
    /// either order end in the same place, and a resume continues from there.
    #[test]
    fn pause_and_completion_commute() {
        let completed = SessionEvent::StageCompleted {
            stage: "b".into(),
            next: Some("c".into()),
            auto_advance: false,
        };
        let run = |events: &[&SessionEvent]| {
            events.iter().fold(state(running("b")), |s, e| {
                transition(&s, e).expect("applies").to
            })
        };
        let pause_first = run(&[&SessionEvent::Pause, &completed]);
        let complete_first = run(&[&completed, &SessionEvent::Pause]);
        assert_eq!(pause_first, complete_first);
        assert_eq!(pause_first, paused_from(pending("c")));
        let resumed = transition(&pause_first, &SessionEvent::Resume).expect("resumes");
        assert_eq!(resumed.to, state(pending("c")));
    }

    /// A failed stage is a state of its own until the user retries it; the
    /// retry runs it again and its completion moves the session on.
    #[test]
    fn a_failed_stage_waits_for_a_retry_then_goes_on() {
        let failure = SessionEvent::StageFailed { stage: "b".into() };
        let retry = SessionEvent::RetryStage { stage: "b".into() };
        let completed = SessionEvent::StageCompleted {
            stage: "b".into(),
            next: Some("c".into()),
            auto_advance: false,
        };
        let stuck = transition(&state(running("b")), &failure).expect("fails");
        assert_eq!(stuck.to, state(failed("b")));
        assert!(
            transition(&stuck.to, &failure).is_err(),
            "a second failure report is a duplicate"
        );
        let retried = transition(&stuck.to, &retry).expect("retries");
        assert_eq!(retried.to, state(running("b")));
        let next = transition(&retried.to, &completed).expect("completes");
        assert_eq!(next.to, state(pending("c")));
        assert!(
            transition(&state(failed("a")), &retry).is_err(),
            "only the failed stage is retried"
        );
    }

    #[test]
    fn a_paused_state_without_its_origin_refuses_everything_but_cancel() {
        let broken = state(S::Paused);
        assert!(transition(&broken, &SessionEvent::Resume).is_err());
        assert!(transition(&broken, &SessionEvent::Cancel).is_ok());
    }

    #[test]
    fn refusals_name_the_state_and_the_event() {
        let e = transition(&state(S::Abandoned), &SessionEvent::Resume).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a session that is abandoned cannot take a resume"
        );
    }

    #[test]
    fn effective_status_looks_through_a_pause() {
        assert_eq!(paused_from(running("b")).effective(), &running("b"));
        assert_eq!(state(pending("b")).effective(), &pending("b"));
    }
}
