//! What one attempt works from: the job's payload and step and the rows it
//! names (model, session, project, stage), read by its claim.

use crate::permanent;
use dialectic_core::paths::{FileKind, PathContext};
use dialectic_core::payload::JobPayload;
use dialectic_core::recipe::RecipeStep;
use dialectic_runtime::worker::AttemptError;
use dialectic_store::StoreError;
use dialectic_store::attempts::AttemptRows;
use dialectic_store::jobs::JobRow;
use dialectic_store::models::ModelRow;
use dialectic_store::projects::ProjectRow;
use dialectic_store::sessions::SessionRow;
use dialectic_store::stages::StageRow;

pub(crate) struct Attempt<'a> {
    pub job: &'a JobRow,
    pub payload: JobPayload,
    pub step: RecipeStep,
    pub model: ModelRow,
    pub session: SessionRow,
    pub project: ProjectRow,
    pub stage: StageRow,
}

impl Attempt<'_> {
    /// The object key of a file in this attempt's stage folder (seed 001 layout).
    pub(crate) fn storage_key(&self, file: FileKind) -> Result<String, AttemptError> {
        PathContext {
            project_id: self.project.id,
            session_short: self.session.id.short(),
            iteration: self.job.iteration_number.max(1) as u32,
            stage_number: self.payload.stage_number,
            stage_slug: self.job.stage_slug.clone(),
            file,
        }
        .construct()
        .map_err(|e| permanent("bad_path", e))
    }
}

impl<'a> Attempt<'a> {
    /// The attempt from its claimed job and the rows the claim read with it.
    pub(crate) fn from_claim(
        job: &'a JobRow,
        rows: Result<AttemptRows, StoreError>,
    ) -> Result<Self, AttemptError> {
        let payload = job.payload()?;
        let step = payload
            .step
            .clone()
            .ok_or_else(|| permanent("bad_payload", "job has no recipe step"))?;
        if job.model_id.is_none() {
            return Err(permanent("bad_payload", "job has no model"));
        }
        let rows = rows?;
        Ok(Attempt {
            job,
            payload,
            step,
            model: rows.model,
            session: rows.session,
            project: rows.project,
            stage: rows.stage,
        })
    }
}
