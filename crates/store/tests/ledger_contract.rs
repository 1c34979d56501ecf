//! The ledger's contract with the wallet service: a hold reserves exactly its
//! amount, a capture debits the actual usage and gives the rest back, every
//! write is idempotent by key, nothing is written for a refused request,
//! expiry releases exactly the expired holds, and racing holds never overdraw.

mod common;

use common::TestDb;
use dialectic_core::ids::{TransactionId, WalletId};
use dialectic_core::ledger::LedgerKind;
use dialectic_store::ledger::{self, LedgerError, References};
use dialectic_store::{Planning, Store};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

fn refs() -> References {
    References {
        job_id: Some(dialectic_core::ids::JobId::new()),
        attempt: Some(1),
        purpose: Some("model_call".into()),
        ..Default::default()
    }
}

async fn hold(
    db: &TestDb,
    wallet: WalletId,
    amount: i64,
    key: &str,
) -> Result<TransactionId, LedgerError> {
    ledger::hold(db.store.pool(), wallet, amount, key, &refs(), 900)
        .await
        .map(|t| t.id)
}

async fn entries(db: &TestDb, wallet: WalletId) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM token_wallet_transactions WHERE wallet_id = $1")
        .bind(wallet)
        .fetch_one(db.store.pool())
        .await
        .expect("count")
}

/// Holds the wallet's row lock until the returned transaction ends, so the
/// requests started meanwhile all look at the ledger before any of them writes.
async fn lock_the_wallet(
    pool: &sqlx::PgPool,
    wallet: WalletId,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut blocker = pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM token_wallets WHERE id = $1 FOR UPDATE")
        .bind(wallet)
        .execute(&mut *blocker)
        .await
        .expect("lock the wallet");
    blocker
}

async fn wait_for_lock_waiters(pool: &sqlx::PgPool, count: usize) {
    common::eventually("every request waits for the wallet's lock", || async {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .expect("waiters");
        waiting == count as i64
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_debits_the_usage_and_gives_the_rest_back_once() {
    let db = TestDb::new(4).await;
    let wallet = db.wallet(1_000).await;
    let held = hold(&db, wallet, 300, "hold-1").await.expect("hold");
    assert_eq!(db.balance(wallet).await, (1_000, 300), "held exactly");
    let pool = db.store.pool();
    let first = ledger::capture(pool, wallet, held, 120, "capture-1")
        .await
        .expect("capture");
    assert_eq!(
        db.balance(wallet).await,
        (880, 0),
        "debited 120, released 180"
    );
    // The same request again (a redelivery) is answered from the first.
    let again = ledger::capture(pool, wallet, held, 120, "capture-1")
        .await
        .expect("replay");
    assert_eq!(again.id, first.id);
    assert_eq!(db.balance(wallet).await, (880, 0));
    // The key with other arguments is refused, and so is a second capture.
    assert!(matches!(
        ledger::capture(pool, wallet, held, 130, "capture-1").await,
        Err(LedgerError::KeyReuse(_))
    ));
    assert!(matches!(
        ledger::capture(pool, wallet, held, 10, "capture-2").await,
        Err(LedgerError::HoldClosed(_))
    ));
    assert_eq!(db.balance(wallet).await, (880, 0));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_gives_the_whole_hold_back() {
    let db = TestDb::new(4).await;
    let wallet = db.wallet(500).await;
    let held = hold(&db, wallet, 200, "hold-1").await.expect("hold");
    let pool = db.store.pool();
    ledger::release(pool, wallet, held, "release-1", "no call")
        .await
        .expect("release");
    assert_eq!(db.balance(wallet).await, (500, 0));
    assert!(matches!(
        ledger::release(pool, wallet, held, "release-2", "again").await,
        Err(LedgerError::HoldClosed(_))
    ));
    assert!(matches!(
        ledger::capture(pool, wallet, held, 1, "capture-1").await,
        Err(LedgerError::HoldClosed(_))
    ));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_the_wallet_cannot_afford_writes_nothing() {
    let db = TestDb::new(4).await;
    let wallet = db.wallet(100).await;
    hold(&db, wallet, 60, "hold-1").await.expect("hold");
    let before = entries(&db, wallet).await;
    match hold(&db, wallet, 50, "hold-2").await {
        Err(LedgerError::InsufficientFunds {
            requested,
            available,
        }) => assert_eq!((requested, available), (50, 40)),
        other => panic!("expected insufficient funds, got {other:?}"),
    }
    assert_eq!(
        entries(&db, wallet).await,
        before,
        "no row for a refused hold"
    );
    assert_eq!(db.balance(wallet).await, (100, 60));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_releases_exactly_the_expired_holds() {
    let db = TestDb::new(4).await;
    let wallet = db.wallet(1_000).await;
    let old = hold(&db, wallet, 100, "hold-old").await.expect("hold");
    hold(&db, wallet, 200, "hold-fresh").await.expect("hold");
    let captured = hold(&db, wallet, 300, "hold-captured").await.expect("hold");
    let pool = db.store.pool();
    ledger::capture(pool, wallet, captured, 300, "capture")
        .await
        .expect("capture");
    sqlx::query(
        "UPDATE token_wallet_transactions SET expires_at = now() - interval '1 second' WHERE id = ANY($1)",
    )
    .bind([old, captured])
    .execute(pool)
    .await
    .expect("expire");
    assert_eq!(ledger::release_expired(pool, 100).await.expect("sweep"), 1);
    assert_eq!(
        db.balance(wallet).await,
        (700, 200),
        "only the old hold went back"
    );
    let released: Vec<TransactionId> = sqlx::query_scalar(
        "SELECT hold_id FROM token_wallet_transactions WHERE wallet_id = $1 AND kind = 'release'",
    )
    .bind(wallet)
    .fetch_all(pool)
    .await
    .expect("releases");
    assert_eq!(released, vec![old]);
    assert_eq!(ledger::release_expired(pool, 100).await.expect("sweep"), 0);
    db.drop_database().await;
}

/// Holds racing for one wallet, each on its own open connection.
const RACERS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_holds_never_overdraw() {
    let db = TestDb::new(RACERS as u32).await;
    let wallet = db.wallet(100).await;
    // Open every connection before the race, so the holds really overlap.
    let mut warm = Vec::new();
    for _ in 0..RACERS {
        warm.push(db.store.pool().acquire().await.expect("connection"));
    }
    drop(warm);
    let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
    let racers: Vec<_> = (0..RACERS)
        .map(|i| {
            let (pool, barrier) = (db.store.pool().clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                ledger::hold(&pool, wallet, 10, &format!("hold-{i}"), &refs(), 900).await
            })
        })
        .collect();
    let mut granted = 0;
    for racer in racers {
        match racer.await.expect("task") {
            Ok(_) => granted += 1,
            Err(LedgerError::InsufficientFunds { .. }) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(granted, 10, "exactly what the balance covers");
    assert_eq!(db.balance(wallet).await, (100, 100));
    db.drop_database().await;
}

/// Requests under one key that queue on the wallet's lock: the first writes,
/// every other one (its lookup read before the first committed) replays it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_racing_under_one_key_write_once_and_replay() {
    const SAME_KEY: usize = 8;
    let db = TestDb::new(SAME_KEY as u32 + 2).await;
    let wallet = db.wallet(1_000).await;
    let pool = db.store.pool();
    let blocker = lock_the_wallet(pool, wallet).await;
    let refs = refs();
    let racers: Vec<_> = (0..SAME_KEY)
        .map(|_| {
            let (pool, refs) = (pool.clone(), refs.clone());
            tokio::spawn(
                async move { ledger::hold(&pool, wallet, 10, "hold-once", &refs, 900).await },
            )
        })
        .collect();
    wait_for_lock_waiters(pool, SAME_KEY).await;
    blocker.rollback().await.expect("free the wallet");
    let mut ids = Vec::new();
    for racer in racers {
        ids.push(racer.await.expect("task").expect("hold or replay").id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "every racer answered with the one hold");
    assert_eq!(db.balance(wallet).await, (1_000, 10), "held once");
    assert_eq!(entries(&db, wallet).await, 1, "one ledger row");
    db.drop_database().await;
}

/// Captures of one hold under different keys that all looked before any
/// committed (queued on the wallet's lock): one closes the hold, every other
/// one is told it is closed, and the wallet is debited once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_closes_of_one_hold_close_it_once() {
    const CLOSERS: usize = 6;
    let db = TestDb::new(CLOSERS as u32 + 2).await;
    let wallet = db.wallet(1_000).await;
    let held = hold(&db, wallet, 300, "hold-1").await.expect("hold");
    // Another call's hold keeps the wallet's held total above this one's, so
    // a second capture would not be stopped by `held >= 0` alone.
    hold(&db, wallet, 600, "hold-2").await.expect("hold");
    let pool = db.store.pool();
    let blocker = lock_the_wallet(pool, wallet).await;
    let closers: Vec<_> = (0..CLOSERS)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                ledger::capture(&pool, wallet, held, 100, &format!("capture-{i}")).await
            })
        })
        .collect();
    wait_for_lock_waiters(pool, CLOSERS).await;
    blocker.rollback().await.expect("free the wallet");
    let mut captured = 0;
    for closer in closers {
        match closer.await.expect("task") {
            Ok(_) => captured += 1,
            Err(LedgerError::HoldClosed(id)) => assert_eq!(id, held),
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(captured, 1, "one capture closed the hold");
    assert_eq!(db.balance(wallet).await, (900, 600), "debited once");
    assert_eq!(entries(&db, wallet).await, 3, "two holds and one capture");
    db.drop_database().await;
}

/// How many scans the ledger's table and each of its indexes have run, as of
/// this connection's last flushed statistics (`seq` for the table's own).
async fn ledger_scans(conn: &mut sqlx::PgConnection) -> HashMap<String, i64> {
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(&mut *conn)
        .await
        .expect("flush at the next idle");
    let scans: Vec<(String, i64)> = sqlx::query_as(
        "SELECT indexrelname::text, idx_scan FROM pg_stat_user_indexes
          WHERE relname = 'token_wallet_transactions'
         UNION ALL
         SELECT 'seq', seq_scan FROM pg_stat_user_tables WHERE relname = 'token_wallet_transactions'",
    )
    .fetch_all(&mut *conn)
    .await
    .expect("scans");
    scans.into_iter().collect()
}

/// Holds, a replay, captures and a release on `wallet`, under keys of `round`.
async fn every_kind_of_request(pool: &sqlx::PgPool, wallet: WalletId, round: &str) {
    let call = refs();
    let key = |what: &str| format!("{round}-{what}");
    let first = ledger::hold(pool, wallet, 300, &key("hold-1"), &call, 900)
        .await
        .expect("hold");
    let again = ledger::hold(pool, wallet, 300, &key("hold-1"), &call, 900)
        .await
        .expect("replay");
    assert_eq!(again.id, first.id);
    ledger::capture(pool, wallet, first.id, 120, &key("capture-1"))
        .await
        .expect("capture");
    let second = ledger::hold(pool, wallet, 300, &key("hold-2"), &call, 900)
        .await
        .expect("hold");
    ledger::release(pool, wallet, second.id, &key("release-2"), "not needed")
        .await
        .expect("release");
    assert!(matches!(
        ledger::capture(pool, wallet, second.id, 10, &key("capture-2")).await,
        Err(LedgerError::HoldClosed(_))
    ));
}

/// A fresh install's first burst, as the wallet service runs it: the ledger
/// starts at the seed row (its statistics: one row per page until autovacuum
/// analyzes it), and the wallet's connections keep running the same prepared
/// statements while it grows. Once it has grown, every hold, capture, replay
/// and release still finds its key by the key index and its hold by the
/// primary key: no scan of the table (a generic plan made while it was a few
/// pages), none of the wallet's history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_use_the_ledger_indexes_as_it_grows_from_fresh_statistics() {
    let db = TestDb::new(2).await;
    sqlx::query("ALTER TABLE token_wallet_transactions SET (autovacuum_enabled = false)")
        .execute(db.store.pool())
        .await
        .expect("keep the fresh statistics");
    // One connection, as the wallet service opens them: its statistics are
    // the requests', and its prepared statements live through the growth.
    let wallet_service =
        Store::connect_lazy_with(&db.url, 1, Duration::from_secs(10), Planning::EachCall)
            .expect("the wallet's pool");
    let pool = wallet_service.pool();
    let wallet = db.wallet(1_000_000).await;
    // Often enough for Postgres to settle on each statement's generic plan
    // (after five custom ones), made for the table as it is now: a few pages.
    for round in 0..6 {
        every_kind_of_request(pool, wallet, &format!("young-{round}")).await;
    }
    sqlx::query(
        "INSERT INTO token_wallet_transactions
           (id, wallet_id, kind, amount, balance_after, held_after, idempotency_key, request_hash)
         SELECT gen_random_uuid(), $1, 'credit', 1, 0, 0, 'history-' || g, '' FROM generate_series(1, 5000) g",
    )
    .bind(wallet)
    .execute(pool)
    .await
    .expect("a wallet with a history");
    let believed: f32 = sqlx::query_scalar(
        "SELECT reltuples FROM pg_class WHERE relname = 'token_wallet_transactions'",
    )
    .fetch_one(pool)
    .await
    .expect("statistics");
    assert!(
        believed < 100.0,
        "the statistics are a fresh install's ({believed} rows)"
    );
    let before = ledger_scans(&mut pool.acquire().await.expect("connection")).await;

    every_kind_of_request(pool, wallet, "grown").await;

    let after = ledger_scans(&mut pool.acquire().await.expect("connection")).await;
    let ran =
        |scan: &str| after.get(scan).copied().unwrap_or(0) - before.get(scan).copied().unwrap_or(0);
    let scans = format!("{before:?} → {after:?}");
    assert!(
        ran("token_wallet_transactions_key") > 0,
        "keys found by the key index: {scans}"
    );
    assert!(
        ran("token_wallet_transactions_pkey") > 0,
        "holds found by id: {scans}"
    );
    assert_eq!(
        ran("token_wallet_transactions_history"),
        0,
        "the history was never read: {scans}"
    );
    assert_eq!(ran("seq"), 0, "the ledger was never scanned: {scans}");
    pool.close().await;
    db.drop_database().await;
}

/// The quoted names in a constraint or index definition as Postgres prints
/// it (`kind = ANY (ARRAY['capture'::text, 'release'::text])`).
fn quoted_names(definition: &str) -> BTreeSet<String> {
    definition
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Core's kinds are the ones the ledger table admits, and core's closing
/// kinds the ones its one-close-per-hold index covers: read from the
/// migrated schema, so a migration and core cannot drift apart unseen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_admits_core_s_kinds_and_indexes_its_closing_ones() {
    let db = TestDb::new(1).await;
    let check: String = sqlx::query_scalar(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint
          WHERE conrelid = 'token_wallet_transactions'::regclass AND contype = 'c'
            AND pg_get_constraintdef(oid) LIKE '%kind%'",
    )
    .fetch_one(db.store.pool())
    .await
    .expect("the kind CHECK");
    let kinds = LedgerKind::ALL.map(|k| k.as_str().to_string());
    assert_eq!(quoted_names(&check), BTreeSet::from(kinds), "{check}");

    let index: String = sqlx::query_scalar(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'token_wallet_transactions_one_close'",
    )
    .fetch_one(db.store.pool())
    .await
    .expect("the one-close index");
    let closing: BTreeSet<String> = LedgerKind::ALL
        .into_iter()
        .filter(|k| k.closes_hold())
        .map(|k| k.as_str().to_string())
        .collect();
    assert_eq!(quoted_names(&index), closing, "{index}");
}
