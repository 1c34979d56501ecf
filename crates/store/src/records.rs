//! Projects, sessions, models, stages, contributions, resources and templates.
//! Reads that act for a user take the user id and match it, so another
//! user's row is simply not found.

use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{
    ContributionId, JobId, ModelId, ProjectId, ResourceId, SessionId, StageId, UserId, WalletId,
};
use dialectic_core::job::JobStatus;
use dialectic_core::session::{SessionState, SessionStatus};
use sqlx::PgPool;
use sqlx::types::Json;
use uuid::Uuid;

#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub struct ProjectRow {
    pub id: ProjectId,
    pub user_id: UserId,
    pub project_name: String,
    pub slug: String,
    pub initial_user_prompt: String,
    pub initial_prompt_storage_key: Option<String>,
    pub process_template_id: Uuid,
    pub created_at: DateTime<Utc>,
    /// The pipeline's slug.
    pub pipeline: String,
}

#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub struct SessionRow {
    pub id: SessionId,
    pub project_id: ProjectId,
    pub user_id: UserId,
    pub status: String,
    pub iteration_count: i32,
    pub current_stage_id: Option<Uuid>,
    pub selected_model_ids: Vec<ModelId>,
    pub auto_advance: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Bumped by each revisit that rewinds the session (root job keys carry it).
    pub revision: i32,
    /// While paused, the status a resume returns to.
    pub paused_from: Option<String>,
    /// The pipeline version it runs (None: a row an older build wrote).
    pub pipeline_version: Option<i32>,
}

#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub struct ModelRow {
    pub id: ModelId,
    pub api_identifier: String,
    pub name: String,
    pub provider: String,
    pub context_window_tokens: i32,
    pub max_output_tokens: i32,
    pub input_token_cost_rate: f64,
    pub output_token_cost_rate: f64,
    pub tokenizer: String,
    /// Name of the environment variable holding the provider key (never the key).
    pub secret_name: Option<String>,
    /// Provider settings such as `base_url`.
    pub config: Json<serde_json::Value>,
}

#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub struct StageRow {
    pub id: StageId,
    pub slug: String,
    pub display_name: String,
    pub stage_number: i32,
    pub system_prompt: Option<String>,
    pub next_stage_slug: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ContributionRow {
    pub id: ContributionId,
    pub session_id: SessionId,
    pub job_id: Option<JobId>,
    pub attempt: Option<i32>,
    pub model_id: Option<ModelId>,
    pub model_name: Option<String>,
    pub stage_slug: String,
    pub iteration_number: i32,
    pub document_key: String,
    pub storage_path: String,
    pub file_name: String,
    pub raw_response_storage_path: String,
    pub finish_reason: Option<String>,
    pub target_contribution_id: Option<ContributionId>,
    pub document_relationships: Option<Json<serde_json::Value>>,
    pub edit_version: i32,
    pub is_latest_edit: bool,
    pub contribution_type: String,
    pub is_incomplete: bool,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ResourceRow {
    pub id: ResourceId,
    pub project_id: ProjectId,
    pub session_id: Option<SessionId>,
    pub stage_slug: Option<String>,
    pub iteration_number: Option<i32>,
    pub resource_type: String,
    pub document_key: Option<String>,
    pub model_id: Option<ModelId>,
    pub file_name: String,
    pub storage_bucket: String,
    pub storage_path: String,
    pub mime_type: String,
    pub size_bytes: i64,
    pub source_contribution_id: Option<ContributionId>,
    pub is_incomplete: bool,
    pub updated_at: DateTime<Utc>,
}

impl SessionRow {
    pub fn session_status(&self) -> Result<SessionStatus, StoreError> {
        parse_status(&self.status)
    }

    /// The state core's session machine takes.
    pub fn state(&self) -> Result<SessionState, StoreError> {
        Ok(SessionState {
            status: self.session_status()?,
            paused_from: self.paused_from.as_deref().map(parse_status).transpose()?,
        })
    }
}

fn parse_status(text: &str) -> Result<SessionStatus, StoreError> {
    SessionStatus::parse(text).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl ResourceRow {
    pub fn key(&self) -> String {
        format!("{}/{}", self.storage_path, self.file_name)
    }
}

pub struct NewProject<'a> {
    pub id: ProjectId,
    pub user_id: UserId,
    pub name: &'a str,
    pub slug: &'a str,
    pub prompt: &'a str,
    pub prompt_key: &'a str,
    pub client_request_id: Option<&'a str>,
    /// The pipeline's slug.
    pub pipeline: &'a str,
}

/// The pipeline a project runs when its creator names none.
pub const DEFAULT_PIPELINE: &str = "dialectic";

pub(crate) const PROJECT_COLUMNS: &str = "id, user_id, project_name, slug, initial_user_prompt, initial_prompt_storage_key, process_template_id, created_at,
    (SELECT COALESCE(t.slug, '') FROM dialectic_process_templates t WHERE t.id = process_template_id) AS pipeline";

/// Inserts a project on the pipeline it names. With a client request id, a
/// repeated call returns the first project instead of creating another.
pub async fn insert_project(
    pool: &PgPool,
    p: &NewProject<'_>,
) -> Result<(ProjectRow, bool), StoreError> {
    let inserted = sqlx::query_as::<_, ProjectRow>(&format!(
        "INSERT INTO dialectic_projects (id, user_id, project_name, slug, initial_user_prompt, initial_prompt_storage_key,
                                         process_template_id, client_request_id)
         SELECT $1, $2, $3, $4, $5, $6, id, $7 FROM dialectic_process_templates WHERE slug = $8
         ORDER BY version DESC LIMIT 1
         ON CONFLICT (user_id, client_request_id) DO NOTHING
         RETURNING {PROJECT_COLUMNS}"
    ))
    .bind(p.id)
    .bind(p.user_id)
    .bind(p.name)
    .bind(p.slug)
    .bind(p.prompt)
    .bind(p.prompt_key)
    .bind(p.client_request_id)
    .bind(p.pipeline)
    .fetch_optional(pool)
    .await?;
    if let Some(row) = inserted {
        return Ok((row, true));
    }
    let existing = sqlx::query_as::<_, ProjectRow>(&format!(
        "SELECT {PROJECT_COLUMNS} FROM dialectic_projects WHERE user_id = $1 AND client_request_id = $2"
    ))
    .bind(p.user_id)
    .bind(p.client_request_id)
    .fetch_optional(pool)
    .await?;
    existing
        .map(|r| (r, false))
        .ok_or_else(|| StoreError::not_found("pipeline", format!("{:?}", p.pipeline)))
}

/// The user's project `id` unless deleted; `id` and `user` are SQL expressions.
fn project_for_user_sql(id: &str, user: &str) -> String {
    format!(
        "SELECT {PROJECT_COLUMNS} FROM dialectic_projects WHERE id = {id} AND user_id = {user} AND deleted_at IS NULL"
    )
}

pub async fn project_for_user(
    executor: impl sqlx::PgExecutor<'_>,
    user_id: UserId,
    id: ProjectId,
) -> Result<ProjectRow, StoreError> {
    sqlx::query_as::<_, ProjectRow>(&project_for_user_sql("$1", "$2"))
        .bind(id)
        .bind(user_id)
        .fetch_optional(executor)
        .await?
        .ok_or_else(|| StoreError::not_found("project", id))
}

pub async fn project(tx: &mut Tx<'_>, id: ProjectId) -> Result<ProjectRow, StoreError> {
    sqlx::query_as::<_, ProjectRow>(&format!(
        "SELECT {PROJECT_COLUMNS} FROM dialectic_projects WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::not_found("project", id))
}

const MODEL_COLUMNS: &str =
    "id, api_identifier, name, provider, context_window_tokens, max_output_tokens,
    input_token_cost_rate, output_token_cost_rate, tokenizer, secret_name, config";

pub async fn active_models(pool: &PgPool) -> Result<Vec<ModelRow>, StoreError> {
    Ok(sqlx::query_as::<_, ModelRow>(&format!(
        "SELECT {MODEL_COLUMNS} FROM ai_providers WHERE is_active ORDER BY api_identifier"
    ))
    .fetch_all(pool)
    .await?)
}

pub async fn models_by_id(
    executor: impl sqlx::PgExecutor<'_>,
    ids: &[ModelId],
) -> Result<Vec<ModelRow>, StoreError> {
    Ok(sqlx::query_as::<_, ModelRow>(&format!(
        "SELECT {MODEL_COLUMNS} FROM ai_providers WHERE id = ANY($1)"
    ))
    .bind(ids)
    .fetch_all(executor)
    .await?)
}

pub async fn model_by_identifier(
    executor: impl sqlx::PgExecutor<'_>,
    api_identifier: &str,
) -> Result<ModelRow, StoreError> {
    sqlx::query_as::<_, ModelRow>(&format!(
        "SELECT {MODEL_COLUMNS} FROM ai_providers WHERE api_identifier = $1 AND is_active"
    ))
    .bind(api_identifier)
    .fetch_optional(executor)
    .await?
    .ok_or_else(|| StoreError::not_found("model", api_identifier))
}

pub async fn model(
    executor: impl sqlx::PgExecutor<'_>,
    id: ModelId,
) -> Result<ModelRow, StoreError> {
    models_by_id(executor, &[id])
        .await?
        .pop()
        .ok_or_else(|| StoreError::not_found("model", id))
}

/// The process template (pipeline version) of the session `session` (an SQL
/// expression): its own, else (a row an older build wrote) its project's.
pub(crate) fn session_process(session: &str) -> String {
    format!(
        "(SELECT COALESCE(s.process_template_id, p.process_template_id)
         FROM dialectic_sessions s JOIN dialectic_projects p ON p.id = s.project_id WHERE s.id = {session})"
    )
}

pub(crate) const SESSION_COLUMNS: &str = "id, project_id, user_id, status, iteration_count, current_stage_id, selected_model_ids, auto_advance, created_at, updated_at, revision, paused_from,
    (SELECT t.version FROM dialectic_process_templates t WHERE t.id = process_template_id) AS pipeline_version";

pub struct NewSession<'a> {
    pub id: SessionId,
    pub project_id: ProjectId,
    pub user_id: UserId,
    pub model_ids: &'a [ModelId],
    pub description: Option<&'a str>,
    pub client_request_id: Option<&'a str>,
    pub auto_advance: bool,
}

/// Inserts the session at `pending_<first stage>` of the newest version of
/// its project's pipeline, which it keeps; returns (row, created).
pub async fn insert_session(
    tx: &mut Tx<'_>,
    s: &NewSession<'_>,
) -> Result<(SessionRow, bool), StoreError> {
    let inserted = sqlx::query_as::<_, SessionRow>(&format!(
        "INSERT INTO dialectic_sessions (id, project_id, user_id, status, current_stage_id, selected_model_ids,
                                         session_description, client_request_id, auto_advance, process_template_id)
         SELECT $1, p.id, $3, $8 || st.slug, st.id, $4, $5, $6, $7, t.id
         FROM dialectic_projects p
         JOIN dialectic_process_templates pinned ON pinned.id = p.process_template_id
         JOIN LATERAL (SELECT id, starting_stage_id FROM dialectic_process_templates v
                        WHERE v.id = pinned.id OR v.slug = pinned.slug
                        ORDER BY v.version DESC LIMIT 1) t ON true
         JOIN dialectic_stages st ON st.id = t.starting_stage_id
         WHERE p.id = $2 AND p.user_id = $3
         ON CONFLICT (user_id, client_request_id) DO NOTHING
         RETURNING {SESSION_COLUMNS}"
    ))
    .bind(s.id)
    .bind(s.project_id)
    .bind(s.user_id)
    .bind(s.model_ids)
    .bind(s.description)
    .bind(s.client_request_id)
    .bind(s.auto_advance)
    .bind(SessionStatus::PENDING_PREFIX)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(row) = inserted {
        return Ok((row, true));
    }
    if let Some(request_id) = s.client_request_id {
        let existing = sqlx::query_as::<_, SessionRow>(&format!(
            "SELECT {SESSION_COLUMNS} FROM dialectic_sessions WHERE user_id = $1 AND client_request_id = $2"
        ))
        .bind(s.user_id)
        .bind(request_id)
        .fetch_optional(&mut **tx)
        .await?;
        if let Some(row) = existing {
            return Ok((row, false));
        }
    }
    Err(StoreError::not_found("project", s.project_id))
}

/// The session `$1` of user `$2`, unless its project was deleted.
fn session_for_user_sql(id: &str, user: &str) -> String {
    format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions s WHERE id = {id} AND user_id = {user}
         AND NOT EXISTS (SELECT 1 FROM dialectic_projects p WHERE p.id = s.project_id AND p.deleted_at IS NOT NULL)"
    )
}

pub async fn session_for_user(
    executor: impl sqlx::PgExecutor<'_>,
    user_id: UserId,
    id: SessionId,
) -> Result<SessionRow, StoreError> {
    sqlx::query_as::<_, SessionRow>(&session_for_user_sql("$1", "$2"))
        .bind(id)
        .bind(user_id)
        .fetch_optional(executor)
        .await?
        .ok_or_else(|| StoreError::not_found("session", id))
}

/// Serialises the session's writers. `NO KEY UPDATE`, not `UPDATE`: rows
/// that reference the session (a contribution, a document, a job) check that
/// key with a share lock, which only `FOR UPDATE` would block, so an executor
/// recording a reply need not wait for the planner's unit on its session.
pub async fn lock_session(tx: &mut Tx<'_>, id: SessionId) -> Result<SessionRow, StoreError> {
    sqlx::query_as::<_, SessionRow>(&format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions WHERE id = $1 FOR NO KEY UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::not_found("session", id))
}

/// The first stage of the session's process (a new iteration starts there).
pub async fn first_stage(tx: &mut Tx<'_>, session_id: SessionId) -> Result<String, StoreError> {
    sqlx::query_scalar(&format!(
        "SELECT st.slug FROM dialectic_process_templates t
         JOIN dialectic_stages st ON st.id = t.starting_stage_id
         WHERE t.id = {process}",
        process = session_process("$1")
    ))
    .bind(session_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::not_found("session", session_id))
}

/// Stores a state that core's session machine produced (the planner is its
/// only caller). The current stage follows the status a resume would return to.
pub async fn write_session_state(
    tx: &mut Tx<'_>,
    id: SessionId,
    state: &SessionState,
) -> Result<SessionRow, StoreError> {
    sqlx::query_as::<_, SessionRow>(&format!(
        "UPDATE dialectic_sessions
         SET status = $2, paused_from = $3,
             current_stage_id = COALESCE(
                 (SELECT st.id FROM dialectic_process_template_stages pts
                  JOIN dialectic_stages st ON st.id = pts.stage_id
                  WHERE st.slug = $4 AND pts.process_template_id = {process}),
                 current_stage_id),
             updated_at = now()
         WHERE id = $1
         RETURNING {SESSION_COLUMNS}",
        process = session_process("$1")
    ))
    .bind(id)
    .bind(state.status.to_string())
    .bind(state.paused_from.as_ref().map(SessionStatus::to_string))
    .bind(state.effective().stage())
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::not_found("session", id))
}

/// Moves the session's iteration counter on by one.
pub async fn begin_iteration(tx: &mut Tx<'_>, id: SessionId) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_sessions SET iteration_count = iteration_count + 1 WHERE id = $1",
    )
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Moves the session's revision counter on by one (a re-run stage gets new root jobs).
pub async fn begin_revision(tx: &mut Tx<'_>, id: SessionId) -> Result<(), StoreError> {
    sqlx::query("UPDATE dialectic_sessions SET revision = revision + 1 WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The project a session belongs to.
pub async fn project_of_session(
    tx: &mut Tx<'_>,
    session_id: SessionId,
) -> Result<ProjectId, StoreError> {
    sqlx::query_scalar("SELECT project_id FROM dialectic_sessions WHERE id = $1")
        .bind(session_id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| StoreError::not_found("session", session_id))
}

/// Up to `limit` sessions, locked, that nothing happened in for `idle_secs`:
/// the session row and every job of it unchanged that long, and no job
/// running. The planner decides (core's machine) which of them pause.
pub async fn lock_idle_sessions(
    tx: &mut Tx<'_>,
    idle_secs: u64,
    limit: i64,
) -> Result<Vec<SessionRow>, StoreError> {
    Ok(sqlx::query_as::<_, SessionRow>(&format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions s
         WHERE s.status NOT IN ($3, $4)
           AND s.updated_at < now() - make_interval(secs => $1::double precision)
           AND NOT EXISTS (
               SELECT 1 FROM dialectic_generation_jobs j WHERE j.session_id = s.id
                 AND (j.status = $5 OR j.updated_at >= now() - make_interval(secs => $1::double precision)))
         ORDER BY s.updated_at LIMIT $2 FOR UPDATE SKIP LOCKED"
    ))
    .bind(idle_secs as f64)
    .bind(limit)
    .bind(SessionStatus::PAUSED)
    .bind(SessionStatus::ABANDONED)
    .bind(JobStatus::Processing.as_str())
    .fetch_all(&mut **tx)
    .await?)
}

/// Up to `limit` sessions, locked, idle for `idle_secs` (the row and every
/// job unchanged that long, nothing running) and not warned since their last
/// activity: the planner warns them that abandonment is coming.
pub async fn lock_sessions_to_warn(
    tx: &mut Tx<'_>,
    idle_secs: u64,
    limit: i64,
) -> Result<Vec<SessionRow>, StoreError> {
    Ok(sqlx::query_as::<_, SessionRow>(&format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions s
         WHERE s.status <> $3
           AND s.updated_at < now() - make_interval(secs => $1::double precision)
           AND (s.idle_warned_at IS NULL OR s.idle_warned_at < s.updated_at)
           AND NOT EXISTS (
               SELECT 1 FROM dialectic_generation_jobs j WHERE j.session_id = s.id
                 AND (j.status = $4 OR j.updated_at >= now() - make_interval(secs => $1::double precision)))
         ORDER BY s.updated_at LIMIT $2 FOR UPDATE SKIP LOCKED"
    ))
    .bind(idle_secs as f64)
    .bind(limit)
    .bind(SessionStatus::ABANDONED)
    .bind(JobStatus::Processing.as_str())
    .fetch_all(&mut **tx)
    .await?)
}

/// Records the warning without touching `updated_at`, which measures activity.
pub async fn mark_idle_warned(tx: &mut Tx<'_>, id: SessionId) -> Result<(), StoreError> {
    sqlx::query("UPDATE dialectic_sessions SET idle_warned_at = now() WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Up to `limit` sessions, locked, warned at least `grace_secs` ago with no
/// activity since the warning: the planner abandons them.
pub async fn lock_sessions_to_abandon(
    tx: &mut Tx<'_>,
    grace_secs: u64,
    limit: i64,
) -> Result<Vec<SessionRow>, StoreError> {
    Ok(sqlx::query_as::<_, SessionRow>(&format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions s
         WHERE s.status <> $3 AND s.idle_warned_at >= s.updated_at
           AND s.idle_warned_at < now() - make_interval(secs => $1::double precision)
           AND NOT EXISTS (
               SELECT 1 FROM dialectic_generation_jobs j WHERE j.session_id = s.id
                 AND (j.status = $4 OR j.updated_at > s.idle_warned_at))
         ORDER BY s.idle_warned_at LIMIT $2 FOR UPDATE SKIP LOCKED"
    ))
    .bind(grace_secs as f64)
    .bind(limit)
    .bind(SessionStatus::ABANDONED)
    .bind(JobStatus::Processing.as_str())
    .fetch_all(&mut **tx)
    .await?)
}

/// A stage within the session's process template, with its successor (seed 000 §3).
/// The stage whose slug is `slug` (an SQL expression) in the process of session `$1`.
fn stage_in_process_sql(session: &str, slug: &str) -> String {
    format!(
        "SELECT st.id, st.slug, st.display_name, pts.stage_number, sp.prompt_text AS system_prompt,
                (SELECT nxt.slug FROM dialectic_stage_transitions tr
                 JOIN dialectic_stages nxt ON nxt.id = tr.target_stage_id
                 WHERE tr.source_stage_id = st.id AND tr.process_template_id = pts.process_template_id
                 LIMIT 1) AS next_stage_slug
         FROM dialectic_process_template_stages pts
         JOIN dialectic_stages st ON st.id = pts.stage_id AND st.slug = {slug}
         LEFT JOIN system_prompts sp ON sp.id = st.default_system_prompt_id
         WHERE pts.process_template_id = {process}",
        process = session_process(session)
    )
}

pub async fn stage_in_process(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    stage_slug: &str,
) -> Result<StageRow, StoreError> {
    sqlx::query_as::<_, StageRow>(&stage_in_process_sql("$1", "$2"))
        .bind(session_id)
        .bind(stage_slug)
        .fetch_optional(executor)
        .await?
        .ok_or_else(|| {
            StoreError::not_found("stage", format!("{stage_slug} in the session's process"))
        })
}

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

pub struct NewContribution<'a> {
    pub id: ContributionId,
    pub session_id: SessionId,
    /// None for a user's edit, which no job produced.
    pub job_id: Option<JobId>,
    pub attempt: i32,
    pub edit_version: i32,
    pub user_id: UserId,
    pub model_id: ModelId,
    pub model_name: &'a str,
    pub stage_slug: &'a str,
    pub iteration: i32,
    pub document_key: &'a str,
    pub contribution_type: &'a str,
    pub bucket: &'a str,
    pub storage_path: &'a str,
    pub file_name: &'a str,
    pub size_bytes: i64,
    pub tokens_in: i64,
    pub tokens_out: i64,
    pub processing_ms: i64,
    pub finish_reason: &'a str,
    pub target_contribution_id: Option<ContributionId>,
    pub document_relationships: serde_json::Value,
    pub is_intermediate: bool,
    pub is_incomplete: bool,
}

/// `contribution_type` of a user's edited version of a document.
pub const USER_EDIT: &str = "user_edit";

/// Row lock on one contribution: the serialisation point for work on its document.
/// Locks a contribution (the first chunk of a document chain); tells whether
/// it was archived (its document regenerated or revisited).
pub async fn lock_contribution(tx: &mut Tx<'_>, id: ContributionId) -> Result<bool, StoreError> {
    sqlx::query_scalar("SELECT is_archived FROM dialectic_contributions WHERE id = $1 FOR UPDATE")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| StoreError::not_found("contribution", id))
}

/// A user's edit becomes the only latest version of its document chain.
pub async fn supersede_chain(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    stage_slug: &str,
    identity: ContributionId,
    except: ContributionId,
) -> Result<(), StoreError> {
    let filter = serde_json::json!({ stage_slug: identity.to_string() });
    sqlx::query(
        "UPDATE dialectic_contributions SET is_latest_edit = false, updated_at = now()
         WHERE session_id = $1 AND document_relationships @> $2 AND is_latest_edit AND id <> $3",
    )
    .bind(session_id)
    .bind(Json(filter))
    .bind(except)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Seed 000 function 5: a newer chunk or edit replaces `id` as the latest of its chain.
pub async fn supersede(tx: &mut Tx<'_>, id: ContributionId) -> Result<(), StoreError> {
    sqlx::query("UPDATE dialectic_contributions SET is_latest_edit = false, updated_at = now() WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Idempotent by (job, attempt): returns the id of the row that exists afterwards.
pub async fn insert_contribution(
    tx: &mut Tx<'_>,
    c: &NewContribution<'_>,
) -> Result<ContributionId, StoreError> {
    let raw_path = format!("{}/{}", c.storage_path, c.file_name);
    let inserted: Option<ContributionId> = sqlx::query_scalar(
        "INSERT INTO dialectic_contributions
           (id, session_id, job_id, attempt, user_id, model_id, model_name, stage_slug, iteration_number, document_key,
            contribution_type, storage_bucket, storage_path, file_name, raw_response_storage_path, size_bytes,
            tokens_used_input, tokens_used_output, processing_time_ms, finish_reason, target_contribution_id,
            document_relationships, is_intermediate, is_incomplete, edit_version)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,$24,$25)
         ON CONFLICT (job_id, attempt) DO NOTHING
         RETURNING id",
    )
    .bind(c.id)
    .bind(c.session_id)
    .bind(c.job_id)
    .bind(c.attempt)
    .bind(c.user_id)
    .bind(c.model_id)
    .bind(c.model_name)
    .bind(c.stage_slug)
    .bind(c.iteration)
    .bind(c.document_key)
    .bind(c.contribution_type)
    .bind(c.bucket)
    .bind(c.storage_path)
    .bind(c.file_name)
    .bind(raw_path)
    .bind(c.size_bytes)
    .bind(c.tokens_in as i32)
    .bind(c.tokens_out as i32)
    .bind(c.processing_ms as i32)
    .bind(c.finish_reason)
    .bind(c.target_contribution_id)
    .bind(Json(&c.document_relationships))
    .bind(c.is_intermediate)
    .bind(c.is_incomplete)
    .bind(c.edit_version)
    .fetch_optional(&mut **tx)
    .await?;
    match inserted {
        Some(id) => Ok(id),
        None => sqlx::query_scalar(
            "SELECT id FROM dialectic_contributions WHERE job_id = $1 AND attempt = $2",
        )
        .bind(c.job_id)
        .bind(c.attempt)
        .fetch_one(&mut **tx)
        .await
        .map_err(Into::into),
    }
}

/// Whether an attempt of a job stored its contribution.
pub async fn contribution_recorded(
    executor: impl sqlx::PgExecutor<'_>,
    job_id: JobId,
    attempt: i32,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM dialectic_contributions WHERE job_id = $1 AND attempt = $2)",
    )
    .bind(job_id)
    .bind(attempt)
    .fetch_one(executor)
    .await?)
}

const CONTRIBUTION_COLUMNS: &str = "id, session_id, job_id, attempt, model_id, model_name, stage_slug, iteration_number,
    document_key, storage_path, file_name, raw_response_storage_path, finish_reason, target_contribution_id,
    document_relationships, edit_version, is_latest_edit, contribution_type, is_incomplete, created_at";

pub async fn contribution(
    executor: impl sqlx::PgExecutor<'_>,
    id: ContributionId,
) -> Result<ContributionRow, StoreError> {
    sqlx::query_as::<_, ContributionRow>(&format!(
        "SELECT {CONTRIBUTION_COLUMNS} FROM dialectic_contributions WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(executor)
    .await?
    .ok_or_else(|| StoreError::not_found("contribution", id))
}

/// The contribution a completed job produced (its last successful attempt).
pub async fn contribution_of_job(
    executor: impl sqlx::PgExecutor<'_>,
    job_id: JobId,
) -> Result<Option<ContributionRow>, StoreError> {
    Ok(sqlx::query_as::<_, ContributionRow>(&format!(
        "SELECT {CONTRIBUTION_COLUMNS} FROM dialectic_contributions WHERE job_id = $1 ORDER BY attempt DESC LIMIT 1"
    ))
    .bind(job_id)
    .fetch_optional(executor)
    .await?)
}

/// Seed 000 function 3: every chunk of one document chain, in edit order.
pub async fn document_chain(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    stage_slug: &str,
    document_identity: ContributionId,
) -> Result<Vec<ContributionRow>, StoreError> {
    let filter = serde_json::json!({ stage_slug: document_identity.to_string() });
    Ok(sqlx::query_as::<_, ContributionRow>(&format!(
        "SELECT {CONTRIBUTION_COLUMNS} FROM dialectic_contributions
         WHERE session_id = $1 AND document_relationships @> $2
         ORDER BY edit_version, created_at, id"
    ))
    .bind(session_id)
    .bind(Json(filter))
    .fetch_all(executor)
    .await?)
}

pub struct NewResource<'a> {
    pub id: ResourceId,
    pub project_id: ProjectId,
    pub user_id: UserId,
    pub session_id: SessionId,
    pub stage_slug: &'a str,
    pub iteration: i32,
    pub resource_type: &'a str,
    pub document_key: &'a str,
    pub model_id: Option<ModelId>,
    pub bucket: &'a str,
    pub storage_path: &'a str,
    pub file_name: &'a str,
    pub mime_type: &'a str,
    pub size_bytes: i64,
    pub source_contribution_id: ContributionId,
    pub is_incomplete: bool,
}

/// Upsert by storage location: one canonical row per rendered document.
pub async fn upsert_resource(
    tx: &mut Tx<'_>,
    r: &NewResource<'_>,
) -> Result<ResourceId, StoreError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO dialectic_project_resources
           (id, project_id, user_id, session_id, stage_slug, iteration_number, resource_type, document_key, model_id,
            storage_bucket, storage_path, file_name, mime_type, size_bytes, source_contribution_id, is_incomplete)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16)
         ON CONFLICT (storage_bucket, storage_path, file_name) DO UPDATE
           SET size_bytes = EXCLUDED.size_bytes, source_contribution_id = EXCLUDED.source_contribution_id,
               is_incomplete = EXCLUDED.is_incomplete,
               updated_at = now()
         RETURNING id",
    )
    .bind(r.id)
    .bind(r.project_id)
    .bind(r.user_id)
    .bind(r.session_id)
    .bind(r.stage_slug)
    .bind(r.iteration)
    .bind(r.resource_type)
    .bind(r.document_key)
    .bind(r.model_id)
    .bind(r.bucket)
    .bind(r.storage_path)
    .bind(r.file_name)
    .bind(r.mime_type)
    .bind(r.size_bytes)
    .bind(r.source_contribution_id)
    .bind(r.is_incomplete)
    .fetch_one(&mut **tx)
    .await?)
}

pub(crate) const RESOURCE_COLUMNS: &str = "id, project_id, session_id, stage_slug, iteration_number, resource_type, document_key, model_id,
    file_name, storage_bucket, storage_path, mime_type, size_bytes, source_contribution_id, is_incomplete, updated_at";

pub async fn session_documents(
    pool: &PgPool,
    user_id: UserId,
    session_id: SessionId,
    stage_slug: Option<&str>,
    iteration: Option<i32>,
) -> Result<Vec<ResourceRow>, StoreError> {
    Ok(sqlx::query_as::<_, ResourceRow>(&format!(
        "SELECT {RESOURCE_COLUMNS} FROM dialectic_project_resources
         WHERE session_id = $1 AND user_id = $2 AND resource_type = 'rendered_document'
           AND ($3::text IS NULL OR stage_slug = $3) AND ($4::int IS NULL OR iteration_number = $4)
         ORDER BY iteration_number, stage_slug, document_key, file_name"
    ))
    .bind(session_id)
    .bind(user_id)
    .bind(stage_slug)
    .bind(iteration)
    .fetch_all(pool)
    .await?)
}

pub async fn resource_for_user(
    pool: &PgPool,
    user_id: UserId,
    id: ResourceId,
) -> Result<ResourceRow, StoreError> {
    sqlx::query_as::<_, ResourceRow>(&format!(
        "SELECT {RESOURCE_COLUMNS} FROM dialectic_project_resources r WHERE id = $1 AND user_id = $2
         AND NOT EXISTS (SELECT 1 FROM dialectic_projects p WHERE p.id = r.project_id AND p.deleted_at IS NOT NULL)"
    ))
    .bind(id)
    .bind(user_id)
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| StoreError::not_found("document", id))
}

/// Template text for a stage's document in the session's pipeline version
/// (seed 000 function 3).
pub async fn document_template(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    stage_slug: &str,
    document_key: &str,
) -> Result<String, StoreError> {
    sqlx::query_scalar(&format!(
        "SELECT d.content FROM dialectic_document_templates d
         JOIN dialectic_process_template_stages pts ON pts.stage_id = d.stage_id
         JOIN dialectic_stages st ON st.id = d.stage_id
         WHERE pts.process_template_id = {process} AND st.slug = $2 AND d.document_key = $3
           AND d.is_active",
        process = session_process("$1")
    ))
    .bind(session_id)
    .bind(stage_slug)
    .bind(document_key)
    .fetch_optional(executor)
    .await?
    .ok_or_else(|| {
        StoreError::not_found("document template", format!("{stage_slug}/{document_key}"))
    })
}

pub async fn prompt_text(
    executor: impl sqlx::PgExecutor<'_>,
    name: &str,
) -> Result<String, StoreError> {
    sqlx::query_scalar("SELECT prompt_text FROM system_prompts WHERE name = $1 AND is_active")
        .bind(name)
        .fetch_optional(executor)
        .await?
        .ok_or_else(|| StoreError::not_found("system prompt", name))
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WalletBalance {
    pub id: WalletId,
    pub balance: i64,
    pub held: i64,
}

pub async fn wallet_balance(
    pool: &PgPool,
    wallet_id: Option<WalletId>,
    user_id: Option<UserId>,
) -> Result<WalletBalance, StoreError> {
    sqlx::query_as::<_, WalletBalance>(
        "SELECT id, balance, held FROM token_wallets
         WHERE ($1::uuid IS NOT NULL AND id = $1) OR ($1::uuid IS NULL AND user_id = $2 AND organization_id IS NULL)",
    )
    .bind(wallet_id)
    .bind(user_id)
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| {
        let name = wallet_id.map_or_else(|| format!("of user {user_id:?}"), |id| id.to_string());
        StoreError::not_found("wallet", name)
    })
}

/// Provenance of context compression: which inputs of a contribution were
/// compressed, with their token counts before and after (seed 001 Phase 3).
pub async fn set_compressed_inputs(
    tx: &mut Tx<'_>,
    contribution_id: ContributionId,
    compressed: &serde_json::Value,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE dialectic_contributions SET compressed_inputs = $2 WHERE id = $1")
        .bind(contribution_id)
        .bind(Json(compressed))
        .execute(&mut **tx)
        .await?;
    Ok(())
}
