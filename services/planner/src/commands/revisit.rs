//! RevisitStage: seed 003's change impact applied to a session. Minor flags
//! the later stages' documents for review (until edited or submitted).
//! Moderate archives the later documents that depend on what changed, by
//! lineage (see `lineage.rs`), and keeps the rest for the re-run to adopt;
//! major archives every later document. Both send the session back to the
//! stage after the revised one (major also starts it at once).
//!
//! A revisit is planned first (`plan`, a value) and then carried out
//! (`apply`); a dry run (`revisit_preview.rs`) returns the plans of every
//! impact level and applies none, so a preview cannot drift from the revisit.

use super::lineage;
use super::lock_session;
use super::revisit_preview;
use crate::engine::{Engine, PlannerError, Unit, parse_id};
use dialectic_core::ids::{JobId, ResourceId, SessionId};
use dialectic_core::revisit::{Archives, Impact, archived_version, reach};
use dialectic_core::session::{SessionEffect, SessionEvent, SessionStatus, transition};
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
    let mut unit = engine
        .begin(dialectic_telemetry::current_traceparent().as_deref())
        .await?;
    let session = lock_session(&mut unit, session_id).await?;
    let revision = Revision::read(&mut unit, &session, &command).await?;
    if command.dry_run {
        return revisit_preview::preview(engine, unit, &session, &revision).await;
    }
    let impact =
        Impact::parse(&command.impact).map_err(|e| PlannerError::BadMessage(e.to_string()))?;
    let plan = plan(engine, &mut unit, &session, &revision, impact).await?;
    apply(engine, unit, &session, &revision, plan).await
}

pub(super) struct Revision<'a> {
    pub(super) stage: &'a str,
    reason: Option<&'a str>,
    /// The later stages this iteration has already run.
    pub(super) reached: Vec<String>,
    /// The stage after the revised one (None: it is the last).
    next: Option<String>,
}

impl<'a> Revision<'a> {
    /// What every impact level shares; refused while jobs of the session run.
    async fn read(
        unit: &mut Unit,
        session: &SessionRow,
        command: &'a RevisitStageCommand,
    ) -> Result<Self, PlannerError> {
        let stage = command.stage_slug.trim();
        let stage_row = stages::stage_in_process(&mut *unit.tx, session.id, stage).await?;
        let reached = reached_stages(unit, session, stage).await?;
        let unfinished = revisit::unfinished_jobs(&mut unit.tx, session.id).await?;
        if unfinished > 0 {
            return Err(PlannerError::Refused(format!(
                "{unfinished} job(s) of this session are not finished (e.g. still rendering); revisit once they are"
            )));
        }
        Ok(Revision {
            stage,
            reason: Some(command.reason.trim()).filter(|r| !r.is_empty()),
            reached,
            next: stage_row.next_stage_slug,
        })
    }
}

/// What a revisit of one impact level will do, decided and named before
/// anything is written.
pub(super) struct Plan {
    pub(super) impact: Impact,
    event: SessionEvent,
    /// The session's status afterwards.
    pub(super) status_after: SessionStatus,
    /// The session's revision afterwards; archived names carry it.
    pub(super) version: i32,
    pub(super) needs_review: Vec<String>,
    archive: Archive,
    /// The documents it archives, each with the (name, key) its archived
    /// version is written to.
    pub(super) documents: Vec<(ResourceRow, (String, String))>,
    pub(super) reruns: Vec<String>,
}

/// Which rows an archive takes out of later inputs.
enum Archive {
    Nothing,
    Jobs(Vec<JobId>),
    Stages(Vec<String>),
}

/// The one place a revisit decides what it flags, archives and re-runs.
/// Reads only: a dry run plans every level in a transaction it rolls back.
pub(super) async fn plan(
    engine: &Engine,
    unit: &mut Unit,
    session: &SessionRow,
    revision: &Revision<'_>,
    impact: Impact,
) -> Result<Plan, PlannerError> {
    let event = event_of(impact, revision)?;
    let t = transition(&session.state()?, &event)?;
    let begins = t.effects.contains(&SessionEffect::BeginRevision);
    let version = session.revision + i32::from(begins);
    let reach = reach(impact, &revision.reached);
    let iteration = session.iteration_count.max(1);
    let (archive, documents) = match reach.archives {
        Archives::Nothing => (Archive::Nothing, Vec::new()),
        Archives::ByLineage => {
            let jobs = lineage::affected_jobs(engine, unit, session, revision).await?;
            let documents = revisit::documents_of_jobs(&mut unit.tx, session.id, &jobs).await?;
            (Archive::Jobs(jobs), documents)
        }
        Archives::AllOf(stages) => {
            let documents =
                revisit::documents(&mut unit.tx, session.id, iteration, &stages).await?;
            (Archive::Stages(stages), documents)
        }
    };
    let number = u32::try_from(version).unwrap_or(1);
    let documents = documents
        .into_iter()
        .map(|doc| {
            let target = archived_version(&doc.storage_path, &doc.file_name, number);
            (doc, target)
        })
        .collect();
    Ok(Plan {
        impact,
        event,
        status_after: t.to.status,
        version,
        needs_review: reach.needs_review,
        archive,
        documents,
        reruns: reach.reruns,
    })
}

fn event_of(impact: Impact, revision: &Revision<'_>) -> Result<SessionEvent, PlannerError> {
    if !impact.rewinds() {
        return Ok(SessionEvent::FlagForReview);
    }
    let next = revision.next.clone().ok_or_else(|| {
        PlannerError::Refused(format!(
            "{} is the last stage; nothing after it depends on it",
            revision.stage
        ))
    })?;
    Ok(SessionEvent::Rewind {
        to_stage: next,
        start_now: impact.restarts_at_once(),
    })
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

/// Carries `plan` out in one transaction, then removes the archived
/// documents' old objects.
async fn apply(
    engine: &Engine,
    mut unit: Unit,
    session: &SessionRow,
    revision: &Revision<'_>,
    plan: Plan,
) -> Result<RevisitStageResult, PlannerError> {
    let applied = engine
        .apply_session_event(&mut unit, session, &plan.event)
        .await?;
    if applied.revision != plan.version {
        // The session row is locked, so this is a bug, not a race: write nothing.
        return Err(PlannerError::Unavailable(format!(
            "the revisit planned revision {} but the session moved to {}",
            plan.version, applied.revision
        )));
    }
    let iteration = session.iteration_count.max(1);
    copy_to_archive(engine, &plan.documents).await?;
    let renamed: Vec<(ResourceId, String)> = plan
        .documents
        .iter()
        .map(|(doc, (name, _))| (doc.id, name.clone()))
        .collect();
    match &plan.archive {
        Archive::Nothing => {
            // The flag is kept per document: ListStageDocuments and GetSession show it.
            resources::flag_for_review(&mut unit.tx, session.id, iteration, &plan.needs_review)
                .await?;
        }
        Archive::Jobs(jobs) => {
            revisit::archive_jobs(&mut unit.tx, session.id, jobs, &renamed).await?;
            blackboard::clear_jobs(&mut unit.tx, session.id, jobs).await?;
            unit.cleared_boards.push(session.id);
        }
        Archive::Stages(stages) => {
            revisit::archive(&mut unit.tx, session.id, iteration, stages, &renamed).await?;
            // The stages that run again publish afresh (seed 004 §7: re-processing clears the board).
            blackboard::clear_stages(&mut unit.tx, session.id, iteration, stages).await?;
            unit.cleared_boards.push(session.id);
        }
    }
    let keys: Vec<String> = plan
        .documents
        .iter()
        .map(|(_, (_, key))| key.clone())
        .collect();
    record(&mut unit, session, revision, &plan, &keys).await?;
    unit.stale_projects.push(session.project_id);
    engine.finish(unit).await?;
    // The current names now hold nothing the pipeline uses; the re-run writes them again.
    for (doc, _) in &plan.documents {
        if let Err(e) = engine.blob.delete(&doc.key()).await {
            tracing::warn!(key = %doc.key(), error = %e, "could not remove an archived document's old object");
        }
    }
    Ok(RevisitStageResult {
        needs_review: plan.needs_review,
        archived: keys,
        revision: u32::try_from(plan.version).unwrap_or(0),
        ..Default::default()
    })
}

/// Copies each document to its archived key. Copies come before the
/// commit: if the transaction then fails, an extra copy is harmless.
async fn copy_to_archive(
    engine: &Engine,
    documents: &[(ResourceRow, (String, String))],
) -> Result<(), PlannerError> {
    for (doc, (_, key)) in documents {
        let body = engine.blob.get(&doc.key()).await?;
        engine.blob.put(key, body, &doc.mime_type).await?;
    }
    Ok(())
}

async fn record(
    unit: &mut Unit,
    session: &SessionRow,
    revision: &Revision<'_>,
    plan: &Plan,
    archived: &[String],
) -> Result<(), PlannerError> {
    revisit::record(
        &mut unit.tx,
        &NewRevision {
            session_id: session.id,
            revision: plan.version,
            stage_slug: revision.stage,
            iteration: session.iteration_count.max(1),
            impact: plan.impact.as_str(),
            reason: revision.reason,
            needs_review: &plan.needs_review,
            archived,
        },
    )
    .await?;
    Ok(())
}
