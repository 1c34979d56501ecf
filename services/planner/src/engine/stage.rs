//! A stage's life: its start (one root PLAN job per selected model, seed 000
//! §4.1) and its completion (seed 000 §§2–3), which moves the session on.

use super::plan::descendant_outputs;
use super::roles::{Placement, Roles};
use super::{Engine, PlannerError, Unit, lock_known_session, now_ms, parse_id, session_event};
use dialectic_cache::ProgressEvent;
use dialectic_core::ids::{JobId, ModelId, SessionId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::payload::JobPayload;
use dialectic_core::progress::EventKind;
use dialectic_core::recipe::{Recipe, RecipeStep};
use dialectic_core::session::{
    SessionEvent, StageCompletion, failed_stage_notice, stage_completion,
};
use dialectic_core::slug::slugify;
use dialectic_proto::v1::queue::{ResumeSession, StartStage};
use dialectic_store::jobs::{self, NewJob};
use dialectic_store::models::{self, ModelRow};
use dialectic_store::recipes;
use dialectic_store::sessions::{self, SessionRow};
use dialectic_store::stages::{self, StageRow};

/// The step a stage's root jobs run: its first PLAN step without predecessors.
fn root_step(recipe: &Recipe) -> Option<&RecipeStep> {
    recipe
        .entry_steps()
        .into_iter()
        .find(|s| s.job_type == JobType::Plan)
}

/// A root job's key: one per stage, iteration and model. A stage re-run
/// after a revisit gets new root jobs: the key carries the revision.
fn root_job_key(
    session: SessionId,
    stage: &str,
    iteration: i32,
    model: ModelId,
    revision: i32,
) -> String {
    let revision = match revision {
        0 => String::new(),
        n => format!(":r{n}"),
    };
    format!("{session}:{stage}:{iteration}:{model}{revision}")
}

/// A root planned after a revisit (its key names the revision): the only
/// kind that may adopt what the revisit kept.
pub(super) fn reruns_after_revisit(root_key: &str) -> bool {
    root_key
        .rsplit(':')
        .next()
        .and_then(|last| last.strip_prefix('r'))
        .is_some_and(|n| n.parse::<u32>().is_ok())
}

/// What every root job of a stage shares.
struct Roots {
    stage: StageRow,
    recipe: Recipe,
    step: RecipeStep,
    iteration: i32,
    /// An earlier stage's render or regeneration the roots wait for.
    waits_for: Option<JobId>,
}

impl Engine {
    /// Seed 000 §4.1: a StartStage command; the session machine's
    /// `PlanRootJobs` creates one root PLAN job per selected model.
    pub async fn start_stage(
        &self,
        command: &StartStage,
        traceparent: Option<&str>,
    ) -> Result<(), PlannerError> {
        let session_id = parse_id::<SessionId>(&command.session_id)?;
        let stage = command.stage_slug.as_str();
        let mut unit = self.begin(traceparent).await?;
        let Some(session) = lock_known_session(&mut unit, session_id).await? else {
            return Ok(());
        };
        if command.iteration.max(1) as i32 != session.iteration_count.max(1) {
            tracing::info!(
                iteration = command.iteration,
                session_iteration = session.iteration_count,
                "start of another iteration's stage; nothing to do"
            );
            return Ok(());
        }
        let event = SessionEvent::StartStage {
            stage: stage.to_string(),
        };
        // Refused when the stage already started or is not next; taken, its
        // effect plans the stage's root jobs.
        if self
            .try_session_event(&mut unit, &session, &event)
            .await?
            .is_none()
        {
            return Ok(());
        }
        unit.events.push(ProgressEvent {
            session_status: session.status.clone(),
            stage_slug: stage.to_string(),
            message: format!("{} root job(s) planned", session.selected_model_ids.len()),
            at_ms: now_ms(),
            ..ProgressEvent::new(EventKind::StageStarted, session_id.to_string())
        });
        self.finish(unit).await
    }

    /// Inserts and dispatches the stage's root jobs, one per selected model
    /// (idempotent by job key): the session machine's `PlanRootJobs`.
    pub(super) async fn plan_root_jobs(
        &self,
        unit: &mut Unit,
        session: &SessionRow,
        stage: &str,
        iteration: i32,
    ) -> Result<(), PlannerError> {
        let stage_row = stages::stage_in_process(&mut *unit.tx, session.id, stage).await?;
        let recipe = recipes::recipe_of_stage(&mut unit.tx, stage_row.id, &stage_row.slug).await?;
        let step = root_step(&recipe)
            .cloned()
            .ok_or_else(|| PlannerError::Recipe {
                stage: stage.to_string(),
                reason: "the recipe has no PLAN step without predecessors".into(),
            })?;
        // RENDER jobs do not gate their own stage, but this stage reads the
        // earlier stages' rendered documents: its root jobs wait for them, and
        // for a regeneration still writing a document they would read.
        let waits_for = jobs::outstanding_input_work(&mut unit.tx, session.id, stage).await?;
        if let Some(prerequisite) = waits_for {
            tracing::info!(%prerequisite, stage, "earlier documents still rendering or regenerating; the stage's root jobs wait for them");
        }
        let models = models::models_by_id(&mut *unit.tx, &session.selected_model_ids).await?;
        let roles = Roles::of(&mut unit.tx, session.model_roles.clone(), &[]).await?;
        let roots = Roots {
            stage: stage_row,
            recipe,
            step,
            iteration,
            waits_for,
        };
        for model_id in &session.selected_model_ids {
            let Some(model) = models.iter().find(|m| m.id == *model_id) else {
                return Err(PlannerError::Recipe {
                    stage: stage.to_string(),
                    reason: format!("model {model_id} no longer exists"),
                });
            };
            let placement = roles.root(&roots.step, model.id, &model.api_identifier);
            self.insert_root_job(unit, session, &roots, model, placement)
                .await?;
        }
        Ok(())
    }

    /// One root in the lineage of `model`, run where its step's role says.
    async fn insert_root_job(
        &self,
        unit: &mut Unit,
        session: &SessionRow,
        roots: &Roots,
        model: &ModelRow,
        placement: Placement,
    ) -> Result<(), PlannerError> {
        let stage = roots.stage.slug.as_str();
        let payload = JobPayload {
            step: Some(roots.step.clone()),
            model_api_identifier: placement.api_identifier,
            model_slug: slugify(&model.api_identifier, 40, "model"),
            stage_number: roots.stage.stage_number.max(0) as u32,
            planned_documents: descendant_outputs(&roots.recipe, &roots.step),
            render: None,
            recipe: Some(roots.recipe.clone()),
            sources: Vec::new(),
            lineage: None,
            lineage_model_id: placement.lineage_model_id,
            clarification: None,
        };
        let new = NewJob {
            id: JobId::new(),
            job_key: root_job_key(
                session.id,
                stage,
                roots.iteration,
                model.id,
                session.revision,
            ),
            session_id: session.id,
            user_id: session.user_id,
            stage_slug: stage,
            iteration: roots.iteration,
            job_type: JobType::Plan,
            status: match roots.waits_for {
                Some(_) => JobStatus::WaitingForPrerequisite,
                None => JobStatus::Pending,
            },
            step_id: Some(roots.step.id),
            step_key: Some(&roots.step.step_key),
            model_id: Some(placement.model_id),
            document_key: Some(&roots.step.output_type),
            payload: &payload,
            parent_job_id: None,
            prerequisite_job_id: roots.waits_for,
            target_contribution_id: None,
            max_attempts: self.config.max_attempts as i32,
        };
        let inserted = jobs::insert(&mut unit.tx, &new).await?;
        if let (Some(id), None) = (inserted, roots.waits_for) {
            self.dispatch(unit, id, JobType::Plan).await?;
        }
        Ok(())
    }

    /// A resume sent over the queue by a gateway of the previous release:
    /// the planner's ResumeSession RPC does the same in one step now.
    pub async fn resume_session(
        &self,
        command: &ResumeSession,
        traceparent: Option<&str>,
    ) -> Result<(), PlannerError> {
        let session_id = parse_id::<SessionId>(&command.session_id)?;
        let mut unit = self.begin(traceparent).await?;
        let Some(session) = lock_known_session(&mut unit, session_id).await? else {
            return Ok(());
        };
        if let Some(applied) = self
            .try_session_event(&mut unit, &session, &SessionEvent::Resume)
            .await?
        {
            unit.events
                .push(session_event(&applied, EventKind::SessionResumed));
        }
        self.finish(unit).await
    }

    /// Seed 000 §§2–3: when every root PLAN job of the stage is done, the
    /// session moves to the next stage's `pending_` status (or review); when
    /// they are all over and one failed, to `failed_<stage>`, its event
    /// carrying the notice that says which step failed and how to retry.
    pub(super) async fn check_stage(
        &self,
        unit: &mut Unit,
        session_id: SessionId,
        stage: &str,
        iteration: i32,
    ) -> Result<(), PlannerError> {
        let session = sessions::lock_session(&mut unit.tx, session_id).await?;
        let roots = jobs::root_jobs(&mut unit.tx, session_id, stage, iteration).await?;
        let stage_event = |kind| ProgressEvent {
            stage_slug: stage.to_string(),
            at_ms: now_ms(),
            ..ProgressEvent::new(kind, session_id.to_string())
        };
        match stage_completion(&roots) {
            StageCompletion::Incomplete => {}
            StageCompletion::Failed => {
                let event = SessionEvent::StageFailed {
                    stage: stage.to_string(),
                };
                // Refused when the session already failed here or moved on.
                let Some(applied) = self.try_session_event(unit, &session, &event).await? else {
                    return Ok(());
                };
                let failures =
                    jobs::failures_in_stage(&mut *unit.tx, session_id, stage, iteration).await?;
                let notice = failed_stage_notice(&session_id.to_string(), stage, &failures);
                tracing::warn!(%session_id, stage, %notice, "stage failed");
                unit.events.push(ProgressEvent {
                    session_status: applied.status,
                    message: notice,
                    ..stage_event(EventKind::StageFailed)
                });
            }
            StageCompletion::Complete => {
                let stage_row = stages::stage_in_process(&mut *unit.tx, session_id, stage).await?;
                let event = SessionEvent::StageCompleted {
                    stage: stage.to_string(),
                    next: stage_row.next_stage_slug,
                    auto_advance: session.auto_advance,
                };
                // Refused when the session already moved on (a duplicate check).
                let Some(applied) = self.try_session_event(unit, &session, &event).await? else {
                    return Ok(());
                };
                let status = applied.status;
                tracing::info!(%session_id, stage, %status, "stage complete");
                unit.events.push(ProgressEvent {
                    session_status: status,
                    stage_percent: 100,
                    ..stage_event(EventKind::StageCompleted)
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_job_key_names_its_revision_only_after_a_revisit() {
        let (session, model) = (SessionId::new(), ModelId::new());
        let first = root_job_key(session, "thesis", 1, model, 0);
        assert_eq!(first, format!("{session}:thesis:1:{model}"));
        let rerun = root_job_key(session, "thesis", 1, model, 2);
        assert_eq!(rerun, format!("{session}:thesis:1:{model}:r2"));
        assert!(reruns_after_revisit(&rerun));
        assert!(!reruns_after_revisit(&first));
        assert!(!reruns_after_revisit(&format!("{}:plan", JobId::new())));
    }
}
