//! Project documents: files a user uploads to a project for its steps to read
//! (`project_document` input rules), stored under the project and indexed.
//! A PDF or DOCX is converted to markdown once, by the indexer (never in the
//! gateway, whose threads serve everyone's calls), with its progress noted
//! for `GetUploadProgress`; steps read the markdown, and the original is
//! stored beside it (and exported with it).

use crate::convert;
use crate::error::GatewayError;
use crate::service::{Gateway, optional, uploaded_text};
use dialectic_cache::uploads::{UploadKey, UploadProgress as NotedProgress, UploadStage};
use dialectic_config::GatewayConfig;
use dialectic_convert::{Kind, Limits};
use dialectic_core::document_role::DocumentRole;
use dialectic_core::error::Reason;
use dialectic_core::ids::{ProjectId, ResourceId, UserId};
use dialectic_core::paths::project_document_key;
use dialectic_proto::names::{from_api, to_api};
use dialectic_proto::v1::indexer::convert_response::Event;
use dialectic_proto::v1::indexer::{ConvertRequest, IndexRequest, IndexResponse};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, DocumentRole as ApiRole, GetUploadProgressRequest,
    ListProjectDocumentsRequest, ListProjectDocumentsResponse, ProjectDocument, UploadProgress,
    UploadStage as ApiStage,
};
use dialectic_store::StoreError;
use dialectic_store::project_documents::{
    self, Limit, LimitReached, NewProjectDocument, ProjectDocumentRow, Recorded,
};
use dialectic_store::projects;
use std::time::{Duration, Instant};

/// Extensions an upload may have: text is stored as it is, PDF and DOCX are
/// converted.
const UPLOAD_EXTENSIONS: [&str; 5] = ["md", "markdown", "txt", "pdf", "docx"];

/// How often a conversion's progress is noted: often enough for a person
/// watching, rarely enough that a 1,000-page file costs Redis little.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);
/// How long an upload's progress is kept after its last note.
const UPLOAD_PROGRESS_SECS: u64 = 600;

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

fn api_stage(stage: UploadStage) -> ApiStage {
    match stage {
        UploadStage::Converting => ApiStage::Converting,
        UploadStage::Indexing => ApiStage::Indexing,
        UploadStage::Stored => ApiStage::Stored,
        UploadStage::Failed => ApiStage::Failed,
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
    /// Pages the conversion read, of how many: (0, 0) for a text file.
    pages: (u32, u32),
}

impl Upload {
    /// Bytes stored for it: the text and the original.
    fn size(&self) -> i64 {
        let original = self.original.as_ref().map_or(0, |(_, bytes)| bytes.len());
        i64::try_from(self.text.len() + original).unwrap_or(i64::MAX)
    }
}

/// The refusal or failure of an upload's conversion: a file the indexer
/// cannot read is INVALID_ARGUMENT naming it (as the indexer said it);
/// anything else is the indexer being out of reach.
fn conversion_failed(file_name: &str, status: tonic::Status) -> GatewayError {
    if status.code() == tonic::Code::InvalidArgument {
        return GatewayError::bad("file", status.message().to_string());
    }
    GatewayError::unavailable(
        Reason::IndexerUnavailable,
        format!(
            "the indexer could not convert {file_name}: {}",
            status.message()
        ),
    )
}

/// Where an upload's progress is noted: nowhere for an upload sent without
/// a client_request_id, as nobody could ask for it.
struct ProgressNote<'a> {
    key: UploadKey<'a>,
    file_name: &'a str,
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
        let (user_text, project_text) = (user.to_string(), project_id.to_string());
        let file_name = req.file_name.clone();
        let note = request_id.map(|request_id| ProgressNote {
            key: UploadKey {
                user_id: &user_text,
                project_id: &project_text,
                request_id,
            },
            file_name: &file_name,
        });
        let added = self
            .add_new_document(user, project_id, &req, note.as_ref())
            .await;
        if let Err(e) = &added {
            let failure = e.to_string();
            self.note_upload(note.as_ref(), UploadStage::Failed, (0, 0), &failure)
                .await;
        }
        added
    }

    async fn add_new_document(
        &self,
        user: UserId,
        project_id: ProjectId,
        req: &AddProjectDocumentRequest,
        note: Option<&ProgressNote<'_>>,
    ) -> Result<ProjectDocument, GatewayError> {
        let role = upload_role(req)?;
        let file_name = upload_name(req)?;
        let file_name = file_name.as_str();
        let upload = match Kind::from_file_name(file_name) {
            Some(kind) => {
                self.convert_upload(note, file_name, kind, req.content.clone())
                    .await?
            }
            None => Upload {
                text: upload_text(file_name, &req.content, self.max_upload_bytes())?,
                original: None,
                pages: (0, 0),
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
        let pages = upload.pages;
        self.note_upload(note, UploadStage::Indexing, pages, "")
            .await;
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
            client_request_id: optional(&req.client_request_id),
            role,
        };
        let recorded =
            project_documents::insert(self.store.pool(), &new, &self.document_limits).await;
        let stored = self
            .settle_upload(project_id, &keys, size, recorded)
            .await?;
        self.note_upload(note, UploadStage::Stored, pages, "").await;
        Ok(stored)
    }

    /// Has the indexer convert `content` (a PDF or DOCX) to markdown, noting
    /// its progress as pages are read; the original is kept to store beside
    /// the text.
    async fn convert_upload(
        &self,
        note: Option<&ProgressNote<'_>>,
        file_name: &str,
        kind: Kind,
        content: Vec<u8>,
    ) -> Result<Upload, GatewayError> {
        let max_text = self.conversion_limits.max_expanded_bytes;
        let request = ConvertRequest {
            file_name: file_name.to_string(),
            content: content.clone(),
            max_pages: self.conversion_limits.max_pages,
            max_unpacked_bytes: u64::try_from(max_text).unwrap_or(u64::MAX),
        };
        let failed = |status| conversion_failed(file_name, status);
        let mut events = self
            .indexer()
            .convert(request)
            .await
            .map_err(failed)?
            .into_inner();
        let mut text = String::new();
        let mut pages = (0, 0);
        let mut noted: Option<Instant> = None;
        while let Some(message) = events.message().await.map_err(failed)? {
            match message.event {
                Some(Event::Progress(p)) => {
                    pages = (p.pages_done, p.pages_total);
                    if noted.is_none_or(|at| at.elapsed() >= PROGRESS_EVERY) {
                        self.note_upload(note, UploadStage::Converting, pages, "")
                            .await;
                        noted = Some(Instant::now());
                    }
                }
                Some(Event::Text(part)) if text.len() + part.len() <= max_text => {
                    text.push_str(&part);
                }
                Some(Event::Text(_)) => {
                    return Err(GatewayError::bad(
                        "file",
                        format!("file {file_name} is refused: its text passes {max_text} bytes"),
                    ));
                }
                Some(Event::Done(_)) => {
                    return Ok(Upload {
                        text,
                        original: Some((kind, content)),
                        pages,
                    });
                }
                None => {}
            }
        }
        Err(GatewayError::unavailable(
            Reason::IndexerUnavailable,
            format!("the indexer stopped converting {file_name} before its end"),
        ))
    }

    /// Notes how far the upload got, best effort: losing Redis loses only
    /// the progress, never the upload.
    async fn note_upload(
        &self,
        note: Option<&ProgressNote<'_>>,
        stage: UploadStage,
        (pages_done, pages_total): (u32, u32),
        failure: &str,
    ) {
        let (Some(note), Ok(cache)) = (note, self.cache()) else {
            return;
        };
        let progress = NotedProgress {
            file_name: note.file_name.to_string(),
            stage,
            pages_done,
            pages_total,
            failure: failure.to_string(),
        };
        if let Err(e) = cache
            .note_upload_progress(note.key, &progress, UPLOAD_PROGRESS_SECS)
            .await
        {
            tracing::debug!(error = %e, "an upload's progress was not noted");
        }
    }

    /// The caller's upload's latest progress (see [`Gateway::note_upload`]).
    pub(crate) async fn upload_progress(
        &self,
        user: UserId,
        req: GetUploadProgressRequest,
    ) -> Result<UploadProgress, GatewayError> {
        let project_id = ProjectId::parse(&req.project_id)?;
        let request_id = req.client_request_id.trim();
        if request_id.is_empty() {
            return Err(GatewayError::bad(
                "client_request_id",
                "client_request_id is required: progress is kept under the id an upload was sent with",
            ));
        }
        projects::project_for_user(self.store.pool(), user, project_id).await?;
        let (user_text, project_text) = (user.to_string(), project_id.to_string());
        let key = UploadKey {
            user_id: &user_text,
            project_id: &project_text,
            request_id,
        };
        let noted = self.cache()?.upload_progress(key).await?;
        let noted = noted.ok_or_else(|| GatewayError::not_found("upload", request_id))?;
        Ok(UploadProgress {
            file_name: noted.file_name,
            stage: api_stage(noted.stage).into(),
            pages_done: noted.pages_done,
            pages_total: noted.pages_total,
            failure: noted.failure,
        })
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
