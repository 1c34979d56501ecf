//! The executor: claims PLAN and EXECUTE jobs, gathers their inputs, makes
//! exactly one model call per job, and saves the reply as one raw JSON chunk
//! in S3 plus one contribution row. The chunk is written before the row; the
//! row, the lease release and the outcome message commit together.

use dialectic_blob::BlobStore;
use dialectic_config::Settings;
use dialectic_core::fanout::SourceDoc;
use dialectic_core::ids::{ProjectId, SessionId};
use dialectic_core::job::JobType;
use dialectic_core::paths::{DocumentName, FileKind, Lineage, PathContext};
use dialectic_core::payload::JobPayload;
use dialectic_core::prompt::{PromptConstructionPayload, ResourceDocument, assemble};
use dialectic_core::recipe::{InputRule, RecipeStep};
use dialectic_core::sanitize::parse_model_json;
use dialectic_llm::{LlmError, SimulatedSettings, provider_for};
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
use dialectic_store::records::{self, NewContribution};
use dialectic_store::{Store, StoreError, inputs};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use uuid::Uuid;

pub const SERVICE_NAME: &str = "dialectic.v1.executor.ExecutorService";

struct Executor {
    store: Store,
    blob: BlobStore,
    simulated: SimulatedSettings,
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
        let provider = provider_for(&model.provider, &self.simulated)
            .map_err(|e| permanent("unsupported_provider", e))?;
        let session = records::session_for_user(pool, job.user_id, job.session_id).await?;
        let project = records::project_for_user(pool, job.user_id, session.project_id).await?;
        let stage = records::stage_in_process(pool, session.id, &job.stage_slug).await?;

        let resources = self
            .gather_inputs(job, &payload, step, &project.initial_user_prompt)
            .await?;
        let prompt = PromptConstructionPayload {
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
        let request = assemble(
            &prompt,
            &model.api_identifier,
            model.max_output_tokens.max(1) as u32,
            &step.output_type,
            &hints,
        );
        let started = Instant::now();
        let response = provider.chat(&request).await.map_err(|e| match e {
            LlmError::Transient(m) => retryable("model_transient", m),
            other => permanent("model_failed", other),
        })?;
        let processing_ms = started.elapsed().as_millis() as i64;
        let (value, sanitized) =
            parse_model_json(&response.text).map_err(|e| retryable("malformed_json", e))?;
        if sanitized.was_sanitized {
            tracing::info!(
                structurally_fixed = sanitized.was_structurally_fixed,
                "model JSON needed sanitising"
            );
        }
        let body = serde_json::to_vec_pretty(&value).map_err(|e| permanent("encode", e))?;

        let name = DocumentName {
            model_slug: payload.model_slug.clone(),
            attempt: (job.attempt_count - 1).max(0) as u32,
            document_key: step.output_type.clone(),
            lineage: payload.lineage.clone().unwrap_or(Lineage::Plain),
        };
        let key = PathContext {
            project_id: ProjectId(project.id),
            session_short: SessionId(session.id).short(),
            iteration: job.iteration_number.max(1) as u32,
            stage_number: payload.stage_number,
            stage_slug: job.stage_slug.clone(),
            file: FileKind::RawChunk {
                name,
                continuation: None,
            },
        }
        .construct()
        .map_err(|e| permanent("bad_path", e))?;
        let size = body.len() as i64;
        self.blob
            .put(&key, body, "application/json")
            .await
            .map_err(|e| retryable("storage", e))?;

        let (dir, file_name) = key.rsplit_once('/').unwrap_or(("", key.as_str()));
        let contribution_id = Uuid::now_v7();
        let mut relationships = serde_json::Map::new();
        relationships.insert(
            job.stage_slug.clone(),
            serde_json::Value::String(contribution_id.to_string()),
        );
        let mut tx = self.store.begin().await?;
        let stored_id = records::insert_contribution(
            &mut tx,
            &NewContribution {
                id: contribution_id,
                session_id: session.id,
                job_id: job.id,
                attempt: job.attempt_count,
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
            },
        )
        .await?;
        let recorded = worker::record_success(
            &mut tx,
            job,
            worker,
            JobSucceeded {
                contribution_id: stored_id.to_string(),
                resource_id: String::new(),
                finish_reason: response.finish_reason.as_str().to_string(),
            },
        )
        .await?;
        if !recorded {
            drop(tx);
            if let Err(e) = self.blob.delete(&key).await {
                tracing::warn!(error = %e, %key, "could not remove the orphaned chunk");
            }
            return Err(AttemptError::Lost);
        }
        tx.commit().await.map_err(StoreError::from)?;
        tracing::info!(contribution_id = %stored_id, %key, "chunk saved");
        Ok(())
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
                paragraphs: 3,
            },
        },
        stats,
    });
    let work_shutdown = shutdown.child_token();
    let topology = dialectic_runtime::topology(&settings);
    let mut dependencies = Dependencies {
        store: Some(store),
        blob: Some(blob),
        ..Default::default()
    };
    let mut tasks = Vec::new();
    for key in [keys::JOB_PLAN, keys::JOB_EXECUTE] {
        tasks.push(tokio::spawn(run_consumer(
            ConsumerOptions {
                amqp_url: settings.amqp.url.clone(),
                topology: topology.clone(),
                routing_key: key,
                prefetch: slots,
                tag: format!("executor-{}-{}", key, std::process::id()),
                grace: Duration::from_secs(settings.shutdown_grace_secs),
                requeue_delay: Duration::from_millis(500),
            },
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
