//! Pause, Resume, Cancel and Complete: one session event each. A pause lets
//! running jobs finish their attempt and claims nothing new until a resume; a
//! resume returns where the session was (also from an idle abandonment) and
//! dispatches what waited; a cancel is for good (claims refuse an abandoned
//! session's jobs); a completion ends finished work, read-only.

use super::lock_session;
use crate::engine::{Engine, PlannerError, session_event};
use dialectic_core::ids::SessionId;
use dialectic_core::progress::EventKind;
use dialectic_core::session::SessionEvent;
use dialectic_store::sessions::SessionRow;

/// The command's name in spans and logs.
pub(crate) fn name(event: &SessionEvent) -> &'static str {
    match event {
        SessionEvent::Pause => "pause",
        SessionEvent::Resume => "resume",
        SessionEvent::Cancel => "cancel",
        SessionEvent::Complete => "complete",
        _ => "session_event",
    }
}

/// What watchers are told.
fn progress(event: &SessionEvent) -> (EventKind, &'static str) {
    match event {
        SessionEvent::Pause => (EventKind::SessionPaused, "paused by the user"),
        SessionEvent::Resume => (EventKind::SessionResumed, "resumed"),
        SessionEvent::Cancel => (
            EventKind::SessionCancelled,
            "cancelled by the user; running jobs finish, nothing new starts",
        ),
        SessionEvent::Complete => (
            EventKind::SessionCompleted,
            "completed by the user; read-only from now on, still listed, exported and queried",
        ),
        _ => (EventKind::SessionStatus, ""),
    }
}

pub(crate) async fn apply(
    engine: &Engine,
    id: SessionId,
    event: SessionEvent,
) -> Result<SessionRow, PlannerError> {
    let mut unit = engine
        .begin(dialectic_telemetry::current_traceparent().as_deref())
        .await?;
    let session = lock_session(&mut unit, id).await?;
    let applied = engine
        .apply_session_event(&mut unit, &session, &event)
        .await?;
    let (kind, message) = progress(&event);
    let mut update = session_event(&applied, kind);
    update.message = message.to_string();
    unit.events.push(update);
    engine.finish(unit).await?;
    tracing::info!(status = %applied.status, "{kind}");
    Ok(applied)
}
