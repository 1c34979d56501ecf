//! A recipe step's `config_override` reaches the provider request: its
//! temperature, and its output limit (never above the model's own). A bad
//! override is refused naming the key, and changes nothing.
//! Alone in its test binary: it reads the simulated provider's transcript.

use dialectic_core::job::JobType;
use dialectic_e2e::TestEnv;
use dialectic_store::recipe_edit::{self, RecipeEditError};

const PROMPT: &str = "# Step parameters\n\nA business case written cold and short.";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_steps_config_override_reaches_the_provider_request() {
    let mut env = TestEnv::new().await;
    let mut conn = env.store.pool().acquire().await.expect("connection");
    let recipe = dialectic_store::recipes::stage_recipe(&mut conn, "thesis")
        .await
        .expect("thesis recipe");
    drop(conn);
    let step = recipe
        .steps
        .iter()
        .find(|s| s.job_type == JobType::Execute)
        .expect("an EXECUTE step")
        .clone();

    let refused = recipe_edit::override_step(
        env.store.pool(),
        "thesis",
        &step.step_key,
        &serde_json::json!({"temprature": 0.3}),
        &serde_json::json!({}),
    )
    .await
    .expect_err("a misspelt key");
    assert!(
        matches!(&refused, RecipeEditError::InvalidStep { reason, .. } if reason.contains("temprature")),
        "{refused}"
    );
    recipe_edit::override_step(
        env.store.pool(),
        "thesis",
        &step.step_key,
        &serde_json::json!({"temperature": 0.3, "max_tokens": 123}),
        &serde_json::json!({}),
    )
    .await
    .expect("override");

    env.start_all_recording().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;

    let requests = dialectic_llm::recorded_requests();
    let (overridden, others): (Vec<_>, Vec<_>) = requests
        .iter()
        .partition(|r| r.output_type == step.output_type);
    assert!(!overridden.is_empty(), "the step ran: {requests:#?}");
    for request in &overridden {
        assert_eq!(
            (request.temperature, request.max_tokens),
            (Some(0.3), 123),
            "the step's parameters"
        );
    }
    assert!(!others.is_empty(), "other steps ran too");
    for request in &others {
        assert_eq!(request.temperature, None, "{}", request.output_type);
        assert!(
            request.max_tokens > 123,
            "{}: the model's own limit",
            request.output_type
        );
    }
    env.teardown().await;
}
