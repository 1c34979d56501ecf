//! Paged lists of a user's projects and sessions, and project deletion.
//! Pages run newest first on (created_at, id), so a row inserted while a
//! client pages never shifts what it has not read yet.

pub use crate::error::DeleteError;
use crate::projects::{PROJECT_COLUMNS, ProjectRow};
use crate::sessions::{SESSION_COLUMNS, SessionRow};
use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{ProjectId, SessionId, UserId};
use dialectic_core::job::JobStatus;
use sqlx::PgPool;

/// Where the previous page stopped: the last row's (created_at, id).
pub type Cursor<Id> = (DateTime<Utc>, Id);

pub async fn projects(
    pool: &PgPool,
    user_id: UserId,
    limit: i64,
    after: Option<Cursor<ProjectId>>,
) -> Result<Vec<ProjectRow>, StoreError> {
    let (at, id) = after.unzip();
    Ok(sqlx::query_as::<_, ProjectRow>(&format!(
        "SELECT {PROJECT_COLUMNS} FROM dialectic_projects
         WHERE user_id = $1 AND deleted_at IS NULL
           AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
         ORDER BY created_at DESC, id DESC LIMIT $4"
    ))
    .bind(user_id)
    .bind(at)
    .bind(id)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

pub async fn sessions(
    pool: &PgPool,
    user_id: UserId,
    project_id: ProjectId,
    limit: i64,
    after: Option<Cursor<SessionId>>,
) -> Result<Vec<SessionRow>, StoreError> {
    let (at, id) = after.unzip();
    Ok(sqlx::query_as::<_, SessionRow>(&format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions
         WHERE project_id = $1 AND user_id = $2
           AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4))
         ORDER BY created_at DESC, id DESC LIMIT $5"
    ))
    .bind(project_id)
    .bind(user_id)
    .bind(at)
    .bind(id)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// Marks the caller's project deleted under the project's row lock and
/// returns its sessions, locked, for the planner to abandon (claims refuse an
/// abandoned session's jobs, so nothing queued runs later); refused while a
/// job is running (its worker would write objects after they were removed).
pub async fn delete_project(
    tx: &mut Tx<'_>,
    user_id: UserId,
    project_id: ProjectId,
) -> Result<Vec<SessionRow>, DeleteError> {
    sqlx::query_scalar::<_, ProjectId>(
        "SELECT id FROM dialectic_projects
         WHERE id = $1 AND user_id = $2 AND deleted_at IS NULL FOR UPDATE",
    )
    .bind(project_id)
    .bind(user_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::not_found("project", project_id))?;
    // Sessions locked first, so no planner transition of theirs interleaves.
    // (A claim racing this transaction may still start one job; its outputs
    // land under a deleted project and are never read.)
    let sessions = sqlx::query_as::<_, SessionRow>(&format!(
        "SELECT {SESSION_COLUMNS} FROM dialectic_sessions WHERE project_id = $1 ORDER BY id FOR UPDATE"
    ))
    .bind(project_id)
    .fetch_all(&mut **tx)
    .await?;
    let busy: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs j JOIN dialectic_sessions s ON s.id = j.session_id
         WHERE s.project_id = $1 AND j.status = $2",
    )
    .bind(project_id)
    .bind(JobStatus::Processing.as_str())
    .fetch_one(&mut **tx)
    .await?;
    if busy > 0 {
        return Err(DeleteError::Busy(busy));
    }
    sqlx::query("UPDATE dialectic_projects SET deleted_at = now() WHERE id = $1")
        .bind(project_id)
        .execute(&mut **tx)
        .await?;
    // The questions asked of it go with it (the row is only marked deleted).
    sqlx::query("DELETE FROM dialectic_query_history WHERE project_id = $1")
        .bind(project_id)
        .execute(&mut **tx)
        .await?;
    Ok(sessions)
}
