//! DeleteProject: the project is marked deleted and its sessions abandoned
//! (claims refuse an abandoned session's jobs, so nothing queued runs later).
//! The gateway removes the project's objects after this commits.

use crate::engine::{Engine, PlannerError, parse_id, session_event};
use dialectic_core::ids::{ProjectId, UserId};
use dialectic_core::progress::EventKind;
use dialectic_core::session::SessionEvent;
use dialectic_proto::v1::planner::{DeleteProjectCommand, DeleteProjectResult};
use dialectic_store::listing::{self, DeleteError};

pub(crate) async fn delete(
    engine: &Engine,
    command: DeleteProjectCommand,
) -> Result<DeleteProjectResult, PlannerError> {
    let project_id = parse_id::<ProjectId>(&command.project_id)?;
    let user_id = parse_id::<UserId>(&command.user_id)?;
    let mut unit = engine
        .begin(dialectic_telemetry::current_traceparent().as_deref())
        .await?;
    let sessions = listing::delete_project(&mut unit.tx, user_id, project_id)
        .await
        .map_err(|e| match e {
            DeleteError::Store(e) => PlannerError::Store(e),
            busy @ DeleteError::Busy(_) => PlannerError::Refused(busy.to_string()),
        })?;
    for session in &sessions {
        // An already abandoned session refuses the event and stays as it is.
        if let Some(applied) = engine
            .try_session_event(&mut unit, session, &SessionEvent::Cancel)
            .await?
        {
            unit.events
                .push(session_event(&applied, EventKind::SessionCancelled));
        }
    }
    unit.stale_projects.push(project_id);
    engine.finish(unit).await?;
    Ok(DeleteProjectResult {
        project_id: project_id.to_string(),
    })
}
