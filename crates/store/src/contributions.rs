//! Contributions (`dialectic_contributions`): what each model call or user
//! edit wrote, chained into documents by edit version.

use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{ContributionId, JobId, ModelId, SessionId, UserId};
use sqlx::types::Json;

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

/// What a document's text is made of (seed 000 function 3): the latest user
/// edit, which is the whole document and wins over the model's chunks, else
/// every chunk of its chain in order.
pub fn current_parts(chain: &[ContributionRow]) -> Vec<&ContributionRow> {
    let latest_edit = chain
        .iter()
        .filter(|c| c.contribution_type == USER_EDIT)
        .max_by_key(|c| (c.edit_version, c.created_at));
    match latest_edit {
        Some(edit) => vec![edit],
        None => chain.iter().collect(),
    }
}

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

/// Row lock on one contribution on the caller's connection (inside its
/// transaction): renders of one assembled document take turns on its first part.
pub async fn lock_on(conn: &mut crate::Conn, id: ContributionId) -> Result<(), StoreError> {
    sqlx::query("SELECT 1 FROM dialectic_contributions WHERE id = $1 FOR UPDATE")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
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
/// The document each contribution belongs to (its chain's first chunk's
/// id; a contribution outside any chain is its own).
pub async fn document_identities(
    executor: impl sqlx::PgExecutor<'_>,
    ids: &[uuid::Uuid],
) -> Result<std::collections::HashMap<uuid::Uuid, uuid::Uuid>, StoreError> {
    let rows: Vec<(uuid::Uuid, Option<String>)> = sqlx::query_as(
        "SELECT id, document_relationships ->> stage_slug FROM dialectic_contributions WHERE id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, identity)| {
            let identity = identity.and_then(|i| uuid::Uuid::parse_str(&i).ok());
            (id, identity.unwrap_or(id))
        })
        .collect())
}

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
