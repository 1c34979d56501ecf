//! Transactional outbox: `enqueue` inside the state change's transaction, and
//! two ways out. The writer publishes its rows right after the commit and then
//! `forget`s them (the runtime's courier); the relay takes what is left once it
//! is `min_age` old, with SKIP LOCKED, publishes with confirms, then commits the
//! deletion. A writer that crashed before publishing leaves its rows to the
//! relay; one that crashed after publishing but before forgetting only repeats
//! a message (consumers are idempotent). Several relays never take one row.

use crate::{StoreError, Tx};
use std::time::Duration;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OutboxRow {
    pub id: i64,
    pub routing_key: String,
    pub payload: Vec<u8>,
    pub traceparent: Option<String>,
}

impl OutboxRow {
    /// The row a writer just inserted as `id`, for its courier.
    pub(crate) fn written(
        id: i64,
        routing_key: &str,
        payload: &[u8],
        traceparent: Option<&str>,
    ) -> Self {
        OutboxRow {
            id,
            routing_key: routing_key.to_string(),
            payload: payload.to_vec(),
            traceparent: traceparent.map(str::to_string),
        }
    }
}

/// Writes one message in the caller's transaction; the row, returned, is what
/// the writer hands its courier once the transaction has committed.
pub async fn enqueue(
    tx: &mut Tx<'_>,
    routing_key: &str,
    payload: &[u8],
    traceparent: Option<&str>,
) -> Result<OutboxRow, StoreError> {
    let id = sqlx::query_scalar(
        "INSERT INTO outbox (routing_key, payload, traceparent) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(routing_key)
    .bind(payload)
    .bind(traceparent)
    .fetch_one(&mut **tx)
    .await?;
    Ok(OutboxRow::written(id, routing_key, payload, traceparent))
}

/// Locks and deletes up to `limit` rows written at least `min_age` ago (younger
/// ones are their writer's to publish); they reappear if the transaction rolls back.
pub async fn take_batch(
    tx: &mut Tx<'_>,
    limit: i64,
    min_age: Duration,
) -> Result<Vec<OutboxRow>, StoreError> {
    Ok(sqlx::query_as::<_, OutboxRow>(
        "DELETE FROM outbox WHERE id IN (
             SELECT id FROM outbox
              WHERE created_at <= now() - make_interval(secs => $2::double precision)
              ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING id, routing_key, payload, traceparent",
    )
    .bind(limit)
    .bind(min_age.as_secs_f64())
    .fetch_all(&mut **tx)
    .await?)
}

/// Deletes rows their writer has published (the broker confirmed them).
/// A row the relay holds is skipped: it is being published again anyway.
pub async fn forget(pool: &sqlx::PgPool, ids: &[i64]) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM outbox WHERE id IN (
             SELECT id FROM outbox WHERE id = ANY($1) FOR UPDATE SKIP LOCKED)",
    )
    .bind(ids)
    .execute(pool)
    .await?
    .rows_affected())
}

pub async fn pending_count(pool: &sqlx::PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(pool)
        .await?)
}
