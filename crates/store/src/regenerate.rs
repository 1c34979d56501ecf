//! Regenerating one document: the jobs that wrote it are superseded, a new
//! EXECUTE job writes it again, and the render of the new document archives
//! the old one (rendered file as a `.v{N}` version, contributions out of every input).

use crate::jobs::{JOB_COLUMNS, JobRow};
use crate::resources::{RESOURCE_COLUMNS, ResourceRow};
use crate::{StoreError, Tx};
use dialectic_core::ids::{
    ContributionId, JobId, ModelId, RegenerationId, ResourceId, SessionId, UserId,
};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::revisit::archived_name;
use sqlx::types::Json;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RegenerationRow {
    pub id: RegenerationId,
    pub session_id: SessionId,
    pub client_request_id: Option<String>,
    pub stage_slug: String,
    pub model_id: Option<ModelId>,
    pub document_key: String,
    pub resource_id: Option<ResourceId>,
    pub new_job_id: JobId,
    pub superseded_job_ids: Vec<JobId>,
}

const REGENERATION_COLUMNS: &str =
    "id, session_id, client_request_id, stage_slug, model_id, document_key, resource_id,
    new_job_id, superseded_job_ids";

/// The user's earlier regeneration under this client request id.
pub async fn by_request(
    executor: impl sqlx::PgExecutor<'_>,
    user_id: UserId,
    client_request_id: &str,
) -> Result<Option<RegenerationRow>, StoreError> {
    Ok(sqlx::query_as::<_, RegenerationRow>(&format!(
        "SELECT {REGENERATION_COLUMNS} FROM dialectic_regenerations WHERE user_id = $1 AND client_request_id = $2"
    ))
    .bind(user_id)
    .bind(client_request_id)
    .fetch_optional(executor)
    .await?)
}

/// The current rendered documents of one model and document key in a stage iteration.
pub async fn current_documents(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
    model_id: ModelId,
    document_key: &str,
) -> Result<Vec<ResourceRow>, StoreError> {
    Ok(sqlx::query_as::<_, ResourceRow>(&format!(
        "SELECT {RESOURCE_COLUMNS} FROM dialectic_project_resources
         WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3 AND model_id = $4
           AND document_key = $5 AND resource_type = 'rendered_document'
         ORDER BY file_name"
    ))
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(model_id)
    .bind(document_key)
    .fetch_all(executor)
    .await?)
}

/// Every job of the document `template` writes, locked: the EXECUTE jobs of
/// its slot (same parent, step, model and sources: the original, its
/// continuations, earlier regenerations and theirs) and the RENDER jobs under
/// them or rendering `identity` (a user's edit). RENDER jobs are locked first:
/// the planner locks a job before its parent, and so must this, or the two
/// deadlock. Repeats the locking read until no new job appears, so a
/// continuation the planner committed meanwhile is not missed.
pub async fn lock_slot(
    tx: &mut Tx<'_>,
    template: JobId,
    identity: ContributionId,
) -> Result<Vec<JobRow>, StoreError> {
    let query = format!(
        "WITH slot AS (
             SELECT j.id FROM dialectic_generation_jobs j
             JOIN dialectic_generation_jobs t ON t.id = $1
             WHERE j.job_type = $4 AND j.session_id = t.session_id
               AND j.stage_slug = t.stage_slug AND j.iteration_number = t.iteration_number
               AND j.parent_job_id IS NOT DISTINCT FROM t.parent_job_id
               AND j.recipe_step_id IS NOT DISTINCT FROM t.recipe_step_id
               AND j.model_id IS NOT DISTINCT FROM t.model_id
               AND j.payload->'sources' IS NOT DISTINCT FROM t.payload->'sources'
               AND j.payload->'lineage' IS NOT DISTINCT FROM t.payload->'lineage')
         SELECT {JOB_COLUMNS} FROM dialectic_generation_jobs
         WHERE id IN (SELECT id FROM slot)
            OR (job_type = $3 AND session_id = (SELECT session_id FROM dialectic_generation_jobs WHERE id = $1)
                AND (parent_job_id IN (SELECT id FROM slot) OR payload->'render'->>'document_identity' = $2))
         ORDER BY job_type = $3 DESC, id FOR UPDATE"
    );
    let mut seen = 0;
    for _ in 0..5 {
        let rows = sqlx::query_as::<_, JobRow>(&query)
            .bind(template)
            .bind(identity.to_string())
            .bind(JobType::Render.as_str())
            .bind(JobType::Execute.as_str())
            .fetch_all(&mut **tx)
            .await?;
        if rows.len() == seen {
            return Ok(rows);
        }
        seen = rows.len();
    }
    Err(StoreError::Invalid(
        "the document's jobs keep changing; try again".into(),
    ))
}

/// Non-terminal root jobs of the session: a stage has been started (its roots
/// may be waiting for renders), so a regeneration would race it.
pub async fn live_root_jobs(
    tx: &mut Tx<'_>,
    session_id: SessionId,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT DISTINCT stage_slug FROM dialectic_generation_jobs
         WHERE session_id = $1 AND parent_job_id IS NULL AND job_type <> $3
           AND status <> ALL($2)",
    )
    .bind(session_id)
    .bind(&JobStatus::TERMINAL[..])
    .bind(JobType::Render.as_str())
    .fetch_all(&mut **tx)
    .await?)
}

/// Marks jobs superseded by `regeneration`; the caller checked each transition.
pub async fn supersede(
    tx: &mut Tx<'_>,
    ids: &[JobId],
    regeneration: RegenerationId,
) -> Result<(), StoreError> {
    let details = serde_json::json!({
        "code": JobStatus::Superseded.as_str(),
        "message": "a regeneration of this document replaced the job",
        "regeneration_id": regeneration.to_string(),
    });
    sqlx::query(
        "UPDATE dialectic_generation_jobs
         SET status = $3, lease_owner = NULL, lease_expires_at = NULL, next_attempt_at = NULL,
             error_details = $2, completed_at = now(), updated_at = now()
         WHERE id = ANY($1)",
    )
    .bind(ids)
    .bind(Json(details))
    .bind(JobStatus::Superseded.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Inserts the regeneration's EXECUTE job as a copy of `template` (same parent,
/// step, model, payload). Its attempts continue after `attempt_base`, so its
/// files (named by attempt) never share a path with an earlier job's.
pub async fn insert_job(
    tx: &mut Tx<'_>,
    template: JobId,
    id: JobId,
    job_key: &str,
    attempt_base: i32,
    max_attempts: i32,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO dialectic_generation_jobs
           (id, job_key, session_id, user_id, stage_slug, iteration_number, job_type, status, recipe_step_id, step_key,
            model_id, document_key, payload, parent_job_id, attempt_count, max_retries)
         SELECT $1, $2, session_id, user_id, stage_slug, iteration_number, $6, $7, recipe_step_id, step_key,
                model_id, document_key, payload, parent_job_id, $3, $4
         FROM dialectic_generation_jobs WHERE id = $5",
    )
    .bind(id)
    .bind(job_key)
    .bind(attempt_base)
    .bind(attempt_base + max_attempts)
    .bind(template)
    .bind(JobType::Execute.as_str())
    .bind(JobStatus::Pending.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Moves a copied job to another model (a confidence gate's `rerun_model`).
pub async fn set_model(
    tx: &mut Tx<'_>,
    id: JobId,
    model_id: ModelId,
    payload: &serde_json::Value,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE dialectic_generation_jobs SET model_id = $2, payload = $3 WHERE id = $1")
        .bind(id)
        .bind(model_id)
        .bind(Json(payload))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub struct NewRegeneration<'a> {
    pub id: RegenerationId,
    pub session_id: SessionId,
    pub user_id: UserId,
    pub client_request_id: Option<&'a str>,
    pub stage_slug: &'a str,
    pub iteration: i32,
    pub model_id: ModelId,
    pub document_key: &'a str,
    pub resource_id: ResourceId,
    pub new_job_id: JobId,
    pub superseded: &'a [JobId],
}

/// False when the user already used this client request id (nothing written).
pub async fn insert(tx: &mut Tx<'_>, r: &NewRegeneration<'_>) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO dialectic_regenerations
           (id, session_id, user_id, client_request_id, stage_slug, iteration_number, model_id, document_key,
            resource_id, new_job_id, superseded_job_ids)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         ON CONFLICT (user_id, client_request_id) DO NOTHING",
    )
    .bind(r.id)
    .bind(r.session_id)
    .bind(r.user_id)
    .bind(r.client_request_id)
    .bind(r.stage_slug)
    .bind(r.iteration)
    .bind(r.model_id)
    .bind(r.document_key)
    .bind(r.resource_id)
    .bind(r.new_job_id)
    .bind(r.superseded)
    .execute(&mut **tx)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// The jobs the regeneration whose new job is `job_id` superseded; None when
/// `job_id` is no regeneration's.
pub async fn superseded_by(
    executor: impl sqlx::PgExecutor<'_>,
    job_id: JobId,
) -> Result<Option<Vec<JobId>>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT superseded_job_ids FROM dialectic_regenerations WHERE new_job_id = $1",
    )
    .bind(job_id)
    .fetch_optional(executor)
    .await?)
}

/// The current rendered documents the `jobs` wrote (by their first chunk), locked.
pub async fn documents_of_jobs(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    jobs: &[JobId],
) -> Result<Vec<ResourceRow>, StoreError> {
    Ok(sqlx::query_as::<_, ResourceRow>(&format!(
        "SELECT {RESOURCE_COLUMNS} FROM dialectic_project_resources
         WHERE session_id = $1 AND resource_type = 'rendered_document'
           AND source_contribution_id IN (SELECT id FROM dialectic_contributions WHERE session_id = $1 AND job_id = ANY($2))
         ORDER BY file_name FOR UPDATE"
    ))
    .bind(session_id)
    .bind(jobs)
    .fetch_all(&mut **tx)
    .await?)
}

/// The first free archived name `{stem}.v{N}.{ext}` for a document in its folder.
pub async fn free_archived_name(tx: &mut Tx<'_>, doc: &ResourceRow) -> Result<String, StoreError> {
    for version in 1..10_000u32 {
        let name = archived_name(&doc.file_name, version);
        let taken: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM dialectic_project_resources
                            WHERE storage_bucket = $1 AND storage_path = $2 AND file_name = $3)",
        )
        .bind(&doc.storage_bucket)
        .bind(&doc.storage_path)
        .bind(&name)
        .fetch_one(&mut **tx)
        .await?;
        if !taken {
            return Ok(name);
        }
    }
    Err(StoreError::Invalid(format!(
        "no archived version name left for {}",
        doc.file_name
    )))
}

/// Turns the old documents into archived versions (their bytes already copied
/// to the new names) and takes the superseded jobs' contributions, and every
/// chunk or edit of the archived documents' chains, out of every later input.
pub async fn archive(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    jobs: &[JobId],
    renamed: &[(ResourceRow, String)],
) -> Result<(), StoreError> {
    for (doc, file_name) in renamed {
        sqlx::query(
            "UPDATE dialectic_project_resources
             SET resource_type = 'archived_document', file_name = $2, updated_at = now()
             WHERE id = $1",
        )
        .bind(doc.id)
        .bind(file_name)
        .execute(&mut **tx)
        .await?;
        if let (Some(stage), Some(identity)) = (&doc.stage_slug, doc.source_contribution_id) {
            let chain = serde_json::json!({ stage.as_str(): identity.to_string() });
            sqlx::query(
                "UPDATE dialectic_contributions SET is_archived = true, updated_at = now()
                 WHERE session_id = $1 AND (id = $2 OR document_relationships @> $3)",
            )
            .bind(session_id)
            .bind(identity)
            .bind(Json(chain))
            .execute(&mut **tx)
            .await?;
        }
    }
    sqlx::query(
        "UPDATE dialectic_contributions SET is_archived = true, updated_at = now()
         WHERE session_id = $1 AND job_id = ANY($2)",
    )
    .bind(session_id)
    .bind(jobs)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
