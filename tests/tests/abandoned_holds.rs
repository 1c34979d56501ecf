//! DESIGN §3.11: a hold whose attempt died is released when that attempt is
//! given up, not at its 15-minute expiry. The hold of the attempt a job is
//! processing stays; once the job moves on (retried after its lease expired,
//! or ended) the wallet's sweep releases it, and the user's available balance
//! is whole again.

use dialectic_core::ids::{JobId, ModelId, ProjectId, SessionId, TransactionId, UserId, WalletId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::ledger::LedgerKind;
use dialectic_core::payload::JobPayload;
use dialectic_e2e::{TestEnv, eventually};
use dialectic_store::ledger::{self, References};
use dialectic_store::{jobs, projects, sessions, wallets};
use uuid::Uuid;

const USER: UserId = UserId(Uuid::from_u128(1));
const MODEL: ModelId = ModelId(Uuid::from_u128(0x5000_0000_0000_0000_0000_0000_0000_0001));
const AMOUNT: i64 = 1_234;

/// A PLAN job processing its first attempt, in a new session of a new project.
async fn processing_job(env: &TestEnv) -> JobId {
    let (user, model) = (USER, MODEL);
    let (project, _) = projects::insert_project(
        env.store.pool(),
        &projects::NewProject {
            id: ProjectId::new(),
            user_id: user,
            name: "Holds",
            slug: "holds",
            prompt: "Hold me.",
            prompt_key: "",
            client_request_id: None,
            pipeline: projects::DEFAULT_PIPELINE,
        },
    )
    .await
    .expect("project");
    let mut tx = env.store.begin().await.expect("tx");
    let (session, _) = sessions::insert_session(
        &mut tx,
        &sessions::NewSession {
            id: SessionId::new(),
            project_id: project.id,
            user_id: user,
            model_ids: &[model],
            description: None,
            client_request_id: None,
            auto_advance: false,
            pushback: Default::default(),
            model_roles: &Default::default(),
        },
    )
    .await
    .expect("session");
    let job = jobs::insert(
        &mut tx,
        &jobs::NewJob {
            id: JobId::new(),
            job_key: format!("{}:thesis:1:{model}", session.id),
            session_id: session.id,
            user_id: user,
            stage_slug: "thesis",
            iteration: 1,
            job_type: JobType::Plan,
            status: JobStatus::Pending,
            step_id: None,
            step_key: None,
            model_id: Some(model),
            document_key: Some("header_context"),
            payload: &JobPayload::default(),
            parent_job_id: None,
            prerequisite_job_id: None,
            target_contribution_id: None,
            max_attempts: 3,
        },
    )
    .await
    .expect("job")
    .expect("new job");
    tx.commit().await.expect("commit");
    job
}

/// The worker's claim: processing, one more attempt. Returns that attempt.
async fn claim(env: &TestEnv, job: JobId) -> i32 {
    let mut tx = env.store.begin().await.expect("tx");
    let row = jobs::claim::<()>(
        &mut *tx,
        job,
        &[JobType::Plan],
        jobs::ClaimScope::Any,
        "test-worker",
        60,
    )
    .await
    .expect("claim")
    .expect("claimable");
    tx.commit().await.expect("commit");
    row.job.attempt_count
}

async fn set_status(env: &TestEnv, job: JobId, status: JobStatus) {
    let mut tx = env.store.begin().await.expect("tx");
    jobs::set_status(&mut tx, job, status, None, None)
        .await
        .expect("status");
    tx.commit().await.expect("commit");
}

async fn hold(env: &TestEnv, wallet: WalletId, job: JobId, attempt: i32) -> TransactionId {
    let refs = References {
        job_id: Some(job),
        attempt: Some(attempt),
        purpose: Some("model_call".into()),
        ..Default::default()
    };
    ledger::hold(
        env.store.pool(),
        wallet,
        AMOUNT,
        &format!("hold:{job}:{attempt}"),
        &refs,
        900,
    )
    .await
    .expect("hold")
    .id
}

/// A job processing its first attempt, with that attempt's hold: (job, attempt, hold).
async fn held_attempt(env: &TestEnv, wallet: WalletId) -> (JobId, i32, TransactionId) {
    let job = processing_job(env).await;
    let attempt = claim(env, job).await;
    (job, attempt, hold(env, wallet, job, attempt).await)
}

async fn held(env: &TestEnv, wallet: WalletId) -> i64 {
    wallets::wallet_balance(env.store.pool(), Some(wallet), None)
        .await
        .expect("wallet")
        .held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_attempts_hold_is_released_when_its_job_moves_on() {
    let mut env = TestEnv::new().await;
    let pool = env.store.pool().clone();
    let wallet = wallets::wallet_balance(&pool, None, Some(USER))
        .await
        .expect("wallet")
        .id;
    let before = held(&env, wallet).await;
    let (job, first, first_hold) = held_attempt(&env, wallet).await;

    // The attempt is alive: its hold stays.
    assert_eq!(
        ledger::settle_abandoned(&pool, 100).await.expect("sweep"),
        ledger::Settled::default()
    );
    assert_eq!(held(&env, wallet).await, before + AMOUNT);

    // Its lease expired and the planner put the job back to retrying.
    set_status(&env, job, JobStatus::Retrying).await;
    assert_eq!(
        ledger::settle_abandoned(&pool, 100).await.expect("sweep"),
        ledger::Settled {
            captured: 0,
            released: 1
        }
    );
    assert_eq!(held(&env, wallet).await, before, "held is whole again");
    let reason: String = sqlx::query_scalar(
        "SELECT reason FROM token_wallet_transactions WHERE hold_id = $1 AND kind = 'release'",
    )
    .bind(first_hold)
    .fetch_one(&pool)
    .await
    .expect("the release row");
    assert!(reason.contains("attempt ended"), "{reason}");
    // A second sweep finds nothing more.
    assert_eq!(
        ledger::settle_abandoned(&pool, 100).await.expect("sweep"),
        ledger::Settled::default()
    );

    // Through the wallet service's own sweeper: the retry's attempt takes a
    // hold and its worker dies too; the job then fails for good.
    env.start(&["wallet"]).await;
    env.wait_serving("wallet").await;
    let second = claim(&env, job).await;
    assert_eq!(second, first + 1);
    hold(&env, wallet, job, second).await;
    assert_eq!(held(&env, wallet).await, before + AMOUNT);
    set_status(&env, job, JobStatus::RetryLoopFailed).await;
    eventually(
        30,
        "the wallet to release the dead attempt's hold",
        || async { (held(&env, wallet).await == before).then_some(()) },
    )
    .await;
    env.teardown().await;
}

/// The window between the model's reply and the capture: the executor wrote
/// down what the call cost, then died (or could not reach the wallet). The
/// call happened, so once its attempt is over the sweep captures that amount,
/// under the executor's own capture key, instead of releasing the hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_attempts_recorded_call_is_captured_not_released() {
    let env = TestEnv::new().await;
    let pool = env.store.pool().clone();
    let wallet = wallets::wallet_balance(&pool, None, Some(USER))
        .await
        .expect("wallet");
    let (job, attempt, hold_id) = held_attempt(&env, wallet.id).await;
    // What the call used and cost in money goes with it (issue 56, "Prices").
    let usage = ledger::CallUsage {
        input_tokens: 600,
        output_tokens: 100,
        cached_input_tokens: 200,
        cache_write_input_tokens: 0,
        money: Some(dialectic_core::price::Money {
            currency: "USD".into(),
            nanos: 1_525_000,
        }),
    };
    ledger::record_call_usage(&pool, hold_id, 700, Some(&usage))
        .await
        .expect("usage");
    assert_eq!(
        ledger::settle_abandoned(&pool, 100).await.expect("sweep"),
        ledger::Settled::default(),
        "the attempt is alive: its own capture may still come"
    );
    // Nor does its expiry release it: the call happened.
    sqlx::query(
        "UPDATE token_wallet_transactions SET expires_at = now() - interval '1 minute' WHERE id = $1",
    )
    .bind(hold_id)
    .execute(&pool)
    .await
    .expect("expire the hold");
    assert_eq!(
        ledger::release_expired(&pool, 100)
            .await
            .expect("expiry sweep"),
        0
    );

    set_status(&env, job, JobStatus::Retrying).await;
    assert_eq!(
        ledger::settle_abandoned(&pool, 100).await.expect("sweep"),
        ledger::Settled {
            captured: 1,
            released: 0
        }
    );
    let after = wallets::wallet_balance(&pool, Some(wallet.id), None)
        .await
        .expect("wallet");
    assert_eq!(
        (after.balance, after.held),
        (wallet.balance - 700, wallet.held),
        "charged what the call cost, nothing left held"
    );
    let key: String = sqlx::query_scalar(
        "SELECT idempotency_key FROM token_wallet_transactions WHERE hold_id = $1 AND kind = 'capture'",
    )
    .bind(hold_id)
    .fetch_one(&pool)
    .await
    .expect("the capture row");
    let recorded: (i64, i64, i64, String, i64) = sqlx::query_as(
        "SELECT input_tokens, output_tokens, cached_input_tokens, money_currency, money_nanos
           FROM token_wallet_transactions WHERE hold_id = $1 AND kind = 'capture'",
    )
    .bind(hold_id)
    .fetch_one(&pool)
    .await
    .expect("the capture's usage");
    assert_eq!(
        recorded,
        (600, 100, 200, "USD".to_string(), 1_525_000),
        "the sweep's capture carries the call's usage and money"
    );
    assert_eq!(key, ledger::capture_key(job, attempt));
    env.teardown().await;
}

/// A worker frozen past its lease: the sweep released its hold as abandoned,
/// then its call replied after all. The call happened, so its late capture is
/// charged as a debit (once, under the capture's key); a second late capture
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_after_the_hold_was_released_is_charged_once() {
    let env = TestEnv::new().await;
    let pool = env.store.pool().clone();
    let wallet = wallets::wallet_balance(&pool, None, Some(USER))
        .await
        .expect("wallet");
    let (job, attempt, hold_id) = held_attempt(&env, wallet.id).await;
    set_status(&env, job, JobStatus::Retrying).await;
    assert_eq!(
        ledger::settle_abandoned(&pool, 100).await.expect("sweep"),
        ledger::Settled {
            captured: 0,
            released: 1
        }
    );

    let key = ledger::capture_key(job, attempt);
    let late = ledger::capture(&pool, wallet.id, hold_id, 300, &key)
        .await
        .expect("the late reply is charged");
    let again = ledger::capture(&pool, wallet.id, hold_id, 300, &key)
        .await
        .expect("a repeated capture replays");
    assert_eq!((late.kind, late.id), (LedgerKind::Debit, again.id));
    let after = wallets::wallet_balance(&pool, Some(wallet.id), None)
        .await
        .expect("wallet");
    assert_eq!(
        (after.balance, after.held),
        (wallet.balance - 300, wallet.held)
    );
    // A hold its attempt released itself (no call) stays closed.
    let (job, attempt, hold_id) = held_attempt(&env, wallet.id).await;
    ledger::release(&pool, wallet.id, hold_id, "release:own", "the call failed")
        .await
        .expect("release");
    assert!(matches!(
        ledger::capture(
            &pool,
            wallet.id,
            hold_id,
            1,
            &ledger::capture_key(job, attempt)
        )
        .await,
        Err(ledger::LedgerError::HoldClosed(_))
    ));
    env.teardown().await;
}
