//! Fan-out over the items of an earlier JSON output (`per_item`): an
//! outline's `sections` array becomes one job per section, each reading only
//! its own section; the step after them reads every section's result.

use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::TestEnv;
use dialectic_store::pipelines;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_job_per_outline_section_each_reading_its_own() {
    let mut env = TestEnv::new().await;
    let file = PipelineFile::parse(include_str!("../pipelines/outline.toml")).expect("parses");
    pipelines::install(env.store.pool(), &file)
        .await
        .expect("install");
    env.start_all_recording().await;
    let (_, session) = env
        .new_session_on(
            "outline",
            "An essay on tides. [[simulate:items:sections:3]]",
            &["simulated"],
            false,
        )
        .await;
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;

    let requests = dialectic_llm::recorded_requests();
    let prompt = |r: &dialectic_core::prompt::ChatRequest| {
        r.messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut read: Vec<Vec<usize>> = requests
        .iter()
        .filter(|r| r.output_type == "section")
        .map(|r| {
            let text = prompt(r);
            (1..=3)
                .filter(|i| text.contains(&format!("sections item {i} of 3")))
                .collect()
        })
        .collect();
    read.sort();
    assert_eq!(read, [vec![1], vec![2], vec![3]], "one section each");

    let essays: Vec<_> = requests
        .iter()
        .filter(|r| r.output_type == "essay")
        .collect();
    assert_eq!(essays.len(), 1);
    let sections = essays[0]
        .inputs
        .iter()
        .filter(|i| i.document_key == "section")
        .count();
    assert_eq!(sections, 3, "the essay reads every section");

    let names: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT file_name FROM dialectic_contributions
          WHERE session_id = $1 AND document_key = 'section'",
    )
    .bind(Uuid::parse_str(&session).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("names");
    assert_eq!(names.len(), 3, "each section its own file: {names:?}");
    env.teardown().await;
}
