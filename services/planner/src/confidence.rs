//! Confidence gates applied to a job's success: a gated reply below its gate
//! is superseded (kept in history) and its step runs again as a sibling job
//! (the parent waits for it), at most `max_reruns` times, optionally on the
//! gate's `rerun_model`; the reply kept after the last rerun is flagged on
//! its contribution and as a `low_confidence` blackboard entry.

use crate::engine::{Engine, PlannerError, Unit, parse_id};
use dialectic_core::blackboard::BoardEntry;
use dialectic_core::gate::{self, ConfidenceGate, GateDecision};
use dialectic_core::ids::{ContributionId, JobId};
use dialectic_core::job::JobType;
use dialectic_core::payload::JobPayload;
use dialectic_core::progress::EventKind;
use dialectic_proto::v1::queue::JobSucceeded;
use dialectic_store::jobs::{self, JobRow};
use dialectic_store::{contributions, gates, models, regenerate};
use serde_json::json;

impl Engine {
    /// Applies the step's gate to a finished reply; true when the step runs
    /// again (the reply is superseded and must not render).
    pub(crate) async fn apply_gate(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        payload: &JobPayload,
        done: &JobSucceeded,
    ) -> Result<bool, PlannerError> {
        let Some(gate) = payload
            .step
            .as_ref()
            .and_then(|s| s.own_output())
            .and_then(|o| o.confidence_gate.clone())
        else {
            return Ok(false);
        };
        let contribution = parse_id::<ContributionId>(&done.contribution_id)?;
        match gate::decide(&gate, done.confidence, &job.job_key) {
            GateDecision::Pass => {
                gates::record(&mut unit.tx, contribution, done.confidence, false).await?;
                Ok(false)
            }
            GateDecision::Rerun { number, job_key } => {
                gates::record(&mut unit.tx, contribution, done.confidence, false).await?;
                supersede_document(unit, job, contribution).await?;
                let rerun = Rerun {
                    gate: &gate,
                    number,
                    job_key: &job_key,
                    confidence: done.confidence.unwrap_or_default(),
                };
                self.spawn_rerun(unit, job, payload, &rerun).await?;
                Ok(true)
            }
            GateDecision::Flag { reruns } => {
                gates::record(&mut unit.tx, contribution, done.confidence, true).await?;
                let confidence = done.confidence.unwrap_or_default();
                let entry = BoardEntry {
                    entry_type: gate::LOW_CONFIDENCE.to_string(),
                    data: json!({
                        "step_key": job.step_key, "document_key": job.document_key,
                        "contribution_id": contribution.to_string(), "confidence": confidence,
                        "min_confidence": gate.min_confidence, "reruns": reruns,
                    }),
                };
                self.publish(unit, job, &[entry]).await?;
                let mut event = self.job_event(unit, job, EventKind::LowConfidence).await?;
                event.message = format!(
                    "{}: kept with confidence {confidence:.2}, below {:.2}, after {reruns} rerun(s)",
                    job.step_key.as_deref().unwrap_or_default(),
                    gate.min_confidence
                );
                unit.events.push(event);
                Ok(false)
            }
        }
    }

    /// Copies the job as its next rerun (attempts, and so file names, continue
    /// after its own), on the gate's model when it names one.
    async fn spawn_rerun(
        &self,
        unit: &mut Unit,
        job: &JobRow,
        payload: &JobPayload,
        rerun: &Rerun<'_>,
    ) -> Result<(), PlannerError> {
        // The parent before its new child, as a continuation does.
        if let Some(parent) = job.parent_job_id {
            jobs::lock(&mut unit.tx, parent).await?;
        }
        let id = JobId::new();
        regenerate::insert_job(
            &mut unit.tx,
            job.id,
            id,
            rerun.job_key,
            job.attempt_count,
            self.config.max_attempts as i32,
        )
        .await?;
        let model = match &rerun.gate.rerun_model {
            Some(identifier) => {
                let model = models::model_by_identifier(&mut *unit.tx, identifier).await?;
                // Named and read in the root's lineage; written and paid by the gate's model.
                let moved = JobPayload {
                    model_api_identifier: model.api_identifier.clone(),
                    lineage_model_id: payload.lineage_model_id.or(job.model_id),
                    ..payload.clone()
                };
                let moved = serde_json::to_value(&moved)
                    .map_err(|e| PlannerError::BadMessage(e.to_string()))?;
                regenerate::set_model(&mut unit.tx, id, model.id, &moved).await?;
                model.api_identifier
            }
            None => payload.model_api_identifier.clone(),
        };
        self.dispatch(unit, id, JobType::Execute).await?;
        let mut event = self
            .job_event(unit, job, EventKind::ConfidenceRerun)
            .await?;
        event.job_id = id.to_string();
        event.message = format!(
            "{}: confidence {:.2} below {:.2}; rerun {} of {} on {model}",
            job.step_key.as_deref().unwrap_or_default(),
            rerun.confidence,
            rerun.gate.min_confidence,
            rerun.number,
            rerun.gate.max_reruns
        );
        unit.events.push(event);
        Ok(())
    }
}

/// Supersedes the reply's whole document: its chunk and, for a continued
/// document, every earlier chunk of its chain.
async fn supersede_document(
    unit: &mut Unit,
    job: &JobRow,
    contribution: ContributionId,
) -> Result<(), PlannerError> {
    let row = contributions::contribution(&mut *unit.tx, contribution).await?;
    let identity = row
        .document_relationships
        .as_ref()
        .and_then(|r| r.0.get(&job.stage_slug))
        .and_then(|v| v.as_str())
        .and_then(|id| ContributionId::parse(id).ok());
    contributions::supersede(&mut unit.tx, contribution).await?;
    if let Some(identity) = identity {
        contributions::supersede_chain(
            &mut unit.tx,
            job.session_id,
            &job.stage_slug,
            identity,
            contribution,
        )
        .await?;
    }
    Ok(())
}

struct Rerun<'a> {
    gate: &'a ConfidenceGate,
    number: u32,
    job_key: &'a str,
    confidence: f64,
}
