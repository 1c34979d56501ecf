//! The window between the model's reply and the capture. The wallet goes away
//! while a call is running: the call's hold was taken, the reply arrives, the
//! capture cannot reach the wallet. The reply is kept (no second paid call),
//! the executor records what the call cost and its capture fails, the hold
//! stays open; once the wallet is back its sweep captures the recorded cost:
//! every call that happened is charged exactly once, at what it cost, and
//! nothing stays held.
//! Alone in its test binary: it counts the simulated provider's calls, the
//! wallet's operations and the executor's warnings, all process-wide.

use dialectic_core::tokens::cost;
use dialectic_e2e::{TestEnv, eventually};
use dialectic_store::ledger::capture_key;
use dialectic_telemetry::metrics;
use std::sync::{Arc, Mutex};
use tracing_subscriber::layer::{Context, Layer};
use uuid::Uuid;

const PROMPT: &str = "# The wallet blinks\n\nThe wallet is down when the model replies.";

/// What the executor logs when a capture does not reach the wallet.
const CAPTURE_FAILED: &str = "capture failed; the wallet's sweep captures the recorded usage";

/// Warnings the services log: (job_id field, message).
type Warnings = Arc<Mutex<Vec<(String, String)>>>;

struct KeepWarnings(Warnings);

#[derive(Default)]
struct Fields {
    job_id: String,
    message: String,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "job_id" => self.job_id = format!("{value:?}"),
            "message" => self.message = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for KeepWarnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.0
            .lock()
            .expect("warnings")
            .push((fields.job_id, fields.message));
    }
}

/// Logs as `init_logging` does, and keeps every warning for the test to read.
fn keep_warnings() -> Warnings {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::prelude::*;
    let warnings = Warnings::default();
    let print = tracing_subscriber::fmt::layer()
        .with_test_writer()
        .with_filter(
            EnvFilter::try_from_env("TEST_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        );
    let keep = KeepWarnings(warnings.clone()).with_filter(LevelFilter::WARN);
    tracing_subscriber::registry()
        .with(print)
        .with(keep)
        .try_init()
        .expect("the first subscriber of this test binary");
    warnings
}

/// One hold of the session: (id, job, attempt, amount).
type Hold = (Uuid, Uuid, i32, i64);

async fn holds(env: &TestEnv, session: Uuid) -> Vec<Hold> {
    sqlx::query_as(
        "SELECT id, job_id, attempt, amount FROM token_wallet_transactions
          WHERE session_id = $1 AND kind = 'hold' ORDER BY created_at, id",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("holds")
}

/// The rows that closed a hold: (kind, amount, idempotency key).
async fn closes(env: &TestEnv, hold: Uuid) -> Vec<(String, i64, String)> {
    sqlx::query_as(
        "SELECT kind, amount, idempotency_key FROM token_wallet_transactions
          WHERE hold_id = $1 ORDER BY created_at, id",
    )
    .bind(hold)
    .fetch_all(env.store.pool())
    .await
    .expect("closing rows")
}

/// What the executor recorded a held call cost, if it did.
async fn usage(env: &TestEnv, hold: Uuid) -> Option<i64> {
    sqlx::query_scalar("SELECT amount FROM model_call_usage WHERE hold_id = $1")
        .bind(hold)
        .fetch_optional(env.store.pool())
        .await
        .expect("usage")
}

/// What the call of one hold cost, from the tokens its kept reply records
/// and its model's rates (never more than was held); None before the reply.
async fn cost_of_reply(env: &TestEnv, (_, job, attempt, held): Hold) -> Option<i64> {
    let reply: Option<(i32, i32, f64, f64)> = sqlx::query_as(
        "SELECT c.tokens_used_input, c.tokens_used_output,
                m.input_token_cost_rate, m.output_token_cost_rate
           FROM dialectic_contributions c JOIN ai_providers m ON m.id = c.model_id
          WHERE c.job_id = $1 AND c.attempt = $2",
    )
    .bind(job)
    .bind(attempt)
    .fetch_optional(env.store.pool())
    .await
    .expect("reply");
    reply.map(|(input, output, input_rate, output_rate)| {
        cost(input as u64, output as u64, input_rate, output_rate).min(held)
    })
}

/// (balance, held) of one wallet.
async fn wallet(env: &TestEnv, id: Uuid) -> (i64, i64) {
    sqlx::query_as("SELECT balance, held FROM token_wallets WHERE id = $1")
        .bind(id)
        .fetch_one(env.store.pool())
        .await
        .expect("wallet")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_whose_capture_fails_is_kept_and_charged_once() {
    let warnings = keep_warnings();
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
    // The seeded administrator's, whose key the env's clients send.
    let wallet_id: Uuid = sqlx::query_scalar(
        "SELECT w.id FROM token_wallets w JOIN users u ON u.id = w.user_id WHERE u.is_admin",
    )
    .fetch_one(env.store.pool())
    .await
    .expect("the administrator's wallet");
    let (balance_before, wallet_held_before) = wallet(&env, wallet_id).await;

    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    let payer: Uuid = sqlx::query_scalar(
        "SELECT w.id FROM token_wallets w JOIN dialectic_sessions s ON s.user_id = w.user_id
          WHERE s.id = $1",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("the session owner's wallet");
    assert_eq!(payer, wallet_id, "the session is the administrator's");
    let first = eventually(60, "the first call's hold", || async {
        holds(&env, session).await.first().copied()
    })
    .await;
    let (hold, job, attempt, held) = first;
    env.stop("wallet").await;
    assert!(
        tokio::net::TcpStream::connect(wallet_addr).await.is_err(),
        "the wallet still listens on {wallet_addr}"
    );

    // The reply arrives while the wallet is down, and is kept.
    let first_cost = eventually(60, "the first reply kept", || cost_of_reply(&env, first)).await;
    // The executor wrote down what the call cost, then tried to capture it
    // and could not; the hold stays open, its amount still held.
    assert_eq!(
        usage(&env, hold).await,
        Some(first_cost),
        "the call's cost, recorded for the sweep"
    );
    eventually(30, "the executor's capture to fail", || async {
        let warnings = warnings.lock().expect("warnings");
        warnings
            .iter()
            .any(|(id, message)| *id == job.to_string() && message == CAPTURE_FAILED)
            .then_some(())
    })
    .await;
    assert_eq!(
        closes(&env, hold).await,
        Vec::new(),
        "the hold is open while the wallet is down"
    );
    assert_eq!(
        wallet(&env, wallet_id).await,
        (balance_before, wallet_held_before + held),
        "nothing charged yet, the first call's hold still held"
    );
    assert_eq!(
        holds(&env, session).await,
        [first],
        "no other call was paid for while the wallet was down"
    );

    let mut restarted = env.settings.clone();
    restarted.wallet.listen = wallet_addr.to_string();
    env.start_with("wallet", restarted).await;
    // Back up, the wallet's sweep captures exactly the recorded cost under
    // the executor's own key, once the attempt is over.
    let captured = eventually(60, "the sweep to capture the first call", || async {
        let closed = closes(&env, hold).await;
        (!closed.is_empty()).then_some(closed)
    })
    .await;
    assert_eq!(
        captured,
        [("capture".to_string(), first_cost, capture_key(job, attempt))]
    );
    assert!(
        metrics::WALLET_OPERATIONS.get(&["late_capture", "ok"]) >= 1.0,
        "the sweep, not the executor, captured it"
    );

    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    eventually(30, "every hold settled", || async {
        (env.held().await == held_before).then_some(())
    })
    .await;

    // Every call charged once, at what it cost; nothing else charged.
    let calls = dialectic_llm::recorded_requests().len();
    let all = holds(&env, session).await;
    assert_eq!(all.len(), calls, "one hold per model call");
    let mut charged = 0;
    for one in all {
        let cost = cost_of_reply(&env, one)
            .await
            .unwrap_or_else(|| panic!("hold {one:?} has no kept reply"));
        assert_eq!(usage(&env, one.0).await, Some(cost), "hold {one:?}");
        assert_eq!(
            closes(&env, one.0).await,
            [("capture".to_string(), cost, capture_key(one.1, one.2))],
            "hold {one:?}"
        );
        charged += cost;
    }
    let replies = env
        .count(
            "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1",
            session,
        )
        .await;
    assert_eq!(
        replies, calls as i64,
        "every reply kept: no call was made twice"
    );
    assert_eq!(
        wallet(&env, wallet_id).await,
        (balance_before - charged, wallet_held_before),
        "the wallet paid exactly what the calls cost"
    );
    env.teardown().await;
}
