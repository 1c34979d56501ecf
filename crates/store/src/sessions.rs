//! Sessions (`dialectic_sessions`): creation, reads for a user (another
//! user's session is simply not found), the lock that serialises a
//! session's writers, the state core's machine produced, and the idle
//! sweeps' selections.

use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{ModelId, ProjectId, SessionId, StageId, UserId};
use dialectic_core::job::JobStatus;
use dialectic_core::pushback::Pushback;
use dialectic_core::session::{SessionState, SessionStatus};
use std::collections::BTreeMap;

#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub struct SessionRow {
    pub id: SessionId,
    pub project_id: ProjectId,
    pub user_id: UserId,
    pub status: String,
    pub iteration_count: i32,
    pub current_stage_id: Option<StageId>,
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
    /// How hard its critique steps push back (prompts' `{{ pushback }}`).
    #[sqlx(try_from = "String")]
    #[serde(default)]
    pub pushback: Pushback,
    /// The model each role of its pipeline runs on, as mapped at start
    /// (docs/models.md, "Model roles"); a role not here runs on every
    /// selected model.
    #[sqlx(json)]
    #[serde(default)]
    pub model_roles: BTreeMap<String, ModelId>,
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

/// The process template (pipeline version) of the session `session` (an SQL
/// expression): its own, else (a row an older build wrote) its project's.
pub(crate) fn session_process(session: &str) -> String {
    format!(
        "(SELECT COALESCE(s.process_template_id, p.process_template_id)
         FROM dialectic_sessions s JOIN dialectic_projects p ON p.id = s.project_id WHERE s.id = {session})"
    )
}

pub(crate) const SESSION_COLUMNS: &str = "id, project_id, user_id, status, iteration_count, current_stage_id, selected_model_ids, auto_advance, created_at, updated_at, revision, paused_from,
    (SELECT t.version FROM dialectic_process_templates t WHERE t.id = process_template_id) AS pipeline_version,
    pushback, model_roles";

pub struct NewSession<'a> {
    pub id: SessionId,
    pub project_id: ProjectId,
    pub user_id: UserId,
    pub model_ids: &'a [ModelId],
    pub description: Option<&'a str>,
    pub client_request_id: Option<&'a str>,
    pub auto_advance: bool,
    pub pushback: Pushback,
    /// Role -> model, checked against the pipeline's roles by the caller.
    pub model_roles: &'a BTreeMap<String, ModelId>,
}

/// Inserts the session at `pending_<first stage>` of the newest version of
/// its project's pipeline, which it keeps; returns (row, created).
pub async fn insert_session(
    tx: &mut Tx<'_>,
    s: &NewSession<'_>,
) -> Result<(SessionRow, bool), StoreError> {
    let inserted = sqlx::query_as::<_, SessionRow>(&format!(
        "INSERT INTO dialectic_sessions (id, project_id, user_id, status, current_stage_id, selected_model_ids,
                                         session_description, client_request_id, auto_advance, process_template_id, pushback,
                                         model_roles)
         SELECT $1, p.id, $3, $8 || st.slug, st.id, $4, $5, $6, $7, t.id, $9, $10
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
    .bind(s.pushback.as_str())
    .bind(sqlx::types::Json(s.model_roles))
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

/// The model each role is mapped to in the session (`StartSession`'s map).
pub async fn model_roles(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
) -> Result<BTreeMap<String, ModelId>, StoreError> {
    let roles: Option<sqlx::types::Json<BTreeMap<String, ModelId>>> =
        sqlx::query_scalar("SELECT model_roles FROM dialectic_sessions WHERE id = $1")
            .bind(session_id)
            .fetch_optional(executor)
            .await?;
    Ok(roles.map(|r| r.0).unwrap_or_default())
}

/// The session `$1` of user `$2`, unless its project was deleted.
pub(crate) fn session_for_user_sql(id: &str, user: &str) -> String {
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

/// Up to `limit` unfinished sessions, locked, that nothing happened in for
/// `idle_secs`: the session row and every job of it unchanged that long, and
/// no job running. Finished work (review, completed) never pauses on a
/// timer. The planner decides (core's machine) which of them pause.
pub async fn lock_idle_sessions(
    tx: &mut Tx<'_>,
    idle_secs: u64,
    limit: i64,
) -> Result<Vec<SessionRow>, StoreError> {
    Ok(sqlx::query_as::<_, SessionRow>(&format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions s
         WHERE s.status NOT IN ($3, $4, $6, $7)
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
    .bind(SessionStatus::REVIEW)
    .bind(SessionStatus::COMPLETED)
    .fetch_all(&mut **tx)
    .await?)
}

/// Up to `limit` unfinished sessions, locked, idle for `idle_secs` (the row
/// and every job unchanged that long, nothing running) and not warned since
/// their last activity: the planner warns them that abandonment is coming.
pub async fn lock_sessions_to_warn(
    tx: &mut Tx<'_>,
    idle_secs: u64,
    limit: i64,
) -> Result<Vec<SessionRow>, StoreError> {
    Ok(sqlx::query_as::<_, SessionRow>(&format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions s
         WHERE {UNFINISHED}
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
    .bind(SessionStatus::REVIEW)
    .bind(SessionStatus::COMPLETED)
    .fetch_all(&mut **tx)
    .await?)
}

/// Sessions idle abandonment may reach: not abandoned, not finished (at
/// review, paused there, or completed). Binds $3 abandoned, $5 review, $6
/// completed.
const UNFINISHED: &str = "s.status NOT IN ($3, $5, $6) AND s.paused_from IS DISTINCT FROM $5";

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
         WHERE {UNFINISHED} AND s.idle_warned_at >= s.updated_at
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
    .bind(SessionStatus::REVIEW)
    .bind(SessionStatus::COMPLETED)
    .fetch_all(&mut **tx)
    .await?)
}
