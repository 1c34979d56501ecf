//! The `DialecticService` trait: one line of routing per RPC. [`Gateway::serve`]
//! gives every call the same frame (the caller, a span, the error contract);
//! the work itself lives in the inherent methods.

use super::*;
use dialectic_proto::v1::{
    CompleteSessionRequest, GetServerInfoRequest, ListQueryHistoryRequest,
    ListQueryHistoryResponse, ListSessionEventsRequest, ListSessionEventsResponse,
    ListSessionRevisionsRequest, ListSessionRevisionsResponse, OverrideClaimRequest, ServerInfo,
};
use dialectic_proto::v1::{ContractAnalysis, GetContractAnalysisRequest};
use dialectic_proto::v1::{GetUploadProgressRequest, UploadProgress};
use dialectic_runtime::error_status;
use dialectic_store::wallets;

/// The ids a request names, recorded on its span so a trace or log line of
/// the call can be found by session, project or document.
pub(crate) trait Names {
    /// Calls that continue a session's trace (its stage runs join it).
    const JOINS_SESSION_TRACE: bool = false;
    /// Calls a Postgres outage need not cut: authenticated from the key's
    /// last-known owner while Postgres is down (`WatchSession` only).
    const OUTLASTS_POSTGRES: bool = false;

    fn named_ids(&self) -> Vec<(&'static str, &str)> {
        Vec::new()
    }
}

macro_rules! names {
    ($field:ident: $($request:ty),+ $(,)?) => {$(
        impl Names for $request {
            fn named_ids(&self) -> Vec<(&'static str, &str)> {
                vec![(stringify!($field), self.$field.as_str())]
            }
        }
    )+};
}

names!(session_id: GetSessionRequest, GetBlackboardRequest, ListStageDocumentsRequest,
    PauseSessionRequest, CancelSessionRequest, CompleteSessionRequest, RevisitStageRequest, RegenerateDocumentRequest,
    ListSessionRevisionsRequest, ListSessionEventsRequest);

/// A progress stream rides out a Postgres failover (see `last_known`).
impl Names for WatchSessionRequest {
    const OUTLASTS_POSTGRES: bool = true;
    fn named_ids(&self) -> Vec<(&'static str, &str)> {
        vec![("session_id", self.session_id.as_str())]
    }
}
names!(project_id: GetProjectRequest, StartSessionRequest, DeleteProjectRequest,
    ListSessionsRequest, AddProjectDocumentRequest, GetUploadProgressRequest, QueryRequest, ListProjectDocumentsRequest,
    ListQueryHistoryRequest,
    ExportProjectRequest);
names!(resource_id: GetDocumentContentRequest, SaveDocumentEditRequest, OverrideClaimRequest);

impl Names for SubmitStageResponsesRequest {
    const JOINS_SESSION_TRACE: bool = true;
    fn named_ids(&self) -> Vec<(&'static str, &str)> {
        vec![("session_id", self.session_id.as_str())]
    }
}

/// A retry runs the stage's jobs again: their work joins the session's trace.
impl Names for RetryStageRequest {
    const JOINS_SESSION_TRACE: bool = true;
    fn named_ids(&self) -> Vec<(&'static str, &str)> {
        vec![("session_id", self.session_id.as_str())]
    }
}

impl Names for ResumeSessionRequest {
    const JOINS_SESSION_TRACE: bool = true;
    fn named_ids(&self) -> Vec<(&'static str, &str)> {
        vec![("session_id", self.session_id.as_str())]
    }
}

/// Names the project or the session, whichever it reads.
impl Names for GetContractAnalysisRequest {
    fn named_ids(&self) -> Vec<(&'static str, &str)> {
        [
            ("project_id", &self.project_id),
            ("session_id", &self.session_id),
        ]
        .into_iter()
        .filter(|(_, id)| !id.is_empty())
        .map(|(field, id)| (field, id.as_str()))
        .collect()
    }
}

impl Names for CreateProjectRequest {}
impl Names for CreditWalletRequest {}
impl Names for GetWalletRequest {}
impl Names for GetServerInfoRequest {}
impl Names for ListModelsRequest {}
impl Names for ListProjectsRequest {}
impl Names for ListWalletTransactionsRequest {}
impl Names for ListRecipesRequest {}
impl Names for ListPipelinesRequest {}
impl Names for InstallPipelineRequest {}
impl Names for GetStageRecipeRequest {}
impl Names for EditStageRecipeRequest {}

impl Gateway {
    /// Every RPC's frame: the caller from its API key, a span named for the
    /// RPC carrying the ids the request names, the work inside that span, and
    /// its error as a status with the error contract's details.
    async fn serve<Req, Resp, Work, Fut>(
        &self,
        rpc: &'static str,
        request: Request<Req>,
        work: Work,
    ) -> Result<Response<Resp>, Status>
    where
        Req: Names,
        Work: FnOnce(UserId, Req) -> Fut,
        Fut: Future<Output = Result<Resp, GatewayError>>,
    {
        let request_id = request_id(request.metadata());
        match self.in_span(rpc, &request_id, request, work).await {
            Ok(answer) => {
                let mut response = Response::new(answer);
                error_status::stamp_request_id(response.metadata_mut(), &request_id);
                Ok(response)
            }
            Err(status) => Err(failed_call(rpc, &request_id, status)),
        }
    }

    /// The call's work, inside a span named for the RPC that carries the
    /// request id and the ids the request names.
    async fn in_span<Req, Resp, Work, Fut>(
        &self,
        rpc: &'static str,
        request_id: &str,
        request: Request<Req>,
        work: Work,
    ) -> Result<Resp, Status>
    where
        Req: Names,
        Work: FnOnce(UserId, Req) -> Fut,
        Fut: Future<Output = Result<Resp, GatewayError>>,
    {
        let user = self
            .caller(request.metadata(), Req::OUTLASTS_POSTGRES)
            .await?;
        let req = request.into_inner();
        let span = tracing::info_span!(
            "rpc",
            otel.name = rpc,
            rpc.method = rpc,
            request_id,
            user_id = %user,
            project_id = tracing::field::Empty,
            session_id = tracing::field::Empty,
            resource_id = tracing::field::Empty,
        );
        let mut session = None;
        for (field, value) in req.named_ids() {
            span.record(field, value);
            if field == "session_id" {
                session = Some(value.to_string());
            }
        }
        if let Some(session) = session.filter(|_| Req::JOINS_SESSION_TRACE) {
            self.continue_trace(&session, &span).await;
        }
        work(user, req).instrument(span).await.map_err(Status::from)
    }

    async fn project_view(&self, user: UserId, id: &str) -> Result<Project, GatewayError> {
        let row =
            projects::project_for_user(self.store.pool(), user, ProjectId::parse(id)?).await?;
        Ok(convert::project(row))
    }

    async fn session_of(&self, user: UserId, id: &str) -> Result<Session, GatewayError> {
        let row =
            sessions::session_for_user(self.store.pool(), user, SessionId::parse(id)?).await?;
        tracing::Span::current().record("project_id", tracing::field::display(row.project_id));
        self.session_view(row, true).await
    }

    async fn blackboard(
        &self,
        user: UserId,
        req: GetBlackboardRequest,
    ) -> Result<GetBlackboardResponse, GatewayError> {
        let id = SessionId::parse(&req.session_id)?;
        sessions::session_for_user(self.store.pool(), user, id).await?;
        let wanted = Some(req.entry_type.trim()).filter(|t| !t.is_empty());
        let entries = blackboard::entries(&self.store, self.cache.get(), id, wanted).await?;
        Ok(GetBlackboardResponse {
            entries: entries.into_iter().map(convert::board_entry).collect(),
        })
    }

    async fn wallet_view(&self, user: UserId, history: u32) -> Result<Wallet, GatewayError> {
        let history = match history {
            0 => 20,
            n => n.min(200),
        };
        let wallet = wallets::wallet_balance(self.store.pool(), None, Some(user)).await?;
        let rows =
            ledger::transactions(self.store.pool(), wallet.id, i64::from(history), None).await?;
        Ok(Wallet {
            wallet_id: wallet.id.to_string(),
            total: wallet.balance,
            held: wallet.held,
            available: wallet.balance - wallet.held,
            history: rows.into_iter().map(crate::catalog::transaction).collect(),
        })
    }

    async fn start_traced_session(
        &self,
        user: UserId,
        req: StartSessionRequest,
    ) -> Result<Session, GatewayError> {
        let session = Gateway::start_session(self, user, req).await?;
        self.remember_trace(&session.id, &tracing::Span::current())
            .await;
        Ok(session)
    }

    async fn models(&self, req: ListModelsRequest) -> Result<ListModelsResponse, GatewayError> {
        let start = convert::start_of(&req.page_token)?;
        let rows = models::active_models(self.store.pool()).await?;
        let (rows, next_page_token) = convert::whole_page(rows, req.page_size, start)?;
        Ok(ListModelsResponse {
            models: rows.iter().map(convert::model).collect(),
            next_page_token,
        })
    }
}

/// The id a call is known by: the client's `x-request-id` when it is a
/// plain token (1 to 128 of `A-Z a-z 0-9 . _ : -`, so it cannot forge a log
/// line), else a new UUIDv7.
fn request_id(metadata: &tonic::metadata::MetadataMap) -> String {
    let offered = metadata.get(error_status::REQUEST_ID);
    error_status::request_id_or_new(offered.and_then(|value| value.to_str().ok()))
}

/// A failed call's one log line (the id a user quotes finds it) and the
/// status its caller receives.
fn failed_call(rpc: &'static str, request_id: &str, status: Status) -> Status {
    let reason = error_status::reason(&status).unwrap_or_default();
    tracing::info!(
        rpc,
        request_id,
        code = ?status.code(),
        reason,
        detail = status.message(),
        "call failed"
    );
    error_status::for_caller(status, request_id)
}

/// The trait's methods, one per RPC: `name(Request) -> Response: |gateway,
/// caller, request| work`, each served through [`Gateway::serve`].
macro_rules! dialectic_service {
    ($($rpc:ident($request:ty) -> $response:ty: |$gw:ident, $user:pat_param, $req:pat_param| $work:expr;)+) => {
        #[tonic::async_trait]
        impl DialecticService for Gateway {
            type ExportProjectStream = ReceiverStream<Result<ExportChunk, Status>>;
            type WatchSessionStream = ReceiverStream<Result<SessionEvent, Status>>;
            $(
                async fn $rpc(
                    &self,
                    request: Request<$request>,
                ) -> Result<Response<$response>, Status> {
                    let $gw = self;
                    self.serve(stringify!($rpc), request, |$user, $req| $work).await
                }
            )+
        }
    };
}

dialectic_service! {
    create_project(CreateProjectRequest) -> Project: |gw, user, req| Gateway::create_project(gw, user, req);
    get_project(GetProjectRequest) -> Project: |gw, user, req| async move { gw.project_view(user, &req.project_id).await };
    start_session(StartSessionRequest) -> Session: |gw, user, req| gw.start_traced_session(user, req);
    submit_stage_responses(SubmitStageResponsesRequest) -> Session: |gw, user, req| gw.once(user, "submit_stage_responses", req, move |req| Gateway::submit_stage_responses(gw, user, req));
    pause_session(PauseSessionRequest) -> Session: |gw, user, req| gw.once(user, "pause_session", req, move |req| async move { gw.session_command(user, &req.session_id, Command::Pause).await });
    resume_session(ResumeSessionRequest) -> Session: |gw, user, req| gw.once(user, "resume_session", req, move |req| async move { gw.session_command(user, &req.session_id, Command::Resume).await });
    // Cancel abandons the session (the planner applies it): claims refuse its
    // jobs, so only what already runs finishes; watchers' streams end.
    cancel_session(CancelSessionRequest) -> Session: |gw, user, req| gw.once(user, "cancel_session", req, move |req| async move { gw.session_command(user, &req.session_id, Command::Cancel).await });
    complete_session(CompleteSessionRequest) -> Session: |gw, user, req| gw.once(user, "complete_session", req, move |req| async move { gw.session_command(user, &req.session_id, Command::Complete).await });
    get_session(GetSessionRequest) -> Session: |gw, user, req| async move { gw.session_of(user, &req.session_id).await };
    get_blackboard(GetBlackboardRequest) -> GetBlackboardResponse: |gw, user, req| gw.blackboard(user, req);
    list_stage_documents(ListStageDocumentsRequest) -> ListStageDocumentsResponse: |gw, user, req| gw.list_documents(user, req);
    get_document_content(GetDocumentContentRequest) -> DocumentContent: |gw, user, req| gw.document_content(user, req);
    get_document_chunks(GetDocumentContentRequest) -> DocumentChunks: |gw, user, req| async move { gw.document_chunks(user, &req.resource_id).await };
    save_document_edit(SaveDocumentEditRequest) -> StageDocument: |gw, user, req| gw.once(user, "save_document_edit", req, move |req| Gateway::save_document_edit(gw, user, req));
    override_claim(OverrideClaimRequest) -> StageDocument: |gw, user, req| gw.once(user, "override_claim", req, move |req| Gateway::override_claim(gw, user, req));
    credit_wallet(CreditWalletRequest) -> WalletTransaction: |gw, admin, req| gw.credit_as_admin(admin, req);
    get_wallet(GetWalletRequest) -> Wallet: |gw, user, req| gw.wallet_view(user, req.history);
    list_models(ListModelsRequest) -> ListModelsResponse: |gw, _, req| gw.models(req);
    list_projects(ListProjectsRequest) -> ListProjectsResponse: |gw, user, req| Gateway::list_projects(gw, user, req);
    delete_project(DeleteProjectRequest) -> DeleteProjectResponse: |gw, user, req| gw.once(user, "delete_project", req, move |req| async move { Gateway::delete_project(gw, user, &req.project_id).await });
    list_sessions(ListSessionsRequest) -> ListSessionsResponse: |gw, user, req| Gateway::list_sessions(gw, user, req);
    list_wallet_transactions(ListWalletTransactionsRequest) -> ListWalletTransactionsResponse: |gw, user, req| Gateway::list_wallet_transactions(gw, user, req);
    list_recipes(ListRecipesRequest) -> ListRecipesResponse: |gw, _, req| Gateway::list_recipes(gw, req);
    get_stage_recipe(GetStageRecipeRequest) -> StageRecipe: |gw, _, req| async move { gw.stage_recipe(&req.stage_slug).await };
    edit_stage_recipe(EditStageRecipeRequest) -> StageRecipe: |gw, user, req| gw.once(user, "edit_stage_recipe", req, move |req| Gateway::edit_stage_recipe(gw, user, req));
    list_pipelines(ListPipelinesRequest) -> ListPipelinesResponse: |gw, _, req| Gateway::list_pipelines(gw, req);
    install_pipeline(InstallPipelineRequest) -> InstallPipelineResponse: |gw, user, req| gw.once(user, "install_pipeline", req, move |req| async move { Gateway::install_pipeline(gw, user, &req.content, req.validate_only).await });
    add_project_document(AddProjectDocumentRequest) -> ProjectDocument: |gw, user, req| Gateway::add_project_document(gw, user, req);
    list_project_documents(ListProjectDocumentsRequest) -> ListProjectDocumentsResponse: |gw, user, req| Gateway::list_project_documents(gw, user, req);
    get_upload_progress(GetUploadProgressRequest) -> UploadProgress: |gw, user, req| Gateway::upload_progress(gw, user, req);
    // The question stays out of the span (only project_id is recorded): it may be confidential.
    query(QueryRequest) -> QueryResponse: |gw, user, req| Gateway::query(gw, user, req);
    list_query_history(ListQueryHistoryRequest) -> ListQueryHistoryResponse: |gw, user, req| Gateway::list_query_history(gw, user, req);
    get_contract_analysis(GetContractAnalysisRequest) -> ContractAnalysis: |gw, user, req| Gateway::get_contract_analysis(gw, user, req);
    revisit_stage(RevisitStageRequest) -> RevisitStageResponse: |gw, user, req| gw.once(user, "revisit_stage", req, move |req| Gateway::revisit_stage(gw, user, req));
    list_session_revisions(ListSessionRevisionsRequest) -> ListSessionRevisionsResponse: |gw, user, req| Gateway::session_revisions(gw, user, req);
    regenerate_document(RegenerateDocumentRequest) -> RegenerateDocumentResponse: |gw, user, req| Gateway::regenerate_document(gw, user, req);
    retry_stage(RetryStageRequest) -> RetryStageResponse: |gw, user, req| gw.once(user, "retry_stage", req, move |req| Gateway::retry_stage(gw, user, req));
    export_project(ExportProjectRequest) -> Self::ExportProjectStream: |gw, user, req| async move { gw.export_stream(user, &req.project_id).await };
    get_export_url(ExportProjectRequest) -> ExportUrl: |gw, user, req| async move { gw.export_url(user, &req.project_id).await };
    watch_session(WatchSessionRequest) -> Self::WatchSessionStream: |gw, user, req| gw.watch(user, req);
    list_session_events(ListSessionEventsRequest) -> ListSessionEventsResponse: |gw, user, req| gw.list_session_events(user, req);
    get_server_info(GetServerInfoRequest) -> ServerInfo: |gw, _, _| async move { Ok(gw.server_info.clone()) };
}
