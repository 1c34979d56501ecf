//! What a dead letter's notice needs from Postgres: whom the letter held up
//! when it died (read by the planner, which notes it), and whether those
//! jobs have moved on since (read by the gateway). Reads only.

use crate::StoreError;
use dialectic_core::ids::{JobId, SessionId};

/// A job as its dead letter's note describes it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LetterJob {
    pub session_id: SessionId,
    pub stage_slug: String,
    pub step_key: String,
    pub step_name: String,
    pub status: String,
    pub attempt_count: i32,
}

/// The job `id` with its session, stage, step and where it stands; None
/// when there is no such job (deleted with its project, or never was).
pub async fn letter_job(
    executor: impl sqlx::PgExecutor<'_>,
    id: JobId,
) -> Result<Option<LetterJob>, StoreError> {
    Ok(sqlx::query_as::<_, LetterJob>(
        "SELECT session_id, stage_slug, COALESCE(step_key, '') AS step_key,
                COALESCE(payload->'step'->>'step_name', '') AS step_name, status, attempt_count
         FROM dialectic_generation_jobs WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(executor)
    .await?)
}

/// The session's status now; None when there is no such session.
pub async fn session_status(
    executor: impl sqlx::PgExecutor<'_>,
    id: SessionId,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT status FROM dialectic_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(executor)
            .await?,
    )
}

/// Where each of the session's jobs among `ids` stands now: (id, status,
/// attempt count). Jobs of other sessions are left out.
pub async fn job_states(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    ids: &[JobId],
) -> Result<Vec<(JobId, String, i32)>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_as(
        "SELECT id, status, attempt_count FROM dialectic_generation_jobs
         WHERE session_id = $1 AND id = ANY($2)",
    )
    .bind(session_id)
    .bind(ids)
    .fetch_all(executor)
    .await?)
}
