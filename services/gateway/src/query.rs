//! `Query`: a question about a project, answered by an executor (the model
//! calls are billed worker work, never the gateway's) and cached in Redis per
//! project and normalised question for an hour. The cache is the project's
//! read cache (`cache_keys:{project}`), so every change an answer could rest
//! on — a rendered, edited, regenerated or archived document, an upload, a
//! revisit, a deletion — drops the project's answers with its other reads.

use crate::error::GatewayError;
use crate::service::{Gateway, optional};
use dialectic_core::digest::sha256_hex;
use dialectic_core::ids::{ProjectId, QueryId, ResourceId, UserId};
use dialectic_core::query::{self, SourceKind, cache_name};
use dialectic_proto::v1::executor::{AnswerRequest, AnswerResponse};
use dialectic_proto::v1::{
    Citation, CitationSourceKind, DocumentContent, QueryRequest, QueryResponse, StageDocument,
};
use dialectic_store::projects;
use dialectic_store::query::cited_source;
use prost::Message;

/// The longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 4_000;

/// How long an answer stays cached (seed 004 §7).
const ANSWER_TTL_SECS: u64 = 3_600;

/// A name the executor sent, typed; one this gateway does not know is unspecified.
fn source_kind(name: &str) -> CitationSourceKind {
    match SourceKind::parse(name) {
        Some(SourceKind::UploadedDocument) => CitationSourceKind::UploadedDocument,
        Some(SourceKind::RenderedDocument) => CitationSourceKind::RenderedDocument,
        Some(SourceKind::Contribution) => CitationSourceKind::Contribution,
        Some(SourceKind::BlackboardEntry) => CitationSourceKind::BlackboardEntry,
        None => CitationSourceKind::Unspecified,
    }
}

fn response(answer: AnswerResponse) -> QueryResponse {
    QueryResponse {
        answer: answer.answer,
        citations: answer
            .citations
            .into_iter()
            .map(|c| Citation {
                source_id: c.source_id,
                source_name: c.source_name,
                chunk_id: c.chunk_id,
                start: c.start,
                end: c.end,
                quote: c.quote,
                source_kind: source_kind(&c.source_kind) as i32,
                // A kind this gateway does not know is not claimed to be the user's.
                model_written: SourceKind::parse(&c.source_kind)
                    .is_none_or(SourceKind::model_written),
            })
            .collect(),
        caveats: answer.caveats,
        confidence: answer.confidence,
        query_type: answer.query_type,
        sub_queries: answer.sub_queries,
        cached: false,
        cost: answer.cost,
        analysis_session_id: answer.analysis_session_id,
    }
}

impl Gateway {
    pub(crate) async fn query(
        &self,
        user: UserId,
        req: QueryRequest,
    ) -> Result<QueryResponse, GatewayError> {
        let project = ProjectId::parse(&req.project_id)?;
        projects::project_for_user(self.store.pool(), user, project).await?;
        let text = req.text.trim();
        if text.is_empty() {
            return Err(GatewayError::bad("text", "text: ask a question"));
        }
        if text.chars().count() > MAX_QUESTION_CHARS {
            return Err(GatewayError::bad(
                "text",
                format!("text: a question is at most {MAX_QUESTION_CHARS} characters"),
            ));
        }
        let project_key = project.to_string();
        // A retry's answer first, then the question's.
        let mut names = Vec::new();
        if let Some(request_id) = optional(&req.client_request_id) {
            names.push(format!(
                "query-request:{}",
                sha256_hex(request_id.as_bytes())
            ));
        }
        names.push(cache_name(req.model.trim(), text));
        let mut lookup = None;
        for name in &names {
            let Some(cache) = self.cache.get() else { break };
            let Ok(found) = cache.cached(&project_key, name).await else {
                break;
            };
            if let Some(mut hit) = found
                .hit
                .as_deref()
                .and_then(|bytes| QueryResponse::decode(bytes).ok())
            {
                hit.cached = true;
                hit.cost = 0;
                return Ok(hit);
            }
            lookup = Some(found);
        }
        let answer = self
            .executor()
            .answer(AnswerRequest {
                project_id: project_key.clone(),
                user_id: user.to_string(),
                text: text.to_string(),
                model: req.model.trim().to_string(),
                query_id: QueryId::new().to_string(),
            })
            .await
            .map_err(GatewayError::Executor)?
            .into_inner();
        let answer = response(answer);
        if let (Some(cache), Some(lookup)) = (self.cache.get(), lookup) {
            for name in &names {
                let stored = cache
                    .store_cached(
                        &project_key,
                        lookup.generation,
                        name,
                        &answer.encode_to_vec(),
                        ANSWER_TTL_SECS,
                    )
                    .await;
                if let Err(e) = stored {
                    tracing::debug!(error = %e, "could not cache an answer");
                }
            }
        }
        Ok(answer)
    }

    /// `GetDocumentContent` of a cited source that is no document row: a
    /// JSON contribution as its content, a blackboard entry as its data, the
    /// same text the query index cut, so a citation's `start..end` counts
    /// characters of `content`. Another user's is NOT_FOUND.
    pub(crate) async fn cited_content(
        &self,
        user: UserId,
        id: ResourceId,
    ) -> Result<DocumentContent, GatewayError> {
        let source = cited_source(self.store.pool(), user, id.0).await?;
        let (content, mime_type) = match (&source.data, &source.storage_key) {
            (Some(data), _) => (query::finding_text(&data.0), "application/json"),
            (None, Some(key)) => (
                query::contribution_text(&self.blob.get_string(key).await?),
                "text/markdown",
            ),
            (None, None) => (String::new(), "text/plain"),
        };
        Ok(DocumentContent {
            document: Some(StageDocument {
                resource_id: source.id.to_string(),
                stage_slug: source.stage_slug,
                iteration: u32::try_from(source.iteration).unwrap_or(0),
                document_key: source.name,
                storage_key: source.storage_key.unwrap_or_default(),
                size_bytes: content.len() as u64,
                ..Default::default()
            }),
            content,
            mime_type: mime_type.to_string(),
        })
    }
}
