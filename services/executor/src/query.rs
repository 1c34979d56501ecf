//! Answering a project's questions (the gateway's `Query`; seed 004 §3–§5):
//! the sources not yet indexed as they are are cut into chunks and stored
//! (`dialectic_store::query`), one model call classifies the question, then
//! one synthesis per part of it runs in parallel over the stored chunks most
//! like that part, which Postgres ranks. Every call is held for and captured from the user's wallet
//! under keys of this question, and every citation is checked against the
//! chunks its call was given (`dialectic_core::query`).

use crate::billing::{self, Hold};
use crate::provider::Provider;
use crate::{Executor, model_call};
use dialectic_core::digest::sha256_hex;
use dialectic_core::error::{ErrorCode, Reason};
use dialectic_core::ids::{ProjectId, SessionId, UserId};
use dialectic_core::prompt::{ChatRequest, Message};
use dialectic_core::query::{self, Answer, Chunk, Route, Source, SourceKind, SubQuery};
use dialectic_core::sanitize::parse_model_json;
use dialectic_core::shape::JsonKind;
use dialectic_core::structured;
use dialectic_core::tokens::cost;
use dialectic_proto::v1::executor::{AnswerCitation, AnswerRequest, AnswerResponse};
use dialectic_runtime::error_status::{self, Failure};
use dialectic_runtime::worker::AttemptError;
use dialectic_store::StoreError;
use dialectic_store::models::{self, ModelRow};
use dialectic_store::projects;
use dialectic_store::query as sources;
use futures::StreamExt;
use std::collections::BTreeMap;
use tonic::Status;

/// Chunks one synthesis reads.
const CHUNKS_PER_PART: usize = 6;

/// Objects read at once when sources are indexed.
const READS_AT_ONCE: usize = 16;

const CLASSIFY_PROMPT: &str = "Classify the user's question about a project's documents. \
Types: truth_reconstitution (the current state of a clause or fact), conflict_detection \
(conflicts, inconsistencies, risks), ripple_analysis (the impact of a change), general \
(anything else). Extract entities: section numbers, names, dates, topics. Only when the \
question genuinely spans several types, split it into sub_queries. Reply with JSON only: \
{\"query_type\": string, \"entities\": [string], \"confidence\": number, \
\"sub_queries\": [{\"query_type\": string, \"query_text\": string}]}.";

const ANSWER_PROMPT: &str = "Answer the user's question from the chunks of the project's \
documents below and nothing else. Cite every claim: each citation names a chunk by its id \
and quotes its text exactly, character for character. When the chunks do not answer the \
question, say so. State a confidence from 0 to 1 and list caveats: conflicts, ambiguities, \
gaps. Reply with JSON only: {\"answer\": string, \"citations\": [{\"chunk_id\": string, \
\"quote\": string}], \"confidence\": number, \"caveats\": [string]}.";

/// A question's calls and what they cost.
struct Asking<'a> {
    executor: &'a Executor,
    project: ProjectId,
    user: UserId,
    query_id: &'a str,
    model: ModelRow,
    provider: Provider,
}

fn status(e: AttemptError) -> Status {
    error_status::status(&e)
}

/// A model's call or reply that failed a question: worth asking again.
fn model_failure(reason: Reason, message: String) -> Status {
    Failure::new(ErrorCode::Unavailable, reason, message).into()
}

impl Executor {
    pub(crate) async fn answer(&self, req: AnswerRequest) -> Result<AnswerResponse, Status> {
        let project = ProjectId::parse(&req.project_id).map_err(|e| error_status::status(&e))?;
        let user = UserId::parse(&req.user_id).map_err(|e| error_status::status(&e))?;
        // The gateway names the user it authenticated; the project must be theirs.
        projects::project_for_user(self.store.pool(), user, project)
            .await
            .map_err(|e| error_status::status(&e))?;
        let identifier = match req.model.trim() {
            "" => self.query_model.as_str(),
            named => named,
        };
        let model = models::model_by_identifier(self.store.pool(), identifier)
            .await
            .map_err(|e| error_status::status(&e))?;
        let provider = self.provider(&model, None).await.map_err(status)?;
        // Before any paid call: a question whose sources cannot be read costs nothing.
        let analysis = self.index(project).await?;
        let asking = Asking {
            project,
            executor: self,
            user,
            query_id: &req.query_id,
            model,
            provider,
        };
        let (route, mut spent) = asking.classify(&req.text).await?;
        let parts = futures::future::join_all(
            route
                .parts
                .iter()
                .enumerate()
                .map(|(i, part)| asking.synthesize(i, part, &route.entities)),
        )
        .await;
        let mut answers = Vec::with_capacity(parts.len());
        for part in parts {
            let (answer, cost) = part?;
            spent += cost;
            answers.push(answer);
        }
        Ok(response(&route, query::merge(answers), spent, analysis))
    }

    /// Indexes what the project's questions read and is not indexed as it
    /// is now (read from S3, or the row for a finding; cut and embedded again
    /// only when its content hash changed), and drops the index of what they
    /// no longer read. Done at the first question after a change rather than
    /// when a source is written: one place that knows what a question reads,
    /// nothing for projects never asked, and no work on the render path.
    /// Returns the analysis (session) whose outputs the index holds.
    async fn index(&self, project: ProjectId) -> Result<Option<SessionId>, Status> {
        let pool = self.store.pool();
        let unavailable = |e: StoreError| error_status::status(&e);
        let analysis = sources::analysis(pool, project)
            .await
            .map_err(unavailable)?;
        let stale = sources::sync(pool, project, analysis)
            .await
            .map_err(unavailable)?;
        if stale.is_empty() {
            return Ok(analysis);
        }
        // The reads as a list first: a stream mapping by closure trips the
        // Send check of the service's async fn (rust#110338).
        let reads: Vec<_> = stale.iter().map(|s| self.source_text(s)).collect();
        let texts: Vec<Result<String, Status>> = futures::stream::iter(reads)
            .buffered(READS_AT_ONCE)
            .collect()
            .await;
        let texts = texts.into_iter().collect::<Result<Vec<_>, _>>()?;
        let stale = std::sync::Arc::new(stale);
        let cut = stale.clone();
        // Cutting and embedding hundreds of texts is CPU work: off the async workers.
        let parts = tokio::task::spawn_blocking(move || {
            cut.iter()
                .zip(texts)
                .map(|(s, text)| cut_source(s, &text))
                .collect::<Result<Vec<_>, Status>>()
        })
        .await
        .map_err(|e| Status::internal(format!("indexing failed: {e}")))??;
        let indexed: Vec<sources::IndexedSource> = stale
            .iter()
            .zip(parts)
            .map(|(source, (content_hash, chunks))| sources::IndexedSource {
                source,
                content_hash,
                chunks,
            })
            .collect();
        sources::store_index(pool, project, &indexed)
            .await
            .map_err(unavailable)?;
        Ok(analysis)
    }

    /// The text a question reads of a source, which is also what a client
    /// fetches for it: an object's text, a JSON contribution's content, a
    /// finding's data.
    async fn source_text(&self, source: &sources::StaleSource) -> Result<String, Status> {
        if let Some(data) = &source.data {
            return Ok(query::finding_text(&data.0));
        }
        let key = source.storage_key.as_deref().unwrap_or_default();
        let text = self
            .blob
            .get_string(key)
            .await
            .map_err(|e| error_status::status(&e))?;
        Ok(if source.kind == SourceKind::Contribution.as_str() {
            query::contribution_text(&text)
        } else {
            text
        })
    }

    /// The chunks of one part's question: the stored ones most like it.
    async fn retrieve(
        &self,
        project: ProjectId,
        question: &str,
        entities: &[String],
    ) -> Result<Vec<Chunk>, Status> {
        let picked = sources::top_chunks(
            self.store.pool(),
            project,
            &query::query_terms(question),
            &query::entity_needles(entities),
            CHUNKS_PER_PART,
        )
        .await
        .map_err(|e| error_status::status(&e))?;
        picked
            .into_iter()
            .map(|c| {
                let kind = SourceKind::parse(&c.kind).ok_or_else(|| {
                    Status::internal(format!(
                        "source {} is of no known kind {:?}",
                        c.source_id, c.kind
                    ))
                })?;
                Ok(Chunk {
                    id: format!("{}:{}", c.source_id, c.chunk_no),
                    source_id: c.source_id.to_string(),
                    source_name: c.name,
                    source_kind: kind,
                    start: usize::try_from(c.start_char).unwrap_or(0),
                    end: usize::try_from(c.end_char).unwrap_or(0),
                    text: c.body,
                })
            })
            .collect()
    }
}

/// A source's content hash and, unless it is the hash already indexed, its
/// chunks with their ranges and embeddings.
fn cut_source(
    stale: &sources::StaleSource,
    text: &str,
) -> Result<(String, Option<Vec<sources::NewChunk>>), Status> {
    let hash = sha256_hex(text.as_bytes());
    if stale.indexed_hash.as_deref() == Some(hash.as_str()) {
        return Ok((hash, None));
    }
    let kind = SourceKind::parse(&stale.kind).ok_or_else(|| {
        Status::internal(format!(
            "source {} is of no known kind {:?}",
            stale.id, stale.kind
        ))
    })?;
    let source = Source {
        id: stale.id.to_string(),
        name: stale.name.clone(),
        kind,
        text: text.to_string(),
    };
    let range =
        |n: usize| i32::try_from(n).map_err(|_| Status::internal("a source too long to index"));
    let chunks = query::chunks(&source)
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(sources::NewChunk {
                chunk_no: range(i)?,
                start: range(c.start)?,
                end: range(c.end)?,
                embedding: query::embedding(&c.text),
                body: c.text,
            })
        })
        .collect::<Result<Vec<_>, Status>>()?;
    Ok((hash, Some(chunks)))
}

impl Asking<'_> {
    async fn classify(&self, question: &str) -> Result<(Route, i64), Status> {
        let request = self.request(
            "query_route",
            CLASSIFY_PROMPT,
            format!("<user_query>\n{question}\n</user_query>"),
            &["query_type"],
            500,
        );
        let (reply, cost) = self.call("classify", &request).await?;
        Ok((query::route(question, &reply), cost))
    }

    /// Answers one part, told what its query type asks for (the dispatch).
    async fn synthesize(
        &self,
        index: usize,
        part: &SubQuery,
        entities: &[String],
    ) -> Result<(Answer, i64), Status> {
        let question = &part.query_text;
        let given = self
            .executor
            .retrieve(self.project, question, entities)
            .await?;
        let mut request = self.request(
            "query_answer",
            ANSWER_PROMPT,
            format!(
                "{}\nFocus ({}): {}\n<user_query>\n{question}\n</user_query>",
                query::chunk_sections(&given),
                part.query_type,
                query::focus(&part.query_type)
            ),
            &["answer", "citations", "confidence"],
            2_000,
        );
        request.key_types = BTreeMap::from([
            ("citations".to_string(), JsonKind::Array),
            ("confidence".to_string(), JsonKind::Number),
        ]);
        request.response_schema = Some(structured::keys_schema(
            &request.required_keys,
            &request.key_types,
        ));
        let (reply, cost) = self.call(&format!("answer-{index}"), &request).await?;
        let rules = &self.executor.quote_rules;
        Ok((query::checked_answer(&reply, &given, rules), cost))
    }

    fn request(
        &self,
        output_type: &str,
        system: &str,
        user: String,
        required: &[&str],
        max_tokens: u32,
    ) -> ChatRequest {
        let required_keys: Vec<String> = required.iter().map(|k| k.to_string()).collect();
        ChatRequest {
            model: self.model.api_identifier.clone(),
            system_instruction: Some(system.to_string()),
            messages: vec![Message::user(user)],
            max_tokens: max_tokens
                .min(u32::try_from(self.model.max_output_tokens).unwrap_or(max_tokens)),
            output_type: output_type.to_string(),
            response_schema: Some(structured::keys_schema(&required_keys, &BTreeMap::new())),
            required_keys,
            ..Default::default()
        }
    }

    /// One paid call: held before, captured after (released when it fails).
    async fn call(
        &self,
        step: &str,
        request: &ChatRequest,
    ) -> Result<(serde_json::Value, i64), Status> {
        let key = format!("query:{}:{step}", self.query_id);
        let hold = self.hold(&key, request).await?;
        let response = match model_call::chat(&self.provider, &self.model, request).await {
            Ok(response) => response,
            Err(e) => {
                if let (Some(billing), Some(hold)) = (&self.executor.billing, &hold) {
                    billing
                        .release_for(&key, hold, "the model call failed")
                        .await;
                }
                return Err(model_failure(
                    Reason::ModelCallFailed,
                    format!("the model call failed: {e}"),
                ));
            }
        };
        let actual = cost(
            response.input_tokens,
            response.output_tokens,
            self.model.input_token_cost_rate,
            self.model.output_token_cost_rate,
        );
        let charged = match (&self.executor.billing, &hold) {
            (Some(billing), Some(hold)) => {
                billing
                    .capture_for(&key, hold, actual, &billing::usage(&self.model, &response))
                    .await
                    .map_err(status)?;
                billing::charged(hold, actual)
            }
            _ => actual,
        };
        let (reply, _) = parse_model_json(&response.text).map_err(|e| {
            model_failure(
                Reason::ModelReplyNotJson,
                format!("the model's reply is not JSON: {e}"),
            )
        })?;
        Ok((reply, charged))
    }

    async fn hold(&self, key: &str, request: &ChatRequest) -> Result<Option<Hold>, Status> {
        match &self.executor.billing {
            Some(billing) => billing
                .hold_for(self.user, key, billing::estimate(request, &self.model))
                .await
                .map(Some)
                .map_err(status),
            None => Ok(None),
        }
    }
}

fn response(
    route: &Route,
    answer: Answer,
    spent: i64,
    analysis: Option<SessionId>,
) -> AnswerResponse {
    AnswerResponse {
        answer: answer.text,
        citations: answer
            .citations
            .into_iter()
            .map(|c| AnswerCitation {
                source_id: c.source_id,
                source_name: c.source_name,
                source_kind: c.source_kind.as_str().to_string(),
                chunk_id: c.chunk_id,
                start: u32::try_from(c.start).unwrap_or(u32::MAX),
                end: u32::try_from(c.end).unwrap_or(u32::MAX),
                quote: c.quote,
            })
            .collect(),
        caveats: answer.caveats,
        confidence: answer.confidence,
        query_type: route.query_type.clone(),
        sub_queries: if route.parts.len() > 1 {
            route.parts.iter().map(|p| p.query_text.clone()).collect()
        } else {
            Vec::new()
        },
        cost: spent,
        analysis_session_id: analysis.map(|s| s.to_string()).unwrap_or_default(),
    }
}
