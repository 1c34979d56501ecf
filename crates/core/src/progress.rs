//! What a session's progress events report, named once: the planner, the
//! executor and the gateway build events from [`EventKind`] and the gateway
//! derives the API's `SessionEventKind` from it, so a misspelt kind is a
//! compile error instead of an event no client recognises.

use crate::job::UnknownValue;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The latest state, first to a watcher joining midway.
    Snapshot,
    SessionStatus,
    SessionPaused,
    SessionResumed,
    SessionCancelled,
    SessionAbandoned,
    /// The user ended a finished session (CompleteSession).
    SessionCompleted,
    IdleWarning,
    StageStarted,
    StageCompleted,
    StageFailed,
    /// A stage's root PLAN job was claimed; other jobs report through `JobStatus`.
    JobStarted,
    /// A job moved to a new status; the event's `job_status` says which.
    JobStatus,
    ContinuationQueued,
    RenderCompleted,
    ContextCompressed,
    WalletInsufficient,
    DocumentRegenerationStarted,
    StepSkipped,
    SkipIgnored,
    BlackboardEntry,
    ConfidenceRerun,
    LowConfidence,
    ClarificationRequested,
    ClarificationIgnored,
    /// A stage's failed jobs were put back (RetryStage).
    StageRetried,
    /// A watch stream was quiet for its heartbeat interval: the gateway
    /// sends it to that stream alone, and it is never published or kept.
    Heartbeat,
}

impl EventKind {
    pub const ALL: [EventKind; 27] = [
        EventKind::Snapshot,
        EventKind::SessionStatus,
        EventKind::SessionPaused,
        EventKind::SessionResumed,
        EventKind::SessionCancelled,
        EventKind::SessionAbandoned,
        EventKind::SessionCompleted,
        EventKind::IdleWarning,
        EventKind::StageStarted,
        EventKind::StageCompleted,
        EventKind::StageFailed,
        EventKind::JobStarted,
        EventKind::JobStatus,
        EventKind::ContinuationQueued,
        EventKind::RenderCompleted,
        EventKind::ContextCompressed,
        EventKind::WalletInsufficient,
        EventKind::DocumentRegenerationStarted,
        EventKind::StepSkipped,
        EventKind::SkipIgnored,
        EventKind::BlackboardEntry,
        EventKind::ConfidenceRerun,
        EventKind::LowConfidence,
        EventKind::ClarificationRequested,
        EventKind::ClarificationIgnored,
        EventKind::StageRetried,
        EventKind::Heartbeat,
    ];

    /// The name events carry (the API's deprecated `SessionEvent.kind`).
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::Snapshot => "snapshot",
            EventKind::SessionStatus => "session_status",
            EventKind::SessionPaused => "session_paused",
            EventKind::SessionResumed => "session_resumed",
            EventKind::SessionCancelled => "session_cancelled",
            EventKind::SessionAbandoned => "session_abandoned",
            EventKind::SessionCompleted => "session_completed",
            EventKind::IdleWarning => "idle_warning",
            EventKind::StageStarted => "stage_started",
            EventKind::StageCompleted => "stage_completed",
            EventKind::StageFailed => "stage_failed",
            EventKind::JobStarted => "job_started",
            EventKind::JobStatus => "job_status",
            EventKind::ContinuationQueued => "continuation_queued",
            EventKind::RenderCompleted => "render_completed",
            EventKind::ContextCompressed => "context_compressed",
            EventKind::WalletInsufficient => "wallet_insufficient",
            EventKind::DocumentRegenerationStarted => "document_regeneration_started",
            EventKind::StepSkipped => "step_skipped",
            EventKind::SkipIgnored => "skip_ignored",
            EventKind::BlackboardEntry => "blackboard_entry",
            EventKind::ConfidenceRerun => "confidence_rerun",
            EventKind::LowConfidence => "low_confidence",
            EventKind::ClarificationRequested => "clarification_requested",
            EventKind::ClarificationIgnored => "clarification_ignored",
            EventKind::StageRetried => "stage_retried",
            EventKind::Heartbeat => "heartbeat",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventKind {
    type Err = UnknownValue;
    fn from_str(value: &str) -> Result<Self, UnknownValue> {
        EventKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == value)
            .ok_or_else(|| UnknownValue::new("event kind", value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events travel as JSON through Redis: serde's name must be the one
    /// `as_str` gives, which the gateway types and clients read.
    #[test]
    fn serde_writes_the_names_as_str_gives() {
        for kind in EventKind::ALL {
            let json = serde_json::to_string(&kind).expect("a kind serializes");
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        assert!("something_new".parse::<EventKind>().is_err());
    }

    /// Parsing searches `ALL`: a variant missing from it is written to
    /// Redis and never read back, and a name two kinds shared reads back as
    /// the first. The match has no wildcard, so a new variant does not
    /// compile here until it is listed, and then must be in `ALL` too.
    #[test]
    fn every_kind_is_listed_once_and_parses_from_its_name() {
        let variants = |kind: EventKind| match kind {
            EventKind::Snapshot
            | EventKind::SessionStatus
            | EventKind::SessionPaused
            | EventKind::SessionResumed
            | EventKind::SessionCancelled
            | EventKind::SessionAbandoned
            | EventKind::SessionCompleted
            | EventKind::IdleWarning
            | EventKind::StageStarted
            | EventKind::StageCompleted
            | EventKind::StageFailed
            | EventKind::JobStarted
            | EventKind::JobStatus
            | EventKind::ContinuationQueued
            | EventKind::RenderCompleted
            | EventKind::ContextCompressed
            | EventKind::WalletInsufficient
            | EventKind::DocumentRegenerationStarted
            | EventKind::StepSkipped
            | EventKind::SkipIgnored
            | EventKind::BlackboardEntry
            | EventKind::ConfidenceRerun
            | EventKind::LowConfidence
            | EventKind::ClarificationRequested
            | EventKind::ClarificationIgnored
            | EventKind::StageRetried
            | EventKind::Heartbeat => 27,
        };
        assert_eq!(variants(EventKind::Snapshot), EventKind::ALL.len());
        let names: std::collections::HashSet<&str> =
            EventKind::ALL.iter().map(|kind| kind.as_str()).collect();
        assert_eq!(names.len(), EventKind::ALL.len(), "names are distinct");
        for kind in EventKind::ALL {
            let read: EventKind =
                serde_json::from_str(&format!("\"{kind}\"")).expect("serde reads the name back");
            assert_eq!(kind.as_str().parse::<EventKind>(), Ok(read));
        }
    }
}
