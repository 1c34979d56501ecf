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
