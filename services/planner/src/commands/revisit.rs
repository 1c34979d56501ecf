//! RevisitStage: seed 003's change impact applied to a session. Minor flags
//! the later stages' documents for review (until edited or submitted).
//! Moderate archives the later documents that depend on what changed, by
//! lineage (see `lineage.rs`), and keeps the rest for the re-run to adopt;
//! major archives every later document. Both send the session back to the
//! stage after the revised one (major also starts it at once).

use super::lineage;
use super::lock_session;
use crate::engine::{Engine, PlannerError, Unit, parse_id};
use dialectic_core::ids::{ResourceId, SessionId};
use dialectic_core::revisit::{Impact, archived_name};
use dialectic_core::session::{SessionEvent, SessionStatus};
use dialectic_proto::v1::planner::{RevisitStageCommand, RevisitStageResult};
use dialectic_store::resources::{self, ResourceRow};
use dialectic_store::revisit::{self, NewRevision};
use dialectic_store::sessions::SessionRow;
use dialectic_store::{blackboard, stages};

pub(crate) async fn revisit(
    engine: &Engine,
    command: RevisitStageCommand,
) -> Result<RevisitStageResult, PlannerError> {
    let session_id = parse_id::<SessionId>(&command.session_id)?;
    let impact =
        Impact::parse(&command.impact).map_err(|e| PlannerError::BadMessage(e.to_string()))?;
    let stage = command.stage_slug.trim();
    let mut unit = engine
        .begin(dialectic_telemetry::current_traceparent().as_deref())
        .await?;
    let session = lock_session(&mut unit, session_id).await?;
    let stage_row = stages::stage_in_process(&mut *unit.tx, session.id, stage).await?;
    let reached = reached_stages(&mut unit, &session, stage).await?;
    let unfinished = revisit::unfinished_jobs(&mut unit.tx, session.id).await?;
    if unfinished > 0 {
        return Err(PlannerError::Refused(format!(
            "{unfinished} job(s) of this session are not finished (e.g. still rendering); revisit once they are"
        )));
    }
    let revision = Revision {
        stage,
        impact,
        reason: Some(command.reason.trim()).filter(|r| !r.is_empty()),
        reached,
    };
    if !impact.rewinds() {
        return flag_for_review(engine, unit, &session, revision).await;
    }
    let next = stage_row.next_stage_slug.clone().ok_or_else(|| {
        PlannerError::Refused(format!(
            "{stage} is the last stage; nothing after it depends on it"
        ))
    })?;
    rewind(engine, unit, &session, revision, next).await
}

pub(super) struct Revision<'a> {
    pub(super) stage: &'a str,
    impact: Impact,
    reason: Option<&'a str>,
    /// The later stages this iteration has already run.
    pub(super) reached: Vec<String>,
}

/// The later stages this iteration has already run: up to where the session
/// waits now (all of them at review). Refused while the revised stage has
/// not completed.
async fn reached_stages(
    unit: &mut Unit,
    session: &SessionRow,
    stage: &str,
) -> Result<Vec<String>, PlannerError> {
    let after = revisit::stages_after(&mut unit.tx, session.id, stage).await?;
    match session.session_status()? {
        SessionStatus::Pending(next) if !after.contains(&next) => {
            Err(PlannerError::Refused(format!(
                "stage {stage} has not completed in this iteration yet (session is {})",
                session.status
            )))
        }
        SessionStatus::Pending(next) => Ok(after.into_iter().take_while(|s| *s != next).collect()),
        // Other states are refused by the session machine, with their reason.
        _ => Ok(after),
    }
}

async fn flag_for_review(
    engine: &Engine,
    mut unit: Unit,
    session: &SessionRow,
    revision: Revision<'_>,
) -> Result<RevisitStageResult, PlannerError> {
    engine
        .apply_session_event(&mut unit, session, &SessionEvent::FlagForReview)
        .await?;
    // The flag is kept per document: ListStageDocuments and GetSession show it.
    resources::flag_for_review(
        &mut unit.tx,
        session.id,
        session.iteration_count.max(1),
        &revision.reached,
    )
    .await?;
    unit.stale_projects.push(session.project_id);
    record(
        &mut unit,
        session,
        &revision,
        session.revision,
        &revision.reached,
        &[],
    )
    .await?;
    engine.finish(unit).await?;
    Ok(RevisitStageResult {
        needs_review: revision.reached,
        archived: Vec::new(),
        revision: u32::try_from(session.revision).unwrap_or(0),
    })
}

async fn rewind(
    engine: &Engine,
    mut unit: Unit,
    session: &SessionRow,
    revision: Revision<'_>,
    next: String,
) -> Result<RevisitStageResult, PlannerError> {
    let event = SessionEvent::Rewind {
        to_stage: next,
        start_now: revision.impact.restarts_at_once(),
    };
    let applied = engine
        .apply_session_event(&mut unit, session, &event)
        .await?;
    let version = applied.revision;
    let iteration = session.iteration_count.max(1);
    let (documents, archived) = match revision.impact {
        Impact::Moderate => {
            let affected = lineage::affected_jobs(engine, &mut unit, session, &revision).await?;
            let documents = revisit::documents_of_jobs(&mut unit.tx, session.id, &affected).await?;
            let archived = copy_to_archive(engine, &documents, version).await?;
            revisit::archive_jobs(
                &mut unit.tx,
                session.id,
                &affected,
                &renamed(&documents, &archived),
            )
            .await?;
            blackboard::clear_jobs(&mut unit.tx, session.id, &affected).await?;
            (documents, archived)
        }
        _ => {
            let documents =
                revisit::documents(&mut unit.tx, session.id, iteration, &revision.reached).await?;
            let archived = copy_to_archive(engine, &documents, version).await?;
            revisit::archive(
                &mut unit.tx,
                session.id,
                iteration,
                &revision.reached,
                &renamed(&documents, &archived),
            )
            .await?;
            // The stages that run again publish afresh (seed 004 §7: re-processing clears the board).
            blackboard::clear_stages(&mut unit.tx, session.id, iteration, &revision.reached)
                .await?;
            (documents, archived)
        }
    };
    let keys: Vec<String> = archived.into_iter().map(|(_, key)| key).collect();
    record(&mut unit, session, &revision, version, &[], &keys).await?;
    unit.cleared_boards.push(session.id);
    unit.stale_projects.push(session.project_id);
    engine.finish(unit).await?;
    // The current names now hold nothing the pipeline uses; the re-run writes them again.
    for doc in &documents {
        if let Err(e) = engine.blob.delete(&doc.key()).await {
            tracing::warn!(key = %doc.key(), error = %e, "could not remove an archived document's old object");
        }
    }
    Ok(RevisitStageResult {
        needs_review: Vec::new(),
        archived: keys,
        revision: u32::try_from(version).unwrap_or(0),
    })
}

fn renamed(documents: &[ResourceRow], archived: &[(String, String)]) -> Vec<(ResourceId, String)> {
    documents
        .iter()
        .zip(archived)
        .map(|(doc, (name, _))| (doc.id, name.clone()))
        .collect()
}

/// Copies each document to its archived name (name, key). Copies come before
/// the commit: if the transaction then fails, an extra copy is harmless.
async fn copy_to_archive(
    engine: &Engine,
    documents: &[ResourceRow],
    version: i32,
) -> Result<Vec<(String, String)>, PlannerError> {
    let mut archived = Vec::with_capacity(documents.len());
    for doc in documents {
        let name = archived_name(&doc.file_name, u32::try_from(version).unwrap_or(1));
        let key = format!("{}/{name}", doc.storage_path);
        let body = engine.blob.get(&doc.key()).await?;
        engine.blob.put(&key, body, &doc.mime_type).await?;
        archived.push((name, key));
    }
    Ok(archived)
}

async fn record(
    unit: &mut Unit,
    session: &SessionRow,
    revision: &Revision<'_>,
    number: i32,
    needs_review: &[String],
    archived: &[String],
) -> Result<(), PlannerError> {
    revisit::record(
        &mut unit.tx,
        &NewRevision {
            session_id: session.id,
            revision: number,
            stage_slug: revision.stage,
            iteration: session.iteration_count.max(1),
            impact: revision.impact.as_str(),
            reason: revision.reason,
            needs_review,
            archived,
        },
    )
    .await?;
    Ok(())
}
