//! SubmitStageResponses: the user's review of a stage is stored and what
//! comes next starts: the next stage, or after the last a new iteration.

use super::lock_session;
use crate::engine::{Engine, PlannerError, parse_id};
use dialectic_core::ids::UserId;
use dialectic_core::ids::{FeedbackId, SessionId};
use dialectic_core::paths::{FileKind, PathContext};
use dialectic_core::session::SessionEvent;
use dialectic_proto::v1::planner::SubmitStageResponsesCommand;
use dialectic_store::inputs::{self, NewFeedback};
use dialectic_store::sessions::{self, SessionRow};
use dialectic_store::stages::{self, StageRow};
use dialectic_store::{resources, revisit};

pub(crate) async fn submit(
    engine: &Engine,
    command: SubmitStageResponsesCommand,
) -> Result<SessionRow, PlannerError> {
    let session_id = parse_id::<SessionId>(&command.session_id)?;
    let user_id = parse_id::<UserId>(&command.user_id)?;
    let mut unit = engine
        .begin(dialectic_telemetry::current_traceparent().as_deref())
        .await?;
    let session = lock_session(&mut unit, session_id).await?;
    let stage = stages::stage_in_process(&mut *unit.tx, session.id, &command.stage_slug).await?;
    let event = SessionEvent::ResponsesSubmitted {
        stage: stage.slug.clone(),
        next: stage.next_stage_slug.clone(),
        first: sessions::first_stage(&mut unit.tx, session.id).await?,
    };
    let applied = engine
        .apply_session_event(&mut unit, &session, &event)
        .await?;
    // The review covers the submitted stage and those before it: their
    // documents a minor revisit flagged are reviewed now.
    let after = revisit::stages_after(&mut unit.tx, session.id, &stage.slug).await?;
    resources::clear_review(
        &mut unit.tx,
        session.id,
        session.iteration_count.max(1),
        &after,
    )
    .await?;
    unit.stale_projects.push(session.project_id);
    if !command.feedback.trim().is_empty() {
        let feedback = Feedback {
            session: &session,
            user_id,
            stage: &stage,
            text: &command.feedback,
        };
        store_feedback(engine, &mut unit, &feedback).await?;
    }
    engine.finish(unit).await?;
    Ok(applied)
}

struct Feedback<'a> {
    session: &'a SessionRow,
    user_id: UserId,
    stage: &'a StageRow,
    text: &'a str,
}

/// Seed 001's `user_feedback_{stage}.md` for the reviewed iteration: the next
/// stage's prompts read it. The key is fixed per stage and iteration, so a
/// retry after a failed commit overwrites the object instead of orphaning one.
async fn store_feedback(
    engine: &Engine,
    unit: &mut crate::engine::Unit,
    feedback: &Feedback<'_>,
) -> Result<(), PlannerError> {
    let session = feedback.session;
    let key = PathContext {
        project_id: session.project_id,
        session_short: session.id.short(),
        iteration: session.iteration_count.max(1) as u32,
        stage_number: feedback.stage.stage_number.max(0) as u32,
        stage_slug: feedback.stage.slug.clone(),
        file: FileKind::UserFeedback,
    }
    .construct()
    .map_err(|e| PlannerError::BadMessage(format!("feedback storage key: {e}")))?;
    let body = format!(
        "# Feedback on {}\n\n{}",
        feedback.stage.display_name, feedback.text
    );
    let size = body.len() as i64;
    engine
        .blob
        .put(&key, body.into_bytes(), "text/markdown")
        .await?;
    let (dir, file_name) = key.rsplit_once('/').unwrap_or(("", key.as_str()));
    inputs::insert_feedback(
        &mut unit.tx,
        &NewFeedback {
            id: FeedbackId::new(),
            project_id: session.project_id,
            session_id: session.id,
            user_id: feedback.user_id,
            stage_slug: &feedback.stage.slug,
            iteration: session.iteration_count,
            document_key: None,
            source_resource_id: None,
            bucket: engine.blob.bucket(),
            storage_path: dir,
            file_name,
            size_bytes: size,
        },
    )
    .await?;
    Ok(())
}
