//! One session transition through core's session machine: the new state is
//! stored and the machine's effects carried out, in the caller's unit.

use super::{Engine, PlannerError, Unit};
use crate::commands::regenerate::{self, Regeneration};
use dialectic_core::session::{SessionEffect, SessionEvent, Transition, transition};
use dialectic_store::jobs;
use dialectic_store::sessions::{self, SessionRow};

/// What an effect needs from the command that caused it, beyond the session.
#[derive(Default)]
pub(crate) struct EffectInputs<'a> {
    /// A RegenerateDocument command's document: its effect writes it again
    /// and leaves the command's answer here.
    pub(crate) regeneration: Option<&'a mut Regeneration>,
}

impl Engine {
    /// Applies `event` to a locked session; an event its state does not take
    /// is refused (`PlannerError::Refused`) and changes nothing.
    pub(crate) async fn apply_session_event(
        &self,
        unit: &mut Unit,
        session: &SessionRow,
        event: &SessionEvent,
    ) -> Result<SessionRow, PlannerError> {
        let mut inputs = EffectInputs::default();
        self.apply_session_event_with(unit, session, event, &mut inputs)
            .await
    }

    /// As `apply_session_event`, for a command whose effects need its inputs.
    pub(crate) async fn apply_session_event_with(
        &self,
        unit: &mut Unit,
        session: &SessionRow,
        event: &SessionEvent,
        inputs: &mut EffectInputs<'_>,
    ) -> Result<SessionRow, PlannerError> {
        let t = transition(&session.state()?, event)?;
        self.carry_out_session(unit, session, &t, inputs).await
    }

    /// As `apply_session_event`, for callers to whom a refusal means
    /// "nothing to do" (a duplicate or late message): None, logged.
    pub(crate) async fn try_session_event(
        &self,
        unit: &mut Unit,
        session: &SessionRow,
        event: &SessionEvent,
    ) -> Result<Option<SessionRow>, PlannerError> {
        match transition(&session.state()?, event) {
            Ok(t) => {
                let mut inputs = EffectInputs::default();
                let row = self.carry_out_session(unit, session, &t, &mut inputs);
                Ok(Some(row.await?))
            }
            Err(refused) => {
                tracing::info!(session_id = %session.id, %refused, "session event not taken; nothing to do");
                Ok(None)
            }
        }
    }

    /// Stores the transition's state and carries out its effects, in order:
    /// the one place a session machine's effects are done.
    async fn carry_out_session(
        &self,
        unit: &mut Unit,
        session: &SessionRow,
        t: &Transition,
        inputs: &mut EffectInputs<'_>,
    ) -> Result<SessionRow, PlannerError> {
        let mut row = session.clone();
        if t.changes(&session.state()?) {
            row = sessions::write_session_state(&mut unit.tx, session.id, &t.to).await?;
        }
        for effect in &t.effects {
            self.carry_out_session_effect(unit, &mut row, effect, inputs)
                .await?;
        }
        Ok(row)
    }

    async fn carry_out_session_effect(
        &self,
        unit: &mut Unit,
        row: &mut SessionRow,
        effect: &SessionEffect,
        inputs: &mut EffectInputs<'_>,
    ) -> Result<(), PlannerError> {
        match effect {
            SessionEffect::BeginIteration => {
                sessions::begin_iteration(&mut unit.tx, row.id).await?;
                row.iteration_count += 1;
            }
            SessionEffect::BeginRevision => {
                sessions::begin_revision(&mut unit.tx, row.id).await?;
                row.revision += 1;
            }
            SessionEffect::StartStage { stage } => {
                self.send_start_stage(unit, row.id, stage, row.iteration_count)
                    .await?
            }
            SessionEffect::DispatchWaiting => {
                for (job, job_type) in jobs::awaiting_dispatch(&mut unit.tx, row.id).await? {
                    self.dispatch(unit, job, job_type).await?;
                }
            }
            SessionEffect::PlanRootJobs { stage } => {
                let iteration = row.iteration_count.max(1);
                self.plan_root_jobs(unit, row, stage, iteration).await?
            }
            SessionEffect::RegenerateDocument => {
                let Some(order) = inputs.regeneration.as_deref_mut() else {
                    return Err(PlannerError::BadMessage(
                        "a document regeneration without its document".into(),
                    ));
                };
                regenerate::carry_out(self, unit, row, order).await?
            }
        }
        Ok(())
    }
}
