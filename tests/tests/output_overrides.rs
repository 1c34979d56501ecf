//! A recipe step's `output_overrides` change what it writes: the thesis
//! business case overridden to plain JSON without a template is saved but no
//! longer rendered, while the other thesis documents render as before. An
//! override naming an output the step does not have, or an unknown field, is
//! refused naming it, and nothing is written.

use dialectic_e2e::TestEnv;
use dialectic_proto::v1::ListStageDocumentsRequest;
use dialectic_store::recipe_edit::{self, RecipeEditError};

const PROMPT: &str = "# Output overrides\n\nA repair café whose business case stays raw.";
const STEP: &str = "thesis_generate_business_case";

async fn refused(env: &TestEnv, overrides: serde_json::Value, expected: &str) {
    let err = recipe_edit::override_step(
        env.store.pool(),
        "thesis",
        STEP,
        &serde_json::json!({}),
        &overrides,
    )
    .await
    .expect_err("a bad override");
    assert!(
        matches!(&err, RecipeEditError::InvalidStep { reason, .. } if reason.contains(expected)),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_output_override_stops_a_document_rendering() {
    let mut env = TestEnv::new().await;
    refused(
        &env,
        serde_json::json!({"risk_register": {"file_type": "json"}}),
        "output_overrides.risk_register: the step has no such output",
    )
    .await;
    refused(
        &env,
        serde_json::json!({"business_case": {"filetype": "json"}}),
        "output_overrides.business_case.filetype is not a known field",
    )
    .await;
    let clones: i64 = sqlx::query_scalar("SELECT count(*) FROM dialectic_stage_recipe_steps")
        .fetch_one(env.store.pool())
        .await
        .expect("clone count");
    assert_eq!(clones, 0, "a refused edit clones nothing");

    recipe_edit::override_step(
        env.store.pool(),
        "thesis",
        STEP,
        &serde_json::json!({}),
        &serde_json::json!({"business_case": {"file_type": "json", "template_filename": null}}),
    )
    .await
    .expect("override");
    env.start_all().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;

    let mut client = env.gateway().await;
    let mut rendered: Vec<String> = client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            iteration: 1,
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner()
        .documents
        .into_iter()
        .map(|d| d.document_key)
        .collect();
    rendered.sort();
    assert_eq!(
        rendered,
        ["feature_spec", "success_metrics", "technical_approach"],
        "the business case is no longer rendered"
    );
    let kept = env
        .count(
            "SELECT count(*) FROM dialectic_contributions
              WHERE session_id = $1 AND document_key = 'business_case' AND is_intermediate",
            uuid::Uuid::parse_str(&session_id).expect("uuid"),
        )
        .await;
    assert_eq!(kept, 1, "the business case is still written, as JSON");
    env.teardown().await;
}
