//! `Query`: a question about a project, answered by an executor (the model
//! calls are billed worker work, never the gateway's) and cached in Redis per
//! project and normalised question for an hour. The cache is the project's
//! read cache (`cache_keys:{project}`), so every change an answer could rest
//! on — a rendered, edited, regenerated or archived document, an upload, a
//! revisit, a deletion — drops the project's answers with its other reads.
//! Every question, answered fresh or from the cache, is kept in the project's
//! query history (`ListQueryHistory`) with its latency and cost.

use crate::error::GatewayError;
use crate::service::{Gateway, optional};
use dialectic_core::digest::sha256_hex;
use dialectic_core::ids::{ProjectId, QueryId, ResourceId, UserId};
use dialectic_core::query::{self, SourceKind, cache_name};
use dialectic_proto::v1::executor::{AnswerRequest, AnswerResponse};
use dialectic_proto::v1::{
    Citation, CitationSourceKind, DocumentContent, ListQueryHistoryRequest,
    ListQueryHistoryResponse, QueryHistoryEntry, QueryRequest, QueryResponse, StageDocument,
};
use dialectic_store::projects;
use dialectic_store::query::cited_source;
use dialectic_store::query_history::{self, NewQuestion, QuestionRow};
use prost::Message;
use std::time::Instant;

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
                // Placed by the gateway (`citations`), from the cited source.
                ..Default::default()
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

/// A kept question as the API lists it.
fn history_entry(row: QuestionRow) -> Result<QueryHistoryEntry, GatewayError> {
    let response = QueryResponse::decode(row.response.as_slice()).map_err(|e| {
        GatewayError::Internal(format!("stored answer of question {}: {e}", row.id))
    })?;
    Ok(QueryHistoryEntry {
        query_id: row.id.to_string(),
        text: row.question,
        response: Some(response),
        latency_ms: u32::try_from(row.latency_ms).unwrap_or(u32::MAX),
        model: row.model,
        user_id: row.user_id.to_string(),
        asked_at: Some(crate::convert::timestamp(row.created_at)),
    })
}

impl Gateway {
    /// Answers the question and keeps it in the project's history.
    pub(crate) async fn query(
        &self,
        user: UserId,
        req: QueryRequest,
    ) -> Result<QueryResponse, GatewayError> {
        let started = Instant::now();
        let project = ProjectId::parse(&req.project_id)?;
        let (id, answer) = self.answer(user, project, &req).await?;
        let question = NewQuestion {
            id,
            project_id: project,
            user_id: user,
            question: req.text.trim(),
            model: req.model.trim(),
            query_type: &answer.query_type,
            latency_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
            cost: answer.cost,
            cached: answer.cached,
            response: &answer.encode_to_vec(),
        };
        // The answer was paid for: a history that cannot be written is logged,
        // not a reason to withhold it.
        if let Err(e) = query_history::record(self.store.pool(), &question).await {
            tracing::warn!(error = %e, query_id = %id, "could not keep the question in the history");
        }
        Ok(answer)
    }

    /// The project's questions, newest first (another user's is NOT_FOUND).
    pub(crate) async fn list_query_history(
        &self,
        user: UserId,
        req: ListQueryHistoryRequest,
    ) -> Result<ListQueryHistoryResponse, GatewayError> {
        let project = ProjectId::parse(&req.project_id)?;
        projects::project_for_user(self.store.pool(), user, project).await?;
        let limit = crate::convert::page_size(req.page_size);
        let after = crate::convert::parse_page_token(&req.page_token)
            .map_err(|e| GatewayError::bad("page_token", e))?;
        let rows = query_history::list(self.store.pool(), project, limit, after).await?;
        let next_page_token = crate::convert::next_token(&rows, limit, |r| (r.created_at, r.id));
        let entries = rows
            .into_iter()
            .map(history_entry)
            .collect::<Result<_, _>>()?;
        Ok(ListQueryHistoryResponse {
            entries,
            next_page_token,
        })
    }

    /// The answer to a question (from the cache when it has one) and the id
    /// the question is kept under.
    async fn answer(
        &self,
        user: UserId,
        project: ProjectId,
        req: &QueryRequest,
    ) -> Result<(QueryId, QueryResponse), GatewayError> {
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
                return Ok((QueryId::new(), hit));
            }
            lookup = Some(found);
        }
        let query_id = QueryId::new();
        let answer = self
            .executor()
            .answer(AnswerRequest {
                project_id: project_key.clone(),
                user_id: user.to_string(),
                text: text.to_string(),
                model: req.model.trim().to_string(),
                query_id: query_id.to_string(),
            })
            .await
            .map_err(GatewayError::Executor)?
            .into_inner();
        let mut answer = response(answer);
        self.place_citations(user, project, &mut answer.citations)
            .await;
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
        Ok((query_id, answer))
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
