//! The jobs a job spawns: a planned step's children, a continuation of a
//! cut-off reply (seed 001), a render of a finished markdown chunk (seed 000
//! function 7).

use super::roles::Placement;
use super::{Engine, PlannerError, Unit};
use dialectic_core::clarify::Clarification;
use dialectic_core::fanout::FanOutJob;
use dialectic_core::ids::{ContributionId, JobId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::paths::Lineage;
use dialectic_core::payload::{JobPayload, RenderPayload};
use dialectic_core::progress::EventKind;
use dialectic_core::recipe::RecipeStep;
use dialectic_store::jobs::{self, JobRow, NewJob};
use dialectic_store::{clarifications, contributions};

/// What a child job is planned with besides its step and sources.
pub(super) struct Child<'a> {
    /// For PLAN steps: the outputs downstream of it, which its header plans.
    pub(super) planned_documents: Vec<String>,
    /// The stage's newest clarification round, when it had one.
    pub(super) round: Option<&'a Clarification>,
    /// The step is the one the round asked, or downstream of it.
    pub(super) asked: bool,
    /// The job planned just before this one for the same step (a `sequential`
    /// job waits for it).
    pub(super) previous: Option<JobId>,
    /// That job was kept from an earlier root, finished: nothing to wait for.
    pub(super) previous_done: bool,
    /// The model its step's role moves it to; None: its parent's.
    pub(super) runs_on: Option<Placement>,
}

/// A child's key: its parent, then its key within the root.
fn child_job_key(
    parent: JobId,
    step: &RecipeStep,
    discriminator: &str,
    round: Option<&Clarification>,
) -> String {
    format!("{parent}:{}", child_key_in_root(step, discriminator, round))
}

/// What names a child within any root: its step and fan-out discriminator.
/// After a clarification round the superseded jobs keep their keys, so the
/// new ones name the round. A re-run root adopts the kept child of an
/// earlier root by this key.
pub(super) fn child_key_in_root(
    step: &RecipeStep,
    discriminator: &str,
    round: Option<&Clarification>,
) -> String {
    let mut key = if discriminator.is_empty() {
        step.step_key.clone()
    } else {
        format!("{}:{discriminator}", step.step_key)
    };
    if let Some(round) = round {
        key.push_str(&format!(":clarified{}", round.round));
    }
    key
}

/// A child's payload: its parent's model (or its role's) and stage, its
/// own step and sources.
fn child_payload(
    parent: &JobPayload,
    step: &RecipeStep,
    fan: FanOutJob,
    child: &Child<'_>,
) -> JobPayload {
    let (model_api_identifier, lineage_model_id) = match &child.runs_on {
        Some(placement) => (placement.api_identifier.clone(), placement.lineage_model_id),
        // A root moved to another model by a retry keeps its lineage.
        None => (parent.model_api_identifier.clone(), parent.lineage_model_id),
    };
    JobPayload {
        step: Some(step.clone()),
        model_api_identifier,
        model_slug: parent.model_slug.clone(),
        stage_number: parent.stage_number,
        planned_documents: if step.job_type == JobType::Plan {
            child.planned_documents.clone()
        } else {
            Vec::new()
        },
        render: None,
        recipe: None,
        sources: fan.sources,
        lineage: (fan.lineage != Lineage::Plain).then_some(fan.lineage),
        lineage_model_id,
        clarification: child.round.filter(|_| child.asked).cloned(),
    }
}

impl Engine {
    /// Inserts one planned job of `step` under `parent` and dispatches it
    /// (unless it waits for the one before it); the id when it was new.
    pub(super) async fn spawn_child(
        &self,
        unit: &mut Unit,
        parent: &JobRow,
        parent_payload: &JobPayload,
        step: &RecipeStep,
        fan: FanOutJob,
        child: &Child<'_>,
    ) -> Result<Option<JobId>, PlannerError> {
        // A sequential job after the first waits for the one before it.
        let wait_for = child
            .previous
            .filter(|_| fan.after_previous && !child.previous_done);
        let job_key = child_job_key(parent.id, step, &fan.discriminator, child.round);
        let status = match wait_for {
            Some(_) => JobStatus::WaitingForPrerequisite,
            None => JobStatus::Pending,
        };
        let payload = child_payload(parent_payload, step, fan, child);
        let new = NewJob {
            id: JobId::new(),
            job_key,
            session_id: parent.session_id,
            user_id: parent.user_id,
            stage_slug: &parent.stage_slug,
            iteration: parent.iteration_number,
            job_type: step.job_type,
            status,
            step_id: Some(step.id),
            step_key: Some(&step.step_key),
            model_id: child
                .runs_on
                .as_ref()
                .map(|p| p.model_id)
                .or(parent.model_id),
            document_key: Some(&step.output_type),
            payload: &payload,
            parent_job_id: Some(parent.id),
            prerequisite_job_id: wait_for,
            target_contribution_id: None,
            max_attempts: self.config.max_attempts as i32,
        };
        let inserted = jobs::insert(&mut unit.tx, &new).await?;
        if let Some(id) = inserted {
            if child.round.is_some() {
                clarifications::continue_attempts(&mut unit.tx, id, parent.id, step.id).await?;
            }
            if wait_for.is_none() {
                self.dispatch(unit, id, step.job_type).await?;
            }
            self.announce_planned(unit, parent, step, id, status)
                .await?;
        }
        Ok(inserted)
    }

    /// Watchers see a step's jobs when they are planned (workers do not
    /// report their claims): the stage's percent as the step begins.
    pub(super) async fn announce_planned(
        &self,
        unit: &mut Unit,
        parent: &JobRow,
        step: &RecipeStep,
        id: JobId,
        status: JobStatus,
    ) -> Result<(), PlannerError> {
        let mut planned = self.job_event(unit, parent, EventKind::JobStatus).await?;
        planned.job_id = id.to_string();
        planned.job_type = step.job_type.as_str().to_string();
        planned.document_key = step.output_type.clone();
        planned.job_status = Some(status);
        planned.message = status.as_str().to_string();
        unit.events.push(planned);
        Ok(())
    }

    /// Seed 001: an unfinished chunk gets a new job for the next turn, under the
    /// same parent (which keeps waiting), pointing at the chunk it continues;
    /// the jobs waiting for this one wait for that turn instead.
    pub(super) async fn spawn_continuation(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        payload: &JobPayload,
        contribution_id: ContributionId,
    ) -> Result<(), PlannerError> {
        // Lock the parent before adding a child to it: the insert's foreign-key
        // share lock, upgraded later by CheckParent, would deadlock with a
        // sibling doing the same.
        if let Some(parent) = job.parent_job_id {
            jobs::lock(&mut unit.tx, parent).await?;
        }
        let inserted = jobs::insert(
            &mut unit.tx,
            &NewJob {
                id: JobId::new(),
                job_key: format!("{contribution_id}:continue"),
                session_id: job.session_id,
                user_id: job.user_id,
                stage_slug: &job.stage_slug,
                iteration: job.iteration_number,
                job_type: JobType::Execute,
                status: JobStatus::PendingContinuation,
                step_id: job.recipe_step_id,
                step_key: job.step_key.as_deref(),
                model_id: job.model_id,
                document_key: job.document_key.as_deref(),
                payload,
                parent_job_id: job.parent_job_id,
                prerequisite_job_id: None,
                target_contribution_id: Some(contribution_id),
                max_attempts: self.config.max_attempts as i32,
            },
        )
        .await?;
        if let Some(id) = inserted {
            // The document is whole only when its last turn is in: the next job
            // of a `sequential` step reads it, so it waits for the continuation.
            for waiting in jobs::waiting_on(&mut unit.tx, job.id).await? {
                jobs::set_prerequisite(&mut unit.tx, waiting, id).await?;
            }
            self.dispatch(unit, id, JobType::Execute).await?;
            let mut event = self
                .job_event(unit, job, EventKind::ContinuationQueued)
                .await?;
            event.job_id = id.to_string();
            unit.events.push(event);
        }
        Ok(())
    }

    /// Seed 000 function 7: a markdown chunk queues a RENDER job for its document
    /// chain. RENDER jobs hang under the EXECUTE job, so they never gate a parent or a stage.
    pub(super) async fn spawn_render(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        payload: &JobPayload,
        contribution_id: ContributionId,
    ) -> Result<(), PlannerError> {
        let contribution = contributions::contribution(&mut *unit.tx, contribution_id).await?;
        let identity = contribution
            .document_relationships
            .as_ref()
            .and_then(|r| r.0.get(&job.stage_slug))
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| contribution_id.to_string());
        let render_payload = JobPayload {
            step: None,
            model_api_identifier: payload.model_api_identifier.clone(),
            model_slug: payload.model_slug.clone(),
            stage_number: payload.stage_number,
            planned_documents: Vec::new(),
            render: Some(RenderPayload {
                document_identity: identity,
                source_contribution_id: contribution_id.to_string(),
                document_key: contribution.document_key.clone(),
            }),
            recipe: None,
            sources: Vec::new(),
            lineage: None,
            lineage_model_id: None,
            clarification: None,
        };
        let inserted = jobs::insert(
            &mut unit.tx,
            &NewJob {
                id: JobId::new(),
                job_key: format!("{contribution_id}:render"),
                session_id: job.session_id,
                user_id: job.user_id,
                stage_slug: &job.stage_slug,
                iteration: job.iteration_number,
                job_type: JobType::Render,
                status: JobStatus::Pending,
                step_id: None,
                step_key: None,
                model_id: job.model_id,
                document_key: Some(&contribution.document_key),
                payload: &render_payload,
                parent_job_id: Some(job.id),
                prerequisite_job_id: None,
                target_contribution_id: Some(contribution_id),
                max_attempts: self.config.max_attempts as i32,
            },
        )
        .await?;
        if let Some(id) = inserted {
            self.dispatch(unit, id, JobType::Render).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
