//! The rows one model call works from (its model, session, project and
//! stage), read in the statement that claims its job.

use crate::StoreError;
use crate::models::{MODEL_COLUMNS, ModelRow};
use crate::projects::{ProjectRow, project_for_user_sql};
use crate::sessions::{SessionRow, session_for_user_sql};
use crate::stages::{StageRow, stage_in_process_sql};
use dialectic_core::ids::{ModelId, SessionId};
use sqlx::types::Json;

/// What one model call works from: its model, the user's session and project
/// (not deleted), and the session's stage `stage_slug`.
#[derive(Debug, Clone)]
pub struct AttemptRows {
    pub model: ModelRow,
    pub session: SessionRow,
    pub project: ProjectRow,
    pub stage: StageRow,
}

/// The select list that reads [`AttemptRows`] for the session, user, stage
/// and model named by SQL expressions (a claimed job's columns), each row as
/// JSON under its own column names: one round trip where four reads took a
/// transaction of six.
pub(crate) fn attempt_rows_sql(session: &str, user: &str, stage: &str, model: &str) -> String {
    format!(
        "(SELECT to_jsonb(m) FROM (SELECT {MODEL_COLUMNS} FROM ai_providers WHERE id = {model}) m) AS model,
         (SELECT to_jsonb(s) FROM ({session_row}) s) AS session,
         (SELECT to_jsonb(p) FROM ({project}) p) AS project,
         (SELECT to_jsonb(st) FROM ({stage_row}) st) AS stage",
        session_row = session_for_user_sql(session, user),
        project = project_for_user_sql(
            &format!("(SELECT project_id FROM dialectic_sessions WHERE id = {session})"),
            user
        ),
        stage_row = stage_in_process_sql(session, stage),
    )
}

/// What [`attempt_rows_sql`] found; a row that is gone (another user's
/// session, a deleted project, a stage outside the session's process) is None.
#[derive(sqlx::FromRow)]
pub(crate) struct FoundAttemptRows {
    model: Option<Json<ModelRow>>,
    session: Option<Json<SessionRow>>,
    project: Option<Json<ProjectRow>>,
    stage: Option<Json<StageRow>>,
}

impl FoundAttemptRows {
    /// The rows, or NotFound naming the first one missing.
    pub(crate) fn into_rows(
        self,
        session_id: SessionId,
        stage_slug: &str,
        model_id: Option<ModelId>,
    ) -> Result<AttemptRows, StoreError> {
        let missing_model = || match model_id {
            Some(id) => StoreError::not_found("model", id),
            None => StoreError::not_found("model", "none named by the job"),
        };
        Ok(AttemptRows {
            model: self.model.ok_or_else(missing_model)?.0,
            session: self
                .session
                .ok_or_else(|| StoreError::not_found("session", session_id))?
                .0,
            project: self
                .project
                .ok_or_else(|| StoreError::not_found("project of session", session_id))?
                .0,
            stage: self
                .stage
                .ok_or_else(|| {
                    StoreError::not_found("stage", format!("{stage_slug} in the session's process"))
                })?
                .0,
        })
    }
}
