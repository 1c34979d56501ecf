//! A recipe step's `object_filter` narrows its inputs: the planner fans the
//! step out only over documents it admits, and each job reads only those.
//! With two models, the business-case critique filtered to `simulated-b`'s
//! business case runs once per critic (not once per critic and lineage) and
//! reads exactly that document; an unfiltered critique still reads the whole
//! lineage. A bad filter is refused naming its key.
//! Alone in its test binary: it reads the simulated provider's transcript.

use dialectic_core::prompt::{ChatRequest, InputRef};
use dialectic_e2e::TestEnv;
use dialectic_store::recipe_edit::{self, RecipeEditError};

const PROMPT: &str = "# Object filter\n\nA tool library whose critics read one proposal.";
const FILTERED_STEP: &str = "antithesis_business_case_critique";
const FILTERED_OUTPUT: &str = "business_case_critique";
const UNFILTERED_OUTPUT: &str = "risk_register";

fn thesis_documents(request: &ChatRequest) -> Vec<&InputRef> {
    request
        .inputs
        .iter()
        .filter(|i| i.kind == "document" && i.stage_slug == "thesis")
        .collect()
}

fn file_name(input: &InputRef) -> &str {
    let key = input.storage_key.as_deref().unwrap_or_default();
    key.rsplit('/').next().unwrap_or(key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_object_filter_narrows_the_fan_out_and_the_inputs() {
    let mut env = TestEnv::new().await;
    let refused = recipe_edit::set_object_filter(
        env.store.pool(),
        "antithesis",
        FILTERED_STEP,
        &serde_json::json!({"document_key": ["business_case"]}),
    )
    .await
    .expect_err("a misspelt key");
    assert!(
        matches!(&refused, RecipeEditError::InvalidStep { reason, .. } if reason.contains("document_key")),
        "{refused}"
    );
    recipe_edit::set_object_filter(
        env.store.pool(),
        "antithesis",
        FILTERED_STEP,
        &serde_json::json!({"document_keys": ["business_case"], "models": ["simulated-b"]}),
    )
    .await
    .expect("filter");

    env.start_all_recording().await;
    let (_, session_id) = env
        .new_session(PROMPT, &["simulated", "simulated-b"], true)
        .await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;

    let requests = dialectic_llm::recorded_requests();
    let filtered: Vec<&ChatRequest> = requests
        .iter()
        .filter(|r| r.output_type == FILTERED_OUTPUT)
        .collect();
    assert_eq!(
        filtered.len(),
        2,
        "one critique per critic, of lineage b only"
    );
    for request in &filtered {
        let read: Vec<&str> = thesis_documents(request)
            .into_iter()
            .map(file_name)
            .collect();
        assert_eq!(
            read,
            ["simulated-b_0_business_case.md"],
            "exactly the admitted document"
        );
    }
    let unfiltered: Vec<&ChatRequest> = requests
        .iter()
        .filter(|r| r.output_type == UNFILTERED_OUTPUT)
        .collect();
    assert_eq!(unfiltered.len(), 4, "per critic and lineage");
    for request in &unfiltered {
        let read = thesis_documents(request);
        assert_eq!(read.len(), 4, "a whole lineage: {read:?}");
    }
    env.teardown().await;
}
