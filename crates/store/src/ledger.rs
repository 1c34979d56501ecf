//! The token ledger (owned by the wallet service). Every operation is one
//! transaction under the wallet's row lock; the table's CHECKs (balance ≥ 0,
//! held ≤ balance) back the code. Each operation carries an idempotency key
//! unique per wallet: a repeat with the same request returns the first result
//! and writes nothing; a repeat with different arguments is an error.
//!
//! Lookups by key or by row id never name the wallet in the same condition:
//! on a fresh install's statistics the planner cannot tell a wallet-led index
//! from another and read the wallet's whole history through
//! `token_wallet_transactions_history`. Keys are looked up alone (the key
//! index leads with the key) and rows by id behind a `MATERIALIZED` fence,
//! the wallet compared after.

pub use crate::error::LedgerError;
use crate::listing::Cursor;
use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{JobId, SessionId, TransactionId, UserId, WalletId};
use dialectic_core::job::JobStatus;
use dialectic_core::ledger::LedgerKind;
use dialectic_core::price::Money;
use sqlx::PgPool;

/// The kinds that close a hold, bound into SQL as `kind = ANY(..)`: taken
/// from [`LedgerKind::closes_hold`], so one list decides; the ledger's
/// one-close index must hold the same (tests/ledger_contract.rs reads it).
fn closing_kinds() -> Vec<&'static str> {
    LedgerKind::ALL
        .into_iter()
        .filter(|kind| kind.closes_hold())
        .map(LedgerKind::as_str)
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Transaction {
    pub id: TransactionId,
    pub wallet_id: WalletId,
    #[sqlx(try_from = "String")]
    pub kind: LedgerKind,
    pub amount: i64,
    pub balance_after: i64,
    pub held_after: i64,
    pub idempotency_key: String,
    pub reason: Option<String>,
    pub hold_id: Option<TransactionId>,
    pub session_id: Option<SessionId>,
    pub job_id: Option<JobId>,
    pub attempt: Option<i32>,
    pub purpose: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// A model call's capture (or late debit): the provider's token counts.
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cached_input_tokens: Option<i64>,
    /// The part of `input_tokens` written to the provider's prompt cache;
    /// None on rows recorded before it was kept.
    pub cache_write_input_tokens: Option<i64>,
    /// ... and its cost in money as priced at the call; None when unpriced.
    pub money_currency: Option<String>,
    pub money_nanos: Option<i64>,
}

impl Transaction {
    /// What the call this entry charged cost in money, when its model was priced.
    pub fn money(&self) -> Option<Money> {
        Some(Money {
            currency: self.money_currency.clone()?,
            nanos: self.money_nanos?,
        })
    }
}

const TX_COLUMNS: &str =
    "id, wallet_id, kind, amount, balance_after, held_after, idempotency_key, reason, hold_id,
    session_id, job_id, attempt, purpose, expires_at, created_at,
    input_tokens, output_tokens, cached_input_tokens, money_currency, money_nanos,
    cache_write_input_tokens";

/// What a model call used and cost in money, recorded on its capture so that
/// a later change of the model's prices does not rewrite what was charged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// The part of `input_tokens` read from the provider's prompt cache.
    pub cached_input_tokens: i64,
    /// The part of `input_tokens` written to the provider's prompt cache.
    pub cache_write_input_tokens: i64,
    /// None when the model was unpriced.
    pub money: Option<Money>,
}

/// The usage columns' values, in ENTRY_COLUMNS' order: input, output and
/// cached input tokens, money's currency and nanos, cache-write tokens.
type UsageColumns<'a> = (
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<&'a str>,
    Option<i64>,
    Option<i64>,
);

impl CallUsage {
    fn columns(usage: Option<&CallUsage>) -> UsageColumns<'_> {
        match usage {
            None => (None, None, None, None, None, None),
            Some(u) => (
                Some(u.input_tokens),
                Some(u.output_tokens),
                Some(u.cached_input_tokens),
                u.money.as_ref().map(|m| m.currency.as_str()),
                u.money.as_ref().map(|m| m.nanos),
                Some(u.cache_write_input_tokens),
            ),
        }
    }
}

/// What a hold is for; part of its identity for idempotency.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    pub session_id: Option<SessionId>,
    pub job_id: Option<JobId>,
    pub attempt: Option<i32>,
    pub purpose: Option<String>,
}

struct Entry<'a> {
    wallet_id: WalletId,
    kind: LedgerKind,
    amount: i64,
    key: &'a str,
    request: String,
    reason: Option<&'a str>,
    hold_id: Option<TransactionId>,
    refs: &'a References,
    expires_in_secs: Option<i64>,
    usage: Option<&'a CallUsage>,
}

/// The arguments a key was first used with, in one comparable string.
fn request_fingerprint(
    kind: LedgerKind,
    wallet: WalletId,
    amount: i64,
    hold: Option<TransactionId>,
    refs: &References,
) -> String {
    format!(
        "{kind}|{wallet}|{amount}|{}|{}|{}|{}|{}",
        hold.map(|h| h.to_string()).unwrap_or_default(),
        refs.session_id.map(|s| s.to_string()).unwrap_or_default(),
        refs.job_id.map(|s| s.to_string()).unwrap_or_default(),
        refs.attempt.map(|a| a.to_string()).unwrap_or_default(),
        refs.purpose.as_deref().unwrap_or_default(),
    )
}

async fn transaction(
    executor: impl sqlx::PgExecutor<'_>,
    id: TransactionId,
) -> Result<Transaction, LedgerError> {
    Ok(sqlx::query_as::<_, Transaction>(&format!(
        "SELECT {TX_COLUMNS} FROM token_wallet_transactions WHERE id = $1"
    ))
    .bind(id)
    .fetch_one(executor)
    .await?)
}

/// The locked wallet's balances, and what the first request under this key
/// wrote, when the key was used before.
struct Locked {
    balance: i64,
    held: i64,
    first: Option<Transaction>,
}

/// Locks the wallet and looks its key up in one statement: one round trip
/// fewer while every other call on this wallet waits. The lookup reads the
/// snapshot taken before the lock was granted, so a request under the same
/// key that committed meanwhile is not seen; its ledger row then fails this
/// request's write on the unique key, and [`once_more_after_key_race`] runs
/// the request again, which replays it. A key used with other arguments is
/// an error.
async fn lock_wallet(
    tx: &mut Tx<'_>,
    wallet_id: WalletId,
    key: &str,
    request: &str,
) -> Result<Locked, LedgerError> {
    type Row = (i64, i64, Option<String>, Option<TransactionId>);
    let (balance, held, hash, first): Row = sqlx::query_as(
        "WITH keyed AS MATERIALIZED (
           SELECT wallet_id, request_hash, id FROM token_wallet_transactions WHERE idempotency_key = $2)
         SELECT w.balance, w.held, t.request_hash, t.id
         FROM token_wallets w LEFT JOIN keyed t ON t.wallet_id = w.id
         WHERE w.id = $1
         FOR UPDATE OF w",
    )
    .bind(wallet_id)
    .bind(key)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(LedgerError::UnknownWallet(wallet_id))?;
    let first = match (hash, first) {
        (Some(hash), _) if hash != request => return Err(LedgerError::KeyReuse(key.to_string())),
        (Some(_), Some(id)) => Some(transaction(&mut **tx, id).await?),
        _ => None,
    };
    Ok(Locked {
        balance,
        held,
        first,
    })
}

/// Runs a ledger request a second time when it lost a race to a request
/// under the same key (see [`lock_wallet`]): the second run replays it.
async fn once_more_after_key_race<F, Fut>(request: F) -> Result<Transaction, LedgerError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Transaction, LedgerError>>,
{
    match request().await {
        Err(LedgerError::Store(StoreError::Database(sqlx::Error::Database(e))))
            if e.is_unique_violation() =>
        {
            request().await
        }
        other => other,
    }
}

/// The columns a ledger row is written with.
const ENTRY_COLUMNS: &str =
    "(id, wallet_id, kind, amount, balance_after, held_after, idempotency_key, request_hash, reason, hold_id,
      session_id, job_id, attempt, purpose, expires_at,
      input_tokens, output_tokens, cached_input_tokens, money_currency, money_nanos,
      cache_write_input_tokens)";

/// Moves the wallet's balances and appends the ledger row in one statement:
/// the wallet row stays locked from here to the commit, so every round trip
/// saved here is time other calls on the same wallet do not wait.
async fn write(
    tx: &mut Tx<'_>,
    e: &Entry<'_>,
    balance_delta: i64,
    held_delta: i64,
) -> Result<Transaction, LedgerError> {
    write_where(&mut **tx, e, balance_delta, held_delta, "")
        .await?
        .ok_or(LedgerError::UnknownWallet(e.wallet_id))
}

/// [`write`] when the wallet row also meets `guard` (SQL over the wallet's
/// columns and the statement's parameters); None, writing nothing, when not.
async fn write_where(
    executor: impl sqlx::PgExecutor<'_>,
    e: &Entry<'_>,
    balance_delta: i64,
    held_delta: i64,
    guard: &str,
) -> Result<Option<Transaction>, LedgerError> {
    let usage = CallUsage::columns(e.usage);
    Ok(sqlx::query_as::<_, Transaction>(&format!(
        "WITH wallet AS (
           UPDATE token_wallets SET balance = balance + $2, held = held + $3, updated_at = now()
           WHERE id = $1 {guard} RETURNING balance, held)
         INSERT INTO token_wallet_transactions {ENTRY_COLUMNS}
         SELECT $4, $1, $5, $6, wallet.balance, wallet.held, $7, $8, $9, $10, $11, $12, $13, $14,
                CASE WHEN $15::bigint IS NULL THEN NULL ELSE now() + make_interval(secs => $15::double precision) END,
                $16, $17, $18, $19, $20, $21
         FROM wallet
         RETURNING {TX_COLUMNS}"
    ))
    .bind(e.wallet_id)
    .bind(balance_delta)
    .bind(held_delta)
    .bind(TransactionId::new())
    .bind(e.kind.as_str())
    .bind(e.amount)
    .bind(e.key)
    .bind(&e.request)
    .bind(e.reason)
    .bind(e.hold_id)
    .bind(e.refs.session_id)
    .bind(e.refs.job_id)
    .bind(e.refs.attempt)
    .bind(e.refs.purpose.as_deref())
    .bind(e.expires_in_secs)
    .bind(usage.0)
    .bind(usage.1)
    .bind(usage.2)
    .bind(usage.3)
    .bind(usage.4)
    .bind(usage.5)
    .fetch_optional(executor)
    .await?)
}

fn check(amount: i64, key: &str) -> Result<(), LedgerError> {
    if key.trim().is_empty() {
        return Err(LedgerError::EmptyKey);
    }
    if amount <= 0 {
        return Err(LedgerError::NonPositiveAmount(amount));
    }
    Ok(())
}

/// Reserves `amount`; fails without writing when the available balance is short.
pub async fn hold(
    pool: &PgPool,
    wallet_id: WalletId,
    amount: i64,
    key: &str,
    refs: &References,
    expires_in_secs: i64,
) -> Result<Transaction, LedgerError> {
    once_more_after_key_race(|| hold_once(pool, wallet_id, amount, key, refs, expires_in_secs))
        .await
}

async fn hold_once(
    pool: &PgPool,
    wallet_id: WalletId,
    amount: i64,
    key: &str,
    refs: &References,
    expires_in_secs: i64,
) -> Result<Transaction, LedgerError> {
    check(amount, key)?;
    let entry = Entry {
        wallet_id,
        kind: LedgerKind::Hold,
        amount,
        key,
        request: request_fingerprint(LedgerKind::Hold, wallet_id, amount, None, refs),
        reason: None,
        hold_id: None,
        refs,
        expires_in_secs: Some(expires_in_secs.max(1)),
        usage: None,
    };
    // Nearly every hold is a new key on a wallet that can afford it: one
    // autocommitted statement, so the wallet row is locked only while it runs.
    // A key used on any wallet sends the hold to the locked path, which tells.
    let affordable_new_key = "AND balance - held >= $3 AND NOT EXISTS (
        SELECT 1 FROM token_wallet_transactions t WHERE t.idempotency_key = $7)";
    if let Some(written) = write_where(pool, &entry, 0, amount, affordable_new_key).await? {
        return Ok(written);
    }
    // A replay, a short or unknown wallet: the locked path tells which.
    let mut tx = pool.begin().await?;
    let locked = lock_wallet(&mut tx, wallet_id, key, &entry.request).await?;
    if let Some(first) = locked.first {
        return Ok(first);
    }
    let available = locked.balance - locked.held;
    if amount > available {
        return Err(LedgerError::InsufficientFunds {
            requested: amount,
            available,
        });
    }
    let written = write(&mut tx, &entry, 0, amount).await?;
    tx.commit().await?;
    Ok(written)
}

#[derive(sqlx::FromRow)]
struct OpenHold {
    amount: i64,
    session_id: Option<SessionId>,
    job_id: Option<JobId>,
    attempt: Option<i32>,
    purpose: Option<String>,
}

#[derive(sqlx::FromRow)]
struct HoldState {
    #[sqlx(flatten)]
    hold: OpenHold,
    /// Captured or released already.
    closed: bool,
}

/// An open hold: (amount, references). Errors when unknown or already closed.
async fn open_hold(
    tx: &mut Tx<'_>,
    wallet_id: WalletId,
    hold_id: TransactionId,
) -> Result<(i64, References), LedgerError> {
    let HoldState { hold, closed } = sqlx::query_as(
        "WITH h AS MATERIALIZED (SELECT * FROM token_wallet_transactions WHERE id = $1)
         SELECT amount, session_id, job_id, attempt, purpose,
                EXISTS (SELECT 1 FROM token_wallet_transactions c
                        WHERE c.hold_id = h.id AND c.kind = ANY($3)) AS closed
         FROM h
         WHERE wallet_id = $2 AND kind = $4",
    )
    .bind(hold_id)
    .bind(wallet_id)
    .bind(closing_kinds())
    .bind(LedgerKind::Hold.as_str())
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(LedgerError::UnknownHold(hold_id))?;
    if closed {
        return Err(LedgerError::HoldClosed(hold_id));
    }
    Ok((
        hold.amount,
        References {
            session_id: hold.session_id,
            job_id: hold.job_id,
            attempt: hold.attempt,
            purpose: hold.purpose,
        },
    ))
}

/// Turns a hold into a debit of the actual `amount`; the rest of the hold is released.
pub async fn capture(
    pool: &PgPool,
    wallet_id: WalletId,
    hold_id: TransactionId,
    amount: i64,
    key: &str,
) -> Result<Transaction, LedgerError> {
    capture_call(pool, wallet_id, hold_id, amount, key, None).await
}

/// [`capture`] of a model call, recording what it used and cost in money
/// (`usage`) on the capture. The usage is not part of the request's
/// identity: a replay under the same key returns the first capture as it was.
pub async fn capture_call(
    pool: &PgPool,
    wallet_id: WalletId,
    hold_id: TransactionId,
    amount: i64,
    key: &str,
    usage: Option<&CallUsage>,
) -> Result<Transaction, LedgerError> {
    once_more_after_key_race(|| capture_once(pool, wallet_id, hold_id, amount, key, usage)).await
}

async fn capture_once(
    pool: &PgPool,
    wallet_id: WalletId,
    hold_id: TransactionId,
    amount: i64,
    key: &str,
    usage: Option<&CallUsage>,
) -> Result<Transaction, LedgerError> {
    if key.trim().is_empty() {
        return Err(LedgerError::EmptyKey);
    }
    if amount < 0 {
        return Err(LedgerError::NonPositiveAmount(amount));
    }
    let request = request_fingerprint(
        LedgerKind::Capture,
        wallet_id,
        amount,
        Some(hold_id),
        &References::default(),
    );
    let capture = Capture {
        wallet_id,
        hold_id,
        amount,
        key,
        request: &request,
        usage,
    };
    if let Some(written) = capture_at_once(pool, &capture).await? {
        return Ok(written);
    }
    // A replay, a closed, foreign or smaller hold: the locked path tells which.
    let mut tx = pool.begin().await?;
    let locked = lock_wallet(&mut tx, wallet_id, key, &request).await?;
    if let Some(first) = locked.first {
        return Ok(first);
    }
    let (held, refs) = match open_hold(&mut tx, wallet_id, hold_id).await {
        Err(LedgerError::HoldClosed(_)) if abandoned(&mut tx, hold_id).await? => {
            let late = LateDebit {
                wallet_id,
                hold_id,
                amount,
                available: locked.balance - locked.held,
                usage,
            };
            return late_debit(tx, late, key, request).await;
        }
        other => other?,
    };
    if amount > held {
        return Err(LedgerError::CaptureExceedsHold {
            requested: amount,
            held,
        });
    }
    let entry = Entry {
        wallet_id,
        kind: LedgerKind::Capture,
        amount,
        key,
        request,
        reason: (amount < held).then_some("the rest of the hold is released"),
        hold_id: Some(hold_id),
        refs: &refs,
        expires_in_secs: None,
        usage,
    };
    let written = write(&mut tx, &entry, -amount, -held).await?;
    tx.commit().await?;
    Ok(written)
}

struct Capture<'a> {
    wallet_id: WalletId,
    hold_id: TransactionId,
    amount: i64,
    key: &'a str,
    request: &'a str,
    usage: Option<&'a CallUsage>,
}

/// The common capture (a new key, an open hold of this wallet at least as
/// large) in one autocommitted statement, so the wallet row is locked only
/// while it runs; None, writing nothing, otherwise. The statement looks at the
/// hold before it waits for the wallet, so a close committed meanwhile is not
/// seen; the second close it would make breaks the ledger's constraints (one
/// close per hold, held never below zero) and is left to the locked path.
async fn capture_at_once(
    pool: &PgPool,
    c: &Capture<'_>,
) -> Result<Option<Transaction>, LedgerError> {
    let usage = CallUsage::columns(c.usage);
    let written = sqlx::query_as::<_, Transaction>(&format!(
        "WITH found AS MATERIALIZED (SELECT * FROM token_wallet_transactions WHERE id = $2),
         hold AS (
           SELECT h.amount AS held, h.session_id, h.job_id, h.attempt, h.purpose
           FROM found h
           WHERE h.wallet_id = $1 AND h.kind = $7 AND h.amount >= $3
             AND NOT EXISTS (SELECT 1 FROM token_wallet_transactions c
                             WHERE c.hold_id = h.id AND c.kind = ANY($8))
             AND NOT EXISTS (SELECT 1 FROM token_wallet_transactions k
                             WHERE k.idempotency_key = $4)),
         wallet AS (
           UPDATE token_wallets w SET balance = w.balance - $3, held = w.held - hold.held, updated_at = now()
           FROM hold WHERE w.id = $1
           RETURNING w.balance, w.held AS held_after, hold.*)
         INSERT INTO token_wallet_transactions {ENTRY_COLUMNS}
         SELECT $6, $1, $9, $3, wallet.balance, wallet.held_after, $4, $5,
                CASE WHEN $3 < wallet.held THEN 'the rest of the hold is released' END, $2,
                wallet.session_id, wallet.job_id, wallet.attempt, wallet.purpose, NULL,
                $10, $11, $12, $13, $14, $15
         FROM wallet
         RETURNING {TX_COLUMNS}"
    ))
    .bind(c.wallet_id)
    .bind(c.hold_id)
    .bind(c.amount)
    .bind(c.key)
    .bind(c.request)
    .bind(TransactionId::new())
    .bind(LedgerKind::Hold.as_str())
    .bind(closing_kinds())
    .bind(LedgerKind::Capture.as_str())
    .bind(usage.0)
    .bind(usage.1)
    .bind(usage.2)
    .bind(usage.3)
    .bind(usage.4)
    .bind(usage.5)
    .fetch_optional(pool)
    .await;
    match written {
        Err(sqlx::Error::Database(e))
            if matches!(
                e.kind(),
                sqlx::error::ErrorKind::UniqueViolation | sqlx::error::ErrorKind::CheckViolation
            ) =>
        {
            Ok(None)
        }
        other => Ok(other?),
    }
}

/// Whether a sweep released this hold (abandoned or expired; not its own
/// attempt, which releases only when no call was made) and nothing captured it.
async fn abandoned(tx: &mut Tx<'_>, hold_id: TransactionId) -> Result<bool, LedgerError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM token_wallet_transactions
                         WHERE hold_id = $1 AND kind = $4 AND idempotency_key IN ($2, $3))
            AND NOT EXISTS (SELECT 1 FROM token_wallet_transactions
                             WHERE hold_id = $1 AND kind = $5)",
    )
    .bind(hold_id)
    .bind(abandon_key(hold_id))
    .bind(expire_key(hold_id))
    .bind(LedgerKind::Release.as_str())
    .bind(LedgerKind::Capture.as_str())
    .fetch_one(&mut **tx)
    .await?)
}

fn abandon_key(hold_id: TransactionId) -> String {
    format!("abandon:{hold_id}")
}

fn expire_key(hold_id: TransactionId) -> String {
    format!("expire:{hold_id}")
}

struct LateDebit<'a> {
    wallet_id: WalletId,
    hold_id: TransactionId,
    amount: i64,
    available: i64,
    usage: Option<&'a CallUsage>,
}

/// A call whose worker was given up for dead (frozen past its lease) but that
/// replied after all: it happened, so it is charged, as a debit (the hold is
/// gone) under the capture's key, from what the wallet has available.
async fn late_debit(
    mut tx: Tx<'_>,
    late: LateDebit<'_>,
    key: &str,
    request: String,
) -> Result<Transaction, LedgerError> {
    let LateDebit {
        wallet_id,
        hold_id,
        amount,
        available,
        usage,
    } = late;
    if amount > available {
        return Err(LedgerError::InsufficientFunds {
            requested: amount,
            available,
        });
    }
    let hold: OpenHold = sqlx::query_as(
        "SELECT amount, session_id, job_id, attempt, purpose FROM token_wallet_transactions WHERE id = $1",
    )
    .bind(hold_id)
    .fetch_one(&mut *tx)
    .await?;
    if amount > hold.amount {
        return Err(LedgerError::CaptureExceedsHold {
            requested: amount,
            held: hold.amount,
        });
    }
    let refs = References {
        session_id: hold.session_id,
        job_id: hold.job_id,
        attempt: hold.attempt,
        purpose: hold.purpose,
    };
    let entry = Entry {
        wallet_id,
        kind: LedgerKind::Debit,
        amount,
        key,
        request,
        reason: Some("a call replied after its hold was released (abandoned or expired)"),
        hold_id: Some(hold_id),
        refs: &refs,
        expires_in_secs: None,
        usage,
    };
    let written = write(&mut tx, &entry, -amount, 0).await?;
    tx.commit().await?;
    Ok(written)
}

/// Gives a hold back in full.
pub async fn release(
    pool: &PgPool,
    wallet_id: WalletId,
    hold_id: TransactionId,
    key: &str,
    reason: &str,
) -> Result<Transaction, LedgerError> {
    once_more_after_key_race(|| release_once(pool, wallet_id, hold_id, key, reason)).await
}

async fn release_once(
    pool: &PgPool,
    wallet_id: WalletId,
    hold_id: TransactionId,
    key: &str,
    reason: &str,
) -> Result<Transaction, LedgerError> {
    if key.trim().is_empty() {
        return Err(LedgerError::EmptyKey);
    }
    let request = request_fingerprint(
        LedgerKind::Release,
        wallet_id,
        0,
        Some(hold_id),
        &References::default(),
    );
    let mut tx = pool.begin().await?;
    if let Some(first) = lock_wallet(&mut tx, wallet_id, key, &request).await?.first {
        return Ok(first);
    }
    let (held, refs) = open_hold(&mut tx, wallet_id, hold_id).await?;
    let entry = Entry {
        wallet_id,
        kind: LedgerKind::Release,
        amount: held,
        key,
        request,
        reason: Some(reason),
        hold_id: Some(hold_id),
        refs: &refs,
        expires_in_secs: None,
        usage: None,
    };
    let written = write(&mut tx, &entry, 0, -held).await?;
    tx.commit().await?;
    Ok(written)
}

pub async fn credit(
    pool: &PgPool,
    wallet_id: WalletId,
    amount: i64,
    key: &str,
    reason: &str,
) -> Result<Transaction, LedgerError> {
    once_more_after_key_race(|| credit_once(pool, wallet_id, amount, key, reason)).await
}

async fn credit_once(
    pool: &PgPool,
    wallet_id: WalletId,
    amount: i64,
    key: &str,
    reason: &str,
) -> Result<Transaction, LedgerError> {
    check(amount, key)?;
    let request = request_fingerprint(
        LedgerKind::Credit,
        wallet_id,
        amount,
        None,
        &References::default(),
    );
    let mut tx = pool.begin().await?;
    if let Some(first) = lock_wallet(&mut tx, wallet_id, key, &request).await?.first {
        return Ok(first);
    }
    let entry = Entry {
        wallet_id,
        kind: LedgerKind::Credit,
        amount,
        key,
        request,
        reason: Some(reason),
        hold_id: None,
        refs: &References::default(),
        expires_in_secs: None,
        usage: None,
    };
    let written = write(&mut tx, &entry, amount, 0).await?;
    tx.commit().await?;
    Ok(written)
}

/// The entry a wallet wrote under `key`, if any: whether a request under that
/// key was already made (`dialecticd bootstrap` reports a repeat as such).
pub async fn entry_with_key(
    pool: &PgPool,
    wallet_id: WalletId,
    key: &str,
) -> Result<Option<Transaction>, LedgerError> {
    Ok(sqlx::query_as::<_, Transaction>(&format!(
        "WITH keyed AS MATERIALIZED (
           SELECT {TX_COLUMNS} FROM token_wallet_transactions WHERE idempotency_key = $2)
         SELECT * FROM keyed WHERE wallet_id = $1"
    ))
    .bind(wallet_id)
    .bind(key)
    .fetch_optional(pool)
    .await?)
}

/// Releases holds whose expiry passed without a capture; returns how many.
/// A hold whose call's cost was recorded is left to [`settle_abandoned`],
/// which captures it once its attempt is over.
pub async fn release_expired(pool: &PgPool, limit: i64) -> Result<u32, LedgerError> {
    let expired: Vec<(WalletId, TransactionId)> = sqlx::query_as(
        "SELECT h.wallet_id, h.id FROM token_wallet_transactions h
         WHERE h.kind = $2 AND h.expires_at < now()
           AND NOT EXISTS (SELECT 1 FROM token_wallet_transactions c
                           WHERE c.hold_id = h.id AND c.kind = ANY($3))
           AND NOT EXISTS (SELECT 1 FROM model_call_usage u WHERE u.hold_id = h.id)
         ORDER BY h.expires_at LIMIT $1",
    )
    .bind(limit)
    .bind(LedgerKind::Hold.as_str())
    .bind(closing_kinds())
    .fetch_all(pool)
    .await?;
    let mut released = 0;
    for (wallet, hold_id) in expired {
        match release(pool, wallet, hold_id, &expire_key(hold_id), "hold expired").await {
            Ok(_) => released += 1,
            // Captured or released meanwhile: nothing to do.
            Err(LedgerError::HoldClosed(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(released)
}

/// Newest first; `before` is the (created_at, id) of the last row of the
/// previous page, in the page cursor every list of the store takes.
pub async fn transactions(
    pool: &PgPool,
    wallet_id: WalletId,
    limit: i64,
    before: Option<Cursor<TransactionId>>,
) -> Result<Vec<Transaction>, LedgerError> {
    let (at, id) = before.unzip();
    Ok(sqlx::query_as::<_, Transaction>(&format!(
        "SELECT {TX_COLUMNS} FROM token_wallet_transactions
         WHERE wallet_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
         ORDER BY created_at DESC, id DESC LIMIT $4"
    ))
    .bind(wallet_id)
    .bind(at)
    .bind(id)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// Sum of a session's captures (what its model calls cost), per stage-agnostic total.
pub async fn session_cost(pool: &PgPool, session_id: SessionId) -> Result<i64, LedgerError> {
    Ok(sqlx::query_scalar(
        "SELECT COALESCE(sum(amount), 0)::bigint FROM token_wallet_transactions WHERE session_id = $1 AND kind = $2",
    )
    .bind(session_id)
    .bind(LedgerKind::Capture.as_str())
    .fetch_one(pool)
    .await?)
}

/// What a session's captured model calls cost in money, per currency
/// (sorted by currency), summed from the money each capture recorded when its
/// call was made. Unpriced calls add nothing; no priced call, no row.
pub async fn session_money(
    pool: &PgPool,
    session_id: SessionId,
) -> Result<Vec<Money>, LedgerError> {
    let sums: Vec<(String, i64)> = sqlx::query_as(
        "SELECT money_currency, sum(money_nanos)::bigint FROM token_wallet_transactions
         WHERE session_id = $1 AND kind = $2 AND money_currency IS NOT NULL
         GROUP BY 1 ORDER BY 1",
    )
    .bind(session_id)
    .bind(LedgerKind::Capture.as_str())
    .fetch_all(pool)
    .await?;
    Ok(sums
        .into_iter()
        .map(|(currency, nanos)| Money { currency, nanos })
        .collect())
}

pub async fn is_admin(pool: &PgPool, user_id: UserId) -> Result<bool, LedgerError> {
    Ok(
        sqlx::query_scalar("SELECT is_admin FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(pool)
            .await?
            .unwrap_or(false),
    )
}

/// Captured cost per stage of a session: (stage_slug, sum).
pub async fn stage_costs(
    pool: &PgPool,
    session_id: SessionId,
) -> Result<Vec<(String, i64)>, LedgerError> {
    Ok(sqlx::query_as(
        "SELECT j.stage_slug, COALESCE(sum(t.amount), 0)::bigint
         FROM token_wallet_transactions t JOIN dialectic_generation_jobs j ON j.id = t.job_id
         WHERE t.session_id = $1 AND t.kind = $2 GROUP BY 1",
    )
    .bind(session_id)
    .bind(LedgerKind::Capture.as_str())
    .fetch_all(pool)
    .await?)
}

/// Records what a held model call cost, before its capture: the sweep below
/// captures it if the capture itself never arrives. Idempotent per hold.
pub async fn record_usage(
    pool: &PgPool,
    hold_id: TransactionId,
    amount: i64,
) -> Result<(), LedgerError> {
    record_call_usage(pool, hold_id, amount, None).await
}

/// [`record_usage`] with the call's token counts and money, which the
/// sweep's capture then carries as the executor's own would.
pub async fn record_call_usage(
    pool: &PgPool,
    hold_id: TransactionId,
    amount: i64,
    usage: Option<&CallUsage>,
) -> Result<(), LedgerError> {
    if amount < 0 {
        return Err(LedgerError::NonPositiveAmount(amount));
    }
    let (input, output, cached, currency, nanos, cache_write) = CallUsage::columns(usage);
    sqlx::query(
        "INSERT INTO model_call_usage
           (hold_id, amount, input_tokens, output_tokens, cached_input_tokens, money_currency, money_nanos,
            cache_write_input_tokens)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (hold_id) DO NOTHING",
    )
    .bind(hold_id)
    .bind(amount)
    .bind(input)
    .bind(output)
    .bind(cached)
    .bind(currency)
    .bind(nanos)
    .bind(cache_write)
    .execute(pool)
    .await?;
    Ok(())
}

/// A `model_call_usage` row as the sweep reads it.
#[derive(sqlx::FromRow)]
struct RecordedUsage {
    wallet_id: WalletId,
    id: TransactionId,
    job_id: JobId,
    attempt: i32,
    amount: Option<i64>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cached_input_tokens: Option<i64>,
    cache_write_input_tokens: Option<i64>,
    money_currency: Option<String>,
    money_nanos: Option<i64>,
}

impl RecordedUsage {
    /// The usage to capture with, when the executor recorded token counts
    /// (a row written before they were kept has none).
    fn usage(&self) -> Option<CallUsage> {
        Some(CallUsage {
            input_tokens: self.input_tokens?,
            output_tokens: self.output_tokens?,
            cached_input_tokens: self.cached_input_tokens.unwrap_or(0),
            cache_write_input_tokens: self.cache_write_input_tokens.unwrap_or(0),
            money: self
                .money_currency
                .clone()
                .zip(self.money_nanos)
                .map(|(currency, nanos)| Money { currency, nanos }),
        })
    }
}

/// The key a held model call is captured under, by its executor or by the sweep.
pub fn capture_key(job_id: impl std::fmt::Display, attempt: i32) -> String {
    format!("capture:{job_id}:{attempt}")
}

/// How many abandoned holds a sweep captured and released.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub captured: u32,
    pub released: u32,
}

/// Settles open holds whose attempt is over: the job they were taken for is
/// no longer processing that attempt (its lease expired and it was retried,
/// or it ended or was superseded). Holds naming no job row are left to expire.
/// A worker releases its hold, or records its call's usage, before it reports
/// the attempt's outcome (the capture itself may still be on its way), so a
/// hold still open once the job has moved on belongs to a worker that died,
/// could not reach the wallet or is about to capture. When its call's usage
/// was recorded the call happened and is captured (under the executor's own
/// key, so whichever capture comes second changes nothing); otherwise no call
/// was made and the hold is
/// released (DESIGN §3.11: when the attempt is given up, not at its expiry).
pub async fn settle_abandoned(pool: &PgPool, limit: i64) -> Result<Settled, LedgerError> {
    let abandoned: Vec<RecordedUsage> = sqlx::query_as(
        "SELECT h.wallet_id, h.id, h.job_id, h.attempt, u.amount,
                u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cache_write_input_tokens,
                u.money_currency, u.money_nanos
           FROM token_wallet_transactions h
           LEFT JOIN model_call_usage u ON u.hold_id = h.id
         WHERE h.kind = $3 AND h.job_id IS NOT NULL AND h.attempt IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM token_wallet_transactions c
                           WHERE c.hold_id = h.id AND c.kind = ANY($4))
           AND EXISTS (SELECT 1 FROM dialectic_generation_jobs j
                       WHERE j.id = h.job_id AND NOT (j.status = $2 AND j.attempt_count = h.attempt))
         ORDER BY h.created_at LIMIT $1",
    )
    .bind(limit)
    .bind(JobStatus::Processing.as_str())
    .bind(LedgerKind::Hold.as_str())
    .bind(closing_kinds())
    .fetch_all(pool)
    .await?;
    let mut settled = Settled::default();
    for recorded in abandoned {
        let usage = recorded.usage();
        let RecordedUsage {
            wallet_id: wallet,
            id: hold_id,
            job_id,
            attempt,
            amount,
            ..
        } = recorded;
        let key = capture_key(job_id, attempt);
        let result = match amount {
            Some(amount) => capture_call(pool, wallet, hold_id, amount, &key, usage.as_ref())
                .await
                .map(|_| settled.captured += 1),
            None => release(
                pool,
                wallet,
                hold_id,
                &abandon_key(hold_id),
                "its attempt ended without a capture (the worker stopped)",
            )
            .await
            .map(|_| settled.released += 1),
        };
        match result {
            Ok(()) => {}
            // Captured or released meanwhile (a late worker): nothing to do.
            Err(LedgerError::HoldClosed(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_keep_the_kind_names_they_were_first_stored_with() {
        // Stored request hashes are compared with these on every replay: a
        // renamed kind would turn each old key's replay into a key reuse.
        let wallet = WalletId::new();
        assert_eq!(
            request_fingerprint(LedgerKind::Credit, wallet, 5, None, &References::default()),
            format!("credit|{wallet}|5|||||")
        );
    }
}
