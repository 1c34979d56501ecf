//! Another user's ids answer NOT_FOUND on every RPC that names them; bad input
//! is INVALID_ARGUMENT with a reason; repeated creates with one request id make one.

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually};
use dialectic_proto::v1::{
    CreateProjectRequest, GetDocumentContentRequest, GetProjectRequest, GetSessionRequest,
    ListStageDocumentsRequest, SaveDocumentEditRequest, StartSessionRequest,
    SubmitStageResponsesRequest, WatchSessionRequest,
};
use tonic::Code;
use uuid::Uuid;

fn as_user<T>(user: Uuid, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "x-dialectic-user",
        user.to_string().parse().expect("header"),
    );
    request
}

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
        })
        .await
        .expect("project")
        .into_inner();
    let again = client
        .create_project(CreateProjectRequest {
            name: "Mine".into(),
            initial_user_prompt: "A tool library.".into(),
            client_request_id: "same-click".into(),
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

    // Another user.
    let stranger = Uuid::now_v7();
    sqlx::query("INSERT INTO users (id, display_name) VALUES ($1, 'stranger')")
        .bind(stranger)
        .execute(env.store.pool())
        .await
        .expect("user");
    let codes = [
        client
            .get_project(as_user(
                stranger,
                GetProjectRequest {
                    project_id: project.id.clone(),
                },
            ))
            .await
            .map(|_| ()),
        client
            .start_session(as_user(
                stranger,
                StartSessionRequest {
                    client_request_id: String::new(),
                    ..start()
                },
            ))
            .await
            .map(|_| ()),
        client
            .get_session(as_user(
                stranger,
                GetSessionRequest {
                    session_id: session.id.clone(),
                },
            ))
            .await
            .map(|_| ()),
        client
            .list_stage_documents(as_user(
                stranger,
                ListStageDocumentsRequest {
                    session_id: session.id.clone(),
                    stage_slug: String::new(),
                    iteration: 0,
                },
            ))
            .await
            .map(|_| ()),
        client
            .get_document_content(as_user(
                stranger,
                GetDocumentContentRequest {
                    resource_id: document.resource_id.clone(),
                },
            ))
            .await
            .map(|_| ()),
        client
            .save_document_edit(as_user(
                stranger,
                SaveDocumentEditRequest {
                    resource_id: document.resource_id.clone(),
                    content: "mine now".into(),
                },
            ))
            .await
            .map(|_| ()),
        client
            .submit_stage_responses(as_user(
                stranger,
                SubmitStageResponsesRequest {
                    session_id: session.id.clone(),
                    stage_slug: "thesis".into(),
                    responses: vec![],
                },
            ))
            .await
            .map(|_| ()),
        client
            .watch_session(as_user(
                stranger,
                WatchSessionRequest {
                    session_id: session.id.clone(),
                },
            ))
            .await
            .map(|_| ()),
    ];
    for (i, result) in codes.into_iter().enumerate() {
        let status = result.expect_err("a stranger gets nothing");
        assert_eq!(status.code(), Code::NotFound, "call {i}: {status:?}");
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
            })
            .await
            .map(|_| ()),
        client
            .create_project(CreateProjectRequest {
                name: "Huge".into(),
                initial_user_prompt: "x".repeat(env.settings.gateway.max_prompt_bytes + 1),
                client_request_id: String::new(),
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
    let projects: i64 = sqlx::query_scalar("SELECT count(*) FROM dialectic_projects")
        .fetch_one(env.store.pool())
        .await
        .expect("count");
    assert_eq!(projects, 1, "nothing was written by the refused calls");
    env.teardown().await;
}
