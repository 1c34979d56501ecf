//! Project documents: files a user uploads to a project for its steps to read
//! (`project_document` input rules), stored under the project and indexed.

use crate::convert;
use crate::error::GatewayError;
use crate::service::{Gateway, optional, uploaded_text};
use dialectic_core::error::Reason;
use dialectic_core::ids::{ProjectId, ResourceId, UserId};
use dialectic_core::paths::project_document_key;
use dialectic_proto::v1::indexer::{IndexRequest, IndexResponse};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, ListProjectDocumentsResponse, ProjectDocument,
};
use dialectic_store::StoreError;
use dialectic_store::project_documents::{
    self, Limit, LimitReached, NewProjectDocument, ProjectDocumentRow, Recorded,
};
use dialectic_store::projects;

fn document(row: ProjectDocumentRow) -> ProjectDocument {
    ProjectDocument {
        resource_id: row.id.to_string(),
        project_id: row.project_id.to_string(),
        file_name: row.file_name,
        size_bytes: u64::try_from(row.size_bytes).unwrap_or(0),
        position: u32::try_from(row.position).unwrap_or(0),
        content_hash: row.content_hash,
        chunks: u32::try_from(row.chunks).unwrap_or(0),
        storage_key: row.storage_path,
        created_at: Some(convert::timestamp(row.created_at)),
    }
}

fn mime_type(file_name: &str) -> &'static str {
    if file_name.to_ascii_lowercase().ends_with(".txt") {
        "text/plain; charset=utf-8"
    } else {
        "text/markdown; charset=utf-8"
    }
}

/// The refusal of an upload past one of its project's limits.
fn exhausted(reached: LimitReached, size: i64) -> GatewayError {
    let (reason, message) = match reached.limit {
        Limit::Documents => (
            Reason::ProjectDocumentLimitReached,
            format!(
                "the project holds {} documents, the most a project may hold ({})",
                reached.current, reached.max
            ),
        ),
        Limit::Bytes => (
            Reason::ProjectBytesLimitReached,
            format!(
                "the project's documents hold {} bytes; {size} more would pass its limit of {} bytes",
                reached.current, reached.max
            ),
        ),
    };
    GatewayError::Exhausted {
        reason,
        message,
        limit: reached.max,
        current: reached.current,
    }
}

/// The file name without any directories, and the upload's text: refused
/// unless both are there and the text is UTF-8 within `max_bytes`.
fn upload_text(
    req: &AddProjectDocumentRequest,
    max_bytes: usize,
) -> Result<(&str, String), GatewayError> {
    let file_name = req
        .file_name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default()
        .trim();
    if file_name.is_empty() {
        return Err(GatewayError::bad("file_name", "file_name is required"));
    }
    let (_, text) = uploaded_text("file", file_name, &req.content, max_bytes)?;
    if text.trim().is_empty() {
        return Err(GatewayError::bad(
            "content",
            format!("file {file_name} has no text in it"),
        ));
    }
    Ok((file_name, text))
}

impl Gateway {
    /// Stores, indexes and records an uploaded document. It is indexed before
    /// anything is written, so an indexer outage (UNAVAILABLE) leaves nothing
    /// behind; a retried upload answers the first one; an upload past the
    /// project's limits is RESOURCE_EXHAUSTED with nothing written.
    pub(crate) async fn add_project_document(
        &self,
        user: UserId,
        req: AddProjectDocumentRequest,
    ) -> Result<ProjectDocument, GatewayError> {
        let project_id = ProjectId::parse(&req.project_id)?;
        projects::project_for_user(self.store.pool(), user, project_id).await?;
        let request_id = optional(&req.client_request_id);
        if let Some(request_id) = request_id
            && let Some(first) =
                project_documents::by_request(self.store.pool(), project_id, request_id).await?
        {
            return Ok(document(first));
        }
        let (file_name, text) = upload_text(&req, self.max_upload_bytes())?;
        let size = i64::try_from(text.len()).unwrap_or(i64::MAX);
        // A full project is refused before the indexer's work and the S3
        // write; the recording checks again under the project's lock, as a
        // concurrent upload may take the last slot meanwhile.
        let held = project_documents::usage(self.store.pool(), project_id).await?;
        if let Some(reached) = self.document_limits.check(held, size) {
            return Err(exhausted(reached, size));
        }
        let indexed = self.index_upload(file_name, &text).await?;
        let id = ResourceId::new();
        let key = project_document_key(project_id, id, file_name);
        self.blob
            .put(&key, text.into_bytes(), mime_type(file_name))
            .await?;
        let new = NewProjectDocument {
            id,
            project_id,
            user_id: user,
            file_name,
            bucket: self.blob.bucket(),
            storage_path: &key,
            mime_type: mime_type(file_name),
            size_bytes: size,
            content_hash: &indexed.content_hash,
            chunks: indexed.chunks,
            client_request_id: request_id,
        };
        let recorded =
            project_documents::insert(self.store.pool(), &new, &self.document_limits).await;
        self.settle_upload(project_id, &key, size, recorded).await
    }

    /// The answer to an upload whose object is stored at `key`: the object is
    /// kept only if its row was created.
    async fn settle_upload(
        &self,
        project_id: ProjectId,
        key: &str,
        size: i64,
        recorded: Result<Recorded, StoreError>,
    ) -> Result<ProjectDocument, GatewayError> {
        match recorded {
            Ok(Recorded::Created(row)) => {
                // Answers to the project's questions may now be incomplete.
                self.invalidate(project_id).await;
                Ok(document(row))
            }
            Ok(Recorded::Repeated(first)) => {
                // A concurrent retry recorded its upload first: keep that one.
                self.discard_object(key).await;
                Ok(document(first))
            }
            Ok(Recorded::Refused(reached)) => {
                // A concurrent upload took the last of the project's room.
                self.discard_object(key).await;
                Err(exhausted(reached, size))
            }
            Err(e) => {
                self.discard_object(key).await;
                Err(e.into())
            }
        }
    }

    async fn index_upload(
        &self,
        file_name: &str,
        text: &str,
    ) -> Result<IndexResponse, GatewayError> {
        let indexed = self
            .indexer()
            .index(IndexRequest {
                text: text.to_string(),
                embedder: String::new(),
                tokenizer: String::new(),
            })
            .await
            .map_err(|status| {
                GatewayError::unavailable(
                    Reason::IndexerUnavailable,
                    format!(
                        "the indexer could not index {file_name}: {}",
                        status.message()
                    ),
                )
            })?;
        Ok(indexed.into_inner())
    }

    pub(crate) async fn list_project_documents(
        &self,
        user: UserId,
        project_id: &str,
    ) -> Result<ListProjectDocumentsResponse, GatewayError> {
        let project_id = ProjectId::parse(project_id)?;
        projects::project_for_user(self.store.pool(), user, project_id).await?;
        let rows = project_documents::list(self.store.pool(), project_id).await?;
        Ok(ListProjectDocumentsResponse {
            documents: rows.into_iter().map(document).collect(),
        })
    }
}
