//! Clarification loops (seed 004 `needs_clarification`): a reply that asks
//! an earlier step of its stage a question makes the planner run that step
//! again with the question in its prompt, then the steps downstream of it,
//! once; the replaced jobs are superseded and their documents kept. Past
//! `planner.max_clarification_rounds` a request is ignored.

use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::TestEnv;
use dialectic_llm::CLARIFY_QUESTION;
use dialectic_proto::v1::SubmitStageResponsesRequest;
use dialectic_store::pipelines;
use uuid::Uuid;

const PROMPT: &str = "Clause 4.2 of the lease. [[simulate:clarify:check>review_draft]]";

async fn install(env: &TestEnv) {
    let file = PipelineFile::parse(include_str!("../pipelines/clarify.toml")).expect("parses");
    pipelines::install(env.store.pool(), &file)
        .await
        .expect("install");
}

/// (status, count) of a step's jobs, by status.
async fn jobs_of(env: &TestEnv, session: &str, step: &str) -> Vec<(String, i64)> {
    sqlx::query_as(
        "SELECT status, count(*) FROM dialectic_generation_jobs
          WHERE session_id = $1 AND step_key = $2 GROUP BY status ORDER BY status",
    )
    .bind(Uuid::parse_str(session).expect("uuid"))
    .bind(step)
    .fetch_all(env.store.pool())
    .await
    .expect("jobs")
}

fn done(n: i64) -> Vec<(String, i64)> {
    vec![("completed".to_string(), n)]
}

fn rerun() -> Vec<(String, i64)> {
    vec![("completed".to_string(), 1), ("superseded".to_string(), 1)]
}

/// The user messages of every recorded request for `output_type`, in order.
fn prompts(output_type: &str) -> Vec<String> {
    dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.output_type == output_type)
        .map(|r| {
            r.messages
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_reruns_the_asked_step_and_its_dependents_exactly_once() {
    let mut env = TestEnv::new().await;
    install(&env).await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let (_, session) = env
        .new_session_on("clarify", PROMPT, &["simulated"], false)
        .await;
    env.wait_for_session(&session, "pending_review", true).await;

    let watcher = env
        .watch_events(&session, |kind| kind.starts_with("clarification"))
        .await;
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session.clone(),
            stage_slug: "intake".into(),
            responses: Vec::new(),
        })
        .await
        .expect("advance");
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;
    let seen: Vec<(String, String)> = watcher
        .await
        .expect("watcher")
        .into_iter()
        .map(|e| (e.kind, e.message))
        .collect();
    assert_eq!(
        seen,
        [(
            "clarification_requested".to_string(),
            format!(
                "round 1 of 2: review_check asked review_draft: {CLARIFY_QUESTION} (2 job(s) run again)"
            )
        )]
    );

    assert_eq!(jobs_of(&env, &session, "review_plan").await, done(1));
    assert_eq!(jobs_of(&env, &session, "review_draft").await, rerun());
    assert_eq!(jobs_of(&env, &session, "review_check").await, rerun());
    assert_eq!(jobs_of(&env, &session, "review_summary").await, done(1));

    let drafts = prompts("draft");
    assert_eq!(drafts.len(), 2);
    assert!(!drafts[0].contains(CLARIFY_QUESTION));
    assert!(drafts[1].contains(CLARIFY_QUESTION), "{}", drafts[1]);
    let checks = prompts("check");
    assert_eq!(checks.len(), 2);
    assert!(checks[1].contains(CLARIFY_QUESTION), "told what was asked");
    let kept: Vec<(String, bool)> = sqlx::query_as(
        "SELECT document_key, is_latest_edit FROM dialectic_contributions
          WHERE session_id = $1 AND document_key IN ('draft', 'check') ORDER BY document_key, created_at",
    )
    .bind(Uuid::parse_str(&session).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("contributions");
    let kept: Vec<(&str, bool)> = kept.iter().map(|(k, l)| (k.as_str(), *l)).collect();
    assert_eq!(
        kept,
        [
            ("check", false),
            ("check", true),
            ("draft", false),
            ("draft", true)
        ],
        "the replaced replies are kept, superseded"
    );
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_past_the_rounds_allowed_is_ignored() {
    let mut env = TestEnv::new().await;
    install(&env).await;
    env.settings.planner.max_clarification_rounds = 0;
    env.start_all().await;
    let (_, session) = env
        .new_session_on("clarify", PROMPT, &["simulated"], true)
        .await;
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;
    assert_eq!(jobs_of(&env, &session, "review_draft").await, done(1));
    assert_eq!(jobs_of(&env, &session, "review_check").await, done(1));
    let rounds = env
        .count(
            "SELECT count(*) FROM dialectic_clarifications WHERE session_id = $1",
            Uuid::parse_str(&session).expect("uuid"),
        )
        .await;
    assert_eq!(rounds, 0);
    env.teardown().await;
}
