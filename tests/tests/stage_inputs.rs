//! A stage reads the earlier stages' rendered documents, and RENDER jobs do not
//! gate the stage that wrote them. An auto-advancing session whose renders lag
//! (here: no renderer at all for a while) must wait for them, not fail.

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually};

const PROMPT: &str =
    "# Waiting for renders\n\nA plan whose next stage must read rendered documents.";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_next_stage_waits_for_the_previous_stages_renders() {
    let mut env = TestEnv::new().await;
    for name in ALL_SERVICES.iter().filter(|n| **n != "renderer") {
        env.start(&[name]).await;
        env.wait_serving(name).await;
    }
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], true).await;
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    // Thesis completes without its renders; antithesis is started and waits.
    let (status, prerequisite_type): (String, String) =
        eventually(60, "antithesis to be started", || async {
            sqlx::query_as(
                "SELECT j.status, p.job_type FROM dialectic_generation_jobs j
                   JOIN dialectic_generation_jobs p ON p.id = j.prerequisite_job_id
                  WHERE j.session_id = $1 AND j.stage_slug = 'antithesis' AND j.parent_job_id IS NULL",
            )
            .bind(session)
            .fetch_optional(env.store.pool())
            .await
            .ok()
            .flatten()
        })
        .await;
    assert_eq!(
        (status.as_str(), prerequisite_type.as_str()),
        ("waiting_for_prerequisite", "RENDER")
    );
    let failed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status IN ('failed', 'retry_loop_failed')",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    assert_eq!(failed, 0);

    env.start(&["renderer"]).await;
    env.wait_serving("renderer").await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let failed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status IN ('failed', 'retry_loop_failed')",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    assert_eq!(failed, 0, "every stage ran on rendered inputs");
    env.teardown().await;
}
