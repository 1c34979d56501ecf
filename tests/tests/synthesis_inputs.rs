//! Synthesis reads the antithesis's comparison vectors (seed 000: the JSON
//! scores antithesis writes "for synthesis"; never rendered, so a rule for the
//! stage's rendered documents alone never found them). The step that plans the
//! final deliverables is sent every model's vector, whole.
//! Alone in its test binary: it reads the simulated provider's transcript.

use dialectic_e2e::TestEnv;

const PROMPT: &str = "# Synthesis inputs\n\nA proposal to critique, score and reconcile.";
const HEADER: &str = "--- Comparison vectors (the antithesis scores of each proposal) ---";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_final_synthesis_plan_reads_every_comparison_vector() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], true).await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;

    let vectors = env
        .count(
            "SELECT count(*) FROM dialectic_contributions
              WHERE session_id = $1 AND stage_slug = 'antithesis' AND document_key = 'comparison_vector'",
            uuid::Uuid::parse_str(&session_id).expect("uuid"),
        )
        .await;
    assert!(vectors > 0, "antithesis wrote comparison vectors");
    let requests = dialectic_llm::recorded_requests();
    let text = |r: &dialectic_core::prompt::ChatRequest| {
        r.messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let reading: Vec<String> = requests
        .iter()
        .map(text)
        .filter(|t| t.contains(HEADER))
        .collect();
    assert_eq!(
        reading.len(),
        1,
        "one final synthesis plan (one model) reads them"
    );
    let sections = reading[0].matches("\"dimensions\"").count() as i64;
    assert_eq!(sections, vectors, "every vector, whole: {}", reading[0]);
    env.teardown().await;
}
