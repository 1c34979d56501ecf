//! RevisitStage with `dry_run`: seed 003's "identify what changed" and
//! "present impact to user and confirm before proceeding". Every impact
//! level is planned by `revisit::plan`, the function a revisit carries out,
//! in a transaction that is rolled back: nothing is written, copied or sent.

use super::lineage;
use super::revisit::{Plan, Revision, plan};
use crate::engine::{Engine, PlannerError, Unit, parse_id};
use dialectic_core::ids::ContributionId;
use dialectic_core::revisit::{Impact, read_text, unified_diff};
use dialectic_proto::v1::planner::RevisitStageResult;
use dialectic_proto::v1::{RevisionDiff, RevisitDocument, RevisitImpact, RevisitPreview};
use dialectic_store::contributions::{self, ContributionRow};
use dialectic_store::resources::ResourceRow;
use dialectic_store::sessions::SessionRow;
use dialectic_store::{StoreError, revisit};

pub(super) async fn preview(
    engine: &Engine,
    mut unit: Unit,
    session: &SessionRow,
    revision: &Revision<'_>,
) -> Result<RevisitStageResult, PlannerError> {
    let mut previews = Vec::with_capacity(3);
    for impact in [Impact::Minor, Impact::Moderate, Impact::Major] {
        previews.push(
            match plan(engine, &mut unit, session, revision, impact).await {
                Ok(plan) => preview_of(plan),
                // One level refused (moderate and major of the last stage) leaves the others.
                Err(PlannerError::Refused(why)) => RevisitPreview {
                    impact_level: level(impact).into(),
                    refused: why,
                    ..Default::default()
                },
                Err(e) => return Err(e),
            },
        );
    }
    let diffs = diffs(engine, &mut unit, session, revision).await?;
    // The plans only read; the rollback ends the row locks they took.
    unit.tx.rollback().await.map_err(StoreError::from)?;
    Ok(RevisitStageResult {
        revision: u32::try_from(session.revision).unwrap_or(0),
        previews,
        diffs,
        ..Default::default()
    })
}

fn level(impact: Impact) -> RevisitImpact {
    match impact {
        Impact::Minor => RevisitImpact::Minor,
        Impact::Moderate => RevisitImpact::Moderate,
        Impact::Major => RevisitImpact::Major,
    }
}

fn preview_of(plan: Plan) -> RevisitPreview {
    let archived = plan
        .documents
        .into_iter()
        .map(|(doc, (_, archived_key))| RevisitDocument {
            storage_key: doc.key(),
            stage_slug: doc.stage_slug.unwrap_or_default(),
            document_key: doc.document_key.unwrap_or_default(),
            model_id: doc.model_id.map(|m| m.to_string()).unwrap_or_default(),
            // The gateway names models.
            model: String::new(),
            resource_id: doc.id.to_string(),
            archived_key,
        })
        .collect();
    RevisitPreview {
        impact_level: level(plan.impact).into(),
        refused: String::new(),
        needs_review: plan.needs_review,
        archived,
        reruns: plan.reruns,
        session_status: plan.status_after.to_string(),
        revision: u32::try_from(plan.version).unwrap_or(0),
    }
}

/// Each document of the revised stage edited since the later stages read
/// it (the edits a moderate revisit weighs): its text as they read it
/// against its text now. None when no edit came after they read it.
async fn diffs(
    engine: &Engine,
    unit: &mut Unit,
    session: &SessionRow,
    revision: &Revision<'_>,
) -> Result<Vec<RevisionDiff>, PlannerError> {
    let (edits, since) = lineage::edits_since_read(unit, session, revision).await?;
    let Some(since) = since else {
        return Ok(Vec::new());
    };
    let mut identities: Vec<&str> = Vec::new();
    for edit in &edits {
        if !identities.contains(&edit.identity.as_str()) {
            identities.push(&edit.identity);
        }
    }
    let iteration = session.iteration_count.max(1);
    let stage = [revision.stage.to_string()];
    let rendered = revisit::documents(&mut unit.tx, session.id, iteration, &stage).await?;
    let mut diffs = Vec::with_capacity(identities.len());
    for identity in identities {
        let id = parse_id::<ContributionId>(identity)?;
        let chain =
            contributions::document_chain(&mut *unit.tx, session.id, revision.stage, id).await?;
        let read: Vec<ContributionRow> = chain
            .iter()
            .filter(|c| c.created_at <= since)
            .cloned()
            .collect();
        let Some(root) = chain.iter().find(|c| c.id == id) else {
            continue;
        };
        if read.is_empty() {
            continue;
        }
        let doc = rendered
            .iter()
            .find(|d| d.source_contribution_id == Some(id));
        let key = doc.map_or_else(|| root.raw_response_storage_path.clone(), ResourceRow::key);
        let json = doc.is_some_and(|d| d.is_json_backed);
        let before = text_of(engine, &contributions::current_parts(&read), json).await?;
        let after = text_of(engine, &contributions::current_parts(&chain), json).await?;
        let diff = unified_diff(
            &before,
            &after,
            &format!("{key} (as the later stages read it)"),
            &format!("{key} (now)"),
        );
        if !diff.is_empty() {
            diffs.push(RevisionDiff {
                stage_slug: root.stage_slug.clone(),
                document_key: root.document_key.clone(),
                model: root.model_name.clone().unwrap_or_default(),
                storage_key: key,
                unified_diff: diff,
            });
        }
    }
    Ok(diffs)
}

/// A version as later steps read it (`read_text`), its parts in order.
async fn text_of(
    engine: &Engine,
    parts: &[&ContributionRow],
    json_backed: bool,
) -> Result<String, PlannerError> {
    let mut text = String::new();
    for part in parts {
        let raw = engine
            .blob
            .get_string(&part.raw_response_storage_path)
            .await?;
        let shown = read_text(&raw, json_backed)
            .map_err(|e| StoreError::Corrupt(format!("{}: {e}", part.raw_response_storage_path)))?;
        text.push_str(&shown);
    }
    Ok(text)
}
