//! Documents a user uploads to a project (AddProjectDocument): one resource
//! row each, in upload order; steps read them through `project_document`
//! input rules.

use crate::StoreError;
use crate::inputs::InputDoc;
use chrono::{DateTime, Utc};
use dialectic_core::document_role::{self, DocumentRole};
use dialectic_core::ids::{ProjectId, ResourceId, SessionId, UserId};
use sqlx::PgPool;

/// `dialectic_project_resources.resource_type` of an uploaded document.
pub const PROJECT_DOCUMENT: &str = "project_document";

#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// What the upload is to the project; none: read only by rules naming no role.
    pub role: Option<DocumentRole>,
}

/// A row as stored: the role is text in `resource_description`.
#[derive(sqlx::FromRow)]
struct StoredRow {
    id: ResourceId,
    project_id: ProjectId,
    file_name: String,
    storage_path: String,
    size_bytes: i64,
    content_hash: String,
    chunks: i32,
    created_at: DateTime<Utc>,
    position: i64,
    role: Option<String>,
}

impl TryFrom<StoredRow> for ProjectDocumentRow {
    type Error = StoreError;

    fn try_from(r: StoredRow) -> Result<Self, StoreError> {
        Ok(ProjectDocumentRow {
            role: stored_role(r.role)?,
            id: r.id,
            project_id: r.project_id,
            file_name: r.file_name,
            storage_path: r.storage_path,
            size_bytes: r.size_bytes,
            content_hash: r.content_hash,
            chunks: r.chunks,
            created_at: r.created_at,
            position: r.position,
        })
    }
}

fn stored_role(text: Option<String>) -> Result<Option<DocumentRole>, StoreError> {
    text.map(|t| {
        t.parse()
            .map_err(|e| StoreError::Corrupt(format!("upload role: {e}")))
    })
    .transpose()
}

const COLUMNS: &str = "id, project_id, file_name, storage_path, size_bytes,
    COALESCE(resource_description->>'content_hash', '') AS content_hash,
    COALESCE((resource_description->>'chunks')::int, 0) AS chunks, created_at,
    row_number() OVER (PARTITION BY project_id ORDER BY created_at, id) AS position,
    resource_description->>'role' AS role";

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
    pub role: Option<DocumentRole>,
}

/// How much one project, and one user across their projects, may hold of
/// uploaded documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentLimits {
    pub max_documents: i64,
    pub max_bytes: i64,
    /// Bytes of the user's uploads across all their (undeleted) projects.
    pub max_user_bytes: i64,
}

/// Which limit an upload would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Documents,
    Bytes,
    UserBytes,
}

/// An upload refused by a limit: the limit, and the project's (or for
/// `UserBytes` the user's) figure for it before this upload (documents held,
/// or bytes held).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitReached {
    pub limit: Limit,
    pub max: i64,
    pub current: i64,
}

/// What a project holds of uploaded documents, and what its owner holds
/// across all their undeleted projects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub documents: i64,
    pub bytes: i64,
    pub user_bytes: i64,
}

impl DocumentLimits {
    /// The limit an upload of `size` bytes would pass, given `usage`; None if it fits.
    pub fn check(&self, usage: Usage, size: i64) -> Option<LimitReached> {
        if usage.documents >= self.max_documents {
            return Some(LimitReached {
                limit: Limit::Documents,
                max: self.max_documents,
                current: usage.documents,
            });
        }
        if usage.bytes.saturating_add(size) > self.max_bytes {
            return Some(LimitReached {
                limit: Limit::Bytes,
                max: self.max_bytes,
                current: usage.bytes,
            });
        }
        if usage.user_bytes.saturating_add(size) > self.max_user_bytes {
            return Some(LimitReached {
                limit: Limit::UserBytes,
                max: self.max_user_bytes,
                current: usage.user_bytes,
            });
        }
        None
    }
}

/// What recording an upload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// A new document row.
    Created(ProjectDocumentRow),
    /// An earlier upload with the same client request id, returned instead.
    Repeated(ProjectDocumentRow),
    /// Nothing written: the project is at a limit.
    Refused(LimitReached),
}

/// The documents and bytes a project's uploads hold, and the bytes its
/// owner's uploads hold across the owner's undeleted projects (this one
/// counted whatever its state, as the project's own figures are).
pub async fn usage(
    executor: impl sqlx::PgExecutor<'_>,
    project_id: ProjectId,
) -> Result<Usage, StoreError> {
    let (documents, bytes, user_bytes): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE r.project_id = $1),
                COALESCE(sum(r.size_bytes) FILTER (WHERE r.project_id = $1), 0)::bigint,
                COALESCE(sum(r.size_bytes), 0)::bigint
           FROM dialectic_project_resources r
           JOIN dialectic_projects p ON p.id = r.project_id
          WHERE p.user_id = (SELECT user_id FROM dialectic_projects WHERE id = $1)
            AND (p.deleted_at IS NULL OR p.id = $1) AND r.resource_type = $2",
    )
    .bind(project_id)
    .bind(PROJECT_DOCUMENT)
    .fetch_one(executor)
    .await?;
    Ok(Usage {
        documents,
        bytes,
        user_bytes,
    })
}

/// Records an uploaded document unless the project or its owner is at one
/// of `limits`. With a client request id, a repeated upload returns the
/// first document, even at a limit. The owner's row and the project's are
/// locked for the check and the insert, so concurrent uploads (to any of
/// the owner's projects) count one another and only one takes the last slot.
pub async fn insert(
    pool: &PgPool,
    d: &NewProjectDocument<'_>,
    limits: &DocumentLimits,
) -> Result<Recorded, StoreError> {
    let mut tx = pool.begin().await?;
    // The owner first, as `CreateProject` takes it, so the two locks are
    // always taken in one order.
    let owner = owner(&mut *tx, d.project_id).await?;
    crate::projects::lock_user(&mut tx, owner).await?;
    // NO KEY UPDATE serializes uploads to the project without blocking the
    // rows other services insert under it (their foreign keys take KEY SHARE).
    sqlx::query("SELECT 1 FROM dialectic_projects WHERE id = $1 FOR NO KEY UPDATE")
        .bind(d.project_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::not_found("project", d.project_id))?;
    // Under the lock no retry of this request can be recording it meanwhile,
    // so the first upload is either here or not at all.
    if let Some(request) = d.client_request_id
        && let Some(id) = request_document(&mut *tx, d.project_id, request).await?
    {
        return Ok(Recorded::Repeated(row(&mut *tx, d.project_id, id).await?));
    }
    if let Some(reached) = limits.check(usage(&mut *tx, d.project_id).await?, d.size_bytes) {
        return Ok(Recorded::Refused(reached));
    }
    insert_row(&mut *tx, d).await?;
    let created = row(&mut *tx, d.project_id, d.id).await?;
    tx.commit().await?;
    Ok(Recorded::Created(created))
}

/// The user a project belongs to (projects never change hands).
async fn owner(
    executor: impl sqlx::PgExecutor<'_>,
    project_id: ProjectId,
) -> Result<UserId, StoreError> {
    sqlx::query_scalar("SELECT user_id FROM dialectic_projects WHERE id = $1")
        .bind(project_id)
        .fetch_optional(executor)
        .await?
        .ok_or_else(|| StoreError::not_found("project", project_id))
}

async fn insert_row(
    executor: impl sqlx::PgExecutor<'_>,
    d: &NewProjectDocument<'_>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO dialectic_project_resources
           (id, project_id, user_id, resource_type, file_name, storage_bucket, storage_path, mime_type,
            size_bytes, resource_description, client_request_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,
                 jsonb_strip_nulls(jsonb_build_object('content_hash', $10::text,
                     'chunks', $11::int, 'role', $13::text)), $12)",
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
    .bind(d.role.map(DocumentRole::as_str))
    .execute(executor)
    .await?;
    Ok(())
}

/// One of a project's documents, with its position among them.
async fn row(
    executor: impl sqlx::PgExecutor<'_>,
    project_id: ProjectId,
    id: ResourceId,
) -> Result<ProjectDocumentRow, StoreError> {
    list(executor, project_id)
        .await?
        .into_iter()
        .find(|r| r.id == id)
        .ok_or_else(|| StoreError::not_found("document", id))
}

async fn request_document(
    executor: impl sqlx::PgExecutor<'_>,
    project_id: ProjectId,
    client_request_id: &str,
) -> Result<Option<ResourceId>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM dialectic_project_resources
          WHERE project_id = $1 AND client_request_id = $2 AND resource_type = $3",
    )
    .bind(project_id)
    .bind(client_request_id)
    .bind(PROJECT_DOCUMENT)
    .fetch_optional(executor)
    .await?)
}

/// The document an earlier upload with this client request id created.
pub async fn by_request(
    pool: &PgPool,
    project_id: ProjectId,
    client_request_id: &str,
) -> Result<Option<ProjectDocumentRow>, StoreError> {
    let Some(id) = request_document(pool, project_id, client_request_id).await? else {
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
    let rows: Vec<StoredRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM dialectic_project_resources
          WHERE project_id = $1 AND resource_type = $2 ORDER BY created_at, id"
    ))
    .bind(project_id)
    .bind(PROJECT_DOCUMENT)
    .fetch_all(executor)
    .await?;
    rows.into_iter().map(ProjectDocumentRow::try_from).collect()
}

/// Which of a project's uploads a `project_document` rule reads: the one
/// whose file name `document_key` names (`*` or none: any), of `role` when
/// the rule names one.
#[derive(Debug, Clone, Copy, Default)]
pub struct UploadSelector<'a> {
    pub document_key: Option<&'a str>,
    pub role: Option<DocumentRole>,
}

impl UploadSelector<'_> {
    fn admits(&self, file_name: &str, role: Option<DocumentRole>) -> bool {
        let named = match self.document_key {
            None | Some("*") => true,
            Some(key) => key == file_name,
        };
        named && document_role::admits(self.role, role)
    }
}

impl<'a> From<&'a dialectic_core::recipe::InputRule> for UploadSelector<'a> {
    fn from(rule: &'a dialectic_core::recipe::InputRule) -> Self {
        UploadSelector {
            document_key: rule.document_key.as_deref(),
            role: rule.role,
        }
    }
}

/// What a `project_document` rule reads: the session's project's uploads the
/// selector admits, in upload order. The executor reads these; the planner
/// fans a `per_source_document` step out over them.
pub async fn for_rule(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    selector: UploadSelector<'_>,
) -> Result<Vec<InputDoc>, StoreError> {
    let uploaded = session_inputs(executor, session_id).await?;
    Ok(uploaded
        .into_iter()
        .filter(|(doc, role)| selector.admits(&doc.document_key, *role))
        .map(|(doc, _)| doc)
        .collect())
}

/// The uploaded documents of a session's project, in upload order, as inputs
/// (the document key is the file name).
async fn session_inputs(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
) -> Result<Vec<(InputDoc, Option<DocumentRole>)>, StoreError> {
    let rows: Vec<(ResourceId, String, String, Option<String>)> = sqlx::query_as(
        "SELECT r.id, r.storage_path, r.file_name, r.resource_description->>'role'
           FROM dialectic_project_resources r
           JOIN dialectic_sessions s ON s.project_id = r.project_id
          WHERE s.id = $1 AND r.resource_type = $2 ORDER BY r.created_at, r.id",
    )
    .bind(session_id)
    .bind(PROJECT_DOCUMENT)
    .fetch_all(executor)
    .await?;
    rows.into_iter()
        .map(|(id, storage_key, file_name, role)| {
            let doc = InputDoc {
                id: id.into(),
                storage_key,
                document_key: file_name,
                model_id: None,
                from_resource: true,
            };
            Ok((doc, stored_role(role)?))
        })
        .collect()
}

/// What a step of the stage wrote under `document_key` from each upload it
/// read: (the upload's key, the object of the step's reply), the latest
/// reply per upload. Fan-outs use it to order uploads by what was extracted
/// from them (`order_by`).
pub async fn written_from_uploads(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
    document_key: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT DISTINCT ON (read.key) read.key, c.raw_response_storage_path
         FROM dialectic_generation_jobs j
         JOIN dialectic_contributions c ON c.job_id = j.id AND NOT c.is_archived
         CROSS JOIN LATERAL jsonb_array_elements(j.payload->'sources') src
         CROSS JOIN LATERAL jsonb_array_elements_text(src->'keys') AS read(key)
         WHERE j.session_id = $1 AND j.stage_slug = $2 AND j.iteration_number = $3
           AND c.document_key = $4 AND c.raw_response_storage_path IS NOT NULL
         ORDER BY read.key, c.created_at DESC",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(document_key)
    .fetch_all(executor)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: DocumentLimits = DocumentLimits {
        max_documents: 2,
        max_bytes: 100,
        max_user_bytes: 150,
    };

    fn held(documents: i64, bytes: i64) -> Usage {
        Usage {
            documents,
            bytes,
            user_bytes: bytes,
        }
    }

    #[test]
    fn an_upload_fits_up_to_each_limit_and_not_past_it() {
        assert_eq!(LIMITS.check(held(1, 60), 40), None, "exactly full fits");
        let bytes = LIMITS.check(held(1, 60), 41).expect("a byte over");
        assert_eq!(
            (bytes.limit, bytes.max, bytes.current),
            (Limit::Bytes, 100, 60)
        );
        let count = LIMITS.check(held(2, 0), 1).expect("a document over");
        assert_eq!(
            (count.limit, count.max, count.current),
            (Limit::Documents, 2, 2)
        );
    }

    #[test]
    fn the_users_bytes_across_projects_count_up_to_their_limit() {
        let elsewhere = |bytes| Usage {
            documents: 0,
            bytes: 0,
            user_bytes: bytes,
        };
        assert_eq!(LIMITS.check(elsewhere(110), 40), None, "exactly full fits");
        let over = LIMITS.check(elsewhere(110), 41).expect("a byte over");
        assert_eq!(
            (over.limit, over.max, over.current),
            (Limit::UserBytes, 150, 110)
        );
    }
}
