//! Hostile input at the public API: every RPC of `dialectic.v1.DialecticService`
//! is called with missing fields, malformed ids, unknown ids and oversized
//! messages; each answers with a clear code and a reason, and nothing is
//! written. A provider key echoed back by a hostile provider, a guessed API
//! key and the bootstrap key never reach a log line, an error, a row or an object.

use dialectic_e2e::{TestEnv, eventually};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, CancelSessionRequest, CompleteSessionRequest, CreateProjectRequest,
    CreditWalletRequest, DeleteProjectRequest, EditStageRecipeRequest, ExportProjectRequest,
    GetBlackboardRequest, GetContractAnalysisRequest, GetDocumentContentRequest, GetProjectRequest,
    GetServerInfoRequest, GetSessionRequest, GetStageRecipeRequest, GetUploadProgressRequest,
    GetWalletRequest, InstallPipelineRequest, ListModelsRequest, ListPipelinesRequest,
    ListProjectDocumentsRequest, ListProjectsRequest, ListQueryHistoryRequest, ListRecipesRequest,
    ListSessionEventsRequest, ListSessionRevisionsRequest, ListSessionsRequest,
    ListStageDocumentsRequest, ListWalletTransactionsRequest, OverrideClaimRequest,
    PauseSessionRequest, QueryRequest, RecipeEdge, RegenerateDocumentRequest, ResumeSessionRequest,
    RetryStageRequest, RevisitStageRequest, SaveDocumentEditRequest, StageResponse,
    StartSessionRequest, SubmitStageResponsesRequest, WatchSessionRequest,
};
use dialectic_runtime::error_status::{self, StatusExt};
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tonic::Code;

/// Every log line of this test binary, at debug level, so the secret check
/// reads what an operator's log pipeline would receive.
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "debug,sqlx=warn,lapin=warn,h2=warn,hyper=warn,hyper_util=warn,tower=warn,\
                 aws_smithy_runtime=warn,aws_sdk_s3=warn,aws_config=warn,rustls=warn,reqwest=warn",
            ))
            .with_ansi(false)
            .with_writer(move || LogSink(sink.clone()))
            .try_init();
        logs
    })
    .clone()
}

struct LogSink(Arc<Mutex<Vec<u8>>>);

impl Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut logs) = self.0.lock() {
            logs.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Row counts of every table: "nothing written" means none of them moved.
async fn row_counts(env: &TestEnv) -> BTreeMap<String, i64> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
           AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(env.store.pool())
    .await
    .expect("tables");
    let mut counts = BTreeMap::new();
    for table in tables {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM \"{table}\""))
            .fetch_one(env.store.pool())
            .await
            .expect("count");
        counts.insert(table, n);
    }
    counts
}

/// The methods the public service declares, from the compiled descriptors, so
/// an RPC added later without a case here fails this test.
fn declared_methods() -> BTreeSet<String> {
    let set = prost_types::FileDescriptorSet::decode(dialectic_proto::FILE_DESCRIPTOR_SET)
        .expect("descriptor set");
    set.file
        .iter()
        .filter(|f| f.package() == "dialectic.v1")
        .flat_map(|f| f.service.iter())
        .filter(|s| s.name() == "DialecticService")
        .flat_map(|s| s.method.iter().map(|m| m.name().to_string()))
        .collect()
}

type Outcome = Result<(), tonic::Status>;

fn done<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Outcome {
    result.map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_rpc_refuses_bad_input_clearly_and_writes_nothing() {
    let _ = captured_logs();
    let mut env = TestEnv::new().await;
    // Small limits so an oversized message is cheap to send.
    env.settings.gateway.max_prompt_bytes = 16 * 1024;
    env.settings.gateway.max_message_bytes = 64 * 1024;
    env.start_all().await;
    let mut client = env.gateway().await;
    let before = row_counts(&env).await;

    let unknown = uuid::Uuid::now_v7().to_string();
    let malformed = "../../etc/passwd".to_string();
    let huge = "x".repeat(100 * 1024);
    let start = |project_id: &str, models: Vec<String>| StartSessionRequest {
        project_id: project_id.to_string(),
        models,
        description: String::new(),
        client_request_id: String::new(),
        auto_advance: false,
        ..Default::default()
    };
    let session_id = |id: &str| GetSessionRequest {
        session_id: id.to_string(),
    };

    let mut cases: Vec<(&str, &str, Code, Outcome)> = Vec::new();
    macro_rules! case {
        ($method:literal, $what:literal, $code:expr, $call:expr) => {
            cases.push(($method, $what, $code, done($call.await)));
        };
    }
    case!(
        "CreateProject",
        "empty request",
        Code::InvalidArgument,
        client.create_project(CreateProjectRequest::default())
    );
    case!(
        "CreateProject",
        "prompt over max_prompt_bytes",
        Code::InvalidArgument,
        client.create_project(CreateProjectRequest {
            name: "Big".into(),
            initial_user_prompt: "y".repeat(20 * 1024),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: String::new(),
        })
    );
    case!(
        "CreateProject",
        "message over max_message_bytes",
        Code::ResourceExhausted,
        client.create_project(CreateProjectRequest {
            name: "Huge".into(),
            initial_user_prompt: huge.clone(),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: String::new(),
        })
    );
    case!(
        "CreateProject",
        "control characters only",
        Code::InvalidArgument,
        client.create_project(CreateProjectRequest {
            name: "\u{0}\u{7}".into(),
            initial_user_prompt: "\n\t ".into(),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: String::new(),
        })
    );
    for (what, id, code) in [
        ("missing id", String::new(), Code::InvalidArgument),
        ("malformed id", malformed.clone(), Code::InvalidArgument),
        ("unknown id", unknown.clone(), Code::NotFound),
    ] {
        cases.push((
            "GetProject",
            what,
            code,
            done(
                client
                    .get_project(GetProjectRequest {
                        project_id: id.clone(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "StartSession",
            what,
            code,
            done(
                client
                    .start_session(start(&id, vec!["simulated".into()]))
                    .await,
            ),
        ));
        cases.push((
            "GetSession",
            what,
            code,
            done(client.get_session(session_id(&id)).await),
        ));
        cases.push((
            "ListSessionRevisions",
            what,
            code,
            done(
                client
                    .list_session_revisions(ListSessionRevisionsRequest {
                        session_id: id.clone(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "PauseSession",
            what,
            code,
            done(
                client
                    .pause_session(PauseSessionRequest {
                        session_id: id.clone(),
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "ResumeSession",
            what,
            code,
            done(
                client
                    .resume_session(ResumeSessionRequest {
                        session_id: id.clone(),
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "SubmitStageResponses",
            what,
            code,
            done(
                client
                    .submit_stage_responses(SubmitStageResponsesRequest {
                        session_id: id.clone(),
                        stage_slug: "thesis".into(),
                        responses: vec![],
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "ListStageDocuments",
            what,
            code,
            done(
                client
                    .list_stage_documents(ListStageDocumentsRequest {
                        session_id: id.clone(),
                        stage_slug: String::new(),
                        iteration: 0,
                        ..Default::default()
                    })
                    .await,
            ),
        ));
        cases.push((
            "GetDocumentContent",
            what,
            code,
            done(
                client
                    .get_document_content(GetDocumentContentRequest {
                        resource_id: id.clone(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "SaveDocumentEdit",
            what,
            code,
            done(
                client
                    .save_document_edit(SaveDocumentEditRequest {
                        resource_id: id.clone(),
                        content: "edited".into(),
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "OverrideClaim",
            what,
            code,
            done(
                client
                    .override_claim(OverrideClaimRequest {
                        resource_id: id.clone(),
                        claim: 1,
                        rationale: "I checked it myself".into(),
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "GetDocumentChunks",
            what,
            code,
            done(
                client
                    .get_document_chunks(GetDocumentContentRequest {
                        resource_id: id.clone(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "DeleteProject",
            what,
            code,
            done(
                client
                    .delete_project(DeleteProjectRequest {
                        project_id: id.clone(),
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "AddProjectDocument",
            what,
            code,
            done(
                client
                    .add_project_document(AddProjectDocumentRequest {
                        project_id: id.clone(),
                        file_name: "brief.md".into(),
                        content: b"A brief.".to_vec(),
                        client_request_id: String::new(),
                        ..Default::default()
                    })
                    .await,
            ),
        ));
        cases.push((
            "ListProjectDocuments",
            what,
            code,
            done(
                client
                    .list_project_documents(ListProjectDocumentsRequest {
                        project_id: id.clone(),
                        ..Default::default()
                    })
                    .await,
            ),
        ));
        cases.push((
            "GetUploadProgress",
            what,
            code,
            done(
                client
                    .get_upload_progress(GetUploadProgressRequest {
                        project_id: id.clone(),
                        client_request_id: "upload-1".into(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "ListSessions",
            what,
            code,
            done(
                client
                    .list_sessions(ListSessionsRequest {
                        project_id: id.clone(),
                        page_size: 10,
                        page_token: String::new(),
                        ..Default::default()
                    })
                    .await,
            ),
        ));
        cases.push((
            "GetContractAnalysis",
            what,
            code,
            done(
                client
                    .get_contract_analysis(GetContractAnalysisRequest {
                        project_id: id.clone(),
                        ..Default::default()
                    })
                    .await,
            ),
        ));
        cases.push((
            "ListQueryHistory",
            what,
            code,
            done(
                client
                    .list_query_history(ListQueryHistoryRequest {
                        project_id: id.clone(),
                        page_size: 10,
                        page_token: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "ExportProject",
            what,
            code,
            done(
                client
                    .export_project(ExportProjectRequest {
                        project_id: id.clone(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "GetExportUrl",
            what,
            code,
            done(
                client
                    .get_export_url(ExportProjectRequest {
                        project_id: id.clone(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "CancelSession",
            what,
            code,
            done(
                client
                    .cancel_session(CancelSessionRequest {
                        session_id: id.clone(),
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "CompleteSession",
            what,
            code,
            done(
                client
                    .complete_session(CompleteSessionRequest {
                        session_id: id.clone(),
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "RevisitStage",
            what,
            code,
            done(
                client
                    .revisit_stage(RevisitStageRequest {
                        session_id: id.clone(),
                        stage_slug: "thesis".into(),
                        impact: "major".into(),
                        reason: "hostile".into(),
                        impact_level: 0,
                        dry_run: false,
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "RetryStage",
            what,
            code,
            done(
                client
                    .retry_stage(RetryStageRequest {
                        session_id: id.clone(),
                        stage_slug: String::new(),
                        model: "simulated".into(),
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "RegenerateDocument",
            what,
            code,
            done(
                client
                    .regenerate_document(RegenerateDocumentRequest {
                        session_id: id.clone(),
                        stage_slug: "thesis".into(),
                        model: "simulated".into(),
                        document_key: "business_case".into(),
                        resource_id: String::new(),
                        client_request_id: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "WatchSession",
            what,
            code,
            done(
                client
                    .watch_session(WatchSessionRequest {
                        session_id: id.clone(),
                        after_sequence: Some(0),
                    })
                    .await,
            ),
        ));
        cases.push((
            "ListSessionEvents",
            what,
            code,
            done(
                client
                    .list_session_events(ListSessionEventsRequest {
                        session_id: id.clone(),
                        page_size: 10,
                        page_token: String::new(),
                    })
                    .await,
            ),
        ));
        cases.push((
            "GetBlackboard",
            what,
            code,
            done(
                client
                    .get_blackboard(GetBlackboardRequest {
                        session_id: id.clone(),
                        entry_type: String::new(),
                    })
                    .await,
            ),
        ));
    }
    let regenerate = |document_key: &str, model: &str, request: String| RegenerateDocumentRequest {
        session_id: unknown.clone(),
        stage_slug: "thesis".into(),
        model: model.to_string(),
        document_key: document_key.to_string(),
        resource_id: String::new(),
        client_request_id: request,
    };
    case!(
        "RegenerateDocument",
        "no document key",
        Code::InvalidArgument,
        client.regenerate_document(regenerate(" ", "simulated", String::new()))
    );
    case!(
        "RegenerateDocument",
        "no model",
        Code::InvalidArgument,
        client.regenerate_document(regenerate("business_case", "", String::new()))
    );
    case!(
        "RegenerateDocument",
        "client_request_id over 200 bytes",
        Code::InvalidArgument,
        client.regenerate_document(regenerate("business_case", "simulated", "r".repeat(201)))
    );
    case!(
        "RegenerateDocument",
        "malformed resource id",
        Code::InvalidArgument,
        client.regenerate_document(RegenerateDocumentRequest {
            resource_id: malformed.clone(),
            ..regenerate("business_case", "simulated", String::new())
        })
    );
    case!(
        "SaveDocumentEdit",
        "message over max_message_bytes",
        Code::ResourceExhausted,
        client.save_document_edit(SaveDocumentEditRequest {
            resource_id: unknown.clone(),
            content: huge.clone(),
            client_request_id: String::new(),
        })
    );
    case!(
        "SubmitStageResponses",
        "message over max_message_bytes",
        Code::ResourceExhausted,
        client.submit_stage_responses(SubmitStageResponsesRequest {
            session_id: unknown.clone(),
            stage_slug: "thesis".into(),
            responses: vec![StageResponse {
                resource_id: String::new(),
                document_key: "business_case".into(),
                feedback: huge.clone(),
            }],
            client_request_id: String::new(),
        })
    );

    case!(
        "ListProjects",
        "forged page token",
        Code::InvalidArgument,
        client.list_projects(ListProjectsRequest {
            page_size: 10,
            page_token: "not-a-token".into(),
            ..Default::default()
        })
    );
    case!(
        "ListProjects",
        "malformed filter",
        Code::InvalidArgument,
        client.list_projects(ListProjectsRequest {
            filter: "name = \"unclosed".into(),
            ..Default::default()
        })
    );
    case!(
        "ListProjects",
        "filter on a field it has not",
        Code::InvalidArgument,
        client.list_projects(ListProjectsRequest {
            filter: "state = RUNNING".into(),
            ..Default::default()
        })
    );
    case!(
        "ListProjects",
        "unknown order_by",
        Code::InvalidArgument,
        client.list_projects(ListProjectsRequest {
            order_by: "size desc; DROP TABLE dialectic_projects".into(),
            ..Default::default()
        })
    );
    case!(
        "ListProjects",
        "a token of another order",
        Code::InvalidArgument,
        client.list_projects(ListProjectsRequest {
            order_by: "name".into(),
            page_token: format!("1763900000000000.{unknown}"),
            ..Default::default()
        })
    );
    case!(
        "ListSessions",
        "unknown state in the filter",
        Code::InvalidArgument,
        client.list_sessions(ListSessionsRequest {
            project_id: unknown.clone(),
            filter: "state = SLEEPING".into(),
            ..Default::default()
        })
    );
    case!(
        "ListSessions",
        "order by name (sessions have none)",
        Code::InvalidArgument,
        client.list_sessions(ListSessionsRequest {
            project_id: unknown.clone(),
            order_by: "name".into(),
            ..Default::default()
        })
    );
    case!(
        "ListModels",
        "forged page token",
        Code::InvalidArgument,
        client.list_models(ListModelsRequest {
            page_token: "o-1".into(),
            ..Default::default()
        })
    );
    case!(
        "ListModels",
        "page token past the end",
        Code::InvalidArgument,
        client.list_models(ListModelsRequest {
            page_token: "o99999".into(),
            ..Default::default()
        })
    );
    case!(
        "ListPipelines",
        "forged page token",
        Code::InvalidArgument,
        client.list_pipelines(ListPipelinesRequest {
            page_token: "\u{0}garbage".into(),
            ..Default::default()
        })
    );
    case!(
        "ListRecipes",
        "forged page token",
        Code::InvalidArgument,
        client.list_recipes(ListRecipesRequest {
            page_size: u32::MAX,
            page_token: "o".into(),
        })
    );
    case!(
        "ListStageDocuments",
        "forged page token",
        Code::InvalidArgument,
        client.list_stage_documents(ListStageDocumentsRequest {
            session_id: unknown.clone(),
            page_token: "not-a-token".into(),
            ..Default::default()
        })
    );
    case!(
        "GetUploadProgress",
        "missing client_request_id",
        Code::InvalidArgument,
        client.get_upload_progress(GetUploadProgressRequest {
            project_id: unknown.clone(),
            client_request_id: " ".into(),
        })
    );
    case!(
        "ListProjectDocuments",
        "forged page token",
        Code::InvalidArgument,
        client.list_project_documents(ListProjectDocumentsRequest {
            project_id: unknown.clone(),
            page_token: "o0".into(),
            ..Default::default()
        })
    );
    case!(
        "ListWalletTransactions",
        "forged page token",
        Code::InvalidArgument,
        client.list_wallet_transactions(ListWalletTransactionsRequest {
            page_size: u32::MAX,
            page_token: "\u{0}garbage".into(),
        })
    );
    case!(
        "ListRecipes",
        "empty request",
        Code::Ok,
        client.list_recipes(ListRecipesRequest::default())
    );
    case!(
        "GetStageRecipe",
        "missing stage",
        Code::InvalidArgument,
        client.get_stage_recipe(GetStageRecipeRequest::default())
    );
    case!(
        "GetStageRecipe",
        "unknown stage",
        Code::NotFound,
        client.get_stage_recipe(GetStageRecipeRequest {
            stage_slug: "no-such-stage".into(),
        })
    );
    case!(
        "EditStageRecipe",
        "missing stage",
        Code::InvalidArgument,
        client.edit_stage_recipe(EditStageRecipeRequest::default())
    );
    case!(
        "EditStageRecipe",
        "unknown stage",
        Code::NotFound,
        client.edit_stage_recipe(EditStageRecipeRequest {
            stage_slug: "no-such-stage".into(),
            skip: vec!["x".into()],
            ..Default::default()
        })
    );
    case!(
        "EditStageRecipe",
        "edge between unknown steps",
        Code::InvalidArgument,
        client.edit_stage_recipe(EditStageRecipeRequest {
            stage_slug: "thesis".into(),
            add_edges: vec![RecipeEdge {
                from_step_key: "nope".into(),
                to_step_key: "also-nope".into(),
            }],
            ..Default::default()
        })
    );

    // Cases that need a real project: unknown models, no models, an unknown stage.
    let project = client
        .create_project(CreateProjectRequest {
            name: "Target".into(),
            initial_user_prompt: "A tool library.".into(),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: String::new(),
        })
        .await
        .expect("a valid project is created")
        .into_inner();
    let after_project = row_counts(&env).await;
    case!(
        "StartSession",
        "unknown model",
        Code::InvalidArgument,
        client.start_session(start(&project.id, vec!["no-such-model".into()]))
    );
    case!(
        "StartSession",
        "a thousand models",
        Code::InvalidArgument,
        client.start_session(start(&project.id, vec!["simulated".into(); 1000]))
    );
    let question = |project_id: &str, text: String| QueryRequest {
        project_id: project_id.into(),
        text,
        model: String::new(),
        client_request_id: String::new(),
    };
    case!(
        "Query",
        "malformed project id",
        Code::InvalidArgument,
        client.query(question("nope", "When is the rent due?".into()))
    );
    case!(
        "Query",
        "an empty question",
        Code::InvalidArgument,
        client.query(question(&project.id, " \n ".into()))
    );
    case!(
        "Query",
        "a question over 4,000 characters",
        Code::InvalidArgument,
        client.query(question(&project.id, "why ".repeat(1_001)))
    );
    case!(
        "ListQueryHistory",
        "a page token no list call returned",
        Code::InvalidArgument,
        client.list_query_history(ListQueryHistoryRequest {
            project_id: project.id.clone(),
            page_size: 10,
            page_token: "not-a-token".into(),
        })
    );
    case!(
        "GetContractAnalysis",
        "both a project and a session",
        Code::InvalidArgument,
        client.get_contract_analysis(GetContractAnalysisRequest {
            project_id: project.id.clone(),
            session_id: unknown.clone(),
            section: String::new(),
        })
    );
    case!(
        "GetContractAnalysis",
        "a section over 64 characters",
        Code::InvalidArgument,
        client.get_contract_analysis(GetContractAnalysisRequest {
            project_id: project.id.clone(),
            session_id: String::new(),
            section: "7.".repeat(40),
        })
    );
    // Checked before the session is looked up: a forged token is refused
    // whoever's session it names.
    case!(
        "ListSessionEvents",
        "a page token no list call returned",
        Code::InvalidArgument,
        client.list_session_events(ListSessionEventsRequest {
            session_id: unknown.clone(),
            page_size: 10,
            page_token: "not-a-token".into(),
        })
    );
    // Calls that take no ids still answer.
    case!(
        "ListPipelines",
        "empty request",
        Code::Ok,
        client.list_pipelines(ListPipelinesRequest::default())
    );
    case!(
        "InstallPipeline",
        "empty file",
        Code::InvalidArgument,
        client.install_pipeline(InstallPipelineRequest::default())
    );
    case!(
        "InstallPipeline",
        "a stage slug of another pipeline",
        Code::InvalidArgument,
        client.install_pipeline(InstallPipelineRequest {
            content: include_str!("../pipelines/notes.toml").replace("\"draft\"", "\"thesis\""),
            client_request_id: String::new(),
            validate_only: false,
        })
    );
    case!(
        "ListModels",
        "empty request",
        Code::Ok,
        client.list_models(ListModelsRequest::default())
    );
    case!(
        "GetServerInfo",
        "empty request",
        Code::Ok,
        client.get_server_info(GetServerInfoRequest {})
    );
    case!(
        "GetWallet",
        "history beyond the cap",
        Code::Ok,
        client.get_wallet(GetWalletRequest { history: u32::MAX })
    );
    let credit = |user_id: &str, amount: i64, key: &str| CreditWalletRequest {
        user_id: user_id.into(),
        amount,
        idempotency_key: key.into(),
        reason: String::new(),
    };
    case!(
        "CreditWallet",
        "malformed user id",
        Code::InvalidArgument,
        client.credit_wallet(credit("robert'); DROP TABLE users;--", 1, "k1"))
    );
    case!(
        "CreditWallet",
        "unknown user",
        Code::NotFound,
        client.credit_wallet(credit(&uuid::Uuid::now_v7().to_string(), 1, "k2"))
    );
    case!(
        "CreditWallet",
        "negative amount",
        Code::InvalidArgument,
        client.credit_wallet(credit(&env.settings.gateway.default_user_id, -5, "k3"))
    );
    case!(
        "CreditWallet",
        "no idempotency key",
        Code::InvalidArgument,
        client.credit_wallet(credit(&env.settings.gateway.default_user_id, 5, ""))
    );

    let mut failures = Vec::new();
    for (method, what, want, outcome) in &cases {
        let (got, message) = match outcome {
            Ok(()) => (Code::Ok, String::new()),
            Err(status) => (status.code(), status.message().to_string()),
        };
        if got != *want {
            failures.push(format!(
                "{method} ({what}): want {want:?}, got {got:?}: {message}"
            ));
        } else if got != Code::Ok && message.trim().len() < 10 {
            failures.push(format!("{method} ({what}): no reason given: {message:?}"));
        } else if let Err(status) = outcome {
            // Every refusal names its reason in google.rpc.ErrorInfo, even an
            // oversized message that tonic's decoder refuses before any handler.
            match status.get_details_error_info() {
                Some(info) if info.domain == error_status::DOMAIN && !info.reason.is_empty() => {}
                other => {
                    failures.push(format!("{method} ({what}): no ErrorInfo reason: {other:?}"))
                }
            }
            // And names the call for a ticket, unless tonic refused it before
            // any handler (an oversized message has no call to name).
            let decoder_refusal =
                error_status::reason(status).as_deref() == Some("RESOURCE_EXHAUSTED");
            let request_id = status.get_details_request_info().map(|i| i.request_id);
            if !decoder_refusal && request_id.is_none_or(|id| id.is_empty()) {
                failures.push(format!("{method} ({what}): no RequestInfo request id"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let covered: BTreeSet<String> = cases.iter().map(|(m, ..)| m.to_string()).collect();
    let missing: Vec<_> = declared_methods().difference(&covered).cloned().collect();
    assert!(
        missing.is_empty(),
        "RPCs without a hostile case: {missing:?}"
    );

    let project_rows = |counts: &BTreeMap<String, i64>| {
        counts
            .get("dialectic_projects")
            .copied()
            .expect("the projects table is counted")
    };
    assert_eq!(
        project_rows(&after_project),
        project_rows(&before) + 1,
        "the one valid create wrote its project"
    );
    assert_eq!(
        row_counts(&env).await,
        after_project,
        "refused calls wrote nothing"
    );
    env.teardown().await;
}

/// A provider that refuses every call and echoes the key it was sent, as some
/// real providers do in their 401 bodies.
async fn key_echoing_provider() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 8192];
                while !String::from_utf8_lossy(&seen).contains("\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&seen).to_string();
                let sent = head
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("authorization: Bearer ")
                            .or_else(|| l.strip_prefix("Authorization: Bearer "))
                    })
                    .unwrap_or("")
                    .trim()
                    .to_string();
                let body = format!(
                    r#"{{"error":{{"message":"Incorrect API key provided: {sent}","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
                );
                let reply = format!(
                    "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secrets_never_reach_logs_errors_rows_or_objects() {
    let logs = captured_logs();
    // Not a DIALECTIC_ variable: a model row naming one of the platform's own is refused.
    const SECRET_VAR: &str = "HOSTILE_TEST_PROVIDER_KEY";
    let secret = format!("sk-hostile-{}", uuid::Uuid::new_v4().simple());
    // SAFETY: set before any service starts; no other thread reads this variable yet.
    unsafe { std::env::set_var(SECRET_VAR, &secret) };
    let mut env = TestEnv::new().await;
    let url = key_echoing_provider().await;
    sqlx::query(
        "INSERT INTO ai_providers
           (api_identifier, name, provider, context_window_tokens, max_output_tokens, secret_name, config)
         VALUES ('echoing', 'Echoing provider', 'openai', 8192, 512, $1, jsonb_build_object('base_url', $2::text))",
    )
    .bind(SECRET_VAR)
    .bind(&url)
    .execute(env.store.pool())
    .await
    .expect("model row");
    env.start_all().await;
    let (_, session_id) = env
        .new_session("A tool library.", &["echoing"], false)
        .await;
    let failed_error: String = eventually(120, "the refused job fails", || {
        let pool = env.store.pool().clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT row_to_json(j)::text FROM dialectic_generation_jobs j
                 WHERE status IN ('failed', 'retry_loop_failed')",
            )
            .fetch_optional(&pool)
            .await
            .ok()
            .flatten()
        }
    })
    .await;
    assert!(
        failed_error.contains("authentication"),
        "the job says why it failed: {failed_error}"
    );

    let mut client = env.gateway().await;
    let session = client
        .get_session(GetSessionRequest {
            session_id: session_id.clone(),
        })
        .await
        .expect("session")
        .into_inner();
    // A guessed API key is refused without being repeated back.
    let guessed_key = format!("dlk_guess_{}", uuid::Uuid::new_v4().simple());
    let refused = client
        .get_session(dialectic_e2e::with_key(
            &guessed_key,
            GetSessionRequest {
                session_id: session_id.clone(),
            },
        ))
        .await
        .expect_err("a guessed key is refused");
    assert_eq!(refused.code(), Code::Unauthenticated);
    let mut seen = vec![
        ("GetSession".to_string(), format!("{session:?}")),
        ("UNAUTHENTICATED".to_string(), format!("{refused:?}")),
    ];
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(env.store.pool())
    .await
    .expect("tables");
    for table in tables {
        let dump: Option<String> = sqlx::query_scalar(&format!(
            "SELECT string_agg(row_to_json(t)::text, E'\\n') FROM \"{table}\" t"
        ))
        .fetch_one(env.store.pool())
        .await
        .expect("dump");
        seen.push((format!("table {table}"), dump.unwrap_or_default()));
    }
    for key in env.blob.list("").await.expect("objects") {
        let body = env.blob.get(&key).await.expect("object");
        seen.push((
            format!("object {key}"),
            String::from_utf8_lossy(&body).into(),
        ));
    }
    let logged = String::from_utf8_lossy(&logs.lock().expect("logs")).to_string();
    assert!(
        logged.contains("authentication failed"),
        "the failure is logged (so the check below reads real log lines)"
    );
    seen.push(("logs".into(), logged));
    let secrets = [
        ("the provider key", secret.as_str()),
        ("a guessed API key", guessed_key.as_str()),
        (
            "the bootstrap API key",
            env.settings.gateway.bootstrap_key.as_str(),
        ),
    ];
    for (place, text) in &seen {
        for (what, value) in secrets {
            assert!(!text.contains(value), "{what} leaked into {place}");
        }
    }
    env.teardown().await;
}
