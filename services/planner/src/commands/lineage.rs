//! What a moderate revisit archives: the later jobs downstream of what
//! changed, by lineage (`dialectic_core::revisit::affected`).
//!
//! What changed is read from the revised stage's edits. A job read a change
//! when a document of the revised stage that one of its `document` rules
//! matched was edited after the job started; a `per_item` job read only its
//! item, so an edit that left its item as it was (the same JSON value at the
//! same place) is no change to it. A revisit with no edit since the later
//! stages started and since the session's last moderate or major revisit is about the stage
//! as a whole: everything that read it read a change. A `blackboard` rule reads the findings of the stage it
//! names (of every stage when it names none): a change when the revised stage
//! changed at all, or when a job of a later stage before it was affected.
//! From there, a job is affected when it read a document an affected job
//! wrote, and every stage's root is re-planned by the re-run.

use super::revisit::Revision;
use crate::engine::{Engine, PlannerError, Unit};
use chrono::{DateTime, Utc};
use dialectic_core::blackboard;
use dialectic_core::ids::JobId;
use dialectic_core::paths::whole_document_key;
use dialectic_core::payload::JobPayload;
use dialectic_core::recipe::InputRule;
use dialectic_core::revisit::{LaterJob, LaterRead, affected};
use dialectic_store::StoreError;
use dialectic_store::revisit::{self, EditRow, LaterJobRow};
use dialectic_store::sessions::SessionRow;
use std::collections::HashMap;

/// The edits of the revised stage, and the documents the later jobs'
/// restricted reads of it name.
struct Changes<'a> {
    stage: &'a str,
    iteration: i32,
    edits: Vec<EditRow>,
    /// No edit since the later stages started: the whole stage changed.
    wholesale: bool,
    /// Storage key → the document it holds a version of.
    identities: HashMap<String, String>,
}

pub(super) async fn affected_jobs(
    engine: &Engine,
    unit: &mut Unit,
    session: &SessionRow,
    revision: &Revision<'_>,
) -> Result<Vec<JobId>, PlannerError> {
    let iteration = session.iteration_count.max(1);
    let rows = revisit::later_jobs(&mut unit.tx, session.id, iteration, &revision.reached).await?;
    let jobs = rows
        .iter()
        .map(|row| Ok((row, payload_of(row)?)))
        .collect::<Result<Vec<_>, PlannerError>>()?;
    let changes = Changes::gather(unit, session, revision.stage, &jobs).await?;
    let mut later = Vec::with_capacity(jobs.len());
    for (row, payload) in &jobs {
        let read_a_change = changes.read_by(engine, row, payload).await?;
        later.push(later_job(
            row,
            payload,
            read_a_change,
            &revision.reached,
            iteration,
        ));
    }
    let affected: Vec<JobId> = affected(&later).into_iter().collect();
    tracing::info!(
        session_id = %session.id,
        later = later.len(),
        affected = affected.len(),
        wholesale = changes.wholesale,
        "moderate revisit: the later jobs downstream of the change"
    );
    Ok(affected)
}

/// When the later stages read the revised stage: since the first of them
/// started, and since the last revisit that sent the session back (an edit
/// such a revisit weighed is not this one's change). None: nothing read it.
async fn read_at(
    unit: &mut Unit,
    session: &SessionRow,
    first_start: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>, PlannerError> {
    let last_rewind = revisit::last_rewind_at(&mut unit.tx, session.id).await?;
    Ok(first_start.max(last_rewind))
}

/// The revised stage's edits a revisit weighs as its change (made after the
/// later stages read the stage, oldest first), and when they read it.
pub(super) async fn edits_since_read(
    unit: &mut Unit,
    session: &SessionRow,
    revision: &Revision<'_>,
) -> Result<(Vec<EditRow>, Option<DateTime<Utc>>), PlannerError> {
    let iteration = session.iteration_count.max(1);
    let rows = revisit::later_jobs(&mut unit.tx, session.id, iteration, &revision.reached).await?;
    let since = read_at(unit, session, rows.iter().map(|r| r.started_at).min()).await?;
    let edits = revisit::edits(&mut unit.tx, session.id, iteration, revision.stage).await?;
    let edits = edits
        .into_iter()
        .filter(|e| since.is_some_and(|t| e.created_at > t))
        .collect();
    Ok((edits, since))
}

fn payload_of(row: &LaterJobRow) -> Result<JobPayload, PlannerError> {
    serde_json::from_value(row.payload.0.clone())
        .map_err(|e| StoreError::Corrupt(format!("job {} payload: {e}", row.id)).into())
}

/// A `document` rule reading the current iteration of `stage` (None: the
/// reading job's own).
fn reads_stage(rule: &InputRule, iteration: i32) -> Option<Option<&str>> {
    (rule.kind == "document" && rule.iteration.of(iteration) == Some(iteration))
        .then_some(rule.stage_slug.as_deref())
}

fn rules(payload: &JobPayload) -> impl Iterator<Item = (usize, &InputRule)> {
    payload
        .step
        .iter()
        .flat_map(|s| s.inputs_required.iter().enumerate())
}

/// A `blackboard` rule reads the entries its stage published (every
/// stage's when it names none); which job published which type is not
/// weighed, so it reads whatever any job of the stage wrote.
fn board_reads(rule: &InputRule, later_stages: &[String]) -> Vec<LaterRead> {
    later_stages
        .iter()
        .filter(|s| {
            rule.stage_slug
                .as_deref()
                .is_none_or(|named| named == s.as_str())
        })
        .map(|stage| LaterRead {
            stage: stage.clone(),
            document_key: "*".into(),
            keys: None,
        })
        .collect()
}

fn later_job(
    row: &LaterJobRow,
    payload: &JobPayload,
    read_a_change: bool,
    later_stages: &[String],
    iteration: i32,
) -> LaterJob<JobId> {
    let mut reads = Vec::new();
    for (index, rule) in rules(payload) {
        if rule.kind == blackboard::INPUT_KIND {
            reads.extend(board_reads(rule, later_stages));
            continue;
        }
        let Some(stage) = reads_stage(rule, iteration) else {
            continue;
        };
        let stage = stage.unwrap_or(&row.stage_slug);
        if later_stages.iter().any(|s| s == stage) {
            reads.push(LaterRead {
                stage: stage.to_string(),
                document_key: rule.document_key.clone().unwrap_or_else(|| "*".into()),
                keys: payload.restriction(index).map(<[String]>::to_vec),
            });
        }
    }
    LaterJob {
        id: row.id,
        stage: row.stage_slug.clone(),
        document_keys: row.document_keys.clone(),
        wrote: row.wrote.iter().map(|k| whole_document_key(k)).collect(),
        reads,
        read_a_change,
        reruns: row.parent_job_id.is_none(),
    }
}

impl<'a> Changes<'a> {
    async fn gather(
        unit: &mut Unit,
        session: &SessionRow,
        stage: &'a str,
        jobs: &[(&LaterJobRow, JobPayload)],
    ) -> Result<Self, PlannerError> {
        let iteration = session.iteration_count.max(1);
        let edits = revisit::edits(&mut unit.tx, session.id, iteration, stage).await?;
        let first_start = jobs.iter().map(|(r, _)| r.started_at).min();
        let since = read_at(unit, session, first_start).await?;
        let wholesale = !edits
            .iter()
            .any(|e| since.is_some_and(|t| e.created_at > t));
        let read_keys: Vec<String> = jobs
            .iter()
            .flat_map(|(_, p)| p.sources.iter().flat_map(|s| s.keys.clone()))
            .collect();
        let identities = revisit::identities(&mut unit.tx, session.id, &read_keys)
            .await?
            .into_iter()
            .collect();
        Ok(Changes {
            stage,
            iteration,
            edits,
            wholesale,
            identities,
        })
    }

    /// Whether what `row` read of the revised stage changed after it started.
    async fn read_by(
        &self,
        engine: &Engine,
        row: &LaterJobRow,
        payload: &JobPayload,
    ) -> Result<bool, PlannerError> {
        for (index, rule) in rules(payload) {
            let board = rule.kind == blackboard::INPUT_KIND;
            let reads_revised = if board {
                rule.stage_slug.as_deref().is_none_or(|s| s == self.stage)
            } else {
                reads_stage(rule, self.iteration).flatten() == Some(self.stage)
            };
            if !reads_revised {
                continue;
            }
            // Findings come from the stage's replies, which an edit does not
            // publish again; an edit of the stage still counts as a change of
            // what it found.
            if self.wholesale || (board && self.edits.iter().any(|e| e.created_at > row.started_at))
            {
                return Ok(true);
            }
            let key = rule.document_key.as_deref().unwrap_or("*");
            let since: Vec<&EditRow> = self
                .edits
                .iter()
                .filter(|e| e.created_at > row.started_at && (key == "*" || e.document_key == key))
                .collect();
            if since.is_empty() {
                continue;
            }
            let Some(read) = payload.restriction(index) else {
                return Ok(true);
            };
            for read_key in read {
                let identity = self.identities.get(read_key);
                // Oldest first: the last edit of the document is its current version.
                let Some(current) = since
                    .iter()
                    .rev()
                    .find(|e| identity.is_none_or(|i| *i == e.identity))
                else {
                    continue;
                };
                let unchanged = match (rule.items.as_deref(), payload.item(index), identity) {
                    (Some(items), Some(item), Some(_)) => {
                        same_item(engine, read_key, &current.raw_key, items, item).await?
                    }
                    _ => false,
                };
                if !unchanged {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// Item `item` of the array `items` is the same JSON value in both objects.
async fn same_item(
    engine: &Engine,
    read: &str,
    current: &str,
    items: &str,
    item: usize,
) -> Result<bool, PlannerError> {
    let before = item_at(engine, read, items, item).await?;
    Ok(before.is_some() && before == item_at(engine, current, items, item).await?)
}

/// None when the object is gone or holds no such item.
async fn item_at(
    engine: &Engine,
    key: &str,
    items: &str,
    item: usize,
) -> Result<Option<serde_json::Value>, PlannerError> {
    let text = match engine.blob.get_string(key).await {
        Ok(text) => text,
        Err(dialectic_blob::BlobError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get(items)?.get(item).cloned()))
}
