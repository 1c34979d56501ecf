//! RenderEdit (queue command): a user's edit of a document was stored; the
//! document is rendered again from it. The gateway stores the edit and sends
//! this in the same transaction, so an edit is never left unrendered.

use crate::engine::{Engine, PlannerError, parse_id};
use dialectic_core::ids::{ContributionId, JobId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::payload::{JobPayload, RenderPayload};
use dialectic_proto::v1::queue::RenderEdit;
use dialectic_store::jobs::{self, NewJob};
use dialectic_store::{StoreError, contributions, sessions};

pub(crate) async fn render_edit(
    engine: &Engine,
    command: &RenderEdit,
    traceparent: Option<&str>,
) -> Result<(), PlannerError> {
    let edit_id = parse_id::<ContributionId>(&command.edit_contribution_id)?;
    let mut unit = engine.begin(traceparent).await?;
    let edit = match contributions::contribution(&mut *unit.tx, edit_id).await {
        Ok(edit) => edit,
        Err(missing @ StoreError::NotFound { .. }) => {
            tracing::warn!(%missing, "render of an unknown edit; ignoring");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let identity = edit.target_contribution_id.ok_or_else(|| {
        PlannerError::BadMessage(format!(
            "contribution {edit_id} is not an edit of a document"
        ))
    })?;
    let session = sessions::lock_session(&mut unit.tx, edit.session_id).await?;
    let payload = JobPayload {
        render: Some(RenderPayload {
            document_identity: identity.to_string(),
            source_contribution_id: edit_id.to_string(),
            document_key: edit.document_key.clone(),
        }),
        ..Default::default()
    };
    let inserted = jobs::insert(
        &mut unit.tx,
        &NewJob {
            id: JobId::new(),
            job_key: format!("{edit_id}:render"),
            session_id: edit.session_id,
            user_id: session.user_id,
            stage_slug: &edit.stage_slug,
            iteration: edit.iteration_number,
            job_type: JobType::Render,
            status: JobStatus::Pending,
            step_id: None,
            step_key: None,
            model_id: edit.model_id,
            document_key: Some(&edit.document_key),
            payload: &payload,
            parent_job_id: None,
            prerequisite_job_id: None,
            target_contribution_id: Some(edit_id),
            max_attempts: engine.config.max_attempts as i32,
        },
    )
    .await?;
    if let Some(id) = inserted {
        engine.dispatch(&mut unit, id, JobType::Render).await?;
    }
    engine.finish(unit).await
}
