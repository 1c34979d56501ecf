//! Record and replay: a session recorded with the simulated provider is served
//! again by the replay provider, byte for byte, without calling any provider.

use dialectic_e2e::{ALL_SERVICES, TestEnv};
use dialectic_proto::v1::{GetDocumentContentRequest, ListStageDocumentsRequest};
use std::collections::BTreeMap;

async fn thesis(env: &TestEnv, prompt: &str, status: &str) -> (String, BTreeMap<String, String>) {
    let (_, session_id) = env.new_session(prompt, &["simulated"], false).await;
    env.wait_for_session(&session_id, status, true).await;
    let mut client = env.gateway().await;
    let docs = client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            iteration: 1,
            ..Default::default()
        })
        .await
        .expect("docs")
        .into_inner()
        .documents;
    let mut out = BTreeMap::new();
    for doc in docs {
        let content = client
            .get_document_content(GetDocumentContentRequest {
                resource_id: doc.resource_id,
            })
            .await
            .expect("content")
            .into_inner()
            .content;
        out.insert(doc.document_key, content);
    }
    (session_id, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_recorded_session_replays_to_identical_documents() {
    let mut env = TestEnv::new().await;
    let mut recording = env.settings.clone();
    recording.executor.provider_mode = "record".into();
    for name in ALL_SERVICES {
        env.start_with(name, recording.clone()).await;
        env.wait_serving(name).await;
    }
    let prompt = "A community fridge network with a volunteer app.";
    let (_, recorded) = thesis(&env, prompt, "pending_antithesis").await;
    assert_eq!(recorded.len(), 4);
    let kept = env.blob.list("recordings/").await.expect("recordings");
    assert_eq!(kept.len(), 5, "the plan and four documents were recorded");

    // Replay with a provider that would fail every call: only recordings can answer.
    env.stop("executor").await;
    let mut replaying = env.settings.clone();
    replaying.executor.provider_mode = "replay".into();
    replaying.executor.simulated_failure_rate = 1.0;
    env.start_with("executor", replaying).await;
    env.wait_serving("executor").await;
    let (_, replayed) = thesis(&env, prompt, "pending_antithesis").await;
    assert_eq!(replayed, recorded, "byte-identical documents");

    // Something never recorded is a clear failure, not a call.
    let (session_id, nothing) = thesis(&env, "Never recorded.", "failed_thesis").await;
    assert!(nothing.is_empty());
    let error: serde_json::Value = sqlx::query_scalar(
        "SELECT error_details FROM dialectic_generation_jobs WHERE session_id = $1 AND parent_job_id IS NULL",
    )
    .bind(uuid::Uuid::parse_str(&session_id).expect("uuid"))
    .fetch_one(env.store.pool())
    .await
    .expect("root job");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("nothing recorded"),
        "{error}"
    );
    env.teardown().await;
}
