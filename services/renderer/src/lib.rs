//! The renderer: claims RENDER jobs, reads every chunk of one document chain
//! (seed 000 function 3), merges their content, fills the stage's document
//! template, and upserts one canonical markdown file per document as a
//! project resource. Rendering is idempotent: the same chain gives the same file.

use dialectic_blob::BlobStore;
use dialectic_config::Settings;
use dialectic_core::error::{ErrorCode, Reason};
use dialectic_core::fanout::chain_place;
use dialectic_core::ids::{ContributionId, JobId, ModelId, ResourceId, SessionId};
use dialectic_core::job::JobType;
use dialectic_core::paths::{DocumentName, FileKind, Lineage, PathContext};
use dialectic_core::prompt::{fill_document, title_from_key};
use dialectic_core::recipe::Granularity;
use dialectic_core::shape::merge_chunks;
use dialectic_proto::v1::queue::JobSucceeded;
use dialectic_proto::v1::renderer::renderer_service_server::{
    RendererService, RendererServiceServer,
};
use dialectic_proto::v1::renderer::{RenderPreviewRequest, RenderPreviewResponse};
use dialectic_queue::keys;
use dialectic_runtime::error_status::{self, Failure};
use dialectic_runtime::worker::{self, AttemptError, JobWork, JobWorker, Recorded, WorkerStats};
use dialectic_runtime::{
    CancellationToken, ConsumerOptions, Courier, Dependencies, Handler, Running, RuntimeError,
    run_consumer, supervise,
};
use dialectic_store::contributions::{self, ContributionRow, USER_EDIT};
use dialectic_store::jobs::{self, JobRow};
use dialectic_store::resources::{self, NewResource};
use dialectic_store::{Conn, Store, StoreError, inputs, regenerate, sessions, templates};
use futures::future::BoxFuture;
use std::sync::Arc;

pub const SERVICE_NAME: &str = "dialectic.v1.renderer.RendererService";

/// Appended to a document whose chain reached the continuation cap.
const INCOMPLETE_NOTE: &str = "\n> **Incomplete:** this document reached its continuation limit; it ends where the model stopped.\n";

/// Used when a stage ships no template for a document, so output is never lost.
const FALLBACK_TEMPLATE: &str = "# {{title}}\n\n{{content}}\n";

pub struct Rendered {
    pub key: String,
    pub markdown: String,
    pub incomplete: bool,
    /// It shows a JSON output (later steps keep reading the JSON).
    pub json_backed: bool,
    /// The document it is: its first chunk's, or an assembled document's own.
    pub document_key: String,
    /// The contribution the resource points at: the first chunk of the
    /// document, or of an assembled document's first part.
    pub source: ContributionId,
}

/// What one render job writes: its document and, when that document
/// assembles a step's replies, the reply it was queued for as a document of
/// its own.
struct Renders {
    document: Rendered,
    part: Option<Rendered>,
    /// The first chunk of the chain the job renders.
    root: ContributionRow,
}

impl Renders {
    fn keys(&self) -> Vec<&str> {
        std::iter::once(&self.document)
            .chain(&self.part)
            .map(|r| r.key.as_str())
            .collect()
    }
}

/// The place of `root`'s reply in its step's chain, from its name.
fn chain_place_of(root: &ContributionRow) -> Option<u32> {
    let context = PathContext::deconstruct(&root.raw_response_storage_path).ok()?;
    match context.file {
        FileKind::RawChunk { name, .. } => chain_place(&name.lineage),
        _ => None,
    }
}

#[derive(Clone)]
struct Renderer {
    store: Store,
    blob: BlobStore,
}

/// The text a chunk contributes: its `content` field, or the whole JSON when a
/// model wrote structured content (a revisit preview diffs the same text).
fn chunk_text(raw: &str) -> Result<String, AttemptError> {
    dialectic_core::revisit::document_text(raw)
        .map_err(|e| AttemptError::permanent("corrupt_chunk", e))
}

/// What a document shows of its step's output.
#[derive(Debug, PartialEq, Eq)]
enum Shown {
    /// A markdown output: the reply's `content` is the document.
    Markdown,
    /// A JSON output with a template (`file_type = "json"`): later steps keep
    /// reading the JSON, the document is for people.
    Json,
    /// A `sequential` step's JSON output: one document of all its replies,
    /// under the template `file_name`.
    Assembled { file_name: String },
}

/// What the document whose first chunk is `root` shows: its step's own
/// output rule and granularity say.
async fn shown_as(conn: &mut Conn, root: &ContributionRow) -> Result<Shown, AttemptError> {
    let Some(job_id) = root.job_id else {
        return Ok(Shown::Markdown);
    };
    let Some(step) = jobs::get(&mut *conn, job_id).await?.payload()?.step else {
        return Ok(Shown::Markdown);
    };
    let Some(rule) = step.own_output() else {
        return Ok(Shown::Markdown);
    };
    Ok(match (rule.file_type.as_deref(), &rule.template_filename) {
        (Some("json"), Some(file)) if step.granularity == Granularity::Sequential => {
            Shown::Assembled {
                file_name: file.clone(),
            }
        }
        (Some("json"), _) => Shown::Json,
        _ => Shown::Markdown,
    })
}

/// The stage's template for `document_key`, or the plain one when it ships none.
async fn stage_template(
    conn: &mut Conn,
    root: &ContributionRow,
    document_key: &str,
) -> Result<String, AttemptError> {
    match templates::document_template(&mut *conn, root.session_id, &root.stage_slug, document_key)
        .await
    {
        Ok(t) => Ok(t),
        Err(missing @ StoreError::NotFound { .. }) => {
            tracing::warn!(%missing, "no document template; using the plain one");
            Ok(FALLBACK_TEMPLATE.to_string())
        }
        Err(e) => Err(e.into()),
    }
}

/// Fills `template` for the document `document_key` whose first chunk is `root`.
async fn fill(
    template: String,
    root: &ContributionRow,
    title: String,
    content: String,
    data: serde_json::Value,
) -> Result<String, AttemptError> {
    let model = root.model_name.clone().unwrap_or_default();
    let stage = root.stage_slug.clone();
    // A template is a tenant's code: it runs off the async threads, on its fuel.
    let filled = tokio::task::spawn_blocking(move || {
        fill_document(
            &template,
            &[
                ("title", title.as_str()),
                ("content", content.trim_end()),
                ("model", model.as_str()),
                ("stage", stage.as_str()),
            ],
            &data,
        )
    });
    filled
        .await
        .map_err(|e| AttemptError::retryable("render_task", e))
}

/// Where the document whose first chunk is `root` is rendered: at the stage
/// root under that chunk's name (seed 001), or for an assembled document
/// under `document_key` in that chunk's model's name.
fn rendered_key(
    root: &ContributionRow,
    document_key: Option<&str>,
) -> Result<String, AttemptError> {
    let mut context = PathContext::deconstruct(&root.raw_response_storage_path)
        .map_err(|e| AttemptError::permanent("bad_path", e))?;
    let FileKind::RawChunk { mut name, .. } = context.file else {
        return Err(AttemptError::permanent(
            "bad_path",
            format!("{} is not a raw chunk", root.raw_response_storage_path),
        ));
    };
    if let Some(key) = document_key {
        name = DocumentName {
            model_slug: name.model_slug,
            attempt: 0,
            document_key: key.to_string(),
            lineage: Lineage::Plain,
        };
    }
    context.file = FileKind::RenderedDocument { name };
    context
        .construct()
        .map_err(|e| AttemptError::permanent("bad_path", e))
}

/// The current replies of the step that wrote `root`, by the same model in
/// the same stage and iteration, one per document, in order.
async fn replies_of(
    conn: &mut Conn,
    root: &ContributionRow,
    model: ModelId,
) -> Result<Vec<inputs::InputDoc>, AttemptError> {
    Ok(inputs::own_stage_artifacts(
        conn,
        root.session_id,
        &root.stage_slug,
        root.iteration_number,
        &root.document_key,
        model,
    )
    .await?)
}

impl Renderer {
    /// Renders the chain whose first chunk is `identity`, without saving anything.
    /// It reads on the caller's connection: a render job holds its transaction
    /// (and the chain's lock) meanwhile, and a second pooled connection per render
    /// starved the pool once render slots approached its size.
    async fn render(
        &self,
        conn: &mut Conn,
        identity: ContributionId,
    ) -> Result<Renders, AttemptError> {
        let root = contributions::contribution(&mut *conn, identity).await?;
        let shown = shown_as(&mut *conn, &root).await?;
        let (document, part) = match &shown {
            Shown::Assembled { file_name } => {
                let document = self.render_assembled(conn, &root, file_name).await?;
                (document, Some(self.render_part(conn, &root).await?))
            }
            _ => {
                let title = title_from_key(&root.document_key);
                let json_backed = shown == Shown::Json;
                (
                    self.render_chain(conn, &root, title, json_backed).await?,
                    None,
                )
            }
        };
        Ok(Renders {
            document,
            part,
            root,
        })
    }

    /// One reply of an assembled document (the essay's paragraph) as a
    /// document of its own, which the writer reads and edits on its own:
    /// titled with its place in the chain.
    async fn render_part(
        &self,
        conn: &mut Conn,
        root: &ContributionRow,
    ) -> Result<Rendered, AttemptError> {
        let mut title = title_from_key(&root.document_key);
        if let Some(place) = chain_place_of(root) {
            title = format!("{title} {place}");
        }
        self.render_chain(conn, root, title, true).await
    }

    /// The document of the chain `root` begins: its current chunks (or
    /// edit) in order, filled into the stage's template for its key.
    async fn render_chain(
        &self,
        conn: &mut Conn,
        root: &ContributionRow,
        title: String,
        json_backed: bool,
    ) -> Result<Rendered, AttemptError> {
        let chain =
            contributions::document_chain(&mut *conn, root.session_id, &root.stage_slug, root.id)
                .await?;
        if chain.is_empty() {
            return Err(AttemptError::permanent(
                "missing_chunks",
                format!("no chunks found for document {}", root.id),
            ));
        }
        let parts = contributions::current_parts(&chain);
        let edited = parts.iter().any(|c| c.contribution_type == USER_EDIT);
        let mut content = String::new();
        let mut replies = Vec::with_capacity(parts.len());
        for chunk in &parts {
            let raw = self
                .blob
                .get_string(&chunk.raw_response_storage_path)
                .await
                .map_err(|e| AttemptError::retryable("storage", e))?;
            content.push_str(&chunk_text(&raw)?);
            replies.extend(serde_json::from_str::<serde_json::Value>(&raw).ok());
        }
        let incomplete = !edited && chain.iter().any(|c| c.is_incomplete);
        let template = stage_template(&mut *conn, root, &root.document_key).await?;
        // The reply's fields, for a template that shows a JSON output's data.
        let data = merge_chunks(replies.iter());
        let mut markdown = fill(template, root, title, content, data).await?;
        if incomplete {
            markdown.push_str(INCOMPLETE_NOTE);
        }
        Ok(Rendered {
            key: rendered_key(root, None)?,
            markdown,
            incomplete,
            json_backed,
            document_key: root.document_key.clone(),
            source: root.id,
        })
    }

    /// A `sequential` step's JSON replies as one document (the essay's
    /// draft): every current reply of the chain so far, in order, filled into
    /// the template the output names, under that template's document key.
    /// Each reply's render writes the whole again, so it grows reply by reply.
    async fn render_assembled(
        &self,
        conn: &mut Conn,
        root: &ContributionRow,
        file_name: &str,
    ) -> Result<Rendered, AttemptError> {
        let (document_key, template) = templates::document_template_by_file(
            &mut *conn,
            root.session_id,
            &root.stage_slug,
            file_name,
        )
        .await?;
        let model = root.model_id.ok_or_else(|| {
            AttemptError::permanent("bad_chunk", format!("{} names no model", root.id))
        })?;
        let first = replies_of(&mut *conn, root, model)
            .await?
            .first()
            .map(|d| ContributionId(d.id));
        let source = first.unwrap_or(root.id);
        // Renders of one assembled document take turns on its first reply, so
        // each reads every reply the render before it read, and more.
        contributions::lock_on(&mut *conn, source).await?;
        let parts = replies_of(&mut *conn, root, model).await?;
        let mut texts = Vec::with_capacity(parts.len());
        let mut data = Vec::with_capacity(parts.len());
        for part in &parts {
            let raw = match self.blob.get_string(&part.storage_key).await {
                Ok(raw) => raw,
                // A reply still being continued has no whole document yet.
                Err(dialectic_blob::BlobError::NotFound(_)) => continue,
                Err(e) => return Err(AttemptError::retryable("storage", e)),
            };
            texts.push(chunk_text(&raw)?.trim().to_string());
            data.extend(serde_json::from_str::<serde_json::Value>(&raw).ok());
        }
        let data = serde_json::json!({ "parts": data });
        let title = title_from_key(&document_key);
        let markdown = fill(template, root, title, texts.join("\n\n"), data).await?;
        Ok(Rendered {
            key: rendered_key(root, Some(&document_key))?,
            markdown,
            incomplete: false,
            json_backed: true,
            document_key,
            source,
        })
    }

    /// Writes `rendered`'s object and upserts its resource row, in `tx`.
    async fn store_rendered(
        &self,
        tx: &mut dialectic_store::Tx<'_>,
        session: &sessions::SessionRow,
        root: &ContributionRow,
        rendered: &Rendered,
    ) -> Result<ResourceId, AttemptError> {
        self.blob
            .put(
                &rendered.key,
                rendered.markdown.clone().into_bytes(),
                "text/markdown",
            )
            .await
            .map_err(|e| AttemptError::retryable("storage", e))?;
        let (dir, file_name) = rendered
            .key
            .rsplit_once('/')
            .unwrap_or(("", rendered.key.as_str()));
        let resource = NewResource {
            id: ResourceId::new(),
            project_id: session.project_id,
            user_id: session.user_id,
            session_id: session.id,
            stage_slug: &root.stage_slug,
            iteration: root.iteration_number,
            resource_type: "rendered_document",
            document_key: &rendered.document_key,
            model_id: root.model_id,
            bucket: self.blob.bucket(),
            storage_path: dir,
            file_name,
            mime_type: "text/markdown",
            size_bytes: rendered.markdown.len() as i64,
            // The resource points at its document's first chunk (seed 000 function 7).
            source_contribution_id: rendered.source,
            is_incomplete: rendered.incomplete,
            is_json_backed: rendered.json_backed,
        };
        Ok(resources::upsert_resource(tx, &resource).await?)
    }

    /// Stores one reply of an assembled document as its own document; when
    /// the render is of the writer's edit of it (`source`), the replies after
    /// it, which continued the text it had, are flagged for review.
    async fn store_part(
        &self,
        tx: &mut dialectic_store::Tx<'_>,
        session: &sessions::SessionRow,
        root: &ContributionRow,
        part: &Rendered,
        source: ContributionId,
    ) -> Result<(), AttemptError> {
        let resource = self.store_rendered(tx, session, root, part).await?;
        let rendered_for = contributions::contribution(&mut **tx, source).await?;
        if rendered_for.contribution_type == USER_EDIT {
            let flagged = resources::flag_later_parts(tx, resource).await?;
            tracing::info!(
                flagged,
                "an edited part flags the parts after it for review"
            );
        }
        Ok(())
    }

    /// When `root_job` is a regeneration, the documents of the jobs it
    /// superseded become archived versions (`name.v{N}.md`) and their chunks
    /// stop being inputs, in the caller's transaction: the new document and the
    /// old one swap places in one commit. Returns the old objects' keys, to
    /// delete once that commit succeeded.
    async fn archive_replaced(
        &self,
        tx: &mut dialectic_store::Tx<'_>,
        session_id: SessionId,
        root_job: JobId,
        current_keys: &[&str],
    ) -> Result<Vec<String>, AttemptError> {
        let Some(superseded) = regenerate::superseded_by(&mut **tx, root_job).await? else {
            return Ok(Vec::new());
        };
        let old = regenerate::documents_of_jobs(tx, session_id, &superseded).await?;
        let mut renamed = Vec::with_capacity(old.len());
        let mut keys = Vec::with_capacity(old.len());
        for doc in old {
            let old_key = doc.key();
            if current_keys.contains(&old_key.as_str()) {
                continue;
            }
            let name = regenerate::free_archived_name(tx, &doc).await?;
            let archived_key = format!("{}/{name}", doc.storage_path);
            // Copy first: if the transaction then fails, an extra copy is harmless.
            match self.blob.get(&old_key).await {
                Ok(body) => {
                    self.blob
                        .put(&archived_key, body, &doc.mime_type)
                        .await
                        .map_err(|e| AttemptError::retryable("storage", e))?;
                    keys.push(old_key.clone());
                }
                Err(dialectic_blob::BlobError::NotFound(_)) => {
                    tracing::warn!(key = %old_key, "a replaced document's object is gone; archiving its row only");
                }
                Err(e) => return Err(AttemptError::retryable("storage", e)),
            }
            tracing::info!(from = %old_key, to = %archived_key, "regenerated document archived");
            renamed.push((doc, name));
        }
        regenerate::archive(tx, session_id, &superseded, &renamed).await?;
        Ok(keys)
    }
}

#[async_trait::async_trait]
impl JobWork for Renderer {
    type Rows = ();

    async fn attempt(&self, job: &JobRow, (): (), worker: &str) -> Result<Recorded, AttemptError> {
        let payload = job.payload()?;
        let render = payload.render.ok_or_else(|| {
            AttemptError::permanent("bad_payload", "RENDER job without a render payload")
        })?;
        let identity = ContributionId::parse(&render.document_identity)
            .map_err(|e| AttemptError::permanent("bad_payload", e))?;
        let source = ContributionId::parse(&render.source_contribution_id)
            .map_err(|e| AttemptError::permanent("bad_payload", e))?;
        // Renders of one document run one at a time, each reading the chain under
        // the lock: a render queued by an early chunk can never overwrite a later one.
        let mut tx = self.store.begin().await?;
        // A document replaced by a regeneration (or archived by a revisit) stays
        // archived: a late render of it must not make it current again.
        if contributions::lock_contribution(&mut tx, identity).await? {
            return Err(AttemptError::permanent(
                "archived",
                format!(
                    "document {identity} was archived (regenerated or revisited); it is not rendered again"
                ),
            ));
        }
        let renders = self.render(&mut tx, identity).await?;
        let session = sessions::session_for_user(&mut *tx, job.user_id, job.session_id).await?;
        let root = &renders.root;
        let resource_id = self
            .store_rendered(&mut tx, &session, root, &renders.document)
            .await?;
        if let Some(part) = &renders.part {
            self.store_part(&mut tx, &session, root, part, source)
                .await?;
        }
        let replaced = match root.job_id {
            Some(root_job) => {
                self.archive_replaced(&mut tx, job.session_id, root_job, &renders.keys())
                    .await?
            }
            None => Vec::new(),
        };
        let recorded = worker::record_success(
            &mut tx,
            job,
            worker,
            JobSucceeded {
                contribution_id: source.to_string(),
                resource_id: resource_id.to_string(),
                finish_reason: String::new(),
                continuation_needed: false,
                ..Default::default()
            },
        )
        .await?;
        let Some(recorded) = recorded else {
            // Another attempt owns the job now; it writes the same file.
            return Err(AttemptError::Lost);
        };
        tx.commit().await.map_err(StoreError::from)?;
        // The archived versions hold the old bytes now; the old names hold nothing current.
        for key in &replaced {
            if let Err(e) = self.blob.delete(key).await {
                tracing::warn!(%key, error = %e, "could not remove a replaced document's old object");
            }
        }
        dialectic_telemetry::metrics::DOCUMENTS_RENDERED.inc(&[&job.stage_slug]);
        tracing::info!(%resource_id, key = %renders.document.key, "document rendered");
        Ok(recorded)
    }
}

struct Api {
    renderer: Renderer,
}

#[tonic::async_trait]
impl RendererService for Api {
    async fn render_preview(
        &self,
        request: tonic::Request<RenderPreviewRequest>,
    ) -> Result<tonic::Response<RenderPreviewResponse>, tonic::Status> {
        let request = request.into_inner();
        let identity = ContributionId::parse(&request.document_identity)
            .map_err(|e| error_status::status(&e))?;
        let mut conn = self
            .renderer
            .store
            .pool()
            .acquire()
            .await
            .map_err(|e| error_status::status(&StoreError::from(e)))?;
        let renders = self
            .renderer
            .render(&mut conn, identity)
            .await
            .map_err(|e| match e {
                AttemptError::Store(e) => error_status::status(&e),
                AttemptError::Retryable { .. } => Failure::new(
                    ErrorCode::Unavailable,
                    Reason::RenderRetryable,
                    e.to_string(),
                )
                .into(),
                other => Failure::new(ErrorCode::Internal, Reason::RenderFailed, other.to_string())
                    .into(),
            })?;
        if !request.session_id.is_empty()
            && request.session_id != renders.root.session_id.to_string()
        {
            let missing = StoreError::not_found("document", format!("{identity} in that session"));
            return Err(error_status::status(&missing));
        }
        Ok(tonic::Response::new(RenderPreviewResponse {
            markdown: renders.document.markdown,
        }))
    }
}

pub fn start(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> BoxFuture<'static, Result<Running, RuntimeError>> {
    Box::pin(start_renderer(settings, shutdown))
}

async fn start_renderer(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> Result<Running, RuntimeError> {
    let store = dialectic_runtime::store(&settings)?;
    let blob = dialectic_runtime::blob(&settings);
    let renderer = Renderer {
        store: store.clone(),
        blob: blob.clone(),
    };
    let server = dialectic_runtime::start_grpc(
        SERVICE_NAME,
        &settings.renderer.worker.listen,
        tonic::service::Routes::new(RendererServiceServer::new(Api {
            renderer: renderer.clone(),
        })),
        dialectic_runtime::service_auth::ServiceKey::from_settings(
            &settings,
            dialectic_core::service_auth::ServiceName::Renderer,
        )?,
        shutdown.clone(),
    )
    .await?;
    let work_shutdown = shutdown.child_token();
    let (courier, courier_task) = Courier::from_settings(&store, &settings, &work_shutdown);
    let handler: Arc<dyn Handler> = Arc::new(JobWorker {
        store: store.clone(),
        worker: dialectic_core::ids::instance_name("renderer"),
        lease_secs: settings.renderer.worker.lease_secs.max(1),
        job_types: &[JobType::Render],
        work: renderer,
        stats: Arc::new(WorkerStats::default()),
        courier,
    });
    let mut dependencies = Dependencies {
        store: Some(store),
        blob: Some(blob),
        ..Default::default()
    };
    let consumer = tokio::spawn(run_consumer(
        ConsumerOptions::new(
            &settings,
            keys::JOB_RENDER,
            settings.renderer.worker.slots,
            "renderer",
        ),
        handler,
        dependencies.broker_flag(),
        work_shutdown.clone(),
    ));
    Ok(supervise(
        "renderer",
        &settings,
        server,
        dependencies,
        work_shutdown,
        std::iter::once(consumer).chain(courier_task).collect(),
    ))
}
