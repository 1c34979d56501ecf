//! Seed 002 "Worker Orchestration": a root job plans the recipe steps whose
//! predecessors are done, each fanned out by its granularity into child
//! jobs, and completes when none are left.

use super::roles::Roles;
use super::spawn::{Child, child_key_in_root};
use super::stage::reruns_after_revisit;
use super::{Apply, Engine, PlannerError, Unit};
use dialectic_core::blackboard::BoardEntry;
use dialectic_core::clarify::Clarification;
use dialectic_core::fanout::{Anchor, FanOutJob, SourceDoc, fan_out};
use dialectic_core::ids::{JobId, StepId};
use dialectic_core::job::{JobEvent, JobStatus, JobType};
use dialectic_core::payload::JobPayload;
use dialectic_core::recipe::{Granularity, OrderBy, Recipe, RecipeStep};
use dialectic_store::jobs::{self, JobRow, KeptChild};
use dialectic_store::{clarifications, contributions, inputs, project_documents, skips};
use serde_json::json;
use std::collections::{BTreeSet, HashMap, HashSet};

/// Output types of every step downstream of `step`: what a PLAN step's header context plans.
pub(super) fn descendant_outputs(recipe: &Recipe, step: &RecipeStep) -> Vec<String> {
    let mut outputs: Vec<String> = Vec::new();
    for id in recipe.descendants(step.id) {
        if let Some(s) = recipe
            .step(id)
            .filter(|s| !s.is_skipped && !outputs.contains(&s.output_type))
        {
            outputs.push(s.output_type.clone());
        }
    }
    outputs
}

/// The steps a root job's children have started, and those they finished.
#[derive(Debug, Default, PartialEq, Eq)]
struct Progress {
    done: HashSet<StepId>,
    started: HashSet<StepId>,
}

/// Progress from the root's own step and its children (type, status, step).
/// RENDER children are no step's; a superseded child (a clarification round
/// replaced it) is planned again.
fn progress(own: Option<StepId>, children: &[(JobType, JobStatus, Option<StepId>)]) -> Progress {
    let mut progress = Progress::default();
    progress.done.extend(own);
    for (job_type, status, step) in children {
        let Some(step) = *step else {
            continue;
        };
        if *job_type == JobType::Render || *status == JobStatus::Superseded {
            continue;
        }
        progress.started.insert(step);
        if *status == JobStatus::Completed {
            progress.done.insert(step);
        }
    }
    progress
}

/// The steps to plan now. A step a plan skipped never starts (unless it had
/// already); the steps after it still wait for what it would have waited for.
fn ready(recipe: &Recipe, skipped: &BTreeSet<String>, progress: &Progress) -> Vec<RecipeStep> {
    recipe
        .with_skipped(skipped, &progress.started)
        .ready_steps(&progress.done, &progress.started)
        .into_iter()
        .cloned()
        .collect()
}

/// What spawning the ready steps did: jobs planned (new, or already there
/// from a redelivery) and kept children adopted.
#[derive(Debug, Default)]
struct Spawned {
    new: usize,
    adopted: usize,
}

fn take_kept(kept: &mut Vec<KeptChild>, key_in_root: &str) -> Option<KeptChild> {
    let at = kept.iter().position(|k| k.key_in_root == key_in_root)?;
    Some(kept.swap_remove(at))
}

/// The steps a clarification round re-runs with its question: the one it
/// asked and everything downstream of it.
fn asked_steps(recipe: &Recipe, round: Option<&Clarification>) -> Option<Vec<StepId>> {
    let step = recipe.step_by_key(&round?.step_key)?;
    let mut ids = recipe.descendants(step.id);
    ids.push(step.id);
    Some(ids)
}

/// A document's first chunk's id for each matched reply: edits and later
/// turns of one document fan out (and are named) as that document, so a
/// re-run after an edit plans the same jobs for what the edit left alone.
async fn document_identities(
    unit: &mut Unit,
    docs: &[inputs::InputDoc],
) -> Result<HashMap<uuid::Uuid, uuid::Uuid>, PlannerError> {
    let replies: Vec<uuid::Uuid> = docs
        .iter()
        .filter(|d| !d.from_resource)
        .map(|d| d.id)
        .collect();
    if replies.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(contributions::document_identities(&mut *unit.tx, &replies).await?)
}

impl Engine {
    /// Spawns the recipe steps whose predecessors are done, or completes the
    /// root job when none are left.
    pub(super) async fn plan_next(
        &self,
        unit: &mut Unit,
        job_id: JobId,
    ) -> Result<(), PlannerError> {
        let job = jobs::lock(&mut unit.tx, job_id).await?;
        if !matches!(
            job.status()?,
            JobStatus::Processing | JobStatus::PendingNextStep
        ) {
            return Ok(());
        }
        let payload = job.payload()?;
        let Some(recipe) = payload.recipe.as_ref() else {
            unit.apply_later(Apply::new(job.id, JobEvent::Succeeded));
            return Ok(());
        };
        loop {
            let ready = self.ready_steps(unit, &job, &payload, recipe).await?;
            if ready.is_empty() {
                unit.apply_later(Apply::new(job.id, JobEvent::Succeeded));
                return Ok(());
            }
            let Some(planned) = self.fan_out_steps(unit, &job, &ready).await? else {
                return Ok(());
            };
            let spawned = self
                .spawn_steps(unit, &job, &payload, recipe, planned)
                .await?;
            // Steps a revisit kept whole have nothing to wait for: the steps
            // after them are ready now.
            if spawned.new > 0 || spawned.adopted == 0 {
                unit.apply_later(Apply::new(job.id, JobEvent::ChildrenSpawned));
                return Ok(());
            }
        }
    }

    async fn ready_steps(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        payload: &JobPayload,
        recipe: &Recipe,
    ) -> Result<Vec<RecipeStep>, PlannerError> {
        let children = jobs::children(&mut unit.tx, job.id).await?;
        let progress = progress(payload.step.as_ref().map(|s| s.id), &children);
        let skipped =
            skips::skipped_keys(&mut unit.tx, job.session_id, job.iteration_number).await?;
        Ok(ready(recipe, &skipped, &progress))
    }

    /// Each ready step's jobs by its granularity. None when a step cannot be
    /// planned: the root job's failure is queued instead.
    async fn fan_out_steps<'s>(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        ready: &'s [RecipeStep],
    ) -> Result<Option<Vec<(&'s RecipeStep, Vec<FanOutJob>)>>, PlannerError> {
        let mut planned = Vec::new();
        for step in ready {
            let anchors = self.anchors(unit, job, step).await?;
            match fan_out(step.granularity, &anchors) {
                Ok(jobs) => planned.push((step, jobs)),
                Err(e) => {
                    tracing::warn!(job_id = %job.id, step = %step.step_key, error = %e, "cannot plan step");
                    unit.apply_later(
                        Apply::new(job.id, JobEvent::Failed { retryable: false }).with_error(
                            json!({
                                "code": "cannot_plan_step",
                                "message": format!("step {}: {e}", step.step_key),
                            }),
                        ),
                    );
                    return Ok(None);
                }
            }
        }
        Ok(Some(planned))
    }

    /// Inserts the planned steps' jobs; after a clarification round, the
    /// steps it re-runs carry its question. A root re-running its stage after
    /// a moderate revisit adopts the children the revisit kept instead.
    async fn spawn_steps(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        payload: &JobPayload,
        recipe: &Recipe,
        planned: Vec<(&RecipeStep, Vec<FanOutJob>)>,
    ) -> Result<Spawned, PlannerError> {
        let round = clarifications::latest(
            &mut unit.tx,
            job.session_id,
            job.iteration_number,
            &job.stage_slug,
        )
        .await?;
        let asked = asked_steps(recipe, round.as_ref());
        let mut kept = if job.parent_job_id.is_none() && reruns_after_revisit(&job.job_key) {
            jobs::kept_children(&mut unit.tx, job).await?
        } else {
            Vec::new()
        };
        let lineage = payload.lineage_model_id.or(job.model_id);
        let roles = Roles::load(&mut unit.tx, job.session_id, lineage.as_slice()).await?;
        let mut spawned = Spawned::default();
        for (step, jobs) in planned {
            let mut child = Child {
                planned_documents: descendant_outputs(recipe, step),
                round: round.as_ref(),
                asked: asked.as_ref().is_some_and(|ids| ids.contains(&step.id)),
                previous: None,
                previous_done: false,
                runs_on: roles.child(step, job, payload),
            };
            // A chain re-runs from its first link that was not kept: every
            // link after it read the draft that link changes.
            let mut chain_kept = true;
            for fan in jobs {
                let key = child_key_in_root(step, &fan.discriminator, child.round);
                if let Some(adopted) = (chain_kept || !fan.after_previous)
                    .then(|| take_kept(&mut kept, &key))
                    .flatten()
                {
                    self.adopt(unit, job, step, adopted.id).await?;
                    child.previous = Some(adopted.id);
                    child.previous_done = true;
                    spawned.adopted += 1;
                    continue;
                }
                chain_kept = false;
                child.previous = self
                    .spawn_child(unit, job, payload, step, fan, &child)
                    .await?;
                child.previous_done = false;
                spawned.new += 1;
            }
        }
        Ok(spawned)
    }

    /// A kept child joins the re-run root, finished; watchers see it so.
    async fn adopt(
        &self,
        unit: &mut Unit,
        root: &JobRow,
        step: &RecipeStep,
        child: JobId,
    ) -> Result<(), PlannerError> {
        jobs::adopt(&mut unit.tx, child, root.id).await?;
        tracing::info!(job_id = %root.id, kept = %child, step = %step.step_key, "kept by the revisit; not run again");
        self.announce_planned(unit, root, step, child, JobStatus::Completed)
            .await
    }

    /// The documents a fanning-out step's anchor rules match (its first two
    /// `document` or `project_document` rules), as its jobs will read them
    /// (`inputs::rule_documents`, `project_documents::for_rule`).
    async fn anchors(
        &self,
        unit: &mut Unit,
        root: &JobRow,
        step: &RecipeStep,
    ) -> Result<Vec<Anchor>, PlannerError> {
        if matches!(
            step.granularity,
            Granularity::AllToOne | Granularity::PerModel
        ) {
            return Ok(Vec::new());
        }
        let mut anchors = Vec::new();
        for (index, rule) in step
            .inputs_required
            .iter()
            .enumerate()
            .filter(|(_, r)| r.kind == "document" || r.kind == "project_document")
            .take(2)
        {
            let docs = self.anchor_documents(unit, root, rule).await?;
            let identities = document_identities(unit, &docs).await?;
            // The step's object_filter narrows what it fans out over, as it
            // narrows what each job reads.
            let mut sources: Vec<SourceDoc> = docs
                .iter()
                .map(|d| {
                    let id = identities.get(&d.id).copied().unwrap_or(d.id);
                    SourceDoc::from_key(id.to_string(), &d.storage_key, &d.document_key)
                })
                .filter(|d| step.filter.admits(&d.document_key, &d.author))
                .collect();
            if let Some(key) = rule.items.as_deref() {
                for source in &mut sources {
                    source.items = Some(self.count_items(&source.key, key).await?);
                }
            }
            anchors.push((index, sources));
        }
        Ok(anchors)
    }

    async fn anchor_documents(
        &self,
        unit: &mut Unit,
        root: &JobRow,
        rule: &dialectic_core::recipe::InputRule,
    ) -> Result<Vec<inputs::InputDoc>, PlannerError> {
        if rule.kind == "project_document" {
            let mut uploads =
                project_documents::for_rule(&mut *unit.tx, root.session_id, rule.into()).await?;
            if let Some(order) = &rule.order_by {
                // Boxed: one more inline await level overflows the layout
                // query depth of the service's whole future.
                Box::pin(self.order_uploads(unit, root, order, &mut uploads)).await?;
            }
            return Ok(uploads);
        }
        // A root a retry moved to another model still fans out over its lineage's artifacts.
        let lineage = root.payload()?.lineage_model_id.or(root.model_id);
        let query = inputs::DocumentQuery::for_rule(
            root.session_id,
            &root.stage_slug,
            lineage,
            root.iteration_number,
            rule,
        );
        Ok(match query {
            Some(query) => inputs::rule_documents(&mut unit.tx, &query).await?,
            None => Vec::new(),
        })
    }

    /// Puts uploads in the order of the value a step of this stage extracted
    /// from each (`order_by`), reading what it wrote from S3. A value that
    /// should be a date and is not goes last and is published on the
    /// blackboard by the root, so the user sees which document and why.
    async fn order_uploads(
        &self,
        unit: &mut Unit,
        root: &JobRow,
        order: &OrderBy,
        uploads: &mut [inputs::InputDoc],
    ) -> Result<(), PlannerError> {
        let written = project_documents::written_from_uploads(
            &mut *unit.tx,
            root.session_id,
            &root.stage_slug,
            root.iteration_number,
            &order.document_key,
        )
        .await?;
        let mut values = HashMap::new();
        for (upload, object) in written {
            let text = self.blob.get_string(&object).await?;
            let value = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| {
                    v.get(&order.key)
                        .and_then(|v| v.as_str())
                        .map(str::to_string)
                });
            if let Some(value) = value {
                values.insert(upload, value);
            }
        }
        let unordered = order.sort(uploads, |u| values.get(&u.storage_key).cloned());
        if !unordered.is_empty() {
            let entries: Vec<BoardEntry> = unordered
                .iter()
                .filter_map(|u| {
                    uploads
                        .get(u.index)
                        .map(|d| u.entry(&d.document_key, order))
                })
                .collect();
            tracing::warn!(job_id = %root.id, count = entries.len(), key = %order.key, "uploads whose value is not a date are ordered last");
            self.publish(unit, root, &entries).await?;
        }
        Ok(())
    }

    /// How many items the JSON array `key` of a stored document holds (0 when
    /// it is not JSON or has no such array).
    async fn count_items(&self, object: &str, key: &str) -> Result<usize, PlannerError> {
        let text = self.blob.get_string(object).await?;
        Ok(serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get(key).and_then(|a| a.as_array()).map(Vec::len))
            .unwrap_or(0))
    }
}

#[cfg(test)]
mod tests;
