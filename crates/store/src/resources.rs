//! Rendered documents (`dialectic_project_resources` rows of type
//! `rendered_document`): one canonical row per stored file. Uploaded
//! documents, rows of the same table, are in `project_documents`.

use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{ContributionId, ModelId, ProjectId, ResourceId, SessionId, UserId};
use sqlx::PgPool;

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
    /// It shows a JSON output, whose contribution stays what later steps read.
    pub is_json_backed: bool,
    /// A minor revisit of an earlier stage flagged it; an edit or a submit clears it.
    pub needs_review: bool,
    pub updated_at: DateTime<Utc>,
}

impl ResourceRow {
    /// The object's key: an upload's storage_path is its whole key, a
    /// rendered document's is its folder.
    pub fn key(&self) -> String {
        if self.resource_type == crate::project_documents::PROJECT_DOCUMENT {
            return self.storage_path.clone();
        }
        format!("{}/{}", self.storage_path, self.file_name)
    }
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
    pub is_json_backed: bool,
}

/// Upsert by storage location: one canonical row per rendered document.
pub async fn upsert_resource(
    tx: &mut Tx<'_>,
    r: &NewResource<'_>,
) -> Result<ResourceId, StoreError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO dialectic_project_resources
           (id, project_id, user_id, session_id, stage_slug, iteration_number, resource_type, document_key, model_id,
            storage_bucket, storage_path, file_name, mime_type, size_bytes, source_contribution_id, is_incomplete,
            is_json_backed)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17)
         ON CONFLICT (storage_bucket, storage_path, file_name) DO UPDATE
           SET size_bytes = EXCLUDED.size_bytes, source_contribution_id = EXCLUDED.source_contribution_id,
               is_incomplete = EXCLUDED.is_incomplete, is_json_backed = EXCLUDED.is_json_backed,
               needs_review = false,
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
    .bind(r.is_json_backed)
    .fetch_one(&mut **tx)
    .await?)
}

pub(crate) const RESOURCE_COLUMNS: &str = "id, project_id, session_id, stage_slug, iteration_number, resource_type, document_key, model_id,
    file_name, storage_bucket, storage_path, mime_type, size_bytes, source_contribution_id, is_incomplete, is_json_backed, needs_review, updated_at";

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

/// Seed 003's minor impact: the current documents of `stages` in one
/// iteration are flagged for review.
pub async fn flag_for_review(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
    stages: &[String],
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_project_resources SET needs_review = true
         WHERE session_id = $1 AND iteration_number = $2 AND stage_slug = ANY($3)
           AND resource_type = 'rendered_document'",
    )
    .bind(session_id)
    .bind(iteration)
    .bind(stages)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Seed 003's paragraph edit: the parts of an assembled document listed
/// after the `edited` one (a sequential step's replies are named in chain
/// order) are flagged for review, as they continued a text that changed.
pub async fn flag_later_parts(tx: &mut Tx<'_>, edited: ResourceId) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "UPDATE dialectic_project_resources later SET needs_review = true
           FROM dialectic_project_resources e
         WHERE e.id = $1 AND later.session_id = e.session_id AND later.stage_slug = e.stage_slug
           AND later.iteration_number = e.iteration_number
           AND later.model_id IS NOT DISTINCT FROM e.model_id AND later.document_key = e.document_key
           AND later.resource_type = e.resource_type AND later.storage_path = e.storage_path
           AND later.file_name > e.file_name",
    )
    .bind(edited)
    .execute(&mut **tx)
    .await?
    .rows_affected())
}

/// A submitted review: the flags of one iteration's documents, but those of
/// the stages `after` the submitted one, are cleared.
pub async fn clear_review(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
    after: &[String],
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_project_resources SET needs_review = false
         WHERE session_id = $1 AND iteration_number = $2 AND needs_review
           AND NOT (stage_slug = ANY($3))",
    )
    .bind(session_id)
    .bind(iteration)
    .bind(after)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The stages of a session with a document flagged for review, in order of
/// their flagged documents' iteration and stage.
pub async fn stages_needing_review(
    pool: &PgPool,
    session_id: SessionId,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT stage_slug FROM dialectic_project_resources
         WHERE session_id = $1 AND needs_review AND resource_type = 'rendered_document'
           AND stage_slug IS NOT NULL
         GROUP BY stage_slug ORDER BY min(iteration_number), min(created_at)",
    )
    .bind(session_id)
    .fetch_all(pool)
    .await?)
}
