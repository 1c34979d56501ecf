//! What a reply publishes besides its document: the steps its plan skips
//! (adaptive execution, bounded by each step's `skip_only_when`) and its
//! blackboard entries.

use super::{Engine, PlannerError, Unit};
use dialectic_core::blackboard::BoardEntry;
use dialectic_core::progress::EventKind;
use dialectic_core::shape::SkipStep;
use dialectic_core::skip_rule::{self, SkipFacts};
use dialectic_proto::v1::queue::{
    BoardEntry as QueueBoardEntry, JobSucceeded, SkipStep as QueueSkipStep,
};
use dialectic_store::jobs::JobRow;
use dialectic_store::{blackboard, project_documents, skips};

impl Engine {
    /// Records the reply's skips and blackboard entries, with an event each.
    pub(super) async fn record_published(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        done: &JobSucceeded,
    ) -> Result<(), PlannerError> {
        if !done.skip_steps.is_empty() {
            self.record_skips(unit, job, &done.skip_steps).await?;
        }
        if !done.blackboard.is_empty() {
            self.record_board(unit, job, &done.blackboard).await?;
        }
        Ok(())
    }

    /// The steps a plan skips, for this session only. A skip its step's
    /// `skip_only_when` does not allow is overruled (the step runs); one
    /// naming a step of another pipeline, or one already skipped, changes
    /// nothing; watchers see each skip, each overruled one with the
    /// condition that did not hold, and each ignored name.
    async fn record_skips(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        asked: &[QueueSkipStep],
    ) -> Result<(), PlannerError> {
        let rules = skips::step_rules(&mut unit.tx, job.session_id).await?;
        let documents =
            project_documents::for_rule(&mut *unit.tx, job.session_id, Default::default())
                .await?
                .len();
        let asked = asked
            .iter()
            .map(|s| SkipStep {
                step_key: s.step_key.clone(),
                reason: s.reason.clone(),
            })
            .collect();
        let judged = skip_rule::judge(asked, &rules, SkipFacts { documents });
        let added = skips::record(
            &mut unit.tx,
            job.session_id,
            job.iteration_number,
            job.id,
            &judged.allowed,
        )
        .await?;
        let refused = judged.overruled.into_iter().chain(
            judged
                .unknown
                .into_iter()
                .map(|s| (s, "no such step in this pipeline".to_string())),
        );
        let told = added
            .into_iter()
            .map(|s| (EventKind::StepSkipped, s.step_key, s.reason))
            .chain(refused.map(|(s, why)| (EventKind::SkipIgnored, s.step_key, why)));
        for (kind, step_key, why) in told {
            let mut event = self.job_event(unit, job, kind).await?;
            event.message = format!("{step_key}: {why}");
            unit.events.push(event);
        }
        Ok(())
    }

    /// Seed 004 §1: records what a reply published on the blackboard.
    async fn record_board(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        published: &[QueueBoardEntry],
    ) -> Result<(), PlannerError> {
        let entries = published
            .iter()
            .map(|e| {
                Ok(BoardEntry {
                    entry_type: e.entry_type.clone(),
                    data: serde_json::from_str(&e.data_json)
                        .map_err(|e| PlannerError::BadMessage(format!("blackboard entry: {e}")))?,
                })
            })
            .collect::<Result<Vec<_>, PlannerError>>()?;
        self.publish(unit, job, &entries).await
    }

    /// Records blackboard entries as published by `job` and tells watchers;
    /// the Redis copy follows the commit.
    pub(crate) async fn publish(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        entries: &[BoardEntry],
    ) -> Result<(), PlannerError> {
        let payload = job.payload()?;
        let by = blackboard::Publisher {
            session_id: job.session_id,
            iteration: job.iteration_number,
            stage_slug: &job.stage_slug,
            step_key: job.step_key.as_deref().unwrap_or_default(),
            model_slug: &payload.model_slug,
            job_id: job.id,
        };
        for recorded in blackboard::record(&mut unit.tx, &by, entries).await? {
            let mut event = self
                .job_event(unit, job, EventKind::BlackboardEntry)
                .await?;
            event.document_key = recorded.entry.entry_type.clone();
            event.message = recorded.entry.data.to_string();
            unit.events.push(event);
            unit.board.push((job.session_id, recorded));
        }
        Ok(())
    }
}
