//! The gateway's memory of the mutations it answered under a client's
//! request id (`dialectic_idempotent_calls`): claim before acting, keep the
//! answer after, hand it back to a retry within the window.

use crate::StoreError;
use dialectic_core::ids::UserId;
use sqlx::PgPool;

/// One call, as a client named it.
#[derive(Debug, Clone, Copy)]
pub struct CallKey<'a> {
    pub user: UserId,
    pub rpc: &'a str,
    pub request_id: &'a str,
}

/// How long answers are kept, and how long a claim with no answer yet is
/// taken to be a call still running (after that, its gateway died).
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    pub keep_secs: i64,
    pub in_flight_secs: i64,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Nobody made this call yet (or its earlier claim expired or was
    /// abandoned): the caller acts, then `answer` or `release`.
    Fresh,
    /// The first call answered: its request's fingerprint and its answer.
    Answered {
        fingerprint: Vec<u8>,
        answer: Vec<u8>,
    },
    /// The first call is still running.
    InFlight { fingerprint: Vec<u8> },
    /// The first call failed and released its claim between this call's
    /// insert and its read: the caller may retry at once.
    Released,
}

/// Claims `key` for a call whose request hashes to `fingerprint`, pruning
/// the user's expired rows first.
pub async fn claim(
    pool: &PgPool,
    key: CallKey<'_>,
    fingerprint: &[u8],
    windows: Windows,
) -> Result<Claim, StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "DELETE FROM dialectic_idempotent_calls
          WHERE user_id = $1 AND claimed_at < now() - make_interval(secs => $2)",
    )
    .bind(key.user)
    .bind(windows.keep_secs as f64)
    .execute(&mut *tx)
    .await?;
    // A claim nobody answered within the in-flight window was left by a
    // gateway that stopped mid-call: take it over rather than wait a day.
    let claimed: Option<(bool,)> = sqlx::query_as(
        "INSERT INTO dialectic_idempotent_calls (user_id, rpc, request_id, fingerprint)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (user_id, rpc, request_id) DO UPDATE
            SET fingerprint = EXCLUDED.fingerprint, claimed_at = now(), answer = NULL
          WHERE dialectic_idempotent_calls.answer IS NULL
            AND dialectic_idempotent_calls.claimed_at < now() - make_interval(secs => $5)
         RETURNING true",
    )
    .bind(key.user)
    .bind(key.rpc)
    .bind(key.request_id)
    .bind(fingerprint)
    .bind(windows.in_flight_secs as f64)
    .fetch_optional(&mut *tx)
    .await?;
    let claim = match claimed {
        Some(_) => Claim::Fresh,
        None => earlier(&mut tx, key).await?,
    };
    tx.commit().await?;
    Ok(claim)
}

async fn earlier(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    key: CallKey<'_>,
) -> Result<Claim, StoreError> {
    let row: Option<(Vec<u8>, Option<Vec<u8>>)> = sqlx::query_as(
        "SELECT fingerprint, answer FROM dialectic_idempotent_calls
          WHERE user_id = $1 AND rpc = $2 AND request_id = $3",
    )
    .bind(key.user)
    .bind(key.rpc)
    .bind(key.request_id)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(match row {
        Some((fingerprint, Some(answer))) => Claim::Answered {
            fingerprint,
            answer,
        },
        Some((fingerprint, None)) => Claim::InFlight { fingerprint },
        None => Claim::Released,
    })
}

/// Keeps the answer of the call that claimed `key`.
pub async fn answer(pool: &PgPool, key: CallKey<'_>, answer: &[u8]) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_idempotent_calls SET answer = $4
          WHERE user_id = $1 AND rpc = $2 AND request_id = $3",
    )
    .bind(key.user)
    .bind(key.rpc)
    .bind(key.request_id)
    .bind(answer)
    .execute(pool)
    .await?;
    Ok(())
}

/// Forgets a claim whose call failed, so a retry acts again.
pub async fn release(pool: &PgPool, key: CallKey<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "DELETE FROM dialectic_idempotent_calls
          WHERE user_id = $1 AND rpc = $2 AND request_id = $3 AND answer IS NULL",
    )
    .bind(key.user)
    .bind(key.rpc)
    .bind(key.request_id)
    .execute(pool)
    .await?;
    Ok(())
}
