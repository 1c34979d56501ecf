//! The token ledger against the real Postgres: concurrency, idempotency,
//! errors through the gRPC API, expiry of unused holds, paging, a capture off
//! its job's path.

use dialectic_core::ids::WalletId;
use dialectic_core::service_auth::{self, ServiceName};
use dialectic_e2e::{TestEnv, eventually};
use dialectic_proto::v1::wallet::wallet_service_client::WalletServiceClient;
use dialectic_proto::v1::wallet::{
    CaptureRequest, CreditRequest, GetBalanceRequest, HoldRequest, ListTransactionsRequest,
    ReleaseRequest,
};
use dialectic_store::ledger::{self, LedgerError, References};
use tonic::Code;
use uuid::Uuid;

/// A new user with an empty wallet; returns (user, wallet).
async fn empty_wallet(env: &TestEnv) -> (Uuid, WalletId) {
    let (user, wallet) = (Uuid::now_v7(), WalletId::new());
    sqlx::query("INSERT INTO users (id, display_name) VALUES ($1, 'wallet test')")
        .bind(user)
        .execute(env.store.pool())
        .await
        .expect("user");
    sqlx::query("INSERT INTO token_wallets (id, user_id, balance) VALUES ($1, $2, 0)")
        .bind(wallet)
        .bind(user)
        .execute(env.store.pool())
        .await
        .expect("wallet");
    (user, wallet)
}

/// A credit as the gateway sends it, acting for `acting_user`.
fn credit_for(
    acting_user: &str,
    wallet: WalletId,
    amount: i64,
    key: &str,
    reason: &str,
) -> tonic::Request<CreditRequest> {
    let mut request = tonic::Request::new(CreditRequest {
        wallet_id: wallet.to_string(),
        amount,
        idempotency_key: key.into(),
        reason: reason.into(),
    });
    request
        .metadata_mut()
        .insert("x-dialectic-user", acting_user.parse().expect("header"));
    request
}

async fn balance(env: &TestEnv, wallet: WalletId) -> (i64, i64) {
    sqlx::query_as("SELECT balance, held FROM token_wallets WHERE id = $1")
        .bind(wallet)
        .fetch_one(env.store.pool())
        .await
        .expect("balance")
}

/// Holds racing for one wallet, each on its own connection (the pool has one
/// per hold, all open before they start), released together by a barrier.
const RACING_HOLDS: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn fifty_concurrent_holds_never_overdraw() {
    let env = TestEnv::new().await;
    let (_, wallet) = empty_wallet(&env).await;
    ledger::credit(env.store.pool(), wallet, 250, "seed-credit", "test")
        .await
        .expect("credit");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(RACING_HOLDS as u32)
        .min_connections(RACING_HOLDS as u32)
        .connect(&env.settings.database.url)
        .await
        .expect("a connection per hold");
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(RACING_HOLDS));
    let attempts = (0..RACING_HOLDS).map(|i| {
        let pool = pool.clone();
        let barrier = barrier.clone();
        tokio::spawn(async move {
            let refs = References {
                job_id: Some(dialectic_core::ids::JobId::new()),
                attempt: Some(1),
                ..Default::default()
            };
            barrier.wait().await;
            ledger::hold(&pool, wallet, 10, &format!("hold-{i}"), &refs, 60).await
        })
    });
    let results: Vec<_> = futures::future::join_all(attempts).await;
    let mut holds = Vec::new();
    let mut refused = 0;
    for result in results {
        match result.expect("task") {
            Ok(hold) => holds.push(hold),
            Err(LedgerError::InsufficientFunds {
                requested,
                available,
            }) => {
                assert_eq!(requested, 10);
                assert!(available < 10);
                refused += 1;
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    let peak: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()",
    )
    .fetch_one(&pool)
    .await
    .expect("connections");
    assert!(peak >= RACING_HOLDS as i64, "{peak} connections were open");
    pool.close().await;
    assert_eq!((holds.len(), refused), (25, 25));
    assert_eq!(
        balance(&env, wallet).await,
        (250, 250),
        "all of it held, none overdrawn"
    );
    let min_available: i64 = sqlx::query_scalar(
        "SELECT min(balance_after - held_after) FROM token_wallet_transactions WHERE wallet_id = $1",
    )
    .bind(wallet)
    .fetch_one(env.store.pool())
    .await
    .expect("min");
    assert!(min_available >= 0);

    // Capture each hold for a different actual amount; the rest goes back.
    let mut captured = 0;
    for (i, hold) in holds.iter().enumerate() {
        let amount = (i % 10) as i64 + 1;
        ledger::capture(
            env.store.pool(),
            wallet,
            hold.id,
            amount,
            &format!("capture-{i}"),
        )
        .await
        .expect("capture");
        captured += amount;
    }
    assert_eq!(balance(&env, wallet).await, (250 - captured, 0));
    let total: i64 = sqlx::query_scalar(
        "SELECT sum(amount)::bigint FROM token_wallet_transactions WHERE wallet_id = $1 AND kind = 'capture'",
    )
    .bind(wallet)
    .fetch_one(env.store.pool())
    .await
    .expect("sum");
    assert_eq!(total, captured);
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn repeated_calls_change_nothing_and_bad_calls_write_nothing() {
    let mut env = TestEnv::new().await;
    let mut settings = env.settings.clone();
    settings.wallet.hold_sweep_interval_ms = 100;
    let addr = env.start_with("wallet", settings).await;
    env.wait_serving("wallet").await;
    let url = format!("http://{addr}");
    let mut client = WalletServiceClient::new(env.internal_channel(&url, ServiceName::Executor));
    let mut gateway = WalletServiceClient::new(env.internal_channel(&url, ServiceName::Gateway));
    let (user, wallet) = empty_wallet(&env).await;
    let w = wallet.to_string();

    // Credit is for administrators; the seeded local user is one, a new user is not.
    let as_user = credit_for(&user.to_string(), wallet, 100, "c1", "");
    let denied = gateway.credit(as_user).await.expect_err("not an admin");
    assert_eq!(denied.code(), Code::PermissionDenied);
    for _ in 0..2 {
        let admin = &env.settings.gateway.default_user_id;
        let as_admin = credit_for(admin, wallet, 100, "c1", "top up");
        let credit = gateway.credit(as_admin).await.expect("credit").into_inner();
        assert_eq!(credit.balance_after, 100);
    }

    let hold = |key: &str, amount: i64| HoldRequest {
        wallet_id: w.clone(),
        amount,
        idempotency_key: key.into(),
        job_id: Uuid::nil().to_string(),
        attempt: 1,
        ..Default::default()
    };
    let first = client
        .hold(hold("h1", 40))
        .await
        .expect("hold")
        .into_inner();
    let again = client
        .hold(hold("h1", 40))
        .await
        .expect("same hold")
        .into_inner();
    assert_eq!(first.id, again.id, "a redelivered hold is the first hold");
    let reuse = client.hold(hold("h1", 41)).await.expect_err("key reuse");
    assert_eq!(reuse.code(), Code::AlreadyExists);
    let zero = client.hold(hold("h2", 0)).await.expect_err("zero amount");
    assert_eq!(zero.code(), Code::InvalidArgument);
    let short = client
        .hold(hold("h3", 61))
        .await
        .expect_err("more than available");
    assert_eq!(short.code(), Code::FailedPrecondition);
    assert!(
        short.message().contains("insufficient balance"),
        "{}",
        short.message()
    );
    let mut unknown = hold("h4", 1);
    unknown.wallet_id = Uuid::now_v7().to_string();
    assert_eq!(
        client.hold(unknown).await.expect_err("unknown").code(),
        Code::NotFound
    );

    let capture = |key: &str, amount: i64| CaptureRequest {
        wallet_id: w.clone(),
        hold_id: first.id.clone(),
        amount,
        idempotency_key: key.into(),
        usage: None,
    };
    let over = client
        .capture(capture("k0", 41))
        .await
        .expect_err("above the hold");
    assert_eq!(over.code(), Code::InvalidArgument);
    let captured = client
        .capture(capture("k1", 25))
        .await
        .expect("capture")
        .into_inner();
    let twice = client
        .capture(capture("k1", 25))
        .await
        .expect("same capture")
        .into_inner();
    assert_eq!(captured.id, twice.id);
    let closed = client
        .capture(capture("k2", 1))
        .await
        .expect_err("hold closed");
    assert_eq!(closed.code(), Code::FailedPrecondition);
    let b = client
        .get_balance(GetBalanceRequest {
            wallet_id: w.clone(),
            user_id: String::new(),
        })
        .await
        .expect("balance")
        .into_inner();
    assert_eq!(
        (b.total, b.held, b.available),
        (75, 0, 75),
        "debited once, the rest released"
    );

    // An unused hold releases itself after its expiry.
    let mut short_lived = hold("h5", 30);
    short_lived.expires_in_secs = 1;
    let h5 = client.hold(short_lived).await.expect("hold").into_inner();
    assert_eq!(balance(&env, wallet).await, (75, 30));
    eventually(15, "the expired hold released", || async {
        (balance(&env, wallet).await == (75, 0)).then_some(())
    })
    .await;
    let released = client
        .release(ReleaseRequest {
            wallet_id: w.clone(),
            hold_id: h5.id.clone(),
            idempotency_key: "r1".into(),
            reason: String::new(),
        })
        .await
        .expect_err("already released by expiry");
    assert_eq!(released.code(), Code::FailedPrecondition);

    // History pages, newest first, without overlap.
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = gateway
            .list_transactions(ListTransactionsRequest {
                wallet_id: w.clone(),
                page_size: 2,
                page_token: token.clone(),
            })
            .await
            .expect("page")
            .into_inner();
        seen.extend(page.entries.into_iter().map(|e| e.kind));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen, vec!["release", "hold", "capture", "hold", "credit"]);
    env.teardown().await;
}

/// Jobs of a session by status.
async fn statuses(env: &TestEnv, session: Uuid) -> Vec<(String, String, i64)> {
    sqlx::query_as(
        "SELECT job_type, status, count(*) FROM dialectic_generation_jobs WHERE session_id = $1 GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("statuses")
}

async fn session_captures(env: &TestEnv, session: Uuid) -> i64 {
    ledger::session_cost(env.store.pool(), dialectic_core::ids::SessionId(session))
        .await
        .expect("session cost")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_pauses_when_the_wallet_runs_dry_and_resumes_after_a_credit() {
    use dialectic_proto::v1::{CreateProjectRequest, GetSessionRequest, StartSessionRequest};
    let mut env = TestEnv::new().await;
    env.start(&dialectic_e2e::ALL_SERVICES).await;
    for name in dialectic_e2e::ALL_SERVICES {
        env.wait_serving(name).await;
    }
    let (user, wallet) = empty_wallet(&env).await;
    // Enough for the plan only: every call holds its most expensive case (the
    // prompt plus 8192 output tokens at rate 1, ~8.3k for the plan, ~8.7k per
    // document), and the plan's capture leaves less than a document's hold.
    const INITIAL: i64 = 9_000;
    ledger::credit(env.store.pool(), wallet, INITIAL, "initial", "test")
        .await
        .expect("credit");
    let key = env.key_for(user).await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(dialectic_e2e::with_key(
            &key,
            CreateProjectRequest {
                name: "On a budget".into(),
                initial_user_prompt: "A bike repair van that visits office parks.".into(),
                client_request_id: String::new(),
                prompt_file: None,
                pipeline: String::new(),
            },
        ))
        .await
        .expect("project")
        .into_inner();
    let session = client
        .start_session(dialectic_e2e::with_key(
            &key,
            StartSessionRequest {
                project_id: project.id,
                models: vec!["simulated".into()],
                description: String::new(),
                client_request_id: String::new(),
                auto_advance: false,
                ..Default::default()
            },
        ))
        .await
        .expect("session")
        .into_inner();
    let session_id = Uuid::parse_str(&session.id).expect("uuid");

    // It runs until a call cannot be afforded, then waits.
    let paused = eventually(
        60,
        "jobs paused for funds, nothing else running",
        || async {
            let s = statuses(&env, session_id).await;
            let paused: i64 = s
                .iter()
                .filter(|(_, st, _)| st == "paused_nsf")
                .map(|r| r.2)
                .sum();
            let busy = s
                .iter()
                .any(|(t, st, _)| t != "PLAN" && (st == "processing" || st == "pending"));
            (paused > 0 && !busy).then_some(paused)
        },
    )
    .await;
    assert_eq!(paused, 4, "every document waits for funds");
    let reasons: Vec<serde_json::Value> = sqlx::query_scalar(
        "SELECT error_details FROM dialectic_generation_jobs WHERE session_id = $1 AND status = 'paused_nsf'",
    )
    .bind(session_id)
    .fetch_all(env.store.pool())
    .await
    .expect("reasons");
    for reason in &reasons {
        assert_eq!(reason["code"], "insufficient_balance");
        assert!(
            reason["message"]
                .as_str()
                .unwrap_or_default()
                .contains("insufficient balance")
        );
    }
    let unpaid_calls: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_contributions c JOIN dialectic_generation_jobs j ON j.id = c.job_id
         WHERE j.session_id = $1 AND j.status = 'paused_nsf'",
    )
    .bind(session_id)
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    assert_eq!(
        unpaid_calls, 0,
        "no call was made that could not be paid for"
    );
    let shown = client
        .get_session(dialectic_e2e::with_key(
            &key,
            GetSessionRequest {
                session_id: session.id.clone(),
            },
        ))
        .await
        .expect("session")
        .into_inner();
    // The notice names the wait and the command that ends it.
    assert!(
        shown.notice.contains("insufficient balance")
            && shown.notice.contains("dialecticd admin credit --user "),
        "{}",
        shown.notice
    );
    let spent = session_captures(&env, session_id).await;
    assert!(spent > 0);
    assert_eq!(
        balance(&env, wallet).await,
        (INITIAL - spent, 0),
        "exactly the captures were debited"
    );

    // A credit lets the paused jobs resume by themselves.
    ledger::credit(env.store.pool(), wallet, 100_000, "top-up", "test")
        .await
        .expect("credit");
    eventually(60, "the stage completes", || {
        let mut client = client.clone();
        let id = session.id.clone();
        let key = key.clone();
        async move {
            let s = client
                .get_session(dialectic_e2e::with_key(
                    &key,
                    GetSessionRequest { session_id: id },
                ))
                .await
                .ok()?
                .into_inner();
            (s.status == "pending_antithesis").then_some(())
        }
    })
    .await;
    let runs: Vec<i64> = sqlx::query_scalar(
        "SELECT count(c.id) FROM dialectic_generation_jobs j LEFT JOIN dialectic_contributions c ON c.job_id = j.id
         WHERE j.session_id = $1 AND j.job_type = 'EXECUTE' GROUP BY j.id",
    )
    .bind(session_id)
    .fetch_all(env.store.pool())
    .await
    .expect("runs");
    assert_eq!(
        runs,
        vec![1, 1, 1, 1],
        "every document written once, none twice"
    );
    eventually(30, "the last holds settled", || async {
        let (_, held) = balance(&env, wallet).await;
        (held == 0).then_some(())
    })
    .await;
    let spent = session_captures(&env, session_id).await;
    assert_eq!(balance(&env, wallet).await, (INITIAL + 100_000 - spent, 0));

    // What the user sees: the session's cost (per stage too) and the wallet.
    let seen = client
        .get_session(dialectic_e2e::with_key(
            &key,
            GetSessionRequest {
                session_id: session.id.clone(),
            },
        ))
        .await
        .expect("session")
        .into_inner();
    assert_eq!(seen.cost, spent);
    assert_eq!(seen.jobs.iter().map(|j| j.cost).sum::<i64>(), spent);
    let mine = client
        .get_wallet(dialectic_e2e::with_key(
            &key,
            dialectic_proto::v1::GetWalletRequest { history: 5 },
        ))
        .await
        .expect("wallet")
        .into_inner();
    assert_eq!(mine.available, INITIAL + 100_000 - spent);
    assert_eq!(mine.history.len(), 5);
    env.teardown().await;
}

/// A client that sends `token` as its service token, whatever it claims.
fn presenting(
    url: &str,
    token: String,
) -> WalletServiceClient<
    tonic::service::interceptor::InterceptedService<
        tonic::transport::Channel,
        impl tonic::service::Interceptor,
    >,
> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_string())
        .expect("url")
        .connect_lazy();
    let value: tonic::metadata::MetadataValue<_> = token.parse().expect("token is metadata");
    WalletServiceClient::with_interceptor(channel, move |mut request: tonic::Request<()>| {
        request
            .metadata_mut()
            .insert(service_auth::HEADER, value.clone());
        Ok(request)
    })
}

fn now_unix() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Any pod that reaches the wallet is not enough: internal calls need a token
/// signed with the calling service's own key (here, per-service keys from
/// `dialecticd keys generate`, as the chart mounts them), and the identity in
/// it limits what the caller may do. A pod holding only the executor's key
/// cannot pass for the gateway, and a gateway token meant for the indexer
/// does not work at the wallet.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_wallet_admits_only_the_services_allowed_each_call() {
    let mut env = TestEnv::new().await;
    let keys = std::env::temp_dir().join(format!("dialectic-wallet-keys-{}", Uuid::new_v4()));
    dialectic_runtime::service_auth::generate_keys(&keys).expect("service keys");
    env.settings.internal.key_dir = keys.display().to_string();
    env.settings.internal.token_secret = "not used with key_dir".into();
    let addr = env.start_with("wallet", env.settings.clone()).await;
    env.wait_serving("wallet").await;
    let url = format!("http://{addr}");
    let (_, wallet) = empty_wallet(&env).await;
    let hold = || HoldRequest {
        wallet_id: wallet.to_string(),
        amount: 1,
        idempotency_key: "h".into(),
        ..Default::default()
    };
    let admin = env.settings.gateway.default_user_id.clone();
    let credit = || credit_for(&admin, wallet, 1_000_000, "c", "free money");

    let mut anonymous = WalletServiceClient::connect(url.clone())
        .await
        .expect("connect");
    let refused = anonymous.credit(credit()).await.expect_err("no identity");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");

    let key_file = |service: ServiceName| {
        let path = dialectic_runtime::service_auth::key_file(&keys, service, "key");
        service_auth::SigningKey::from_hex(&std::fs::read_to_string(path).expect("key file"))
            .expect("a key")
    };
    let executor_key = key_file(ServiceName::Executor);
    // Bound to no call this test makes: the signature and the audience are
    // checked first, so these fail for what they claim, not for that.
    let call = service_auth::Call::new("/", b"", b"");
    let claiming_gateway = service_auth::mint(
        &executor_key,
        ServiceName::Gateway,
        ServiceName::Wallet,
        &call,
        &[0; service_auth::NONCE_BYTES],
        now_unix(),
    );
    let refused = presenting(&url, claiming_gateway)
        .credit(credit())
        .await
        .expect_err("the executor's key signs only as the executor");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("not signed by the gateway service's key"),
        "{refused:?}"
    );
    let for_the_indexer = service_auth::mint(
        &key_file(ServiceName::Gateway),
        ServiceName::Gateway,
        ServiceName::Indexer,
        &call,
        &[0; service_auth::NONCE_BYTES],
        now_unix(),
    );
    let refused = presenting(&url, for_the_indexer)
        .credit(credit())
        .await
        .expect_err("a token for the indexer");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(refused.message().contains("for the indexer"), "{refused:?}");

    let mut executor = WalletServiceClient::new(env.internal_channel(&url, ServiceName::Executor));
    let refused = executor
        .credit(credit())
        .await
        .expect_err("executors do not credit");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let mut gateway = WalletServiceClient::new(env.internal_channel(&url, ServiceName::Gateway));
    let refused = gateway
        .hold(hold())
        .await
        .expect_err("the gateway does not hold");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    assert_eq!(
        balance(&env, wallet).await,
        (0, 0),
        "no refused call moved money"
    );
    gateway
        .credit(credit())
        .await
        .expect("the gateway's admin path credits");
    executor.hold(hold()).await.expect("executors hold");
    assert_eq!(balance(&env, wallet).await, (1_000_000, 1));
    std::fs::remove_dir_all(&keys).expect("keys removed");
    env.teardown().await;
}

/// The gateway's admin path: an administrator credits any user's wallet once
/// per idempotency key; anyone else is refused, whichever user they name.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn administrators_credit_wallets_through_the_gateway() {
    use dialectic_proto::v1::{CreditWalletRequest, GetWalletRequest};
    let mut env = TestEnv::new().await;
    for name in ["wallet", "gateway"] {
        env.start(&[name]).await;
        env.wait_serving(name).await;
    }
    let (user, key) = env.new_user("funded").await;
    let credit = |user: &str, key: &str| CreditWalletRequest {
        user_id: user.to_string(),
        amount: 5_000,
        idempotency_key: key.to_string(),
        reason: "invoice 42".into(),
    };
    let mut admin = env.gateway().await;
    for _ in 0..2 {
        let entry = admin
            .credit_wallet(credit(&user.to_string(), "inv-42"))
            .await
            .expect("an administrator credits")
            .into_inner();
        assert_eq!(
            (entry.kind.as_str(), entry.balance_after),
            ("credit", 5_000)
        );
    }
    let mut funded = env.gateway_with_key(&key).await;
    let wallet = funded
        .get_wallet(GetWalletRequest { history: 5 })
        .await
        .expect("wallet")
        .into_inner();
    assert_eq!(wallet.total, 5_000, "credited once");

    let refused = funded
        .credit_wallet(credit(&user.to_string(), "self-service"))
        .await
        .expect_err("not an administrator");
    assert_eq!(refused.code(), Code::PermissionDenied);
    let refused = admin
        .credit_wallet(credit(&Uuid::now_v7().to_string(), "nobody"))
        .await
        .expect_err("unknown user");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    let refused = admin
        .credit_wallet(credit("not-a-uuid", "bad"))
        .await
        .expect_err("bad id");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    env.teardown().await;
}

/// A call's capture is not on its job's path: once the executor has written
/// the call's usage, the job's outcome goes on while the capture still waits
/// for the wallet, and the capture lands once the wallet is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_jobs_outcome_does_not_wait_for_its_capture() {
    let mut env = TestEnv::new().await;
    env.start_all_with(|s| s.executor.simulated_latency_ms = 1_500)
        .await;
    let (_, session_id) = env
        .new_session("# Capture later\n\nThe job goes on.", &["simulated"], false)
        .await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    let (hold, wallet, job): (Uuid, Uuid, Uuid) = eventually(60, "the first call's hold", || {
        let pool = env.store.pool().clone();
        async move {
            sqlx::query_as(
                "SELECT id, wallet_id, job_id FROM token_wallet_transactions
                  WHERE session_id = $1 AND kind = 'hold' ORDER BY created_at LIMIT 1",
            )
            .bind(session)
            .fetch_optional(&pool)
            .await
            .expect("hold query")
        }
    })
    .await;

    // Every capture locks its wallet's row first: while this transaction
    // holds it, no capture on the wallet can commit.
    let mut blocker = env.store.pool().begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM token_wallets WHERE id = $1 FOR UPDATE")
        .bind(wallet)
        .execute(&mut *blocker)
        .await
        .expect("lock the wallet");
    eventually(30, "the job completed while its capture waits", || async {
        let done = env
            .count(
                "SELECT count(*) FROM dialectic_generation_jobs WHERE id = $1 AND completed_at IS NOT NULL",
                job,
            )
            .await;
        (done == 1).then_some(())
    })
    .await;
    let captures =
        "SELECT count(*) FROM token_wallet_transactions WHERE hold_id = $1 AND kind = 'capture'";
    assert_eq!(
        env.count(captures, hold).await,
        0,
        "the capture is still waiting"
    );
    blocker.rollback().await.expect("free the wallet");

    eventually(30, "the capture landed", || async {
        (env.count(captures, hold).await == 1).then_some(())
    })
    .await;
    env.teardown().await;
}
