//! Revisits (seed 003): archiving later stages' documents as versions and
//! rewinding a session to the stage after the revised one.

use crate::contributions::USER_EDIT;
use crate::resources::{RESOURCE_COLUMNS, ResourceRow};
use crate::sessions::session_process;
use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{JobId, ResourceId, RevisionId, SessionId};
use dialectic_core::job::{JobStatus, JobType};
use sqlx::types::Json;

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
    rename_archived(tx, renamed).await?;
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

/// A finished job of the later stages whose output is current, with what
/// it wrote: a moderate revisit weighs each by lineage.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LaterJobRow {
    pub id: JobId,
    pub stage_slug: String,
    pub parent_job_id: Option<JobId>,
    pub payload: Json<serde_json::Value>,
    pub started_at: DateTime<Utc>,
    /// Its output type and its rendered documents' keys.
    pub document_keys: Vec<String>,
    /// Raw replies and rendered documents (`storage_path/file_name`).
    pub wrote: Vec<String>,
}

/// The later stages' finished jobs (not renders, not superseded) whose
/// output is current, in the order they started.
pub async fn later_jobs(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
    stages: &[String],
) -> Result<Vec<LaterJobRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT j.id, j.stage_slug, j.parent_job_id, j.payload,
                COALESCE(j.started_at, j.created_at) AS started_at,
                ARRAY(SELECT DISTINCT k FROM unnest(array_append(
                        ARRAY(SELECT r.document_key FROM dialectic_project_resources r
                               JOIN dialectic_contributions c ON c.id = r.source_contribution_id
                              WHERE c.job_id = j.id AND r.document_key IS NOT NULL),
                        COALESCE(j.document_key, ''))) AS k) AS document_keys,
                ARRAY(SELECT c.raw_response_storage_path FROM dialectic_contributions c
                       WHERE c.job_id = j.id AND NOT c.is_archived
                      UNION ALL
                      SELECT r.storage_path || '/' || r.file_name FROM dialectic_project_resources r
                        JOIN dialectic_contributions c ON c.id = r.source_contribution_id
                       WHERE c.job_id = j.id AND r.resource_type = 'rendered_document') AS wrote
         FROM dialectic_generation_jobs j
         WHERE j.session_id = $1 AND j.iteration_number = $2 AND j.stage_slug = ANY($3)
           AND j.status = $4 AND j.job_type <> $5
           AND EXISTS (SELECT 1 FROM dialectic_contributions c WHERE c.job_id = j.id AND NOT c.is_archived)
         ORDER BY 5, j.id",
    )
    .bind(session_id)
    .bind(iteration)
    .bind(stages)
    .bind(JobStatus::Completed.as_str())
    .bind(JobType::Render.as_str())
    .fetch_all(&mut **tx)
    .await?)
}

/// A user's edit of a document of one stage: the document (its first
/// chunk's id), when, and where the edited whole is.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EditRow {
    pub identity: String,
    pub document_key: String,
    pub raw_key: String,
    pub created_at: DateTime<Utc>,
}

/// Every edit of the stage's documents in one iteration, oldest first.
pub async fn edits(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
    stage_slug: &str,
) -> Result<Vec<EditRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT COALESCE(document_relationships ->> stage_slug, target_contribution_id::text, id::text) AS identity,
                document_key, raw_response_storage_path AS raw_key, created_at
         FROM dialectic_contributions
         WHERE session_id = $1 AND iteration_number = $2 AND stage_slug = $3 AND contribution_type = $4
         ORDER BY created_at, id",
    )
    .bind(session_id)
    .bind(iteration)
    .bind(stage_slug)
    .bind(USER_EDIT)
    .fetch_all(&mut **tx)
    .await?)
}

/// The document (its first chunk's id) each storage key holds a version
/// of: raw replies by their chain, rendered documents by their source.
pub async fn identities(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    keys: &[String],
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT raw_response_storage_path, COALESCE(document_relationships ->> stage_slug, id::text)
           FROM dialectic_contributions
          WHERE session_id = $1 AND raw_response_storage_path = ANY($2)
         UNION ALL
         SELECT storage_path || '/' || file_name, source_contribution_id::text
           FROM dialectic_project_resources
          WHERE session_id = $1 AND source_contribution_id IS NOT NULL
            AND storage_path || '/' || file_name = ANY($2)",
    )
    .bind(session_id)
    .bind(keys)
    .fetch_all(&mut **tx)
    .await?)
}

/// The rendered documents a moderate revisit archives: those the `jobs`
/// wrote (by their first chunk), and the documents assembled from the
/// replies of one step (the essay's draft) that hold a reply of one of them,
/// whichever reply names the assembly. Locked.
pub async fn documents_of_jobs(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    jobs: &[JobId],
) -> Result<Vec<ResourceRow>, StoreError> {
    Ok(sqlx::query_as::<_, ResourceRow>(&format!(
        "WITH written AS (
             SELECT id, stage_slug, iteration_number, document_key, model_id
               FROM dialectic_contributions WHERE session_id = $1 AND job_id = ANY($2))
         SELECT {RESOURCE_COLUMNS} FROM dialectic_project_resources r
         WHERE r.session_id = $1 AND r.resource_type = 'rendered_document'
           AND (r.source_contribution_id IN (SELECT id FROM written) OR EXISTS (
               SELECT 1 FROM dialectic_contributions named
                 JOIN written w ON w.stage_slug = named.stage_slug
                  AND w.iteration_number = named.iteration_number
                  AND w.document_key = named.document_key
                  AND w.model_id IS NOT DISTINCT FROM named.model_id
                WHERE named.id = r.source_contribution_id
                  AND r.document_key IS DISTINCT FROM named.document_key))
         ORDER BY file_name FOR UPDATE"
    ))
    .bind(session_id)
    .bind(jobs)
    .fetch_all(&mut **tx)
    .await?)
}

/// A moderate revisit's archive: the documents the `jobs` wrote become
/// archived versions (renamed to where their bytes were copied), and their
/// contributions, with every chunk and edit of their documents, stop being
/// inputs.
pub async fn archive_jobs(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    jobs: &[JobId],
    renamed: &[(ResourceId, String)],
) -> Result<(), StoreError> {
    rename_archived(tx, renamed).await?;
    sqlx::query(
        "UPDATE dialectic_contributions SET is_archived = true, updated_at = now()
         WHERE session_id = $1 AND (job_id = ANY($2) OR (document_relationships ->> stage_slug) IN (
             SELECT id::text FROM dialectic_contributions WHERE session_id = $1 AND job_id = ANY($2)))",
    )
    .bind(session_id)
    .bind(jobs)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn rename_archived(
    tx: &mut Tx<'_>,
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
    Ok(())
}

/// When the session was last sent back by a revisit (a minor one flags
/// and sends nothing back), if ever.
pub async fn last_rewind_at(
    tx: &mut Tx<'_>,
    session_id: SessionId,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT max(created_at) FROM dialectic_session_revisions
          WHERE session_id = $1 AND impact <> 'minor'",
    )
    .bind(session_id)
    .fetch_one(&mut **tx)
    .await?)
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
