//! Graceful shutdown of an executor with a model call longer than its grace:
//! the call is handed back (its hold released, its lease given up, the job
//! retried) instead of being abandoned to a lease that would keep the user's
//! money held and the job stuck for minutes. The retry runs on the next
//! executor, and the user pays for exactly the replies that were kept.

use dialectic_e2e::{TestEnv, eventually};
use std::time::{Duration, Instant};
use uuid::Uuid;

const PROMPT: &str = "# A rolling update during a long call\n\nThe executor is stopped while the model is still thinking.";

async fn scalar(env: &TestEnv, sql: &str, session: Uuid) -> i64 {
    env.count(sql, session).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_outlasting_the_grace_is_handed_back_and_paid_once() {
    let mut env = TestEnv::new().await;
    for name in ["wallet", "indexer", "planner", "renderer", "gateway"] {
        env.start(&[name]).await;
        env.wait_serving(name).await;
    }
    let mut slow = env.settings.clone();
    slow.executor.simulated_latency_ms = 600_000;
    slow.shutdown_grace_secs = 1;
    // Far longer than the test: only the hand-back can free the job.
    slow.executor.worker.lease_secs = 600;
    env.start_with("executor", slow).await;
    env.wait_serving("executor").await;
    let held_before = env.held().await;

    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    eventually(60, "a model call in flight with its hold", || async {
        let holds = scalar(
            &env,
            "SELECT count(*) FROM token_wallet_transactions WHERE session_id = $1 AND kind = 'hold'",
            session,
        )
        .await;
        (holds > 0).then_some(())
    })
    .await;
    assert!(env.held().await > held_before, "the call's hold is open");

    let stopping = Instant::now();
    env.stop("executor").await;
    let stopped_in = stopping.elapsed();
    assert!(
        stopped_in < Duration::from_secs(20),
        "the executor stopped after its grace and the hand-back, not the call ({stopped_in:?})"
    );
    assert_eq!(
        env.held().await,
        held_before,
        "the handed-back call's hold was released"
    );
    assert_eq!(
        scalar(
            &env,
            "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND lease_owner IS NOT NULL",
            session
        )
        .await,
        0,
        "no job is left leased to the stopped executor"
    );
    // The planner reads the hand-back from the outbox and schedules a retry.
    eventually(30, "the handed-back job retried", || async {
        let handed_back = scalar(
            &env,
            "SELECT count(*) FROM dialectic_generation_jobs
              WHERE session_id = $1 AND status <> 'processing' AND error_details->>'code' = 'handed_back'",
            session,
        )
        .await;
        (handed_back == 1).then_some(())
    })
    .await;

    // The next executor (a quick model) picks the job up again.
    let mut quick = env.settings.clone();
    quick.executor.simulated_latency_ms = 0;
    env.start_with("executor", quick).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    assert_eq!(env.held().await, held_before, "nothing stays held");
    let captures = scalar(
        &env,
        "SELECT count(*) FROM token_wallet_transactions WHERE session_id = $1 AND kind = 'capture'",
        session,
    )
    .await;
    let replies = scalar(
        &env,
        "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1",
        session,
    )
    .await;
    assert_eq!(
        captures, replies,
        "one charge per reply kept; the dropped call cost nothing"
    );
    env.teardown().await;
}
