//! The window between the model's reply and the capture. The wallet goes away
//! while a call is running: the call's hold was taken, the reply arrives, the
//! capture cannot reach the wallet. The reply is kept (no second paid call),
//! and once the wallet is back its sweep captures what the executor recorded:
//! every call that happened is charged exactly once, and nothing stays held.
//! Alone in its test binary: it counts the simulated provider's calls.

use dialectic_e2e::{TestEnv, eventually};
use uuid::Uuid;

const PROMPT: &str = "# The wallet blinks\n\nThe wallet is down when the model replies.";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_whose_capture_fails_is_kept_and_charged_once() {
    let mut env = TestEnv::new().await;
    for name in ["wallet", "indexer", "planner", "renderer", "gateway"] {
        env.start(&[name]).await;
        env.wait_serving(name).await;
    }
    let wallet_addr = env.addr("wallet");
    let mut slow = env.settings.clone();
    slow.executor.simulated_latency_ms = 2_000;
    slow.executor.simulated_record_requests = true;
    env.start_with("executor", slow).await;
    env.wait_serving("executor").await;
    let held_before = env.held().await;

    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    eventually(60, "the first call's hold", || async {
        let holds = env
            .count(
                "SELECT count(*) FROM token_wallet_transactions WHERE session_id = $1 AND kind = 'hold'",
                session,
            )
            .await;
        (holds > 0).then_some(())
    })
    .await;
    env.stop("wallet").await;
    // The reply arrives while the wallet is down, and is kept.
    eventually(60, "the first reply kept", || async {
        let kept = env
            .count(
                "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1",
                session,
            )
            .await;
        (kept > 0).then_some(())
    })
    .await;
    let mut wallet = env.settings.clone();
    wallet.wallet.listen = wallet_addr.to_string();
    env.start_with("wallet", wallet).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    eventually(30, "every hold settled", || async {
        (env.held().await == held_before).then_some(())
    })
    .await;

    let calls = dialectic_llm::recorded_requests().len() as i64;
    let captures = env
        .count(
            "SELECT count(*) FROM token_wallet_transactions WHERE session_id = $1 AND kind = 'capture'",
            session,
        )
        .await;
    let replies = env
        .count(
            "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1",
            session,
        )
        .await;
    assert_eq!(captures, calls, "every model call charged once");
    assert_eq!(replies, calls, "every reply kept: no call was made twice");
    env.teardown().await;
}
