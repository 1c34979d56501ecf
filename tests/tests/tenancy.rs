//! Two users: each RPC that names the other's project, session or document
//! answers NOT_FOUND, lists show only the caller's own; a missing, wrong,
//! malformed or revoked key is UNAUTHENTICATED; bad input is INVALID_ARGUMENT
//! with a reason; repeated creates with one request id make one.

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually, with_key};
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use dialectic_proto::v1::{
    CancelSessionRequest, CreateProjectRequest, DeleteProjectRequest, EditStageRecipeRequest,
    ExportProjectRequest, GetBlackboardRequest, GetDocumentContentRequest, GetProjectRequest,
    GetSessionRequest, GetStageRecipeRequest, GetWalletRequest, ListProjectsRequest,
    ListSessionsRequest, ListStageDocumentsRequest, ListWalletTransactionsRequest,
    PauseSessionRequest, PromptFile, RecipeEdge, RegenerateDocumentRequest, ResumeSessionRequest,
    RetryStageRequest, RevisitStageRequest, SaveDocumentEditRequest, StartSessionRequest,
    SubmitStageResponsesRequest, WatchSessionRequest,
};
use dialectic_runtime::error_status::StatusExt;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn other_users_ids_are_not_found_and_bad_input_is_refused() {
    let mut env = TestEnv::new().await;
    env.start(&ALL_SERVICES).await;
    for name in ALL_SERVICES {
        env.wait_serving(name).await;
    }
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Mine".into(),
            initial_user_prompt: "A tool library.".into(),
            client_request_id: "same-click".into(),
            prompt_file: None,
            pipeline: String::new(),
        })
        .await
        .expect("project")
        .into_inner();
    let again = client
        .create_project(CreateProjectRequest {
            name: "Mine".into(),
            initial_user_prompt: "A tool library.".into(),
            client_request_id: "same-click".into(),
            prompt_file: None,
            pipeline: String::new(),
        })
        .await
        .expect("project again")
        .into_inner();
    assert_eq!(again.id, project.id, "one request id, one project");
    let start = || StartSessionRequest {
        project_id: project.id.clone(),
        models: vec!["simulated".into()],
        description: String::new(),
        client_request_id: "start-once".into(),
        auto_advance: false,
        ..Default::default()
    };
    let session = client
        .start_session(start())
        .await
        .expect("session")
        .into_inner();
    let twice = client
        .start_session(start())
        .await
        .expect("session again")
        .into_inner();
    assert_eq!(twice.id, session.id, "one request id, one session");
    let document = eventually(60, "a rendered document", || {
        let mut client = client.clone();
        let session_id = session.id.clone();
        async move {
            client
                .list_stage_documents(ListStageDocumentsRequest {
                    session_id,
                    stage_slug: String::new(),
                    iteration: 0,
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner()
                .documents
                .into_iter()
                .next()
        }
    })
    .await;

    // Another user, with a project of their own.
    let (_, stranger) = env.new_user("stranger").await;
    let mut theirs = env.gateway_with_key(&stranger).await;
    let their_project = theirs
        .create_project(CreateProjectRequest {
            name: "Theirs".into(),
            initial_user_prompt: "A seed swap.".into(),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: String::new(),
        })
        .await
        .expect("their project")
        .into_inner();
    let listed = theirs
        .list_projects(ListProjectsRequest::default())
        .await
        .expect("their list")
        .into_inner();
    assert_eq!(
        listed
            .projects
            .iter()
            .map(|p| p.id.as_str())
            .collect::<Vec<_>>(),
        [their_project.id.as_str()],
        "a list shows only the caller's projects"
    );
    let mine = client
        .list_projects(ListProjectsRequest::default())
        .await
        .expect("my list")
        .into_inner();
    assert_eq!(
        mine.projects
            .iter()
            .map(|p| p.id.as_str())
            .collect::<Vec<_>>(),
        [project.id.as_str()]
    );
    let my_wallet = client
        .get_wallet(GetWalletRequest::default())
        .await
        .expect("my wallet")
        .into_inner();
    let their_wallet = theirs
        .get_wallet(GetWalletRequest::default())
        .await
        .expect("their wallet")
        .into_inner();
    assert_ne!(my_wallet.wallet_id, their_wallet.wallet_id);
    let their_history = theirs
        .list_wallet_transactions(ListWalletTransactionsRequest::default())
        .await
        .expect("their history")
        .into_inner();
    assert!(
        their_history.transactions.is_empty(),
        "none of my transactions: {their_history:?}"
    );

    let session_id = || session.id.clone();
    let project_id = || project.id.clone();
    let resource_id = || document.resource_id.clone();
    let calls: Vec<(&str, Result<(), tonic::Status>)> = vec![
        (
            "GetProject",
            theirs
                .get_project(GetProjectRequest {
                    project_id: project_id(),
                })
                .await
                .map(drop),
        ),
        (
            "ListSessions",
            theirs
                .list_sessions(ListSessionsRequest {
                    project_id: project_id(),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "DeleteProject",
            theirs
                .delete_project(DeleteProjectRequest {
                    project_id: project_id(),
                    client_request_id: String::new(),
                })
                .await
                .map(drop),
        ),
        (
            "ExportProject",
            theirs
                .export_project(ExportProjectRequest {
                    project_id: project_id(),
                })
                .await
                .map(drop),
        ),
        (
            "GetExportUrl",
            theirs
                .get_export_url(ExportProjectRequest {
                    project_id: project_id(),
                })
                .await
                .map(drop),
        ),
        (
            "StartSession",
            theirs
                .start_session(StartSessionRequest {
                    client_request_id: String::new(),
                    ..start()
                })
                .await
                .map(drop),
        ),
        (
            "GetSession",
            theirs
                .get_session(GetSessionRequest {
                    session_id: session_id(),
                })
                .await
                .map(drop),
        ),
        (
            "PauseSession",
            theirs
                .pause_session(PauseSessionRequest {
                    session_id: session_id(),
                    client_request_id: String::new(),
                })
                .await
                .map(drop),
        ),
        (
            "ResumeSession",
            theirs
                .resume_session(ResumeSessionRequest {
                    session_id: session_id(),
                    client_request_id: String::new(),
                })
                .await
                .map(drop),
        ),
        (
            "ListStageDocuments",
            theirs
                .list_stage_documents(ListStageDocumentsRequest {
                    session_id: session_id(),
                    stage_slug: String::new(),
                    iteration: 0,
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "GetDocumentContent",
            theirs
                .get_document_content(GetDocumentContentRequest {
                    resource_id: resource_id(),
                })
                .await
                .map(drop),
        ),
        (
            "SaveDocumentEdit",
            theirs
                .save_document_edit(SaveDocumentEditRequest {
                    resource_id: resource_id(),
                    content: "mine now".into(),
                    client_request_id: String::new(),
                })
                .await
                .map(drop),
        ),
        (
            "SubmitStageResponses",
            theirs
                .submit_stage_responses(SubmitStageResponsesRequest {
                    session_id: session_id(),
                    stage_slug: "thesis".into(),
                    responses: vec![],
                    client_request_id: String::new(),
                })
                .await
                .map(drop),
        ),
        (
            "GetDocumentChunks",
            theirs
                .get_document_chunks(GetDocumentContentRequest {
                    resource_id: resource_id(),
                })
                .await
                .map(drop),
        ),
        (
            "CancelSession",
            theirs
                .cancel_session(CancelSessionRequest {
                    session_id: session_id(),
                    client_request_id: String::new(),
                })
                .await
                .map(drop),
        ),
        (
            "RevisitStage",
            theirs
                .revisit_stage(RevisitStageRequest {
                    session_id: session_id(),
                    stage_slug: "thesis".into(),
                    impact: "major".into(),
                    reason: String::new(),
                    impact_level: 0,
                    dry_run: false,
                    client_request_id: String::new(),
                })
                .await
                .map(drop),
        ),
        (
            "RetryStage",
            theirs
                .retry_stage(RetryStageRequest {
                    session_id: session_id(),
                    stage_slug: String::new(),
                    model: "simulated".into(),
                    client_request_id: String::new(),
                })
                .await
                .map(drop),
        ),
        (
            "RegenerateDocument",
            theirs
                .regenerate_document(RegenerateDocumentRequest {
                    session_id: session_id(),
                    stage_slug: "thesis".into(),
                    model: "simulated".into(),
                    document_key: "business_case".into(),
                    resource_id: resource_id(),
                    client_request_id: "their-click".into(),
                })
                .await
                .map(drop),
        ),
        (
            "WatchSession",
            theirs
                .watch_session(WatchSessionRequest {
                    session_id: session_id(),
                    after_sequence: None,
                })
                .await
                .map(drop),
        ),
        (
            "GetBlackboard",
            theirs
                .get_blackboard(GetBlackboardRequest {
                    session_id: session_id(),
                    entry_type: String::new(),
                })
                .await
                .map(drop),
        ),
        // And the other way round.
        (
            "GetProject (theirs)",
            client
                .get_project(GetProjectRequest {
                    project_id: their_project.id.clone(),
                })
                .await
                .map(drop),
        ),
        (
            "ExportProject (theirs)",
            client
                .export_project(ExportProjectRequest {
                    project_id: their_project.id.clone(),
                })
                .await
                .map(drop),
        ),
        (
            "ListSessions (theirs)",
            client
                .list_sessions(ListSessionsRequest {
                    project_id: their_project.id.clone(),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
    ];
    for (name, result) in calls {
        let status = result.expect_err(name);
        assert_eq!(status.code(), Code::NotFound, "{name}: {status:?}");
        let info = status.get_details_error_info().expect(name);
        assert_eq!(info.reason, "RESOURCE_NOT_FOUND", "{name}");
        assert!(
            info.metadata.contains_key("resource_type"),
            "{name}: {info:?}"
        );
    }
    // Nothing of mine changed: still mine, not deleted, not paused.
    let still = client
        .get_session(GetSessionRequest {
            session_id: session_id(),
        })
        .await
        .expect("my session")
        .into_inner();
    assert_ne!(still.status, "paused");
    assert_ne!(still.status, "abandoned");

    // No key, a wrong key, a malformed header, a revoked key: UNAUTHENTICATED.
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", env.addr("gateway")))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
    let mut anonymous = DialecticServiceClient::new(channel);
    let (revoked_user, revoked) = env.new_user("revoked").await;
    assert!(
        dialectic_store::auth::revoke_key(
            env.store.pool(),
            &dialectic_core::apikey::hash(&revoked)
        )
        .await
        .expect("revoke")
    );
    let _ = revoked_user;
    let mut malformed = tonic::Request::new(ListProjectsRequest::default());
    malformed.metadata_mut().insert(
        "authorization",
        format!("Basic {stranger}").parse().expect("header"),
    );
    let denied = [
        (
            "no key",
            anonymous
                .list_projects(ListProjectsRequest::default())
                .await
                .map(drop),
        ),
        (
            "no key, get",
            anonymous
                .get_project(GetProjectRequest {
                    project_id: project_id(),
                })
                .await
                .map(drop),
        ),
        (
            "no key, watch",
            anonymous
                .watch_session(WatchSessionRequest {
                    session_id: session_id(),
                    after_sequence: None,
                })
                .await
                .map(drop),
        ),
        (
            "wrong key",
            anonymous
                .list_projects(with_key(
                    "dlk_not_a_real_key",
                    ListProjectsRequest::default(),
                ))
                .await
                .map(drop),
        ),
        (
            "malformed",
            anonymous.list_projects(malformed).await.map(drop),
        ),
        (
            "revoked",
            anonymous
                .get_session(with_key(
                    &revoked,
                    GetSessionRequest {
                        session_id: session_id(),
                    },
                ))
                .await
                .map(drop),
        ),
    ];
    for (name, result) in denied {
        let status = result.expect_err(name);
        assert_eq!(status.code(), Code::Unauthenticated, "{name}: {status:?}");
        assert!(
            status.message().contains("key") || status.message().contains("authorization"),
            "{name}: {status:?}"
        );
    }

    // Bad input, each with a reason.
    let bad = [
        client
            .get_project(GetProjectRequest {
                project_id: "not-a-uuid".into(),
            })
            .await
            .map(|_| ()),
        client
            .create_project(CreateProjectRequest {
                name: " ".into(),
                initial_user_prompt: "x".into(),
                client_request_id: String::new(),
                prompt_file: None,
                pipeline: String::new(),
            })
            .await
            .map(|_| ()),
        client
            .create_project(CreateProjectRequest {
                name: "Huge".into(),
                initial_user_prompt: "x".repeat(env.settings.gateway.max_prompt_bytes + 1),
                client_request_id: String::new(),
                prompt_file: None,
                pipeline: String::new(),
            })
            .await
            .map(|_| ()),
        client
            .create_project(CreateProjectRequest {
                prompt_file: Some(PromptFile {
                    file_name: "slides.pdf".into(),
                    content: b"%PDF-1.7".to_vec(),
                }),
                ..Default::default()
            })
            .await
            .map(|_| ()),
        client
            .create_project(CreateProjectRequest {
                prompt_file: Some(PromptFile {
                    file_name: "brief.md".into(),
                    content: vec![0xff, 0xfe, b'#'],
                }),
                ..Default::default()
            })
            .await
            .map(|_| ()),
        client
            .create_project(CreateProjectRequest {
                name: "Both".into(),
                initial_user_prompt: "x".into(),
                prompt_file: Some(PromptFile {
                    file_name: "brief.md".into(),
                    content: b"y".to_vec(),
                }),
                ..Default::default()
            })
            .await
            .map(|_| ()),
        client
            .start_session(StartSessionRequest {
                models: vec!["no-such-model".into()],
                client_request_id: String::new(),
                ..start()
            })
            .await
            .map(|_| ()),
    ];
    for (i, result) in bad.into_iter().enumerate() {
        let status = result.expect_err("refused");
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "bad call {i}: {status:?}"
        );
        assert!(!status.message().is_empty());
    }
    // Recipes are shared: only an administrator changes them (clone on write).
    let edit = || EditStageRecipeRequest {
        stage_slug: "paralysis".into(),
        skip: vec![],
        unskip: vec![],
        add_edges: vec![],
        client_request_id: String::new(),
        validate_only: false,
    };
    let before = client
        .get_stage_recipe(GetStageRecipeRequest {
            stage_slug: "paralysis".into(),
        })
        .await
        .expect("recipe")
        .into_inner();
    assert!(!before.is_cloned);
    let last = before.steps.last().expect("steps").step_key.clone();
    let first = before.steps[0].step_key.clone();
    let denied = theirs
        .edit_stage_recipe(EditStageRecipeRequest {
            skip: vec![last.clone()],
            ..edit()
        })
        .await
        .expect_err("not an administrator");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let changed = client
        .edit_stage_recipe(EditStageRecipeRequest {
            skip: vec![last.clone()],
            ..edit()
        })
        .await
        .expect("admin edit")
        .into_inner();
    assert!(changed.is_cloned, "the first change clones the template");
    assert!(
        changed
            .steps
            .iter()
            .any(|s| s.step_key == last && s.skipped),
        "{changed:?}"
    );
    let cycle = client
        .edit_stage_recipe(EditStageRecipeRequest {
            add_edges: vec![RecipeEdge {
                from_step_key: last.clone(),
                to_step_key: first.clone(),
            }],
            ..edit()
        })
        .await
        .expect_err("a cycle");
    assert_eq!(cycle.code(), Code::InvalidArgument, "{cycle:?}");
    assert!(cycle.message().contains("cyclic"), "{cycle:?}");

    let projects: i64 = sqlx::query_scalar("SELECT count(*) FROM dialectic_projects")
        .fetch_one(env.store.pool())
        .await
        .expect("count");
    assert_eq!(projects, 2, "nothing was written by the refused calls");
    env.teardown().await;
}

/// A project made from an uploaded prompt document: named after the file,
/// the prompt is the file's text, stored at the project root like a typed one;
/// the same upload retried with one request id makes one project.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_project_is_created_from_an_uploaded_prompt_file() {
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let text = "# Tool library\n\nNeighbours lend each other drills — and fix them.\n";
    let upload = || CreateProjectRequest {
        client_request_id: "upload-1".into(),
        prompt_file: Some(PromptFile {
            file_name: "Tool library.md".into(),
            content: [&[0xEF, 0xBB, 0xBF][..], text.as_bytes()].concat(),
        }),
        ..Default::default()
    };
    let first = client
        .create_project(upload())
        .await
        .expect("created from a file")
        .into_inner();
    let again = client
        .create_project(upload())
        .await
        .expect("retried")
        .into_inner();
    assert_eq!(first.id, again.id, "one request id, one project");
    assert_eq!(first.name, "Tool library");
    assert_eq!(first.initial_user_prompt, text);
    let key = format!("projects/{}/initial-prompt.md", first.id);
    assert_eq!(
        env.blob.get(&key).await.expect("prompt object"),
        text.as_bytes()
    );
    let projects: i64 = sqlx::query_scalar("SELECT count(*) FROM dialectic_projects")
        .fetch_one(env.store.pool())
        .await
        .expect("count");
    assert_eq!(projects, 1);
    env.teardown().await;
}
