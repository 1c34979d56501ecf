//! Transactional outbox: `enqueue` inside the state change's transaction;
//! the relay takes rows with SKIP LOCKED, publishes with confirms, then commits
//! their deletion — so several relays never publish the same row at once and a
//! crash between publish and commit only repeats a message (consumers are idempotent).

use crate::{StoreError, Tx};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OutboxRow {
    pub id: i64,
    pub routing_key: String,
    pub payload: Vec<u8>,
    pub traceparent: Option<String>,
}

pub async fn enqueue(
    tx: &mut Tx<'_>,
    routing_key: &str,
    payload: &[u8],
    traceparent: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO outbox (routing_key, payload, traceparent) VALUES ($1, $2, $3)")
        .bind(routing_key)
        .bind(payload)
        .bind(traceparent)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Locks and deletes up to `limit` rows; they reappear if the transaction rolls back.
pub async fn take_batch(tx: &mut Tx<'_>, limit: i64) -> Result<Vec<OutboxRow>, StoreError> {
    Ok(sqlx::query_as::<_, OutboxRow>(
        "DELETE FROM outbox WHERE id IN (
             SELECT id FROM outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING id, routing_key, payload, traceparent",
    )
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?)
}

pub async fn pending_count(pool: &sqlx::PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(pool)
        .await?)
}
