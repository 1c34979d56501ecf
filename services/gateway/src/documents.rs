//! Project documents: files a user uploads to a project for its steps to read
//! (`project_document` input rules), stored under the project and indexed.
//! A PDF or DOCX is converted to markdown once, on a blocking worker thread
//! (never on the async threads that serve other calls); steps read the
//! markdown, and the original is stored beside it (and exported with it).

use crate::convert;
use crate::error::GatewayError;
use crate::service::{Gateway, optional, uploaded_text};
use dialectic_config::GatewayConfig;
use dialectic_convert::{Kind, Limits, to_markdown};
use dialectic_core::document_role::DocumentRole;
use dialectic_core::error::Reason;
use dialectic_core::ids::{ProjectId, ResourceId, UserId};
use dialectic_core::paths::project_document_key;
use dialectic_proto::names::{from_api, to_api};
use dialectic_proto::v1::indexer::{IndexRequest, IndexResponse};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, DocumentRole as ApiRole, ListProjectDocumentsRequest,
    ListProjectDocumentsResponse, ProjectDocument,
};
use dialectic_store::StoreError;
use dialectic_store::project_documents::{
    self, Limit, LimitReached, NewProjectDocument, ProjectDocumentRow, Recorded,
};
use dialectic_store::projects;
use tokio::sync::Semaphore;

/// Extensions an upload may have: text is stored as it is, PDF and DOCX are
/// converted.
const UPLOAD_EXTENSIONS: [&str; 5] = ["md", "markdown", "txt", "pdf", "docx"];

/// Conversions running at once: each holds a file, its parse and a core,
/// so a burst of uploads waits here rather than starving the gateway.
static CONVERSIONS: Semaphore = Semaphore::const_new(2);

/// What one conversion may cost (`gateway.max_upload_pages`,
/// `gateway.max_upload_unpacked_bytes`). The file itself is already capped
/// by the gateway's message size.
pub(crate) fn conversion_limits(config: &GatewayConfig) -> Limits {
    Limits {
        max_bytes: config.max_message_bytes,
        max_pages: config.max_upload_pages,
        max_expanded_bytes: usize::try_from(config.max_upload_unpacked_bytes).unwrap_or(usize::MAX),
        ..Limits::default()
    }
}

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
        role: api_role(row.role),
    }
}

/// Roles cross the API by name: `DOCUMENT_ROLE_WRITING_SAMPLE` is `writing_sample`.
const ROLE_PREFIX: &str = "DOCUMENT_ROLE";

fn api_role(role: Option<DocumentRole>) -> i32 {
    role.map_or(0, |r| {
        to_api(ROLE_PREFIX, r.as_str(), ApiRole::from_str_name)
    })
}

/// The upload's role; a number the proto does not define is refused.
fn upload_role(req: &AddProjectDocumentRequest) -> Result<Option<DocumentRole>, GatewayError> {
    let bad = || GatewayError::bad("role", format!("role {} is not a DocumentRole", req.role));
    match ApiRole::try_from(req.role).map_err(|_| bad())? {
        ApiRole::Unspecified => Ok(None),
        role => from_api(ROLE_PREFIX, role.as_str_name())
            .parse()
            .map(Some)
            .map_err(|_| bad()),
    }
}

fn mime_type(file_name: &str) -> &'static str {
    if file_name.to_ascii_lowercase().ends_with(".txt") {
        "text/plain; charset=utf-8"
    } else {
        "text/markdown; charset=utf-8"
    }
}

/// The refusal of an upload past one of its project's (or its owner's) limits.
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
        Limit::UserBytes => (
            Reason::UserBytesLimitReached,
            format!(
                "your documents, across your projects, hold {} bytes; {size} more would pass your limit of {} bytes",
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

/// The file name without any directories: refused when missing or of a
/// kind not taken.
fn upload_name(req: &AddProjectDocumentRequest) -> Result<String, GatewayError> {
    let file_name = req
        .file_name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default()
        .trim();
    if file_name.is_empty() {
        return Err(GatewayError::bad("file_name", "file_name is required"));
    }
    if let Some((stem, extension)) = file_name.rsplit_once('.')
        && !stem.is_empty()
        && !UPLOAD_EXTENSIONS.contains(&extension.to_ascii_lowercase().as_str())
    {
        return Err(GatewayError::bad(
            "file",
            format!(
                "file {file_name}: .{extension} is not taken; upload .pdf, .docx, .md, .markdown or .txt"
            ),
        ));
    }
    Ok(file_name.to_string())
}

/// The upload's text: refused unless it is UTF-8 within `max_bytes` and not
/// blank.
fn upload_text(file_name: &str, content: &[u8], max_bytes: usize) -> Result<String, GatewayError> {
    let (_, text) = uploaded_text("file", file_name, content, max_bytes)?;
    if text.trim().is_empty() {
        return Err(GatewayError::bad(
            "content",
            format!("file {file_name} has no text in it"),
        ));
    }
    Ok(text)
}

/// An upload as stored: the text steps read, and for a converted file its
/// original bytes.
struct Upload {
    text: String,
    original: Option<(Kind, Vec<u8>)>,
}

impl Upload {
    /// Bytes stored for it: the text and the original.
    fn size(&self) -> i64 {
        let original = self.original.as_ref().map_or(0, |(_, bytes)| bytes.len());
        i64::try_from(self.text.len() + original).unwrap_or(i64::MAX)
    }
}

/// Converts `content` on a blocking worker; a file that cannot be read is
/// INVALID_ARGUMENT naming it and saying why.
async fn convert_upload(
    file_name: &str,
    kind: Kind,
    content: Vec<u8>,
    limits: Limits,
) -> Result<Upload, GatewayError> {
    let _permit = CONVERSIONS
        .acquire()
        .await
        .map_err(|e| GatewayError::Internal(format!("conversion workers: {e}")))?;
    let (content, converted) = tokio::task::spawn_blocking(move || {
        let converted = to_markdown(&content, kind, &limits);
        (content, converted)
    })
    .await
    .map_err(|e| GatewayError::Internal(format!("converting {file_name}: {e}")))?;
    let converted = converted
        .map_err(|e| GatewayError::bad("file", format!("file {file_name} is refused: {e}")))?;
    Ok(Upload {
        text: converted.markdown,
        original: Some((kind, content)),
    })
}

impl Gateway {
    /// Stores, indexes and records an uploaded document. It is indexed before
    /// anything is written, so an indexer outage (UNAVAILABLE) leaves nothing
    /// behind; a retried upload answers the first one; an upload past the
    /// project's or its user's limits is RESOURCE_EXHAUSTED with nothing written.
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
        let role = upload_role(&req)?;
        let file_name = upload_name(&req)?;
        let file_name = file_name.as_str();
        let upload = match Kind::from_file_name(file_name) {
            Some(kind) => {
                convert_upload(file_name, kind, req.content, self.conversion_limits).await?
            }
            None => Upload {
                text: upload_text(file_name, &req.content, self.max_upload_bytes())?,
                original: None,
            },
        };
        let size = upload.size();
        // A full project (or user) is refused before the indexer's work and the S3
        // write; the recording checks again under the project's lock, as a
        // concurrent upload may take the last slot meanwhile.
        let held = project_documents::usage(self.store.pool(), project_id).await?;
        if let Some(reached) = self.document_limits.check(held, size) {
            return Err(exhausted(reached, size));
        }
        let indexed = self.index_upload(file_name, &upload.text).await?;
        let id = ResourceId::new();
        let keys = self.store_upload(project_id, id, file_name, upload).await?;
        let new = NewProjectDocument {
            id,
            project_id,
            user_id: user,
            file_name,
            bucket: self.blob.bucket(),
            storage_path: &keys[0],
            mime_type: mime_type(&keys[0]),
            size_bytes: size,
            content_hash: &indexed.content_hash,
            chunks: indexed.chunks,
            client_request_id: request_id,
            role,
        };
        let recorded =
            project_documents::insert(self.store.pool(), &new, &self.document_limits).await;
        self.settle_upload(project_id, &keys, size, recorded).await
    }

    /// Writes the text steps read and, for a converted file, the original
    /// beside it (same name and id, its own extension). Gives the keys
    /// written, the text's first; a failed write leaves none behind.
    async fn store_upload(
        &self,
        project_id: ProjectId,
        id: ResourceId,
        file_name: &str,
        upload: Upload,
    ) -> Result<Vec<String>, GatewayError> {
        let Some((kind, original)) = upload.original else {
            let key = project_document_key(project_id, id, file_name);
            self.blob
                .put(&key, upload.text.into_bytes(), mime_type(file_name))
                .await?;
            return Ok(vec![key]);
        };
        let stem = file_name
            .rsplit_once('.')
            .map_or(file_name, |(stem, _)| stem);
        let text_key = project_document_key(project_id, id, &format!("{stem}.md"));
        let original_key = project_document_key(project_id, id, file_name);
        self.blob
            .put(&text_key, upload.text.into_bytes(), mime_type(&text_key))
            .await?;
        if let Err(e) = self
            .blob
            .put(&original_key, original, kind.mime_type())
            .await
        {
            self.discard_object(&text_key).await;
            return Err(e.into());
        }
        Ok(vec![text_key, original_key])
    }

    /// The answer to an upload whose objects are stored at `keys`: they are
    /// kept only if its row was created.
    async fn settle_upload(
        &self,
        project_id: ProjectId,
        keys: &[String],
        size: i64,
        recorded: Result<Recorded, StoreError>,
    ) -> Result<ProjectDocument, GatewayError> {
        let answer = match recorded {
            Ok(Recorded::Created(row)) => {
                // Answers to the project's questions may now be incomplete.
                self.invalidate(project_id).await;
                return Ok(document(row));
            }
            // A concurrent retry recorded its upload first: keep that one.
            Ok(Recorded::Repeated(first)) => Ok(document(first)),
            // A concurrent upload took the last of the project's (or user's) room.
            Ok(Recorded::Refused(reached)) => Err(exhausted(reached, size)),
            Err(e) => Err(e.into()),
        };
        for key in keys {
            self.discard_object(key).await;
        }
        answer
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
        req: ListProjectDocumentsRequest,
    ) -> Result<ListProjectDocumentsResponse, GatewayError> {
        let project_id = ProjectId::parse(&req.project_id)?;
        let start = crate::convert::start_of(&req.page_token)?;
        projects::project_for_user(self.store.pool(), user, project_id).await?;
        let rows = project_documents::list(self.store.pool(), project_id).await?;
        let (rows, next_page_token) = crate::convert::whole_page(rows, req.page_size, start)?;
        Ok(ListProjectDocumentsResponse {
            documents: rows.into_iter().map(document).collect(),
            next_page_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_crosses_the_api_and_back() {
        for role in DocumentRole::ALL {
            let api = api_role(Some(role));
            assert_ne!(
                api,
                i32::from(ApiRole::Unspecified),
                "{role} has no DocumentRole twin"
            );
            let req = AddProjectDocumentRequest {
                role: api,
                ..Default::default()
            };
            assert_eq!(upload_role(&req).ok(), Some(Some(role)));
        }
        let none = AddProjectDocumentRequest::default();
        assert_eq!(upload_role(&none).ok(), Some(None));
        let unknown = AddProjectDocumentRequest {
            role: 99,
            ..Default::default()
        };
        assert!(upload_role(&unknown).is_err());
    }
}
