//! The executor: claims PLAN and EXECUTE jobs, gathers their inputs, makes
//! exactly one model call per job, and saves the reply as one raw JSON chunk
//! in S3 plus one contribution row. The chunk is written before the row; the
//! row, the lease release and the outcome message commit together.

pub mod billing;
pub mod compress;
pub mod limits;

use billing::Billing;
use dialectic_blob::BlobStore;
use dialectic_cache::Cache;
use dialectic_cache::ProgressEvent;
use dialectic_config::Settings;
use dialectic_core::context::Context;
use dialectic_core::fanout::SourceDoc;
use dialectic_core::ids::{ProjectId, SessionId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::paths::{DocumentName, FileKind, Lineage, PathContext};
use dialectic_core::payload::JobPayload;
use dialectic_core::prompt::{Message, PromptConstructionPayload, ResourceDocument};
use dialectic_core::recipe::{InputRule, RecipeStep};
use dialectic_core::sanitize::parse_model_json;
use dialectic_core::tokens::cost;
use dialectic_llm::{
    ChatResponse, ExchangeStore, FinishReason, Limited, LlmError, ProviderConfig, Recording,
    Replay, SimulatedSettings, WithFallback, provider_for,
};
use dialectic_proto::v1::executor::executor_service_server::{
    ExecutorService, ExecutorServiceServer,
};
use dialectic_proto::v1::executor::{StatusRequest, StatusResponse};
use dialectic_proto::v1::queue::JobSucceeded;
use dialectic_queue::keys;
use dialectic_runtime::worker::{self, AttemptError, JobWork, JobWorker, WorkerStats};
use dialectic_runtime::{
    CancellationToken, ConsumerOptions, Dependencies, Handler, Running, RuntimeError, run_consumer,
    supervise,
};
use dialectic_store::jobs::JobRow;
use dialectic_store::records::{self, NewContribution, USER_EDIT};
use dialectic_store::{Store, StoreError, inputs};
use dialectic_telemetry::metrics;
use dialectic_tokenizer::{Encoding, TokenCounter};
use futures::future::BoxFuture;
use limits::{Limits, RedisLimiter};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use uuid::Uuid;

pub const SERVICE_NAME: &str = "dialectic.v1.executor.ExecutorService";

struct Executor {
    store: Store,
    blob: BlobStore,
    simulated: SimulatedSettings,
    max_continuations: u32,
    /// None when billing is off (`executor.wallet_url` empty).
    billing: Option<Billing>,
    /// Redis, for call limits shared across replicas (connected in the background).
    cache: Arc<OnceLock<Cache>>,
    lease_secs: u64,
    provider_mode: String,
    /// Counts every request with the model's tokenizer (cached in Redis).
    counter: TokenCounter,
    /// None when compression is off (`executor.indexer_url` empty).
    indexer: Option<compress::GrpcIndexer>,
    /// Default embedder when a model row names none.
    embedder: String,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Recorded provider exchanges, kept in the bucket under `recordings/`.
struct BlobExchanges(BlobStore);

#[async_trait::async_trait]
impl ExchangeStore for BlobExchanges {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        match self.0.get(key).await {
            Ok(body) => Ok(Some(body)),
            Err(dialectic_blob::BlobError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), String> {
        self.0
            .put(key, body, "application/json")
            .await
            .map_err(|e| e.to_string())
    }
}

fn permanent(code: &'static str, message: impl ToString) -> AttemptError {
    AttemptError::permanent(code, message)
}

fn retryable(code: &'static str, message: impl ToString) -> AttemptError {
    AttemptError::retryable(code, message)
}

#[async_trait::async_trait]
impl JobWork for Executor {
    async fn attempt(&self, job: &JobRow, worker: &str) -> Result<(), AttemptError> {
        let payload = job.payload()?;
        let step = payload
            .step
            .as_ref()
            .ok_or_else(|| permanent("bad_payload", "job has no recipe step"))?;
        let model_id = job
            .model_id
            .ok_or_else(|| permanent("bad_payload", "job has no model"))?;
        let pool = self.store.pool();
        let model = records::model(pool, model_id).await?;
        let provider_config =
            ProviderConfig::from_row(&model.config.0, model.secret_name.as_deref());
        let mut provider = provider_for(&model.provider, &self.simulated, &provider_config)
            .map_err(|e| permanent("unsupported_provider", e))?;
        match self.provider_mode.as_str() {
            "record" => {
                provider = Arc::new(Recording {
                    inner: provider,
                    store: Arc::new(BlobExchanges(self.blob.clone())),
                })
            }
            "replay" => {
                provider = Arc::new(Replay {
                    store: Arc::new(BlobExchanges(self.blob.clone())),
                })
            }
            _ => {}
        }
        if let Some(name) = model
            .config
            .0
            .get("fallback_model")
            .and_then(|v| v.as_str())
        {
            let backup = records::model_by_identifier(pool, name).await?;
            let backup_config =
                ProviderConfig::from_row(&backup.config.0, backup.secret_name.as_deref());
            let fallback = provider_for(&backup.provider, &self.simulated, &backup_config)
                .map_err(|e| permanent("unsupported_provider", e))?;
            provider = Arc::new(WithFallback {
                primary: provider,
                fallback,
                fallback_model: backup.api_identifier,
            });
        }
        let limits = Limits::from_config(&model.config.0);
        if limits.any() {
            provider = Arc::new(Limited {
                inner: provider,
                limiter: Arc::new(RedisLimiter::new(
                    self.cache.clone(),
                    limits,
                    Duration::from_secs(60),
                    Duration::from_secs(self.lease_secs.max(30) * 4),
                    Duration::from_secs(120),
                )),
                key: format!("model:{}", model.api_identifier),
            });
        }
        let session = records::session_for_user(pool, job.user_id, job.session_id).await?;
        let project = records::project_for_user(pool, job.user_id, session.project_id).await?;
        let stage = records::stage_in_process(pool, session.id, &job.stage_slug).await?;

        let resources = self
            .gather_inputs(job, &payload, step, &project.initial_user_prompt)
            .await?;
        let original = PromptConstructionPayload {
            system_instruction: stage.system_prompt.clone(),
            conversation_history: Vec::new(),
            resource_documents: resources,
            current_user_prompt: step
                .prompt_template
                .clone()
                .unwrap_or_else(|| format!("Write the {} document as JSON.", step.output_type)),
        };
        let hints = if payload.planned_documents.is_empty() {
            vec![step.output_type.clone()]
        } else {
            payload.planned_documents.clone()
        };
        let max_tokens = model.max_output_tokens.max(1) as u32;
        let chain = match job.target_contribution_id {
            Some(target) => Some(self.chain_of(job, target).await?),
            None => None,
        };
        let context = Context {
            original,
            chunks: chain.as_ref().map_or_else(Vec::new, |c| {
                c.chunks
                    .iter()
                    .map(|c| Message::assistant(c.raw.clone(), Some(c.id.to_string())))
                    .collect()
            }),
            continue_instruction: CONTINUE_INSTRUCTION.into(),
        };
        let encoding = Encoding::from_name(&model.tokenizer)
            .map_err(|e| permanent("unsupported_tokenizer", e))?;
        let limits = compress::Limits {
            model: model.api_identifier.clone(),
            max_tokens,
            output_type: step.output_type.clone(),
            hints: hints.clone(),
            encoding,
            context_window: model.context_window_tokens.max(1) as u64,
            input_rate: model.input_token_cost_rate,
            embedder: model
                .config
                .0
                .get("embedder")
                .and_then(|v| v.as_str())
                .unwrap_or(&self.embedder)
                .to_string(),
        };
        let payer = compress::Payer {
            user_id: job.user_id,
            session_id: job.session_id,
            job_id: job.id,
            attempt: job.attempt_count,
        };
        let services = compress::Services {
            counter: &self.counter,
            indexer: self
                .indexer
                .as_ref()
                .map(|i| i as &dyn compress::ContextIndexer),
            wallet: self
                .billing
                .as_ref()
                .map(|b| b as &dyn compress::ContextWallet),
        };
        let cache = self.cache.get().cloned();
        let step_job_type = format!("{:?}", step.job_type).to_uppercase();
        let step_output = step.output_type.clone();
        let mut report = |step: &compress::Step| {
            tracing::info!(
                candidate = %step.id,
                kind = step.kind,
                tokens_before = step.tokens_before,
                tokens_after = step.tokens_after,
                embedding_tokens = step.embedding_tokens,
                cost = step.cost,
                request_tokens = step.request_tokens_after,
                "compressed a context candidate"
            );
            dialectic_telemetry::metrics::COMPRESSION_STEPS.inc(&[step.kind]);
            if let Some(cache) = cache.clone() {
                let event = ProgressEvent {
                    session_id: job.session_id.to_string(),
                    kind: "context_compressed".into(),
                    stage_slug: job.stage_slug.clone(),
                    job_id: job.id.to_string(),
                    job_type: step_job_type.clone(),
                    document_key: step_output.clone(),
                    model: model.api_identifier.clone(),
                    message: format!(
                        "compressed {} {}: {} -> {} tokens, {} embedding tokens, cost {}",
                        step.kind,
                        step.id,
                        step.tokens_before,
                        step.tokens_after,
                        step.embedding_tokens,
                        step.cost
                    ),
                    at_ms: now_ms(),
                    ..Default::default()
                };
                // Progress is best effort: a missed event never fails the job.
                tokio::spawn(async move {
                    if let Err(e) = cache.notify(&event).await {
                        tracing::debug!(error = %e, "progress event not published");
                    }
                });
            }
        };
        let fitted = compress::fit(context, &limits, &payer, &services, &mut report).await?;
        if !fitted.steps.is_empty() {
            tracing::info!(
                initial_tokens = fitted.initial_tokens,
                final_tokens = fitted.final_tokens,
                steps = fitted.steps.len(),
                "prompt compressed to fit the context window"
            );
        }
        let compressed_inputs = fitted.steps.clone();
        let request = fitted.request;
        let mut request = request;
        request.required_keys = step
            .outputs_required
            .iter()
            .filter(|o| o.document_key == step.output_type)
            .flat_map(|o| o.required_keys.iter().cloned())
            .collect();
        // No call the wallet cannot pay for: hold the most it can cost first.
        let hold = match &self.billing {
            Some(billing) => Some(
                billing
                    .hold(job, billing::estimate(&request, &model))
                    .await?,
            ),
            None => None,
        };
        let started = Instant::now();
        let response = match provider.chat(&request).await {
            Ok(r) => r,
            Err(e) => {
                let result = match &e {
                    LlmError::Transient(_) => "transient",
                    _ => "failed",
                };
                metrics::MODEL_CALLS.inc(&[&model.api_identifier, result]);
                if let (Some(billing), Some(hold)) = (&self.billing, &hold) {
                    billing.release(job, hold, "the model call failed").await;
                }
                return Err(match e {
                    LlmError::Transient(m) => retryable("model_transient", m),
                    other => permanent("model_failed", other),
                });
            }
        };
        let processing_ms = started.elapsed().as_millis() as i64;
        let actual = cost(
            response.input_tokens,
            response.output_tokens,
            model.input_token_cost_rate,
            model.output_token_cost_rate,
        );
        let model_label = model.api_identifier.as_str();
        metrics::MODEL_CALLS.inc(&[model_label, "ok"]);
        metrics::MODEL_TOKENS.add(&[model_label, "input"], response.input_tokens as f64);
        metrics::MODEL_TOKENS.add(&[model_label, "output"], response.output_tokens as f64);
        metrics::MODEL_COST.add(&[model_label], actual as f64);
        if let (Some(billing), Some(hold)) = (&self.billing, &hold) {
            billing.capture(job, hold, actual).await?;
        }
        let (value, sanitized) =
            parse_model_json(&response.text).map_err(|e| retryable("malformed_json", e))?;
        if sanitized.was_sanitized {
            tracing::info!(
                structurally_fixed = sanitized.was_structurally_fixed,
                "model JSON needed sanitising"
            );
        }
        let turn = chain.as_ref().map_or(0, |c| c.chunks.len() as u32);
        let unfinished = step.job_type == JobType::Execute && needs_more(&response, &value, step);
        // Seed 001: a capped document is assembled from what exists and marked incomplete.
        let incomplete = unfinished && turn >= self.max_continuations;
        let continuation_needed = unfinished && !incomplete;
        let body = serde_json::to_vec_pretty(&value).map_err(|e| permanent("encode", e))?;

        let own_name = DocumentName {
            model_slug: payload.model_slug.clone(),
            attempt: (job.attempt_count - 1).max(0) as u32,
            document_key: step.output_type.clone(),
            lineage: payload.lineage.clone().unwrap_or(Lineage::Plain),
        };
        let name = chain.as_ref().map_or(own_name, |c| c.root_name.clone());
        let context = |continuation: Option<u32>| PathContext {
            project_id: ProjectId(project.id),
            session_short: SessionId(session.id).short(),
            iteration: job.iteration_number.max(1) as u32,
            stage_number: payload.stage_number,
            stage_slug: job.stage_slug.clone(),
            file: FileKind::RawChunk {
                name: name.clone(),
                continuation,
            },
        };
        // A chunk of a multi-turn document lives under _work/; a whole one at the root path.
        let in_work = turn > 0 || continuation_needed;
        let key = context(in_work.then_some(turn))
            .construct()
            .map_err(|e| permanent("bad_path", e))?;
        let size = body.len() as i64;
        self.blob
            .put(&key, body, "application/json")
            .await
            .map_err(|e| retryable("storage", e))?;
        let mut assembled_key = None;
        if let (Some(chain), false) = (&chain, continuation_needed) {
            // Seed 001 Phase 4: the last chunk arrived; assemble the whole document at its root path.
            let mut merged = String::new();
            for c in &chain.chunks {
                merged.push_str(&chunk_content(&c.raw));
            }
            merged.push_str(&chunk_content(&String::from_utf8_lossy(
                &serde_json::to_vec(&value).unwrap_or_default(),
            )));
            let assembled = serde_json::json!({
                "content": merged,
                "chunks": chain.chunks.len() + 1,
                "incomplete": incomplete,
            });
            let root_key = context(None)
                .construct()
                .map_err(|e| permanent("bad_path", e))?;
            self.blob
                .put(
                    &root_key,
                    serde_json::to_vec_pretty(&assembled).unwrap_or_default(),
                    "application/json",
                )
                .await
                .map_err(|e| retryable("storage", e))?;
            assembled_key = Some(root_key);
        }

        let (dir, file_name) = key.rsplit_once('/').unwrap_or(("", key.as_str()));
        let contribution_id = Uuid::now_v7();
        let mut relationships = serde_json::Map::new();
        match &chain {
            Some(c) => {
                relationships.insert(
                    job.stage_slug.clone(),
                    serde_json::Value::String(c.identity.to_string()),
                );
                relationships.insert("turn".into(), serde_json::Value::from(turn));
            }
            None => {
                relationships.insert(
                    job.stage_slug.clone(),
                    serde_json::Value::String(contribution_id.to_string()),
                );
            }
        }
        let mut tx = self.store.begin().await?;
        let stored_id = records::insert_contribution(
            &mut tx,
            &NewContribution {
                id: contribution_id,
                session_id: session.id,
                job_id: Some(job.id),
                attempt: job.attempt_count,
                edit_version: 1,
                user_id: job.user_id,
                model_id: model.id,
                model_name: &model.api_identifier,
                stage_slug: &job.stage_slug,
                iteration: job.iteration_number,
                document_key: &step.output_type,
                contribution_type: &step.output_type,
                bucket: self.blob.bucket(),
                storage_path: dir,
                file_name,
                size_bytes: size,
                tokens_in: response.input_tokens as i64,
                tokens_out: response.output_tokens as i64,
                processing_ms,
                finish_reason: response.finish_reason.as_str(),
                target_contribution_id: job.target_contribution_id,
                document_relationships: serde_json::Value::Object(relationships),
                is_intermediate: !step.renders_markdown(),
                is_incomplete: incomplete,
            },
        )
        .await?;
        if !compressed_inputs.is_empty() {
            let provenance = serde_json::to_value(&compressed_inputs).unwrap_or_default();
            records::set_compressed_inputs(&mut tx, stored_id, &provenance).await?;
        }
        if let Some(previous) = job.target_contribution_id {
            // Seed 000 function 5: the newest chunk is the chain's latest.
            records::supersede(&mut tx, previous).await?;
        }
        let recorded = worker::record_success(
            &mut tx,
            job,
            worker,
            JobSucceeded {
                contribution_id: stored_id.to_string(),
                resource_id: String::new(),
                finish_reason: response.finish_reason.as_str().to_string(),
                continuation_needed,
            },
        )
        .await?;
        if !recorded {
            drop(tx);
            // Superseded by a regeneration, or taken away after a lease expiry:
            // the outcome is discarded and the chunk must not outlive it.
            tracing::info!(%key, "the attempt no longer owns its job; discarding its chunk");
            if let Err(e) = self.blob.delete(&key).await {
                tracing::warn!(error = %e, %key, "could not remove the orphaned chunk");
            }
            // A superseded job's last turn assembled a document of a regenerated
            // chain that nothing writes again, so it goes too; after a lease
            // expiry the retry writes the same file, so it stays.
            if let Some(root_key) = assembled_key {
                let superseded = dialectic_store::jobs::get(self.store.pool(), job.id)
                    .await
                    .is_ok_and(|j| j.status == JobStatus::Superseded.as_str());
                if superseded && let Err(e) = self.blob.delete(&root_key).await {
                    tracing::warn!(error = %e, %root_key, "could not remove a superseded document's assembly");
                }
            }
            return Err(AttemptError::Lost);
        }
        tx.commit().await.map_err(StoreError::from)?;
        tracing::info!(contribution_id = %stored_id, %key, turn, continuation_needed, incomplete, "chunk saved");
        Ok(())
    }
}

const CONTINUE_INSTRUCTION: &str = "Continue exactly where your previous reply stopped. Reply with the same JSON shape, \
     holding only the text that comes next.";

/// One earlier chunk of a document chain, as the model wrote it.
struct Chunk {
    id: Uuid,
    raw: String,
}

struct Chain {
    identity: Uuid,
    root_name: DocumentName,
    chunks: Vec<Chunk>,
}

/// A turn that stopped on length, says it needs more, or lacks a key its step
/// requires is not a finished document (seed 001 "Limits and honest failure").
fn needs_more(response: &ChatResponse, value: &serde_json::Value, step: &RecipeStep) -> bool {
    let flagged = value
        .get("continuation_needed")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let missing_key = step
        .outputs_required
        .iter()
        .filter(|o| o.document_key == step.output_type)
        .flat_map(|o| o.required_keys.iter())
        .any(|k| value.get(k).is_none());
    response.finish_reason == FinishReason::Length || flagged || missing_key
}

/// The text a chunk contributes to its document.
fn chunk_content(raw: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v) => match v.get("content") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        },
        Err(_) => String::new(),
    }
}

impl Executor {
    /// The chunks written so far for the document `target` belongs to, in order.
    async fn chain_of(&self, job: &JobRow, target: Uuid) -> Result<Chain, AttemptError> {
        let pool = self.store.pool();
        let target_row = records::contribution(pool, target).await?;
        let identity = target_row
            .document_relationships
            .as_ref()
            .and_then(|r| r.0.get(&job.stage_slug))
            .and_then(|v| v.as_str())
            .and_then(|v| Uuid::parse_str(v).ok())
            .unwrap_or(target);
        let rows = records::document_chain(pool, job.session_id, &job.stage_slug, identity)
            .await?
            .into_iter()
            .filter(|c| c.contribution_type != USER_EDIT)
            .collect::<Vec<_>>();
        let root = rows.first().ok_or_else(|| {
            permanent(
                "missing_chunks",
                format!("no chunks for document {identity}"),
            )
        })?;
        let root_name = match PathContext::deconstruct(&root.raw_response_storage_path)
            .map(|c| c.file)
            .map_err(|e| permanent("bad_path", e))?
        {
            FileKind::RawChunk { name, .. } => name,
            _ => {
                return Err(permanent(
                    "bad_path",
                    "the chain's first chunk is not a raw chunk",
                ));
            }
        };
        let mut chunks = Vec::with_capacity(rows.len());
        for row in &rows {
            let raw = self
                .blob
                .get_string(&row.raw_response_storage_path)
                .await
                .map_err(|e| retryable("storage", e))?;
            chunks.push(Chunk { id: row.id, raw });
        }
        Ok(Chain {
            identity,
            root_name,
            chunks,
        })
    }
}

fn relevance_of(step: &RecipeStep, rule: &InputRule) -> f64 {
    step.inputs_relevance
        .as_array()
        .and_then(|all| {
            all.iter().find(|r| {
                r.get("document_key").and_then(|k| k.as_str()) == rule.document_key.as_deref()
                    && r.get("type")
                        .and_then(|t| t.as_str())
                        .is_none_or(|t| t == rule.kind)
            })
        })
        .and_then(|r| r.get("relevance"))
        .and_then(|r| r.as_f64())
        .unwrap_or(1.0)
}

fn describe(rule: &InputRule, index: usize) -> String {
    format!(
        "input rule {index} ({} {}/{})",
        rule.kind,
        rule.stage_slug.as_deref().unwrap_or("this stage"),
        rule.document_key.as_deref().unwrap_or("*")
    )
}

impl Executor {
    /// gatherInputsForStage (DESIGN §8) for one job: every rule of its step,
    /// restricted to the job's own sources where the planner fanned it out.
    async fn gather_inputs(
        &self,
        job: &JobRow,
        payload: &JobPayload,
        step: &RecipeStep,
        seed_prompt: &str,
    ) -> Result<Vec<ResourceDocument>, AttemptError> {
        let mut conn = self
            .store
            .pool()
            .acquire()
            .await
            .map_err(StoreError::from)?;
        let mut resources = Vec::new();
        for (index, rule) in step.inputs_required.iter().enumerate() {
            let relevance = relevance_of(step, rule);
            let stage = rule.stage_slug.as_deref().unwrap_or(&job.stage_slug);
            let key = rule.document_key.as_deref().unwrap_or("*");
            let found = match rule.kind.as_str() {
                "seed_prompt" => {
                    resources.push(ResourceDocument {
                        id: job.session_id.to_string(),
                        kind: "seed_prompt".into(),
                        stage_slug: job.stage_slug.clone(),
                        document_key: "seed_prompt".into(),
                        model: None,
                        content: seed_prompt.to_string(),
                        section_header: rule.section_header.clone(),
                        relevance,
                    });
                    continue;
                }
                "header_context" => {
                    let model = job
                        .model_id
                        .ok_or_else(|| permanent("bad_payload", "job has no model"))?;
                    let mut all = inputs::own_stage_artifacts(
                        &mut conn,
                        job.session_id,
                        stage,
                        job.iteration_number,
                        key,
                        model,
                    )
                    .await?;
                    // The most recent header context of this root is the one in force.
                    all.truncate(1);
                    all
                }
                "document" => match (stage == job.stage_slug, job.model_id) {
                    (true, Some(model)) => {
                        inputs::own_stage_artifacts(
                            &mut conn,
                            job.session_id,
                            stage,
                            job.iteration_number,
                            key,
                            model,
                        )
                        .await?
                    }
                    _ => {
                        inputs::earlier_stage_documents(
                            &mut conn,
                            job.session_id,
                            stage,
                            job.iteration_number,
                            key,
                        )
                        .await?
                    }
                },
                "feedback" => {
                    inputs::feedback(&mut conn, job.session_id, stage, job.iteration_number).await?
                }
                other => {
                    if rule.required {
                        return Err(permanent(
                            "unsupported_input",
                            format!("{}: unknown input type {other:?}", describe(rule, index)),
                        ));
                    }
                    continue;
                }
            };
            let found: Vec<_> = match payload.restriction(index) {
                Some(keys) => found
                    .into_iter()
                    .filter(|d| keys.contains(&d.storage_key))
                    .collect(),
                None => found,
            };
            if found.is_empty() {
                if rule.required {
                    return Err(permanent(
                        "missing_input",
                        format!("{} matched nothing", describe(rule, index)),
                    ));
                }
                continue;
            }
            let header = rule.section_header.clone();
            for doc in found {
                let content = self
                    .blob
                    .get_string(&doc.storage_key)
                    .await
                    .map_err(|e| retryable("storage", e))?;
                let source =
                    SourceDoc::from_key(doc.id.to_string(), &doc.storage_key, &doc.document_key);
                resources.push(ResourceDocument {
                    id: doc.id.to_string(),
                    kind: rule.kind.clone(),
                    stage_slug: stage.to_string(),
                    document_key: doc.document_key.clone(),
                    model: (!source.author.is_empty()).then_some(source.author),
                    content,
                    section_header: header.clone(),
                    relevance,
                });
            }
        }
        Ok(resources)
    }
}

struct Api {
    slots: u32,
    stats: Arc<WorkerStats>,
}

#[tonic::async_trait]
impl ExecutorService for Api {
    async fn status(
        &self,
        _request: tonic::Request<StatusRequest>,
    ) -> Result<tonic::Response<StatusResponse>, tonic::Status> {
        Ok(tonic::Response::new(StatusResponse {
            slots: self.slots,
            busy: self.stats.busy.load(Ordering::Relaxed),
            jobs_completed: self.stats.completed.load(Ordering::Relaxed),
        }))
    }
}

pub fn start(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> BoxFuture<'static, Result<Running, RuntimeError>> {
    Box::pin(start_executor(settings, shutdown))
}

async fn start_executor(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> Result<Running, RuntimeError> {
    let store = dialectic_runtime::store(&settings)?;
    let blob = dialectic_runtime::blob(&settings);
    let stats = Arc::new(WorkerStats::default());
    let slots = settings.executor.worker.slots.max(1);
    let server = dialectic_runtime::start_grpc(
        SERVICE_NAME,
        &settings.executor.worker.listen,
        tonic::service::Routes::new(ExecutorServiceServer::new(Api {
            slots: u32::from(slots),
            stats: stats.clone(),
        })),
        shutdown.clone(),
    )
    .await?;
    let cache = Arc::new(OnceLock::new());
    let billing = if settings.executor.wallet_url.trim().is_empty() {
        tracing::warn!("executor.wallet_url is empty: model calls are not billed");
        None
    } else {
        match Billing::new(settings.executor.wallet_url.trim()) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::error!(error = %e, "billing disabled");
                None
            }
        }
    };
    let indexer = if settings.executor.indexer_url.trim().is_empty() {
        tracing::warn!(
            "executor.indexer_url is empty: oversized prompts fail instead of being compressed"
        );
        None
    } else {
        match compress::GrpcIndexer::new(settings.executor.indexer_url.trim()) {
            Ok(i) => Some(i),
            Err(e) => {
                tracing::error!(error = %e, "compression disabled");
                None
            }
        }
    };
    let handler: Arc<dyn Handler> = Arc::new(JobWorker {
        store: store.clone(),
        worker: format!("executor-{}", Uuid::now_v7().simple()),
        lease_secs: settings.executor.worker.lease_secs.max(1),
        job_types: &[JobType::Plan, JobType::Execute],
        work: Executor {
            store: store.clone(),
            blob: blob.clone(),
            simulated: SimulatedSettings {
                latency_ms: settings.executor.simulated_latency_ms,
                failure_rate: settings.executor.simulated_failure_rate,
                record_requests: settings.executor.simulated_record_requests,
                call_log: Some(settings.executor.simulated_call_log.trim())
                    .filter(|p| !p.is_empty())
                    .map(std::path::PathBuf::from),
                paragraphs: 3,
            },
            max_continuations: settings.executor.max_continuations,
            billing,
            cache: cache.clone(),
            lease_secs: settings.executor.worker.lease_secs,
            provider_mode: settings.executor.provider_mode.trim().to_string(),
            counter: TokenCounter::new(cache.clone()),
            indexer,
            embedder: settings.executor.embedder.trim().to_string(),
        },
        stats,
    });
    let work_shutdown = shutdown.child_token();
    let mut dependencies = Dependencies {
        store: Some(store),
        blob: Some(blob),
        cache: Some(cache),
        ..Default::default()
    };
    let mut tasks = Vec::new();
    for key in [keys::JOB_PLAN, keys::JOB_EXECUTE] {
        tasks.push(tokio::spawn(run_consumer(
            ConsumerOptions::new(&settings, key, slots, "executor"),
            handler.clone(),
            dependencies.broker_flag(),
            work_shutdown.clone(),
        )));
    }
    Ok(supervise(
        "executor",
        &settings,
        server,
        dependencies,
        work_shutdown,
        tasks,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_core::recipe::OutputRule;

    fn step(required: &[&str]) -> RecipeStep {
        let mut step: RecipeStep = serde_json::from_value(serde_json::json!({
            "id": Uuid::nil(), "step_key": "s", "step_name": "s", "job_type": "EXECUTE",
            "prompt_type": "Turn", "prompt_template": null, "output_type": "risk_register",
            "granularity": "all_to_one", "inputs_required": [], "inputs_relevance": [],
            "outputs_required": [], "order": 1, "is_skipped": false
        }))
        .expect("step");
        step.outputs_required = vec![OutputRule {
            document_key: "risk_register".into(),
            file_type: Some("json".into()),
            template_filename: None,
            required_keys: required.iter().map(|k| k.to_string()).collect(),
        }];
        step
    }

    fn reply(finish_reason: FinishReason) -> ChatResponse {
        ChatResponse {
            text: String::new(),
            finish_reason,
            input_tokens: 0,
            output_tokens: 0,
            usage_estimated: true,
            raw: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_turn_is_unfinished_when_cut_flagged_or_missing_a_required_key() {
        let done = serde_json::json!({"content": "x", "risks": []});
        assert!(!needs_more(
            &reply(FinishReason::Stop),
            &done,
            &step(&["content", "risks"])
        ));
        assert!(needs_more(
            &reply(FinishReason::Length),
            &done,
            &step(&["content"])
        ));
        let flagged = serde_json::json!({"content": "x", "continuation_needed": true});
        assert!(needs_more(
            &reply(FinishReason::Stop),
            &flagged,
            &step(&["content"])
        ));
        let missing = serde_json::json!({"content": "x"});
        assert!(needs_more(
            &reply(FinishReason::Stop),
            &missing,
            &step(&["content", "risks"])
        ));
    }

    #[test]
    fn chunk_content_reads_the_content_field() {
        assert_eq!(chunk_content(r#"{"content": "abc"}"#), "abc");
        assert_eq!(chunk_content("not json"), "");
    }
}
