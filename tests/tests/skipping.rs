//! Plan-driven skipping (seed 004 adaptive execution): a PLAN reply's
//! `skip_steps` skips those steps for its session only, shown in GetSession
//! and in events; a name no step of the pipeline has is ignored, and said so.

use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{GetSessionRequest, StageResponse, SubmitStageResponsesRequest};
use dialectic_store::pipelines;

/// notes.toml whose review plan also reads the feedback on the draft: the
/// skip directive arrives with that feedback, while a watcher listens.
fn notes_reading_feedback() -> PipelineFile {
    let text = include_str!("../pipelines/notes.toml").replace(
        r#"    { type = "document", stage_slug = "draft", document_key = "note", section_header = "--- Draft notes ---" },"#,
        r#"    { type = "document", stage_slug = "draft", document_key = "note", section_header = "--- Draft notes ---" },
    { type = "feedback", stage_slug = "draft", document_key = "*", required = false, section_header = "--- Feedback ---" },"#,
    );
    assert!(text.contains("--- Feedback ---"), "the rule was added");
    PipelineFile::parse(&text).expect("parses")
}

async fn step_jobs(env: &TestEnv, session_id: &str, step_key: &str) -> i64 {
    env.count(
        &format!(
            "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND step_key = '{step_key}'"
        ),
        uuid::Uuid::parse_str(session_id).expect("uuid"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plan_skips_steps_for_its_session_only() {
    let mut env = TestEnv::new().await;
    pipelines::install(env.store.pool(), &notes_reading_feedback())
        .await
        .expect("install");
    env.start_all().await;
    let mut client = env.gateway().await;
    let (_, skipping) = env
        .new_session_on("notes", "Notes on a garden.", &["simulated"], false)
        .await;
    env.wait_for_session(&skipping, "pending_review", true)
        .await;

    // The stream ends by itself once the session waits for review.
    let watcher = env
        .watch_events(&skipping, |kind| {
            kind.starts_with("skip") || kind == "step_skipped"
        })
        .await;
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: skipping.clone(),
            stage_slug: "draft".into(),
            responses: vec![StageResponse {
                resource_id: String::new(),
                document_key: String::new(),
                feedback: "No review needed. [[simulate:skip:review_write]] [[simulate:skip:no_such_step]]"
                    .into(),
            }],
         client_request_id: String::new(), })
        .await
        .expect("submit");
    env.wait_for_session(&skipping, "iteration_complete_pending_review", true)
        .await;
    let reason = "the prompt asked for it to be skipped";
    let seen: Vec<(String, String)> = watcher
        .await
        .expect("watcher")
        .into_iter()
        .map(|e| (e.kind, e.message))
        .collect();
    assert_eq!(
        seen,
        [
            (
                "step_skipped".to_string(),
                format!("review_write: {reason}")
            ),
            (
                "skip_ignored".to_string(),
                "no_such_step: no such step in this pipeline".to_string()
            ),
        ]
    );
    let session = client
        .get_session(GetSessionRequest {
            session_id: skipping.clone(),
        })
        .await
        .expect("session")
        .into_inner();
    let skipped: Vec<(u32, &str, &str)> = session
        .skipped_steps
        .iter()
        .map(|s| (s.iteration, s.step_key.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(skipped, [(1, "review_write", reason)]);
    assert_eq!(step_jobs(&env, &skipping, "review_plan").await, 1);
    assert_eq!(
        step_jobs(&env, &skipping, "review_write").await,
        0,
        "skipped"
    );

    // The recipe is unchanged: another session of the pipeline reviews.
    let (_, other) = env
        .new_session_on("notes", "Notes on a pond.", &["simulated"], true)
        .await;
    env.wait_for_session(&other, "iteration_complete_pending_review", true)
        .await;
    assert_eq!(step_jobs(&env, &other, "review_write").await, 1);
    env.teardown().await;
}
