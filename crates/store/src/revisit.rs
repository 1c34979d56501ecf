//! Revisits (seed 003): archiving later stages' documents as versions and
//! rewinding a session to the stage after the revised one.

use crate::resources::{RESOURCE_COLUMNS, ResourceRow};
use crate::sessions::session_process;
use crate::{StoreError, Tx};
use dialectic_core::ids::{ResourceId, RevisionId, SessionId};
use dialectic_core::job::JobStatus;

/// The stages after `stage_slug` in the session's process, in order.
pub async fn stages_after(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    stage_slug: &str,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(&format!(
        "SELECT st.slug
         FROM dialectic_process_template_stages pts
         JOIN dialectic_stages st ON st.id = pts.stage_id
         WHERE pts.process_template_id = {process} AND pts.stage_number > (
             SELECT pts2.stage_number FROM dialectic_process_template_stages pts2
             JOIN dialectic_stages st2 ON st2.id = pts2.stage_id
             WHERE pts2.process_template_id = pts.process_template_id AND st2.slug = $2)
         ORDER BY pts.stage_number",
        process = session_process("$1")
    ))
    .bind(session_id)
    .bind(stage_slug)
    .fetch_all(&mut **tx)
    .await?)
}

/// Jobs of the session that are not over (a revisit waits for them).
pub async fn unfinished_jobs(tx: &mut Tx<'_>, session_id: SessionId) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs
         WHERE session_id = $1 AND status <> ALL($2)",
    )
    .bind(session_id)
    .bind(&JobStatus::TERMINAL[..])
    .fetch_one(&mut **tx)
    .await?)
}

/// The current rendered documents of `stages` in one iteration.
pub async fn documents(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
    stages: &[String],
) -> Result<Vec<ResourceRow>, StoreError> {
    Ok(sqlx::query_as::<_, ResourceRow>(&format!(
        "SELECT {RESOURCE_COLUMNS} FROM dialectic_project_resources
         WHERE session_id = $1 AND iteration_number = $2 AND stage_slug = ANY($3)
           AND resource_type = 'rendered_document'
         ORDER BY stage_slug, file_name FOR UPDATE"
    ))
    .bind(session_id)
    .bind(iteration)
    .bind(stages)
    .fetch_all(&mut **tx)
    .await?)
}

/// Turns documents into archived versions (renamed to where their bytes were
/// copied) and takes the stages' contributions out of every later input.
pub async fn archive(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
    stages: &[String],
    renamed: &[(ResourceId, String)],
) -> Result<(), StoreError> {
    for (id, file_name) in renamed {
        sqlx::query(
            "UPDATE dialectic_project_resources
             SET resource_type = 'archived_document', file_name = $2, updated_at = now()
             WHERE id = $1",
        )
        .bind(id)
        .bind(file_name)
        .execute(&mut **tx)
        .await?;
    }
    sqlx::query(
        "UPDATE dialectic_contributions SET is_archived = true
         WHERE session_id = $1 AND iteration_number = $2 AND stage_slug = ANY($3)",
    )
    .bind(session_id)
    .bind(iteration)
    .bind(stages)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub struct NewRevision<'a> {
    pub session_id: SessionId,
    pub revision: i32,
    pub stage_slug: &'a str,
    pub iteration: i32,
    pub impact: &'a str,
    pub reason: Option<&'a str>,
    pub needs_review: &'a [String],
    pub archived: &'a [String],
}

pub async fn record(tx: &mut Tx<'_>, r: &NewRevision<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO dialectic_session_revisions
           (id, session_id, revision, stage_slug, iteration_number, impact, reason, needs_review, downstream_archived)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(RevisionId::new())
    .bind(r.session_id)
    .bind(r.revision)
    .bind(r.stage_slug)
    .bind(r.iteration)
    .bind(r.impact)
    .bind(r.reason)
    .bind(r.needs_review)
    .bind(r.archived)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// One row of `dialectic_session_revisions`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RevisionRow {
    pub revision: i32,
    pub stage_slug: String,
    pub iteration_number: i32,
    pub impact: String,
    pub reason: Option<String>,
    pub needs_review: Vec<String>,
    pub downstream_archived: Vec<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// A session's revisits, oldest first.
pub async fn revisions(
    pool: &sqlx::PgPool,
    session_id: SessionId,
) -> Result<Vec<RevisionRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT revision, stage_slug, iteration_number, impact, reason, needs_review,
                downstream_archived, created_at
         FROM dialectic_session_revisions WHERE session_id = $1 ORDER BY created_at, id",
    )
    .bind(session_id)
    .fetch_all(pool)
    .await?)
}
