//! PauseSession, ResumeSession and CancelSession: one session event each.

use super::lock_session;
use crate::engine::{Engine, PlannerError, session_event};
use dialectic_core::session::SessionEvent;
use dialectic_store::records::SessionRow;
use uuid::Uuid;

/// Running jobs finish their attempt; nothing new is claimed until a resume.
pub(crate) async fn pause(engine: &Engine, id: Uuid) -> Result<SessionRow, PlannerError> {
    apply(
        engine,
        id,
        SessionEvent::Pause,
        "session_paused",
        "paused by the user",
    )
    .await
}

/// Back where it was paused; the jobs that waited are dispatched again.
pub(crate) async fn resume(engine: &Engine, id: Uuid) -> Result<SessionRow, PlannerError> {
    apply(
        engine,
        id,
        SessionEvent::Resume,
        "session_resumed",
        "resumed",
    )
    .await
}

/// For good: claims refuse an abandoned session's jobs, so nothing new starts.
pub(crate) async fn cancel(engine: &Engine, id: Uuid) -> Result<SessionRow, PlannerError> {
    apply(
        engine,
        id,
        SessionEvent::Cancel,
        "session_cancelled",
        "cancelled by the user; running jobs finish, nothing new starts",
    )
    .await
}

async fn apply(
    engine: &Engine,
    id: Uuid,
    event: SessionEvent,
    kind: &str,
    message: &str,
) -> Result<SessionRow, PlannerError> {
    let mut unit = engine
        .begin(dialectic_telemetry::current_traceparent().as_deref())
        .await?;
    let session = lock_session(&mut unit, id).await?;
    let applied = engine
        .apply_session_event(&mut unit, &session, &event)
        .await??;
    let mut progress = session_event(&applied, kind);
    progress.message = message.to_string();
    unit.events.push(progress);
    engine.finish(unit).await?;
    tracing::info!(status = %applied.status, "{kind}");
    Ok(applied)
}
