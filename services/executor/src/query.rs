//! Answering a project's questions (the gateway's `Query`; seed 004 §3–§5):
//! the sources are cut into chunks, one model call classifies the question,
//! then one synthesis per part of it runs in parallel over the chunks most
//! like that part. Every call is held for and captured from the user's wallet
//! under keys of this question, and every citation is checked against the
//! chunks its call was given (`dialectic_core::query`).

use crate::Executor;
use crate::billing::{self, Hold};
use crate::provider::Provider;
use dialectic_core::error::{ErrorCode, Reason};
use dialectic_core::ids::{ProjectId, UserId};
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
use std::collections::BTreeMap;
use tonic::Status;

/// Chunks one synthesis reads.
const CHUNKS_PER_PART: usize = 6;

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
        let provider = self.provider(&model).await.map_err(status)?;
        let chunks = self.chunks_of(project).await?;
        let asking = Asking {
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
                .map(|(i, part)| asking.synthesize(i, part, &route.entities, &chunks)),
        )
        .await;
        let mut answers = Vec::with_capacity(parts.len());
        for part in parts {
            let (answer, cost) = part?;
            spent += cost;
            answers.push(answer);
        }
        Ok(response(&route, query::merge(answers), spent))
    }

    /// Every chunk of the project's sources: documents (read from S3) and findings.
    async fn chunks_of(&self, project: ProjectId) -> Result<Vec<Chunk>, Status> {
        let unavailable = |e: StoreError| error_status::status(&e);
        let mut found = Vec::new();
        for doc in sources::documents(self.store.pool(), project)
            .await
            .map_err(unavailable)?
        {
            let text = self
                .blob
                .get_string(&doc.storage_key)
                .await
                .map_err(|e| error_status::status(&e))?;
            let text = if doc.json {
                parse_model_json(&text)
                    .ok()
                    .and_then(|(v, _)| v["content"].as_str().map(str::to_string))
                    .unwrap_or_default()
            } else {
                text
            };
            let kind = SourceKind::parse(&doc.kind).ok_or_else(|| {
                Status::internal(format!(
                    "source {} is of no known kind {:?}",
                    doc.id, doc.kind
                ))
            })?;
            found.push(Source {
                id: doc.id.to_string(),
                name: doc.name,
                kind,
                text,
            });
        }
        for finding in sources::findings(self.store.pool(), project)
            .await
            .map_err(unavailable)?
        {
            found.push(Source {
                id: finding.id.to_string(),
                name: format!("blackboard:{}", finding.entry_type),
                kind: SourceKind::BlackboardEntry,
                text: finding.data.0.to_string(),
            });
        }
        Ok(found.iter().flat_map(query::chunks).collect())
    }
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
        chunks: &[Chunk],
    ) -> Result<(Answer, i64), Status> {
        let question = &part.query_text;
        let given = query::most_relevant(chunks, question, entities, CHUNKS_PER_PART);
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
        let response = match self.provider.chat(request).await {
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
                    .capture_for(&key, hold, actual)
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

fn response(route: &Route, answer: Answer, spent: i64) -> AnswerResponse {
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
    }
}
