//! Clarification rounds (seed 004 `needs_clarification`), applied after the
//! asking job's success: the asked step and every step downstream of it in
//! the stage are superseded under their root, which plans them again (the
//! question in their prompts, see `Engine::plan_next`), at most
//! `planner.max_clarification_rounds` rounds per session. One round per
//! reply: further requests in it are ignored, with an event each.

use crate::engine::{Engine, PlannerError, Unit};
use dialectic_core::clarify::{self, Clarification, ClarificationRequest};
use dialectic_core::ids::JobId;
use dialectic_core::progress::EventKind;
use dialectic_store::clarifications::{self, Asked};
use dialectic_store::jobs::{self, JobRow};

impl Engine {
    pub(crate) async fn clarify(
        &self,
        unit: &mut Unit,
        job_id: JobId,
        asked: &[ClarificationRequest],
    ) -> Result<(), PlannerError> {
        let job = jobs::lock(&mut unit.tx, job_id).await?;
        let Some((first, rest)) = asked.split_first() else {
            return Ok(());
        };
        for ignored in rest {
            self.ignore(unit, &job, ignored, "one round per reply")
                .await?;
        }
        let Some(root_id) = job.parent_job_id else {
            return self
                .ignore(
                    unit,
                    &job,
                    first,
                    "a stage's first plan has nothing before it",
                )
                .await;
        };
        let root = jobs::lock(&mut unit.tx, root_id).await?;
        let Some(recipe) = root.payload()?.recipe else {
            return self.ignore(unit, &job, first, "no recipe to re-run").await;
        };
        let rounds = clarifications::rounds(&mut unit.tx, job.session_id).await?;
        let max = self.config.max_clarification_rounds;
        let steps = match clarify::rerun_steps(&recipe, first, rounds, max) {
            Ok(steps) => steps,
            Err(refused) => return self.ignore(unit, &job, first, &refused.to_string()).await,
        };
        let round = Clarification {
            round: rounds + 1,
            asked_by: job.step_key.clone().unwrap_or_default(),
            step_key: first.step_key.clone(),
            question: first.question.clone(),
        };
        let at = Asked {
            session_id: job.session_id,
            iteration: job.iteration_number,
            stage_slug: &job.stage_slug,
            job_id: job.id,
        };
        clarifications::record(&mut unit.tx, &at, &round).await?;
        let replaced = clarifications::supersede_steps(&mut unit.tx, root.id, &steps).await?;
        let mut event = self
            .job_event(unit, &job, EventKind::ClarificationRequested)
            .await?;
        event.message = format!(
            "round {} of {max}: {} asked {}: {} ({replaced} job(s) run again)",
            round.round, round.asked_by, round.step_key, round.question
        );
        unit.events.push(event);
        Ok(())
    }

    async fn ignore(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        asked: &ClarificationRequest,
        why: &str,
    ) -> Result<(), PlannerError> {
        let mut event = self
            .job_event(unit, job, EventKind::ClarificationIgnored)
            .await?;
        event.message = format!("{}: {why}", asked.step_key);
        unit.events.push(event);
        Ok(())
    }
}
