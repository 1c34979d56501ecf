//! The thesis stage through all six services, against real Postgres,
//! RabbitMQ, Redis and S3, with the simulated model.

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually};
use dialectic_proto::v1::{
    CreateProjectRequest, GetDocumentContentRequest, GetSessionRequest, ListStageDocumentsRequest,
    StartSessionRequest, WatchSessionRequest,
};
use futures::StreamExt;
use std::collections::BTreeSet;

const PROMPT: &str = "A lending library for power tools, run by neighbours for neighbours.";
const DOCUMENTS: [&str; 4] = [
    "business_case",
    "feature_spec",
    "technical_approach",
    "success_metrics",
];

async fn start_session(env: &TestEnv, models: &[&str]) -> (String, String) {
    env.new_session(PROMPT, models, false).await
}

async fn wait_for_status(env: &TestEnv, session_id: &str, want: &str) {
    env.wait_for_session(session_id, want, false).await;
}

async fn count(env: &TestEnv, sql: &str, session_id: &str) -> i64 {
    let id = uuid::Uuid::parse_str(session_id).expect("session id");
    sqlx::query_scalar(sql)
        .bind(id)
        .fetch_one(env.store.pool())
        .await
        .expect("count query")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thesis_runs_end_to_end_through_every_service() {
    let mut env = TestEnv::new().await;
    env.start(&ALL_SERVICES).await;
    for name in ALL_SERVICES {
        env.wait_serving(name).await;
    }
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Tool library".into(),
            initial_user_prompt: PROMPT.into(),
            client_request_id: "tool-library-1".into(),
            prompt_file: None,
            pipeline: String::new(),
        })
        .await
        .expect("create project")
        .into_inner();
    let session = client
        .start_session(StartSessionRequest {
            project_id: project.id.clone(),
            models: vec!["simulated".into(), "simulated-b".into()],
            description: String::new(),
            client_request_id: String::new(),
            auto_advance: false,
            ..Default::default()
        })
        .await
        .expect("start session")
        .into_inner();
    let mut events = client
        .watch_session(WatchSessionRequest {
            session_id: session.id.clone(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    let watched = tokio::spawn(async move {
        let mut kinds: Vec<(String, String)> = Vec::new();
        while let Some(Ok(event)) = events.next().await {
            kinds.push((event.kind, event.session_status));
            // Renders never gate the stage, so the first may come before or after its completion.
            let seen = |kind: &str| kinds.iter().any(|(k, _)| k == kind);
            if seen("stage_completed") && seen("render_completed") {
                break;
            }
        }
        kinds
    });

    wait_for_status(&env, &session.id, "pending_antithesis").await;

    let kinds = tokio::time::timeout(std::time::Duration::from_secs(10), watched)
        .await
        .expect("the watch stream reports the stage's completion")
        .expect("watch task");
    assert_eq!(kinds.first().map(|k| k.0.as_str()), Some("snapshot"));
    assert!(kinds.iter().any(|(k, _)| k == "job_started"));
    assert!(kinds.iter().any(|(k, _)| k == "render_completed"));
    assert!(
        kinds
            .iter()
            .any(|(k, s)| k == "stage_completed" && s == "pending_antithesis"),
        "{kinds:?}"
    );

    // RENDER jobs never gate a stage (seed 000 §2), so the last renders may finish just after.
    let docs = eventually(30, "eight rendered documents", || {
        let mut client = client.clone();
        let session_id = session.id.clone();
        async move {
            let docs = client
                .list_stage_documents(ListStageDocumentsRequest {
                    session_id,
                    stage_slug: "thesis".into(),
                    iteration: 1,
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner()
                .documents;
            (docs.len() >= 8).then_some(docs)
        }
    })
    .await;
    assert_eq!(docs.len(), 8, "four documents per model: {docs:?}");
    let session_short = dialectic_core::ids::SessionId::parse(&session.id)
        .expect("session id")
        .short();
    let mut seen = BTreeSet::new();
    for doc in &docs {
        seen.insert((doc.model.clone(), doc.document_key.clone()));
        let model_slug = doc.model.clone();
        assert_eq!(
            doc.storage_key,
            format!(
                "projects/{}/session_{session_short}/iteration_1/1_thesis/{model_slug}_0_{}.md",
                project.id, doc.document_key
            )
        );
        let content = client
            .get_document_content(GetDocumentContentRequest {
                resource_id: doc.resource_id.clone(),
            })
            .await
            .expect("document content")
            .into_inner();
        assert_eq!(content.mime_type, "text/markdown");
        assert!(content.content.starts_with("# "), "{}", content.content);
        assert!(
            content.content.contains("power tools"),
            "the seed prompt shows in the document"
        );
        assert!(
            content.content.contains("## Header context"),
            "the header context shows in the document"
        );
        // The same bytes are in S3 under the seed 001 layout.
        let in_s3 = env
            .blob
            .get_string(&doc.storage_key)
            .await
            .expect("S3 object");
        assert_eq!(in_s3, content.content);
    }
    let expected: BTreeSet<_> = ["simulated", "simulated-b"]
        .iter()
        .flat_map(|m| {
            DOCUMENTS
                .iter()
                .map(move |d| (m.to_string(), d.to_string()))
        })
        .collect();
    assert_eq!(seen, expected);

    let raw = env
        .blob
        .list(&format!(
            "projects/{}/session_{session_short}/iteration_1/1_thesis/raw_responses/",
            project.id
        ))
        .await
        .expect("list raw chunks");
    assert_eq!(
        raw.len(),
        10,
        "two header contexts and eight documents: {raw:?}"
    );
    assert!(
        raw.iter()
            .any(|k| k.ends_with("/simulated-b_0_header_context_raw.json"))
    );

    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1",
            &session.id
        )
        .await,
        10
    );
    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status <> 'completed'",
            &session.id
        )
        .await,
        0,
        "every job completed"
    );
    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND job_type = 'RENDER'",
            &session.id
        )
        .await,
        8
    );
    let session_after = client
        .get_session(GetSessionRequest {
            session_id: session.id.clone(),
        })
        .await
        .expect("get session")
        .into_inner();
    let thesis = session_after
        .jobs
        .iter()
        .find(|j| j.stage_slug == "thesis")
        .expect("thesis counts");
    assert_eq!((thesis.plan, thesis.execute, thesis.render), (2, 8, 8));
    env.teardown().await;
}

/// Starts a one-model session with no executor running, so its root PLAN
/// job's dispatch waits in the queue; returns (session id, root job id).
async fn session_without_executor(env: &mut TestEnv) -> (String, dialectic_core::ids::JobId) {
    env.start(&["planner", "gateway", "renderer"]).await;
    env.wait_serving("gateway").await;
    env.wait_serving("planner").await;
    let (_, session_id) = start_session(env, &["simulated"]).await;
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let root: dialectic_core::ids::JobId = eventually(30, "root PLAN job", || async {
        sqlx::query_scalar(
            "SELECT id FROM dialectic_generation_jobs WHERE session_id = $1 AND parent_job_id IS NULL",
        )
        .bind(session)
        .fetch_optional(env.store.pool())
        .await
        .ok()
        .flatten()
    })
    .await;
    (session_id, root)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_duplicate_dispatch_produces_one_contribution() {
    let mut env = TestEnv::new().await;
    // No executor yet: the root PLAN jobs' dispatch messages wait in the queue.
    let (session_id, root) = session_without_executor(&mut env).await;
    // Two more copies of the same dispatch, as a redelivery or a repeated relay would make.
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let publisher =
        dialectic_queue::Publisher::new(&connection, &dialectic_runtime::topology(&env.settings))
            .await
            .expect("publisher");
    let dispatch = dialectic_queue::encode(&dialectic_proto::v1::queue::Envelope {
        version: dialectic_proto::ENVELOPE_VERSION,
        body: Some(dialectic_proto::v1::queue::envelope::Body::JobDispatch(
            dialectic_proto::v1::queue::JobDispatch {
                job_id: root.to_string(),
            },
        )),
    });
    for _ in 0..2 {
        publisher
            .publish(dialectic_queue::keys::JOB_PLAN, &dispatch, None)
            .await
            .expect("publish duplicate");
    }
    env.start(&["executor"]).await;
    wait_for_status(&env, &session_id, "pending_antithesis").await;
    let (contributions, attempts): (i64, i32) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM dialectic_contributions WHERE job_id = $1), attempt_count
         FROM dialectic_generation_jobs WHERE id = $1",
    )
    .bind(root)
    .fetch_one(env.store.pool())
    .await
    .expect("root job");
    assert_eq!(contributions, 1, "one header_context for three dispatches");
    assert_eq!(attempts, 1, "the duplicates never claimed the job");
    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1",
            &session_id
        )
        .await,
        5
    );
    let _ = connection.close(200, "done".into()).await;
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_whose_worker_dies_is_picked_up_again() {
    let mut env = TestEnv::new().await;
    let (session_id, root) = session_without_executor(&mut env).await;
    // A worker claims the job with a one-second lease and then dies: no heartbeat, no outcome.
    let claimed = dialectic_runtime::worker::claim::<()>(
        &env.store,
        &dialectic_runtime::Courier::default(),
        root,
        &[dialectic_core::job::JobType::Plan],
        "worker-that-dies",
        1,
    )
    .await
    .expect("claim");
    assert!(claimed.is_some(), "the dying worker got the job");
    env.start(&["executor"]).await;
    wait_for_status(&env, &session_id, "pending_antithesis").await;
    let (attempts, status, error): (i32, String, Option<sqlx::types::JsonValue>) = sqlx::query_as(
        "SELECT attempt_count, status, error_details FROM dialectic_generation_jobs WHERE id = $1",
    )
    .bind(root)
    .fetch_one(env.store.pool())
    .await
    .expect("root job");
    assert_eq!(status, "completed");
    assert_eq!(attempts, 2, "the second attempt finished the job");
    let error = error.expect("the lost attempt is recorded");
    assert_eq!(error["code"], "lease_expired");
    let (attempt, path): (i32, String) = sqlx::query_as(
        "SELECT attempt, raw_response_storage_path FROM dialectic_contributions WHERE job_id = $1",
    )
    .bind(root)
    .fetch_one(env.store.pool())
    .await
    .expect("one contribution");
    assert_eq!(attempt, 2);
    assert!(
        path.ends_with("/simulated_1_header_context_raw.json"),
        "{path}"
    );
    env.teardown().await;
}
