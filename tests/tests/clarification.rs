//! Clarification loops (seed 004 `needs_clarification`): a reply that asks
//! an earlier step of its stage a question makes the planner run that step
//! again with the question in its prompt, then the steps downstream of it,
//! once; the replaced jobs are superseded and their documents kept. Past
//! `planner.max_clarification_rounds` a request is refused, and watchers are
//! told why.
//!
//! The simulated model asks only while the prompt carries no clarification
//! note, so "once" here is the planner's: the asking reply is delivered to
//! the planner again (as the queue redelivers a message whose ack was lost),
//! right after it arrived and again once the stage is over, and still one
//! round runs, counted from the job rows.

use dialectic_cache::Cache;
use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::{QueueTap, TestEnv, eventually};
use dialectic_llm::CLARIFY_QUESTION;
use dialectic_planner::engine::Engine;
use dialectic_proto::v1::SubmitStageResponsesRequest;
use dialectic_proto::v1::queue::envelope::Body;
use dialectic_proto::v1::queue::{JobOutcome, job_outcome};
use dialectic_store::pipelines;
use serde_json::json;
use std::sync::{Arc, OnceLock};
use uuid::Uuid;

const PROMPT: &str = "Clause 4.2 of the lease. [[simulate:clarify:check>review_draft]]";

/// The seeded model `simulated`.
const SIMULATED: Uuid = Uuid::from_u128(0x5000_0000_0000_0000_0000_0000_0000_0001);

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

/// One job of the review stage: (step, status, key, attempts, the
/// clarification round its payload carries).
type ReviewJob = (String, String, String, i32, Option<serde_json::Value>);

/// Every non-render job of the review stage, by step, oldest first.
async fn review_jobs(env: &TestEnv, session: &str) -> Vec<ReviewJob> {
    sqlx::query_as(
        "SELECT step_key, status, job_key, attempt_count,
                NULLIF(payload->'clarification', 'null'::jsonb)
           FROM dialectic_generation_jobs
          WHERE session_id = $1 AND stage_slug = 'review' AND job_type <> 'RENDER'
          ORDER BY step_key, created_at, job_key",
    )
    .bind(Uuid::parse_str(session).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("review jobs")
}

/// The review stage's root PLAN job.
async fn review_root(env: &TestEnv, session: &str) -> Uuid {
    sqlx::query_scalar(
        "SELECT id FROM dialectic_generation_jobs
          WHERE session_id = $1 AND stage_slug = 'review' AND parent_job_id IS NULL",
    )
    .bind(Uuid::parse_str(session).expect("uuid"))
    .fetch_one(env.store.pool())
    .await
    .expect("review root")
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

/// The first success on the wire whose reply asks a question.
async fn asking_outcome(tap: &QueueTap) -> JobOutcome {
    eventually(120, "a reply asking a question, on the wire", || async {
        tap.take()
            .await
            .into_iter()
            .find_map(|(_, envelope)| match envelope.body {
                Some(Body::JobOutcome(outcome)) => match &outcome.result {
                    Some(job_outcome::Result::Succeeded(done))
                        if !done.clarifications.is_empty() =>
                    {
                        Some(outcome)
                    }
                    _ => None,
                },
                _ => None,
            })
    })
    .await
}

/// Delivers `outcome` to another planner replica, as a redelivered message.
async fn redeliver(replica: &Engine, outcome: &JobOutcome) {
    replica
        .on_outcome(outcome, None)
        .await
        .unwrap_or_else(|e| panic!("a duplicate of a delivered outcome is a no-op, not: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_reruns_the_asked_step_and_its_dependents_exactly_once() {
    let mut env = TestEnv::new().await;
    install(&env).await;
    env.start_all_recording().await;
    let tap = QueueTap::new(&env, &[dialectic_queue::keys::JOB_EVENT]).await;
    let cache = Arc::new(OnceLock::new());
    let connected = Cache::connect(&env.settings.redis.url, 60)
        .await
        .expect("redis");
    assert!(cache.set(connected).is_ok());
    let replica = Engine::new(
        env.store.clone(),
        env.blob.clone(),
        env.settings.planner.clone(),
        cache,
    );
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
            client_request_id: String::new(),
        })
        .await
        .expect("advance");
    // The check's question, delivered twice more while the stage runs.
    let asked = asking_outcome(&tap).await;
    tokio::join!(redeliver(&replica, &asked), redeliver(&replica, &asked));
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
        )],
        "one round, however often the asking reply is delivered"
    );
    // And once more after the stage is over.
    redeliver(&replica, &asked).await;

    assert_eq!(jobs_of(&env, &session, "review_plan").await, done(1));
    assert_eq!(jobs_of(&env, &session, "review_draft").await, rerun());
    assert_eq!(jobs_of(&env, &session, "review_check").await, rerun());
    assert_eq!(jobs_of(&env, &session, "review_summary").await, done(1));

    // One round, recorded against the reply that asked; the jobs it replaced
    // superseded, and one job of each step after, carrying the round.
    let rounds: Vec<(i32, Uuid, String, String, String)> = sqlx::query_as(
        "SELECT round, asked_by_job, asked_by_step, step_key, question
           FROM dialectic_clarifications WHERE session_id = $1",
    )
    .bind(Uuid::parse_str(&session).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("rounds");
    let asker = Uuid::parse_str(&asked.job_id).expect("job id");
    assert_eq!(
        rounds,
        [(
            1,
            asker,
            "review_check".to_string(),
            "review_draft".to_string(),
            CLARIFY_QUESTION.to_string()
        )]
    );
    let root = review_root(&env, &session).await;
    let round = json!({
        "round": 1,
        "asked_by": "review_check",
        "step_key": "review_draft",
        "question": CLARIFY_QUESTION,
    });
    let job = |step: &str, status: &str, key: String, attempts: i32, round: Option<&_>| {
        (
            step.to_string(),
            status.to_string(),
            key,
            attempts,
            round.cloned(),
        )
    };
    let jobs = review_jobs(&env, &session).await;
    assert_eq!(
        jobs,
        [
            job(
                "review_check",
                "superseded",
                format!("{root}:review_check"),
                1,
                None
            ),
            job(
                "review_check",
                "completed",
                format!("{root}:review_check:clarified1"),
                2,
                Some(&round)
            ),
            job(
                "review_draft",
                "superseded",
                format!("{root}:review_draft"),
                1,
                None
            ),
            job(
                "review_draft",
                "completed",
                format!("{root}:review_draft:clarified1"),
                2,
                Some(&round)
            ),
            job(
                "review_plan",
                "completed",
                format!("{session}:review:1:{SIMULATED}"),
                1,
                None
            ),
            job(
                "review_summary",
                "completed",
                format!("{root}:review_summary:clarified1"),
                1,
                Some(&round)
            ),
        ],
        "one rerun of the asked step and its dependents"
    );
    let asking_job: (String, String) =
        sqlx::query_as("SELECT step_key, status FROM dialectic_generation_jobs WHERE id = $1")
            .bind(asker)
            .fetch_one(env.store.pool())
            .await
            .expect("the asking job");
    assert_eq!(
        asking_job,
        ("review_check".to_string(), "superseded".to_string()),
        "the reply that asked was the first check's"
    );

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
    tap.close().await;
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_past_the_rounds_allowed_is_ignored() {
    let mut env = TestEnv::new().await;
    install(&env).await;
    env.settings.planner.max_clarification_rounds = 0;
    env.start_all().await;
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
            client_request_id: String::new(),
        })
        .await
        .expect("advance");
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;

    // The check asked the draft, and the planner refused, saying why.
    let check: Uuid = sqlx::query_scalar(
        "SELECT id FROM dialectic_generation_jobs WHERE session_id = $1 AND step_key = 'review_check'",
    )
    .bind(Uuid::parse_str(&session).expect("uuid"))
    .fetch_one(env.store.pool())
    .await
    .expect("the one check job");
    let seen: Vec<(String, String, String, String)> = watcher
        .await
        .expect("watcher")
        .into_iter()
        .map(|e| (e.kind, e.stage_slug, e.job_id, e.message))
        .collect();
    assert_eq!(
        seen,
        [(
            "clarification_ignored".to_string(),
            "review".to_string(),
            check.to_string(),
            "review_draft: the session has had its 0 clarification round(s)".to_string()
        )],
        "the check's question refused, with the planner's reason"
    );
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
