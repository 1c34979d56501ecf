//! Confidence gates (seed 004 override resolution): a gated step whose reply
//! is below `min_confidence` runs again, exactly `max_reruns` more times
//! (its earlier replies superseded and kept), on `rerun_model` when the gate
//! names one; the reply kept after the last rerun is flagged on its
//! contribution, as a `low_confidence` blackboard entry and in GetSession's
//! notice, and the session goes on: the step after it reads only that reply.

use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::TestEnv;
use dialectic_llm::LOW_CONFIDENCE_DIRECTIVE;
use dialectic_proto::v1::{GetBlackboardRequest, GetSessionRequest};
use dialectic_store::pipelines;
use uuid::Uuid;

const DONE: &str = "iteration_complete_pending_review";

async fn install(env: &TestEnv, rerun_model: Option<&str>) {
    let mut text = include_str!("../pipelines/gated.toml").to_string();
    if let Some(model) = rerun_model {
        text = text.replace(
            "max_reruns = 2 }",
            &format!("max_reruns = 2, rerun_model = \"{model}\" }}"),
        );
        assert!(text.contains("rerun_model"), "the gate names a model");
    }
    let file = PipelineFile::parse(&text).expect("parses");
    pipelines::install(env.store.pool(), &file)
        .await
        .expect("install");
}

/// (model that wrote it, is_latest_edit, low_confidence, confidence) of every
/// resolution, oldest first.
async fn resolutions(env: &TestEnv, session: &str) -> Vec<(String, bool, bool, Option<f64>)> {
    sqlx::query_as(
        "SELECT c.model_name, c.is_latest_edit, c.low_confidence, c.confidence
           FROM dialectic_contributions c
          WHERE c.session_id = $1 AND c.document_key = 'resolution' ORDER BY c.created_at",
    )
    .bind(Uuid::parse_str(session).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("resolutions")
}

async fn clause_jobs(env: &TestEnv, session: &str) -> i64 {
    env.count(
        "SELECT count(*) FROM dialectic_generation_jobs
          WHERE session_id = $1 AND step_key = 'resolve_clause' AND status = 'completed'",
        Uuid::parse_str(session).expect("uuid"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_low_reply_runs_exactly_max_reruns_more_times_then_is_kept_flagged() {
    let mut env = TestEnv::new().await;
    install(&env, None).await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let prompt = format!("Clause 4.2 as amended. {LOW_CONFIDENCE_DIRECTIVE}");
    let (_, session) = env
        .new_session_on("gated", &prompt, &["simulated"], false)
        .await;
    env.wait_for_session(&session, DONE, true).await;

    assert_eq!(
        clause_jobs(&env, &session).await,
        3,
        "the first run and two reruns"
    );
    let low = ("simulated".to_string(), false, false, Some(0.2));
    assert_eq!(
        resolutions(&env, &session).await,
        [
            low.clone(),
            low,
            ("simulated".to_string(), true, true, Some(0.2))
        ],
        "earlier replies superseded and kept; the last kept, flagged"
    );
    let board = client
        .get_blackboard(GetBlackboardRequest {
            session_id: session.clone(),
            entry_type: "low_confidence".into(),
        })
        .await
        .expect("blackboard")
        .into_inner()
        .entries;
    assert_eq!(board.len(), 1);
    let data: serde_json::Value = serde_json::from_str(&board[0].data_json).expect("json");
    assert_eq!(data["reruns"], 2);
    assert_eq!(data["step_key"], "resolve_clause");
    let notice = client
        .get_session(GetSessionRequest {
            session_id: session.clone(),
        })
        .await
        .expect("session")
        .into_inner()
        .notice;
    assert_eq!(
        notice,
        "1 document(s) kept below their confidence gate: resolve/resolution (0.20)"
    );
    // The summary waited for the last rerun and read only what was kept.
    let summaries: Vec<_> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.output_type == "summary")
        .collect();
    assert_eq!(summaries.len(), 1);
    let read: Vec<&str> = summaries[0]
        .inputs
        .iter()
        .map(|i| i.document_key.as_str())
        .collect();
    assert_eq!(read, ["resolution", "low_confidence"]);
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_confident_reply_passes_and_reruns_use_the_gates_model() {
    let mut env = TestEnv::new().await;
    install(&env, Some("simulated-b")).await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let (_, confident) = env
        .new_session_on("gated", "Clause 4.2 as amended.", &["simulated"], false)
        .await;
    let (_, doubtful) = env
        .new_session_on(
            "gated",
            &format!("Clause 7. {LOW_CONFIDENCE_DIRECTIVE}"),
            &["simulated"],
            false,
        )
        .await;
    env.wait_for_session(&confident, DONE, true).await;
    env.wait_for_session(&doubtful, DONE, true).await;

    assert_eq!(clause_jobs(&env, &confident).await, 1);
    assert_eq!(
        resolutions(&env, &confident).await,
        [("simulated".to_string(), true, false, Some(0.9))]
    );
    let notice = client
        .get_session(GetSessionRequest {
            session_id: confident.clone(),
        })
        .await
        .expect("session")
        .into_inner()
        .notice;
    assert_eq!(notice, "");

    let models: Vec<String> = resolutions(&env, &doubtful)
        .await
        .into_iter()
        .map(|(model, ..)| model)
        .collect();
    assert_eq!(models, ["simulated", "simulated-b", "simulated-b"]);
    env.teardown().await;
}
