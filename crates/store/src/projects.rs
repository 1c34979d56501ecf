//! Projects (`dialectic_projects`): creation on a pipeline and reads, for a
//! user (another user's project is simply not found) or by id.

use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{PipelineId, ProjectId, UserId};
use sqlx::PgPool;

#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub struct ProjectRow {
    pub id: ProjectId,
    pub user_id: UserId,
    pub project_name: String,
    pub slug: String,
    pub initial_user_prompt: String,
    pub initial_prompt_storage_key: Option<String>,
    pub process_template_id: PipelineId,
    pub created_at: DateTime<Utc>,
    /// The pipeline's slug.
    pub pipeline: String,
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
    let mut conn = pool.acquire().await?;
    insert_or_first(&mut conn, p).await
}

/// A user's projects past which `CreateProject` is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProjectLimitReached {
    pub max: i64,
    /// Projects the user holds, deleted ones not counted.
    pub current: i64,
}

/// What creating a project under a per-user limit did.
#[derive(Debug)]
pub enum Creation {
    /// The project, and whether this call made it (false: a repeated
    /// client request id, answered with the first project).
    Recorded(ProjectRow, bool),
    /// Nothing written: the user holds the most projects they may.
    Refused(ProjectLimitReached),
}

/// Inserts a project unless its user already holds `max_projects` (deleted
/// ones not counted). The user's row is locked for the count and the
/// insert, so concurrent creations count one another and only one takes the
/// last slot; a repeated client request id answers the first project even
/// at the limit.
pub async fn insert_within(
    pool: &PgPool,
    p: &NewProject<'_>,
    max_projects: i64,
) -> Result<Creation, StoreError> {
    let mut tx = pool.begin().await?;
    lock_user(&mut tx, p.user_id).await?;
    if let Some(reached) =
        limit_reached_on(&mut tx, p.user_id, p.client_request_id, max_projects).await?
    {
        return Ok(Creation::Refused(reached));
    }
    let (row, created) = insert_or_first(&mut tx, p).await?;
    tx.commit().await?;
    Ok(Creation::Recorded(row, created))
}

/// Takes the user's row lock for the rest of the transaction: what a user
/// holds in all (projects, document bytes) is counted under it. NO KEY
/// UPDATE blocks no row inserted under the user (foreign keys take KEY SHARE).
pub(crate) async fn lock_user(
    conn: &mut sqlx::PgConnection,
    user_id: UserId,
) -> Result<(), StoreError> {
    sqlx::query("SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE")
        .bind(user_id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(|| StoreError::not_found("user", user_id))?;
    Ok(())
}

/// The limit a new project of the user would pass, outside the user's lock:
/// a first look, before work a refusal would waste (`insert_within` counts
/// again under the lock).
pub async fn limit_reached(
    pool: &PgPool,
    user_id: UserId,
    client_request_id: Option<&str>,
    max_projects: i64,
) -> Result<Option<ProjectLimitReached>, StoreError> {
    let mut conn = pool.acquire().await?;
    limit_reached_on(&mut conn, user_id, client_request_id, max_projects).await
}

/// The limit a new project of the user would pass; None when it fits or
/// when `client_request_id` already made one (a retry is answered, not
/// counted).
async fn limit_reached_on(
    conn: &mut sqlx::PgConnection,
    user_id: UserId,
    client_request_id: Option<&str>,
    max_projects: i64,
) -> Result<Option<ProjectLimitReached>, StoreError> {
    if by_request(&mut *conn, user_id, client_request_id)
        .await?
        .is_some()
    {
        return Ok(None);
    }
    let current: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_projects WHERE user_id = $1 AND deleted_at IS NULL",
    )
    .bind(user_id)
    .fetch_one(conn)
    .await?;
    Ok((current >= max_projects).then_some(ProjectLimitReached {
        max: max_projects,
        current,
    }))
}

/// Inserts the project, or returns the one its client request id made
/// first: (row, whether this call inserted it).
async fn insert_or_first(
    conn: &mut sqlx::PgConnection,
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
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = inserted {
        return Ok((row, true));
    }
    by_request(conn, p.user_id, p.client_request_id)
        .await?
        .map(|r| (r, false))
        .ok_or_else(|| StoreError::not_found("pipeline", format!("{:?}", p.pipeline)))
}

/// The project a client request id of the user made, deleted or not.
async fn by_request(
    conn: &mut sqlx::PgConnection,
    user_id: UserId,
    client_request_id: Option<&str>,
) -> Result<Option<ProjectRow>, StoreError> {
    let Some(request) = client_request_id else {
        return Ok(None);
    };
    Ok(sqlx::query_as::<_, ProjectRow>(&format!(
        "SELECT {PROJECT_COLUMNS} FROM dialectic_projects WHERE user_id = $1 AND client_request_id = $2"
    ))
    .bind(user_id)
    .bind(request)
    .fetch_optional(conn)
    .await?)
}

/// The user's project `id` unless deleted; `id` and `user` are SQL expressions.
pub(crate) fn project_for_user_sql(id: &str, user: &str) -> String {
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
