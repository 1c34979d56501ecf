//! Documents a user uploads to a project (AddProjectDocument): one resource
//! row each, in upload order; steps read them through `project_document`
//! input rules.

use crate::StoreError;
use crate::inputs::InputDoc;
use chrono::{DateTime, Utc};
use dialectic_core::ids::{ProjectId, ResourceId, SessionId, UserId};
use sqlx::PgPool;

/// `dialectic_project_resources.resource_type` of an uploaded document.
pub const PROJECT_DOCUMENT: &str = "project_document";

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ProjectDocumentRow {
    pub id: ResourceId,
    pub project_id: ProjectId,
    pub file_name: String,
    pub storage_path: String,
    pub size_bytes: i64,
    /// SHA-256 of the text, as the indexer keys it.
    pub content_hash: String,
    /// Chunks the indexer split it into.
    pub chunks: i32,
    pub created_at: DateTime<Utc>,
    /// 1 for the first upload of the project.
    pub position: i64,
}

const COLUMNS: &str = "id, project_id, file_name, storage_path, size_bytes,
    COALESCE(resource_description->>'content_hash', '') AS content_hash,
    COALESCE((resource_description->>'chunks')::int, 0) AS chunks, created_at,
    row_number() OVER (PARTITION BY project_id ORDER BY created_at, id) AS position";

pub struct NewProjectDocument<'a> {
    pub id: ResourceId,
    pub project_id: ProjectId,
    pub user_id: UserId,
    pub file_name: &'a str,
    pub bucket: &'a str,
    pub storage_path: &'a str,
    pub mime_type: &'a str,
    pub size_bytes: i64,
    pub content_hash: &'a str,
    pub chunks: u32,
    pub client_request_id: Option<&'a str>,
}

/// Records an uploaded document; returns (row, created). With a client
/// request id, a repeated upload returns the first document instead.
pub async fn insert(
    pool: &PgPool,
    d: &NewProjectDocument<'_>,
) -> Result<(ProjectDocumentRow, bool), StoreError> {
    let inserted: Option<ResourceId> = sqlx::query_scalar(
        "INSERT INTO dialectic_project_resources
           (id, project_id, user_id, resource_type, file_name, storage_bucket, storage_path, mime_type,
            size_bytes, resource_description, client_request_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,
                 jsonb_build_object('content_hash', $10::text, 'chunks', $11::int), $12)
         ON CONFLICT (project_id, client_request_id) WHERE client_request_id IS NOT NULL DO NOTHING
         RETURNING id",
    )
    .bind(d.id)
    .bind(d.project_id)
    .bind(d.user_id)
    .bind(PROJECT_DOCUMENT)
    .bind(d.file_name)
    .bind(d.bucket)
    .bind(d.storage_path)
    .bind(d.mime_type)
    .bind(d.size_bytes)
    .bind(d.content_hash)
    .bind(d.chunks as i32)
    .bind(d.client_request_id)
    .fetch_optional(pool)
    .await?;
    let id = match inserted {
        Some(id) => id,
        None => {
            let request = d.client_request_id.unwrap_or_default();
            by_request(pool, d.project_id, request)
                .await?
                .ok_or_else(|| StoreError::not_found("upload", request))?
                .id
        }
    };
    let row = list(pool, d.project_id)
        .await?
        .into_iter()
        .find(|r| r.id == id)
        .ok_or_else(|| StoreError::not_found("document", id))?;
    Ok((row, inserted.is_some()))
}

/// The document an earlier upload with this client request id created.
pub async fn by_request(
    pool: &PgPool,
    project_id: ProjectId,
    client_request_id: &str,
) -> Result<Option<ProjectDocumentRow>, StoreError> {
    let id: Option<ResourceId> = sqlx::query_scalar(
        "SELECT id FROM dialectic_project_resources
          WHERE project_id = $1 AND client_request_id = $2 AND resource_type = $3",
    )
    .bind(project_id)
    .bind(client_request_id)
    .bind(PROJECT_DOCUMENT)
    .fetch_optional(pool)
    .await?;
    let Some(id) = id else {
        return Ok(None);
    };
    Ok(list(pool, project_id)
        .await?
        .into_iter()
        .find(|r| r.id == id))
}

/// A project's uploaded documents in upload order.
pub async fn list(
    executor: impl sqlx::PgExecutor<'_>,
    project_id: ProjectId,
) -> Result<Vec<ProjectDocumentRow>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM dialectic_project_resources
          WHERE project_id = $1 AND resource_type = $2 ORDER BY created_at, id"
    ))
    .bind(project_id)
    .bind(PROJECT_DOCUMENT)
    .fetch_all(executor)
    .await?)
}

/// What a `project_document` rule reads: the session's project's uploads in
/// upload order, all of them, or the one whose file name `document_key` names
/// (`*` or none: all). The executor reads these; the planner fans a
/// `per_source_document` step out over them.
pub async fn for_rule(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    document_key: Option<&str>,
) -> Result<Vec<InputDoc>, StoreError> {
    let uploaded = session_inputs(executor, session_id).await?;
    Ok(match document_key {
        None | Some("*") => uploaded,
        Some(file_name) => uploaded
            .into_iter()
            .filter(|d| d.document_key == file_name)
            .collect(),
    })
}

/// The uploaded documents of a session's project, in upload order, as inputs
/// (the document key is the file name).
async fn session_inputs(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
) -> Result<Vec<InputDoc>, StoreError> {
    let rows: Vec<(uuid::Uuid, String, String)> = sqlx::query_as(
        "SELECT r.id, r.storage_path, r.file_name FROM dialectic_project_resources r
           JOIN dialectic_sessions s ON s.project_id = r.project_id
          WHERE s.id = $1 AND r.resource_type = $2 ORDER BY r.created_at, r.id",
    )
    .bind(session_id)
    .bind(PROJECT_DOCUMENT)
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, storage_key, file_name)| InputDoc {
            id,
            storage_key,
            document_key: file_name,
            model_id: None,
            from_resource: true,
        })
        .collect())
}
