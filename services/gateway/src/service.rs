//! The `DialecticService` handlers.

use crate::convert;
use crate::edits::EditTarget;
use crate::error::GatewayError;
use crate::last_known::LastKnown;
use dialectic_blob::BlobStore;
use dialectic_cache::{Cache, ProgressEvent};
use dialectic_config::GatewayConfig;
use dialectic_core::apikey;
use dialectic_core::error::Reason;
use dialectic_core::ids::{ContributionId, ModelId, ProjectId, ResourceId, SessionId, UserId};
use dialectic_core::job::JobStatus;
use dialectic_core::paths::{FileKind, PathContext};
use dialectic_core::position::{Position, StepTally, item_documents};
use dialectic_core::progress::EventKind;
use dialectic_core::session::{
    SessionStatus, SlotWait, failed_stage_notice, funds_notice, idle_abandoned_notice, slot_notice,
};
use dialectic_core::slug::slugify;
use dialectic_proto::v1::dialectic_service_server::DialecticService;
use dialectic_proto::v1::executor::executor_service_client::ExecutorServiceClient;
use dialectic_proto::v1::indexer::indexer_service_client::IndexerServiceClient;
use dialectic_proto::v1::planner::planner_service_client::PlannerServiceClient;
use dialectic_proto::v1::planner::{SessionCommand, SubmitStageResponsesCommand};
use dialectic_proto::v1::wallet::wallet_service_client::WalletServiceClient;
use dialectic_proto::v1::{
    AddProjectDocumentRequest, GetBlackboardRequest, GetBlackboardResponse,
    ListProjectDocumentsRequest, ListProjectDocumentsResponse, ProjectDocument, QueryRequest,
    QueryResponse, SessionPosition, SkippedStep,
};
use dialectic_proto::v1::{
    CancelSessionRequest, CreditWalletRequest, DeleteProjectRequest, DeleteProjectResponse,
    DocumentChunks, EditStageRecipeRequest, ExportChunk, ExportProjectRequest, ExportUrl,
    GetStageRecipeRequest, InstallPipelineRequest, InstallPipelineResponse, ListPipelinesRequest,
    ListPipelinesResponse, ListProjectsRequest, ListProjectsResponse, ListRecipesRequest,
    ListRecipesResponse, ListSessionsRequest, ListSessionsResponse, ListWalletTransactionsRequest,
    ListWalletTransactionsResponse, RegenerateDocumentRequest, RegenerateDocumentResponse,
    RetryStageRequest, RetryStageResponse, RevisitStageRequest, RevisitStageResponse, StageRecipe,
    WalletTransaction,
};
use dialectic_proto::v1::{
    CreateProjectRequest, DocumentContent, GetDocumentContentRequest, GetProjectRequest,
    GetSessionRequest, GetWalletRequest, ListModelsRequest, ListModelsResponse,
    ListStageDocumentsRequest, ListStageDocumentsResponse, PauseSessionRequest, Project,
    ResumeSessionRequest, SaveDocumentEditRequest, Session, SessionEvent, StageDocument,
    StartSessionRequest, SubmitStageResponsesRequest, Wallet, WatchSessionRequest,
};
use dialectic_runtime::blackboard;
use dialectic_runtime::service_auth::InternalChannel;
use dialectic_runtime::{CancellationToken, Courier};
use dialectic_store::contributions::{self, NewContribution, USER_EDIT};
use dialectic_store::ledger;
use dialectic_store::project_documents::DocumentLimits;
use dialectic_store::projects::{self, Creation, NewProject, ProjectLimitReached};
use dialectic_store::sessions::{self, NewSession, SessionRow};
use dialectic_store::{
    Store, StoreError, api, auth, gates, jobs, models, outbox, position, resources, skips,
};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};
use tracing::Instrument;

mod dead_letters;
mod history;
mod rpc;
mod watching;

/// The session commands that need nothing but the session's id.
pub(crate) enum Command {
    Pause,
    Resume,
    Cancel,
    Complete,
}

/// How many of a session's jobs are in `status` (`session_counts` rows).
fn jobs_in(counts: &[(String, String, String, i64)], status: JobStatus) -> i64 {
    counts
        .iter()
        .filter(|(_, _, s, _)| s == status.as_str())
        .map(|r| r.3)
        .sum()
}

/// Where an idle-abandoned session stopped (a resume returns there); None
/// for any other session, a cancelled one included.
fn idle_abandoned_at(row: &SessionRow) -> Option<String> {
    match (row.status.as_str(), &row.paused_from) {
        (SessionStatus::ABANDONED, Some(was)) => Some(was.clone()),
        _ => None,
    }
}

/// A watch ends once the session waits for the user's review or is over.
fn ends_watch(status: &str) -> bool {
    matches!(
        status,
        SessionStatus::REVIEW | SessionStatus::ABANDONED | SessionStatus::COMPLETED
    )
}

/// How long a cached read lives: also the bound on staleness should an
/// invalidation be lost while Redis is unreachable.
const READ_CACHE_TTL_SECS: u64 = 60;

/// Largest edited document the gateway accepts.
const MAX_EDIT_BYTES: usize = 4 * 1024 * 1024;

/// Metadata that carries the caller's API key: `authorization: Bearer <key>`.
pub const AUTHORIZATION: &str = "authorization";

/// The configured bootstrap key (by hash) and the user it acts as.
#[derive(Debug, Clone)]
pub struct BootstrapKey {
    pub key_hash: String,
    pub user_id: UserId,
}

/// Key of a project's initial prompt: `projects/{id}/initial-prompt.md`. A dash,
/// not an underscore: `paths` reserves underscores as name-part separators.
pub const PROMPT_NAME: &str = "initial-prompt";

/// Where a project's initial prompt is stored.
/// Extensions of the prompt documents a project can be created from: the
/// pipeline reads the prompt as text, so only text formats are taken.
const PROMPT_FILE_EXTENSIONS: [&str; 3] = ["md", "markdown", "txt"];

/// Checks an uploaded prompt document; gives its name without the extension
/// (the default project name) and its text.
fn uploaded_prompt(
    file_name: &str,
    content: &[u8],
    max_bytes: usize,
) -> Result<(String, String), GatewayError> {
    uploaded_text("prompt_file", file_name, content, max_bytes)
}

/// Checks an uploaded text document (`field` names it in errors): a text
/// extension or none, at most `max_bytes`, UTF-8 (a BOM is dropped); gives
/// its name without the extension and its text.
pub(crate) fn uploaded_text(
    field: &'static str,
    file_name: &str,
    content: &[u8],
    max_bytes: usize,
) -> Result<(String, String), GatewayError> {
    let base = file_name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default()
        .trim();
    let (stem, extension) = match base.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem, ext.to_ascii_lowercase()),
        _ => (base, String::new()),
    };
    if !extension.is_empty() && !PROMPT_FILE_EXTENSIONS.contains(&extension.as_str()) {
        return Err(GatewayError::bad(
            field,
            format!("{field} {base}: .{extension} is not text; upload .md, .markdown or .txt"),
        ));
    }
    if content.len() > max_bytes {
        return Err(GatewayError::bad(
            field,
            format!(
                "{field} is {} bytes; the limit is {max_bytes} bytes",
                content.len()
            ),
        ));
    }
    let content = content.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(content);
    let text = std::str::from_utf8(content).map_err(|e| {
        GatewayError::bad(
            field,
            format!(
                "{field} {base} is not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )
    })?;
    Ok((stem.to_string(), text.to_string()))
}

pub fn prompt_key(project_id: ProjectId) -> Result<String, GatewayError> {
    PathContext {
        project_id,
        session_short: String::new(),
        iteration: 0,
        stage_number: 0,
        stage_slug: String::new(),
        file: FileKind::ProjectPrompt {
            name_slug: PROMPT_NAME.into(),
        },
    }
    .construct()
    .map_err(|e| GatewayError::Internal(format!("prompt storage key: {e}")))
}

pub(crate) fn optional(value: &str) -> Option<&str> {
    let value = value.trim();
    (!value.is_empty()).then_some(value)
}

/// The internal services the gateway calls, signed with its identity.
pub struct Internal {
    /// Every command that changes a session or its jobs.
    pub planner: PlannerServiceClient<InternalChannel>,
    /// Administrators' credits.
    pub wallet: WalletServiceClient<InternalChannel>,
    /// Indexing uploaded project documents.
    pub indexer: IndexerServiceClient<InternalChannel>,
    /// Answering questions (`Query`).
    pub executor: ExecutorServiceClient<InternalChannel>,
}

/// The refusal of a key Postgres (or Redis, for a revocation) disowns.
fn unknown_key() -> GatewayError {
    GatewayError::Unauthenticated(
        "unknown or revoked API key; an administrator creates keys with `dialecticd admin create-key`"
            .into(),
    )
}

/// Limits past what Postgres counts in a bigint are no limit at all.
fn document_limits(config: &GatewayConfig) -> DocumentLimits {
    DocumentLimits {
        max_documents: i64::try_from(config.max_documents_per_project).unwrap_or(i64::MAX),
        max_bytes: i64::try_from(config.max_document_bytes_per_project).unwrap_or(i64::MAX),
        max_user_bytes: per_user_cap(config.max_document_bytes_per_user),
    }
}

/// A per-user limit as the store counts it: 0 (no cap), like a figure past
/// a bigint, is no limit at all.
fn per_user_cap(value: u64) -> i64 {
    match value {
        0 => i64::MAX,
        value => i64::try_from(value).unwrap_or(i64::MAX),
    }
}

/// The refusal of a project past its user's limit.
fn too_many_projects(reached: ProjectLimitReached) -> GatewayError {
    GatewayError::Exhausted {
        reason: Reason::UserProjectLimitReached,
        message: format!(
            "you hold {} projects, the most a user may hold ({}); delete one to make another",
            reached.current, reached.max
        ),
        limit: reached.max,
        current: reached.current,
    }
}

pub struct Gateway {
    pub(crate) store: Store,
    pub(crate) blob: BlobStore,
    pub(crate) cache: Arc<OnceLock<Cache>>,
    internal: Internal,
    bootstrap: Option<BootstrapKey>,
    max_prompt_bytes: usize,
    /// What converting one PDF or DOCX upload may cost.
    pub(crate) conversion_limits: dialectic_convert::Limits,
    /// How much each project, and each user, may hold of uploaded documents.
    pub(crate) document_limits: DocumentLimits,
    /// Projects one user may hold (`gateway.max_projects_per_user`).
    max_projects: i64,
    /// Largest export archive of a project (`gateway.max_export_bytes`).
    pub(crate) max_export_bytes: u64,
    /// Exports in progress per user (`gateway.max_exports_per_user`).
    pub(crate) export_slots: crate::catalog::ExportSlots,
    shutdown: CancellationToken,
    /// Publishes the planner commands a call enqueues, right after its commit.
    courier: Courier,
    /// Open watch streams: per-user counts and the shared Redis subscriptions.
    watches: watching::Watches,
    /// Key owners and session owners Postgres confirmed lately, for its outages.
    last_known: LastKnown,
    /// `GetServerInfo`'s answer, made from the configuration at start.
    pub(crate) server_info: dialectic_proto::v1::ServerInfo,
    /// How long answers to retried mutations are kept (`crate::once`).
    pub(crate) idempotency: dialectic_store::idempotency::Windows,
}

impl Gateway {
    pub fn new(
        store: Store,
        blob: BlobStore,
        cache: Arc<OnceLock<Cache>>,
        internal: Internal,
        bootstrap: Option<BootstrapKey>,
        max_prompt_bytes: usize,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            store,
            blob,
            cache,
            internal,
            bootstrap,
            max_prompt_bytes,
            document_limits: document_limits(&GatewayConfig::default()),
            max_projects: per_user_cap(GatewayConfig::default().max_projects_per_user),
            conversion_limits: crate::documents::conversion_limits(&GatewayConfig::default()),
            max_export_bytes: GatewayConfig::default().max_export_bytes,
            export_slots: crate::catalog::ExportSlots::new(
                GatewayConfig::default().max_exports_per_user,
            ),
            shutdown,
            courier: Courier::default(),
            watches: watching::Watches::new(GatewayConfig::default().max_watches_per_user),
            last_known: LastKnown::new(GatewayConfig::default().last_known_secs, Arc::default()),
            server_info: crate::server_info::describe(&dialectic_config::Settings::default()),
            idempotency: crate::once::windows(&GatewayConfig::default()),
        }
    }

    /// What `GetServerInfo` answers: `settings`' features and limits; and
    /// how long retried mutations get their first answer back.
    pub fn with_server_info(mut self, settings: &dialectic_config::Settings) -> Self {
        self.server_info = crate::server_info::describe(settings);
        self.idempotency = crate::once::windows(&settings.gateway);
        self
    }

    pub fn with_courier(mut self, courier: Courier) -> Self {
        self.courier = courier;
        self
    }

    /// The per-project limits `config` sets: uploaded documents, and the
    /// size of an export; and per user: projects, document bytes, and how
    /// many exports a user may run at once.
    pub fn with_document_limits(mut self, config: &GatewayConfig) -> Self {
        self.document_limits = document_limits(config);
        self.max_projects = per_user_cap(config.max_projects_per_user);
        self.conversion_limits = crate::documents::conversion_limits(config);
        self.max_export_bytes = config.max_export_bytes;
        self.export_slots = crate::catalog::ExportSlots::new(config.max_exports_per_user);
        self
    }

    /// The per-user cap on watch streams `config` sets.
    pub fn with_watch_limits(mut self, config: &GatewayConfig) -> Self {
        self.watches = watching::Watches::new(config.max_watches_per_user)
            .heartbeat_every(config.watch_heartbeat_secs);
        self
    }

    /// How long key and session owners are remembered for Postgres outages,
    /// and the readiness loop's flag that says when one is on.
    pub fn with_last_known(
        mut self,
        config: &GatewayConfig,
        postgres_down: Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        self.last_known = LastKnown::new(config.last_known_secs, postgres_down);
        self
    }

    /// The user whose API key the call carries; UNAUTHENTICATED without a
    /// valid one. `outlasts_postgres`: the call may be authenticated from
    /// the last-known owners during a Postgres outage (`WatchSession` only).
    async fn caller(
        &self,
        metadata: &MetadataMap,
        outlasts_postgres: bool,
    ) -> Result<UserId, GatewayError> {
        let header = match metadata.get(AUTHORIZATION) {
            Some(v) => Some(v.to_str().map_err(|_| {
                GatewayError::Unauthenticated("authorization metadata is not valid text".into())
            })?),
            None => None,
        };
        let key = apikey::from_bearer(header)
            .map_err(|e| GatewayError::Unauthenticated(e.to_string()))?;
        let hash = apikey::hash(key);
        if let Some(bootstrap) = &self.bootstrap
            && bootstrap.key_hash == hash
        {
            return Ok(bootstrap.user_id);
        }
        let owner = match auth::owner_of_key(self.store.pool(), &hash).await {
            Ok(owner) => owner.map(|o| o.user_id),
            Err(e) if e.is_unreachable() => {
                return self
                    .caller_without_postgres(&hash, outlasts_postgres, e)
                    .await;
            }
            Err(e) => return Err(e.into()),
        };
        self.last_known.key_confirmed(&hash, owner);
        owner.ok_or_else(unknown_key)
    }

    /// Postgres did not answer for the key. A key Redis lists as revoked is
    /// UNAUTHENTICATED. Its last-known owner answers only for a call that
    /// outlasts Postgres, while the readiness loop holds Postgres down (a
    /// busy pool times out too, and must never open this door), and once
    /// Redis said the key is not revoked; anything else is the store's error.
    async fn caller_without_postgres(
        &self,
        key_hash: &str,
        outlasts_postgres: bool,
        error: dialectic_store::StoreError,
    ) -> Result<UserId, GatewayError> {
        let revoked = match self.cache.get() {
            Some(cache) => cache.is_key_revoked(key_hash).await.ok(),
            None => None,
        };
        if revoked == Some(true) {
            return Err(unknown_key());
        }
        if outlasts_postgres
            && revoked == Some(false)
            && self.last_known.in_outage()
            && let Some(user) = self.last_known.owner_of_key(key_hash)
        {
            tracing::debug!("Postgres down: the key's owner as last confirmed");
            return Ok(user);
        }
        Err(error.into())
    }

    /// `user`'s session, or None while Postgres is unreachable if Postgres
    /// confirmed lately that the session is theirs (NOT_FOUND for another
    /// user's session either way).
    async fn owned_session(
        &self,
        user: UserId,
        id: SessionId,
    ) -> Result<Option<SessionRow>, GatewayError> {
        match sessions::session_for_user(self.store.pool(), user, id).await {
            Ok(row) => {
                self.last_known.session_confirmed(user, id);
                Ok(Some(row))
            }
            Err(e)
                if e.is_unreachable()
                    && self.last_known.in_outage()
                    && self.last_known.owns_session(user, id) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Pause, resume, cancel or complete: the planner applies it once the
    /// caller is known to own the session (another user's session is NOT_FOUND).
    pub(crate) async fn session_command(
        &self,
        user: UserId,
        session_id: &str,
        command: Command,
    ) -> Result<Session, GatewayError> {
        let id = SessionId::parse(session_id)?;
        sessions::session_for_user(self.store.pool(), user, id).await?;
        let message = tonic::Request::new(SessionCommand {
            session_id: id.to_string(),
        });
        let mut planner = self.planner();
        match command {
            Command::Pause => planner.pause(message).await,
            Command::Resume => planner.resume(message).await,
            Command::Cancel => planner.cancel(message).await,
            Command::Complete => planner.complete(message).await,
        }
        .map_err(GatewayError::Planner)?;
        let row = sessions::session_for_user(self.store.pool(), user, id).await?;
        self.session_view(row, true).await
    }

    /// A client for the planner's commands. Call after checking that the
    /// caller owns what the command names: the planner trusts the gateway.
    pub(crate) fn planner(&self) -> PlannerServiceClient<InternalChannel> {
        self.internal.planner.clone()
    }

    pub(crate) fn wallet(&self) -> WalletServiceClient<InternalChannel> {
        self.internal.wallet.clone()
    }

    pub(crate) fn indexer(&self) -> IndexerServiceClient<InternalChannel> {
        self.internal.indexer.clone()
    }

    pub(crate) fn executor(&self) -> ExecutorServiceClient<InternalChannel> {
        self.internal.executor.clone()
    }

    pub(crate) fn max_upload_bytes(&self) -> usize {
        self.max_prompt_bytes
    }

    pub(crate) fn cache(&self) -> Result<&Cache, GatewayError> {
        self.cache.get().ok_or_else(|| {
            GatewayError::unavailable(Reason::CacheUnavailable, "redis is not connected yet")
        })
    }

    pub(crate) async fn model_names(
        &self,
        ids: &[ModelId],
    ) -> Result<HashMap<ModelId, String>, GatewayError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        Ok(models::models_by_id(self.store.pool(), ids)
            .await?
            .into_iter()
            .map(|m| (m.id, m.api_identifier))
            .collect())
    }

    pub(crate) async fn session_view(
        &self,
        row: SessionRow,
        with_jobs: bool,
    ) -> Result<Session, GatewayError> {
        let role_models: Vec<ModelId> = row.model_roles.values().copied().collect();
        let names = self
            .model_names(&[row.selected_model_ids.as_slice(), &role_models].concat())
            .await?;
        let model_roles = row
            .model_roles
            .iter()
            .map(|(role, id)| {
                let name = names.get(id).cloned().unwrap_or_else(|| id.to_string());
                (role.clone(), name)
            })
            .collect();
        let models = row
            .selected_model_ids
            .iter()
            .map(|id| names.get(id).cloned().unwrap_or_else(|| id.to_string()))
            .collect();
        let stage_from_row = match row.current_stage_id {
            Some(id) => api::stage_slug(self.store.pool(), id).await?,
            None => None,
        };
        let current_stage = stage_from_row
            .or_else(|| convert::stage_of_status(&row.status))
            .unwrap_or_default();
        let skipped_steps = if with_jobs {
            skips::list(self.store.pool(), row.id)
                .await?
                .into_iter()
                .map(|s| SkippedStep {
                    iteration: u32::try_from(s.iteration).unwrap_or(0),
                    step_key: s.step_key,
                    reason: s.reason,
                })
                .collect()
        } else {
            Vec::new()
        };
        let position = if with_jobs {
            self.position(&row, &current_stage).await?
        } else {
            None
        };
        let needs_review_stages = if with_jobs {
            resources::stages_needing_review(self.store.pool(), row.id).await?
        } else {
            Vec::new()
        };
        let spent = if with_jobs {
            convert::spent(ledger::session_money(self.store.pool(), row.id).await?)
        } else {
            None
        };
        let output = if with_jobs {
            self.output_record(&row).await?
        } else {
            None
        };
        let (jobs, cost, notice) = if with_jobs {
            let rows = jobs::session_counts(self.store.pool(), row.id).await?;
            let notice = self.notice(&row, &rows).await?;
            let mut counts = convert::job_counts(&rows);
            let costs = ledger::stage_costs(self.store.pool(), row.id).await?;
            for stage in &mut counts {
                stage.cost = costs
                    .iter()
                    .find(|(slug, _)| *slug == stage.stage_slug)
                    .map_or(0, |(_, c)| *c);
            }
            (counts, costs.iter().map(|(_, c)| c).sum(), notice)
        } else {
            (Vec::new(), 0, String::new())
        };
        Ok(Session {
            id: row.id.to_string(),
            project_id: row.project_id.to_string(),
            state: convert::session_state(&row.status),
            status: row.status,
            iteration: u32::try_from(row.iteration_count).unwrap_or(0),
            current_stage,
            models,
            jobs,
            created_at: Some(convert::timestamp(row.created_at)),
            updated_at: Some(convert::timestamp(row.updated_at)),
            auto_advance: row.auto_advance,
            cost,
            notice,
            pipeline_version: row
                .pipeline_version
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0),
            skipped_steps,
            position,
            needs_review_stages,
            pushback: convert::pushback(row.pushback),
            spent,
            output,
            model_roles,
        })
    }

    /// What a session says about itself, the first that holds of: a failed
    /// stage, an idle spell that abandoned it, a dead letter it waits for, a
    /// wait for funds, a wait for a model's call slot, else the low-confidence
    /// gates it kept. A wait only an operator ends (a dead letter) comes
    /// first, then one the user can end (funds), then one that ends by
    /// itself (a slot).
    async fn notice(
        &self,
        row: &SessionRow,
        counts: &[(String, String, String, i64)],
    ) -> Result<String, GatewayError> {
        if let Some(failed) = self.failed_stage_notice(row).await? {
            return Ok(failed);
        }
        if let Some(was) = idle_abandoned_at(row) {
            return Ok(idle_abandoned_notice(&row.id.to_string(), &was));
        }
        let dead = self.dead_letter_notice(row).await;
        if !dead.is_empty() {
            return Ok(dead);
        }
        let paused = jobs_in(counts, JobStatus::PausedNsf);
        if paused > 0 {
            return Ok(funds_notice(paused, &row.user_id.to_string()));
        }
        // Only a claimed job waits for a slot: no claimed job, no Redis read.
        if jobs_in(counts, JobStatus::Processing) > 0 {
            let slots = self.slot_notice(row.id).await;
            if !slots.is_empty() {
                return Ok(slots);
            }
        }
        Ok(convert::low_confidence_notice(
            &gates::kept_low(self.store.pool(), row.id).await?,
        ))
    }

    /// The session's jobs waiting for a model's call slot, as the executors
    /// noted them. Best effort: Redis out of reach costs this notice, not
    /// the read.
    async fn slot_notice(&self, session_id: SessionId) -> String {
        let Ok(cache) = self.cache() else {
            return String::new();
        };
        match cache.slot_waiters(&session_id.to_string()).await {
            Ok(waiters) => slot_notice(&SlotWait::group(
                waiters
                    .iter()
                    .map(|w| (w.job_id.as_str(), w.model.as_str(), w.max_concurrency)),
            )),
            Err(e) => {
                tracing::warn!(error = %e, "the waits for call slots could not be read");
                String::new()
            }
        }
    }

    /// What a session whose stage failed (also while paused there) says:
    /// the failed step, its last error and the command that retries.
    async fn failed_stage_notice(&self, row: &SessionRow) -> Result<Option<String>, GatewayError> {
        let SessionStatus::Failed(stage) = row.state()?.effective().clone() else {
            return Ok(None);
        };
        let failures =
            jobs::failures_in_stage(self.store.pool(), row.id, &stage, row.iteration_count).await?;
        Ok(Some(failed_stage_notice(
            &row.id.to_string(),
            &stage,
            &failures,
        )))
    }

    /// Where the session is: its stage's place in its pipeline and the step
    /// under way there (None when the stage is not in its pipeline).
    async fn position(
        &self,
        row: &SessionRow,
        stage_slug: &str,
    ) -> Result<Option<SessionPosition>, GatewayError> {
        let mut conn = self
            .store
            .pool()
            .acquire()
            .await
            .map_err(StoreError::from)?;
        let Some((number, count, name)) =
            position::stage_place(&mut conn, row.id, stage_slug).await?
        else {
            return Ok(None);
        };
        let steps =
            position::step_tallies(&mut conn, row.id, stage_slug, row.iteration_count).await?;
        let percent =
            jobs::stage_percent(&mut conn, row.id, stage_slug, row.iteration_count).await?;
        let stage = (
            u32::try_from(number).unwrap_or(0),
            u32::try_from(count).unwrap_or(0),
            name.as_str(),
        );
        let place = Position::new(stage, &steps);
        let place = self
            .within_documents(&mut conn, row, stage_slug, &steps, place)
            .await?;
        Ok(Some(convert::position(&place, percent)))
    }

    /// Names the document the current job's item comes from ("section 2 of
    /// 3") when the step works through the items of several.
    async fn within_documents(
        &self,
        conn: &mut dialectic_store::Conn,
        row: &SessionRow,
        stage_slug: &str,
        steps: &[StepTally],
        place: Position,
    ) -> Result<Position, GatewayError> {
        let current = steps.iter().find(|s| s.step.step_key == place.step_key);
        let Some((from_stage, key)) = current.and_then(|s| item_documents(&s.step)) else {
            return Ok(place);
        };
        let jobs = position::item_jobs(
            conn,
            row.id,
            stage_slug,
            row.iteration_count,
            &place.step_key,
        )
        .await?;
        let unit = position::written_unit(conn, row.id, from_stage, key)
            .await?
            .unwrap_or_else(|| "document".into());
        Ok(place.within_documents(&unit, &jobs))
    }

    /// Keeps the trace a session started in, so its later commands join it.
    /// Best effort: tracing never fails a request.
    async fn remember_trace(&self, session_id: &str, span: &tracing::Span) {
        let traceparent = span.in_scope(dialectic_telemetry::current_traceparent);
        if let (Ok(id), Some(tp)) = (SessionId::parse(session_id), traceparent) {
            let stored =
                dialectic_store::traces::remember_session_trace(self.store.pool(), id, &tp);
            if let Err(e) = stored.await {
                tracing::debug!(error = %e, "could not remember the session's trace");
            }
        }
    }

    /// Makes `span` (not yet entered) part of the session's trace, so the
    /// stage it starts is traced with the rest of the session.
    async fn continue_trace(&self, session_id: &str, span: &tracing::Span) {
        let Ok(id) = SessionId::parse(session_id) else {
            return;
        };
        match dialectic_store::traces::session_trace(self.store.pool(), id).await {
            Ok(Some(tp)) => dialectic_telemetry::adopt_traceparent(span, Some(&tp)),
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "could not read the session's trace"),
        }
    }

    /// Sends the review of `stage` to the planner, which stores it and starts
    /// what comes next: the next stage, or after the last a new iteration.
    async fn submit_stage_responses(
        &self,
        user: UserId,
        req: SubmitStageResponsesRequest,
    ) -> Result<Session, GatewayError> {
        let session_id = SessionId::parse(&req.session_id)?;
        let reviewed = req.stage_slug.trim();
        if reviewed.is_empty() {
            return Err(GatewayError::bad(
                "stage_slug",
                "stage_slug names the stage whose documents were reviewed",
            ));
        }
        let row = sessions::session_for_user(self.store.pool(), user, session_id).await?;
        let feedback = self.feedback_text(user, &row, &req).await?;
        let command = SubmitStageResponsesCommand {
            session_id: row.id.to_string(),
            user_id: user.to_string(),
            stage_slug: reviewed.to_string(),
            feedback,
        };
        self.planner()
            .submit_stage_responses(tonic::Request::new(command))
            .await
            .map_err(GatewayError::Planner)?;
        let row = sessions::session_for_user(self.store.pool(), user, row.id).await?;
        self.session_view(row, false).await
    }

    /// One markdown section per response with feedback, named after the
    /// document it is about (which must be this session's).
    async fn feedback_text(
        &self,
        user: UserId,
        session: &SessionRow,
        req: &SubmitStageResponsesRequest,
    ) -> Result<String, GatewayError> {
        let mut text = String::new();
        for response in req
            .responses
            .iter()
            .filter(|r| !r.feedback.trim().is_empty())
        {
            let about = if !response.document_key.trim().is_empty() {
                response.document_key.trim().to_string()
            } else if !response.resource_id.trim().is_empty() {
                let id = ResourceId::parse(&response.resource_id)?;
                let resource = resources::resource_for_user(self.store.pool(), user, id).await?;
                if resource.session_id != Some(session.id) {
                    return Err(GatewayError::not_found("document", &response.resource_id));
                }
                resource.document_key.unwrap_or(resource.file_name)
            } else {
                "the stage as a whole".into()
            };
            text.push_str(&format!("## {about}\n\n{}\n\n", response.feedback.trim()));
        }
        Ok(text)
    }

    async fn create_project(
        &self,
        user: UserId,
        req: CreateProjectRequest,
    ) -> Result<Project, GatewayError> {
        let uploaded = match &req.prompt_file {
            Some(file) if !file.content.is_empty() || !file.file_name.is_empty() => {
                if !req.initial_user_prompt.is_empty() {
                    return Err(GatewayError::bad(
                        "prompt_file",
                        "give initial_user_prompt or prompt_file, not both",
                    ));
                }
                Some(uploaded_prompt(
                    &file.file_name,
                    &file.content,
                    self.max_prompt_bytes,
                )?)
            }
            _ => None,
        };
        let (name, prompt) = match &uploaded {
            Some((stem, text)) => (
                if req.name.trim().is_empty() {
                    stem.as_str()
                } else {
                    req.name.trim()
                },
                text.as_str(),
            ),
            None => (req.name.trim(), req.initial_user_prompt.as_str()),
        };
        if name.is_empty() {
            return Err(GatewayError::bad("name", "name is required"));
        }
        if prompt.trim().is_empty() {
            return Err(GatewayError::bad(
                "initial_user_prompt",
                "initial_user_prompt (or a prompt_file with text in it) is required",
            ));
        }
        if prompt.len() > self.max_prompt_bytes {
            return Err(GatewayError::bad(
                "initial_user_prompt",
                format!(
                    "initial_user_prompt is {} bytes; the limit is {} bytes",
                    prompt.len(),
                    self.max_prompt_bytes
                ),
            ));
        }
        let request_id = optional(&req.client_request_id);
        // A user at the limit is refused before the prompt object is written;
        // the insert counts again under the user's lock, as a concurrent call
        // may take the last slot meanwhile.
        let first_look =
            projects::limit_reached(self.store.pool(), user, request_id, self.max_projects).await?;
        if let Some(reached) = first_look {
            return Err(too_many_projects(reached));
        }
        let id = ProjectId::new();
        tracing::Span::current().record("project_id", tracing::field::display(id));
        let slug = slugify(name, 60, "project");
        let key = prompt_key(id)?;
        // The object goes first: a project row must never point at a missing prompt.
        self.blob
            .put(
                &key,
                prompt.as_bytes().to_vec(),
                "text/markdown; charset=utf-8",
            )
            .await?;
        let inserted = projects::insert_within(
            self.store.pool(),
            &NewProject {
                id,
                user_id: user,
                name,
                slug: &slug,
                prompt,
                prompt_key: &key,
                client_request_id: request_id,
                pipeline: optional(&req.pipeline).unwrap_or(projects::DEFAULT_PIPELINE),
            },
            self.max_projects,
        )
        .await;
        match inserted {
            Ok(Creation::Recorded(row, true)) => Ok(convert::project(row)),
            Ok(Creation::Recorded(row, false)) => {
                // A retried request: the first project keeps its own prompt object.
                tracing::info!(existing = %row.id, "client request id repeated; returning the first project");
                self.discard_object(&key).await;
                Ok(convert::project(row))
            }
            Ok(Creation::Refused(reached)) => {
                self.discard_object(&key).await;
                Err(too_many_projects(reached))
            }
            Err(e) => {
                self.discard_object(&key).await;
                Err(e.into())
            }
        }
    }

    /// Best effort: a leftover prompt object is harmless, so a failed delete is only logged.
    pub(crate) async fn discard_object(&self, key: &str) {
        if let Err(e) = self.blob.delete(key).await {
            tracing::warn!(key, error = %e, "could not delete an unused prompt object");
        }
    }

    async fn start_session(
        &self,
        user: UserId,
        req: StartSessionRequest,
    ) -> Result<Session, GatewayError> {
        let project_id = ProjectId::parse(&req.project_id)?;
        projects::project_for_user(self.store.pool(), user, project_id).await?;
        let active: Vec<(ModelId, String)> = models::active_models(self.store.pool())
            .await?
            .into_iter()
            .map(|m| (m.id, m.api_identifier))
            .collect();
        if req.models.len() > convert::MAX_MODELS_PER_SESSION {
            return Err(GatewayError::bad(
                "models",
                format!(
                    "{} models requested; a session takes at most {}",
                    req.models.len(),
                    convert::MAX_MODELS_PER_SESSION
                ),
            ));
        }
        let model_ids = convert::resolve_models(&req.models, &active).map_err(|name| {
            GatewayError::bad(
                "models",
                format!("unknown model {name:?}; see ListModels for the available ones"),
            )
        })?;
        let model_roles = self.model_roles(project_id, &req, &active).await?;
        let session_id = SessionId::new();
        let mut tx = self.store.begin().await?;
        let (row, created) = sessions::insert_session(
            &mut tx,
            &NewSession {
                id: session_id,
                project_id,
                user_id: user,
                model_ids: &model_ids,
                description: optional(&req.description),
                client_request_id: optional(&req.client_request_id),
                auto_advance: req.auto_advance,
                pushback: convert::pushback_of(req.pushback)?,
                model_roles: &model_roles,
            },
        )
        .await?;
        tracing::Span::current().record("session_id", tracing::field::display(row.id));
        if created {
            let stage_slug = convert::stage_to_start(&row.status).ok_or_else(|| {
                GatewayError::Internal(format!(
                    "new session has status {:?}, which names no stage to start",
                    row.status
                ))
            })?;
            let command = outbox::enqueue(
                &mut tx,
                dialectic_queue::keys::PLANNER_COMMAND,
                &dialectic_queue::start_stage_command(&row.id.to_string(), &stage_slug, 1),
                dialectic_telemetry::current_traceparent().as_deref(),
            )
            .await?;
            tx.commit().await.map_err(StoreError::from)?;
            self.courier.post([command]);
        } else {
            tx.commit().await.map_err(StoreError::from)?;
        }
        self.session_view(row, false).await
    }

    /// The request's role map, each role one the project's pipeline
    /// declares and each model registered and active (docs/models.md).
    async fn model_roles(
        &self,
        project_id: ProjectId,
        req: &StartSessionRequest,
        active: &[(ModelId, String)],
    ) -> Result<std::collections::BTreeMap<String, ModelId>, GatewayError> {
        let mut roles = std::collections::BTreeMap::new();
        if req.model_roles.is_empty() {
            return Ok(roles);
        }
        let declared =
            dialectic_store::pipelines::roles_for_new_session(self.store.pool(), project_id)
                .await?;
        dialectic_core::model_role::check_role_map(
            &declared,
            req.model_roles.keys().map(String::as_str),
        )
        .map_err(|reason| GatewayError::bad("model_roles", reason))?;
        for (role, model) in &req.model_roles {
            let id = convert::resolve_models(std::slice::from_ref(model), active)
                .ok()
                .and_then(|ids| ids.first().copied())
                .filter(|_| !model.trim().is_empty())
                .ok_or_else(|| {
                    GatewayError::bad(
                        "model_roles",
                        format!("role {role:?}: unknown model {model:?}; see ListModels for the available ones"),
                    )
                })?;
            roles.insert(role.clone(), id);
        }
        Ok(roles)
    }

    async fn list_documents(
        &self,
        user: UserId,
        req: ListStageDocumentsRequest,
    ) -> Result<ListStageDocumentsResponse, GatewayError> {
        let session_id = SessionId::parse(&req.session_id)?;
        convert::start_of(&req.page_token)?;
        let session = sessions::session_for_user(self.store.pool(), user, session_id).await?;
        let iteration = match req.iteration {
            0 => None,
            n => Some(i32::try_from(n).map_err(|_| {
                GatewayError::bad("iteration", format!("iteration {n} is out of range"))
            })?),
        };
        let stage = optional(&req.stage_slug).map(str::to_string);
        // The whole list is what is cached; a page is cut from it.
        let (page_size, start) = (req.page_size, convert::start_of(&req.page_token)?);
        let name = format!(
            "docs:{}:{}:{}",
            session.id,
            stage.as_deref().unwrap_or("*"),
            iteration.unwrap_or(0)
        );
        let whole = self
            .read_through(session.project_id, &name, || async {
                let rows = resources::session_documents(
                    self.store.pool(),
                    user,
                    session.id,
                    stage.as_deref(),
                    iteration,
                )
                .await?;
                let mut ids: Vec<ModelId> = rows.iter().filter_map(|r| r.model_id).collect();
                ids.sort_unstable();
                ids.dedup();
                let names = self.model_names(&ids).await?;
                Ok(ListStageDocumentsResponse {
                    documents: rows.iter().map(|r| convert::document(r, &names)).collect(),
                    next_page_token: String::new(),
                })
            })
            .await?;
        let (documents, next_page_token) = convert::whole_page(whole.documents, page_size, start)?;
        Ok(ListStageDocumentsResponse {
            documents,
            next_page_token,
        })
    }

    /// A cached read (after the caller's ownership was checked): the entry
    /// when Redis has it, else `load`, stored for later. Redis trouble only
    /// costs the cache, never the read.
    pub(crate) async fn read_through<M, F, Fut>(
        &self,
        project: ProjectId,
        name: &str,
        load: F,
    ) -> Result<M, GatewayError>
    where
        M: prost::Message + Default,
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<M, GatewayError>>,
    {
        let project = project.to_string();
        let cache = self.cache.get();
        let lookup = match cache {
            Some(cache) => match cache.cached(&project, name).await {
                Ok(lookup) => Some(lookup),
                Err(e) => {
                    tracing::debug!(error = %e, "read cache unavailable");
                    None
                }
            },
            None => None,
        };
        if let Some(bytes) = lookup.as_ref().and_then(|l| l.hit.as_deref())
            && let Ok(message) = M::decode(bytes)
        {
            return Ok(message);
        }
        let message = load().await?;
        if let (Some(cache), Some(lookup)) = (cache, lookup)
            && let Err(e) = cache
                .store_cached(
                    &project,
                    lookup.generation,
                    name,
                    &message.encode_to_vec(),
                    READ_CACHE_TTL_SECS,
                )
                .await
        {
            tracing::debug!(error = %e, "could not cache a read");
        }
        Ok(message)
    }

    /// Drops a project's cached reads after a change the planner will not report.
    pub(crate) async fn invalidate(&self, project: ProjectId) {
        if let Some(cache) = self.cache.get()
            && let Err(e) = cache.invalidate_project(&project.to_string()).await
        {
            tracing::warn!(error = %e, %project, "could not drop cached reads");
        }
    }

    async fn document_content(
        &self,
        user: UserId,
        req: GetDocumentContentRequest,
    ) -> Result<DocumentContent, GatewayError> {
        let id = ResourceId::parse(&req.resource_id)?;
        let row = match resources::resource_for_user(self.store.pool(), user, id).await {
            // A citation may name a contribution or a blackboard entry instead.
            Err(StoreError::NotFound { .. }) => return self.cited_content(user, id).await,
            found => found?,
        };
        let name = format!("doc:{}", row.id);
        let project = row.project_id;
        self.read_through(project, &name, || async {
            let content = self.blob.get_string(&row.key()).await?;
            let names = self.model_names(row.model_id.as_slice()).await?;
            Ok(DocumentContent {
                document: Some(convert::document(&row, &names)),
                content,
                mime_type: row.mime_type.clone(),
            })
        })
        .await
    }

    /// The rendered document `id` names (another user's is NOT_FOUND) and
    /// its first chunk, whose id is the identity its chunks and edits share.
    pub(crate) async fn document_root(
        &self,
        user: UserId,
        id: ResourceId,
    ) -> Result<(resources::ResourceRow, contributions::ContributionRow), GatewayError> {
        let resource = resources::resource_for_user(self.store.pool(), user, id).await?;
        let identity = resource.source_contribution_id.ok_or_else(|| {
            GatewayError::bad("resource_id", "this resource is not a rendered document")
        })?;
        let root = contributions::contribution(self.store.pool(), identity).await?;
        Ok((resource, root))
    }

    /// Seed 000 function 5: a user's edit is a new version of the document's
    /// chain (latest from now on) and gets re-rendered; later stages read it.
    async fn save_document_edit(
        &self,
        user: UserId,
        req: SaveDocumentEditRequest,
    ) -> Result<StageDocument, GatewayError> {
        let id = ResourceId::parse(&req.resource_id)?;
        if req.content.trim().is_empty() {
            return Err(GatewayError::bad("content", "content is empty"));
        }
        if req.content.len() > MAX_EDIT_BYTES {
            return Err(GatewayError::bad(
                "content",
                format!("an edited document may hold at most {MAX_EDIT_BYTES} bytes"),
            ));
        }
        let target = self.editable_document(user, id).await?;
        let body = self
            .edit_body(&target.resource, &target.root, &target.chain, &req.content)
            .await?;
        self.store_user_edit(user, &target, body).await
    }

    /// A stage document the user may edit: its resource, its chain's root
    /// and the chain; refused once its session is completed.
    pub(crate) async fn editable_document(
        &self,
        user: UserId,
        id: ResourceId,
    ) -> Result<EditTarget, GatewayError> {
        let (resource, root) = self.document_root(user, id).await?;
        let session = sessions::session_for_user(self.store.pool(), user, root.session_id).await?;
        if session.status == SessionStatus::COMPLETED {
            return Err(GatewayError::refused(
                Reason::SessionCompleted,
                format!("session {} is completed and read-only", session.id),
            ));
        }
        let chain = contributions::document_chain(
            self.store.pool(),
            root.session_id,
            &root.stage_slug,
            root.id,
        )
        .await?;
        Ok(EditTarget {
            resource,
            root,
            chain,
        })
    }

    /// Seed 000 function 5's write: `body` is the document's JSON as a new
    /// edit version of its chain (latest from now on), re-rendered by a
    /// RENDER job the planner inserts.
    pub(crate) async fn store_user_edit(
        &self,
        user: UserId,
        target: &EditTarget,
        body: Vec<u8>,
    ) -> Result<StageDocument, GatewayError> {
        let EditTarget {
            resource,
            root,
            chain,
        } = target;
        let identity = root.id;
        let mut context = PathContext::deconstruct(&root.raw_response_storage_path)
            .map_err(|e| GatewayError::Internal(format!("document path: {e}")))?;
        let FileKind::RawChunk { name, .. } = context.file else {
            return Err(GatewayError::Internal(
                "document root is not a chunk".into(),
            ));
        };
        let version = chain.iter().map(|c| c.edit_version).max().unwrap_or(1) + 1;
        context.file = FileKind::UserEdit {
            name,
            version: version.max(0) as u32,
        };
        let key = context
            .construct()
            .map_err(|e| GatewayError::Internal(format!("edit storage key: {e}")))?;
        let size = body.len() as i64;
        self.blob.put(&key, body, "application/json").await?;
        let (dir, file_name) = key.rsplit_once('/').unwrap_or(("", key.as_str()));
        let edit_id = ContributionId::new();
        let mut tx = self.store.begin().await?;
        // An edit of a document no model wrote (none today) names the nil model.
        let model = root.model_id.unwrap_or(ModelId::NONE);
        contributions::insert_contribution(
            &mut tx,
            &NewContribution {
                id: edit_id,
                session_id: root.session_id,
                job_id: None,
                attempt: 0,
                edit_version: version,
                user_id: user,
                model_id: model,
                model_name: root.model_name.as_deref().unwrap_or_default(),
                stage_slug: &root.stage_slug,
                iteration: root.iteration_number,
                document_key: &root.document_key,
                contribution_type: USER_EDIT,
                bucket: self.blob.bucket(),
                storage_path: dir,
                file_name,
                size_bytes: size,
                tokens_in: 0,
                tokens_out: 0,
                processing_ms: 0,
                finish_reason: "user_edit",
                target_contribution_id: Some(identity),
                document_relationships: serde_json::json!({ root.stage_slug.as_str(): identity.to_string() }),
                is_intermediate: false,
                is_incomplete: false,
            },
        )
        .await?;
        contributions::supersede_chain(
            &mut tx,
            root.session_id,
            &root.stage_slug,
            identity,
            edit_id,
        )
        .await?;
        // The planner inserts and dispatches the RENDER job (it owns job state).
        let command = outbox::enqueue(
            &mut tx,
            dialectic_queue::keys::PLANNER_COMMAND,
            &dialectic_queue::render_edit_command(&edit_id.to_string()),
            dialectic_telemetry::current_traceparent().as_deref(),
        )
        .await?;
        tx.commit().await.map_err(StoreError::from)?;
        self.courier.post([command]);
        self.invalidate(resource.project_id).await;
        let names = self.model_names(resource.model_id.as_slice()).await?;
        Ok(convert::document(resource, &names))
    }

    async fn watch(
        &self,
        user: UserId,
        req: WatchSessionRequest,
    ) -> Result<ReceiverStream<Result<SessionEvent, Status>>, GatewayError> {
        let session_id = SessionId::parse(&req.session_id)?;
        // Counted first, so a user at the cap costs no query and no subscription.
        let permit = self.watches.admit(user)?;
        self.owned_session(user, session_id).await?;
        let cache = self.cache()?;
        let sid = session_id.to_string();
        // Joining the feed before reading the snapshot means no event falls between them.
        let feed = self.watches.feed(session_id, cache.subscribe(&sid)).await?;
        // Read before the row, so every event up to it is in what the row says.
        let sequence = cache.last_sequence(&sid).await?;
        let row = self.owned_session(user, session_id).await?;
        let latest = cache.latest(&sid).await.ok().flatten();
        let cached_status = match row {
            Some(_) => None,
            None => cache.latest_status(&sid).await.ok().flatten(),
        };
        let status = snapshot_status(row.as_ref(), cached_status)?;
        let stage_slug = convert::stage_of_status(&status).unwrap_or_default();
        // The latest event only adds progress detail to a snapshot of the same status.
        let latest = latest.filter(|e| {
            e.session_status == status && (stage_slug.is_empty() || e.stage_slug == stage_slug)
        });
        // A failed session's snapshot says why, as GetSession does, and so
        // does one held up by a dead letter or whose jobs wait for a call
        // slot: no event says that.
        // Best effort: the latest event, the stage's failure, says it too.
        let notice = match &row {
            Some(row) => self.failed_stage_notice(row).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "a failed session's notice could not be read");
                None
            }),
            None => None,
        };
        let notice = match (notice, &row) {
            (Some(notice), _) => Some(notice),
            (None, Some(row)) => Some(self.dead_letter_notice(row).await).filter(|n| !n.is_empty()),
            (None, None) => None,
        };
        let notice = match notice {
            Some(notice) => Some(notice),
            None => Some(self.slot_notice(session_id).await).filter(|n| !n.is_empty()),
        };
        let snapshot = convert::event(ProgressEvent {
            session_status: status,
            stage_slug,
            stage_percent: latest.as_ref().map(|e| e.stage_percent).unwrap_or(0),
            message: notice
                .or_else(|| latest.map(|e| e.message))
                .unwrap_or_default(),
            at_ms: chrono::Utc::now().timestamp_millis(),
            sequence,
            ..ProgressEvent::new(EventKind::Snapshot, sid.clone())
        });
        let opening = watching::opening(cache, &sid, req.after_sequence, snapshot).await?;
        let (tx, rx) = mpsc::channel(64);
        let beat = self.watches.heartbeat();
        tokio::spawn(
            watching::forward(sid, opening, feed, permit, tx, self.shutdown.clone(), beat)
                .in_current_span(),
        );
        Ok(ReceiverStream::new(rx))
    }
}

/// The status a watch starts from: the session row's, or while Postgres is
/// unreachable the one its last event naming a status carried (Redis keeps
/// it: the latest event may be a job's, which names none).
fn snapshot_status(
    row: Option<&SessionRow>,
    cached: Option<String>,
) -> Result<String, GatewayError> {
    match (row, cached) {
        (Some(row), _) => Ok(row.status.clone()),
        (None, Some(status)) => Ok(status),
        (None, None) => Err(GatewayError::unavailable(
            Reason::DatabaseUnavailable,
            "the database is unreachable and no progress of this session is cached; try again shortly",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploaded_prompts_must_be_text() {
        let ok = uploaded_prompt("docs/Brief.MD", b"\xEF\xBB\xBF# Plan", 100).ok();
        assert_eq!(ok, Some(("Brief".to_string(), "# Plan".to_string())));
        assert!(uploaded_prompt("notes", b"plain", 100).is_ok());
        for (name, body) in [
            ("slides.pdf", &b"%PDF"[..]),
            ("brief.md", &[0xff, 0xfe, 0x00][..]),
            ("brief.txt", &[b'a'; 101][..]),
        ] {
            assert!(
                matches!(
                    uploaded_prompt(name, body, 100),
                    Err(GatewayError::BadField {
                        field: "prompt_file",
                        ..
                    })
                ),
                "{name} was taken"
            );
        }
    }

    #[test]
    fn prompt_key_is_at_the_project_root() {
        let id = ProjectId::new();
        assert_eq!(
            prompt_key(id).ok(),
            Some(format!("projects/{id}/initial-prompt.md"))
        );
    }
}
