//! The trace a session belongs to (see migration 20261123000801).

use crate::StoreError;
use dialectic_core::ids::SessionId;
use sqlx::PgPool;

/// Records the session's trace once; later calls keep the first.
pub async fn remember_session_trace(
    pool: &PgPool,
    session_id: SessionId,
    traceparent: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_sessions SET traceparent = $2 WHERE id = $1 AND traceparent IS NULL",
    )
    .bind(session_id)
    .bind(traceparent)
    .execute(pool)
    .await?;
    Ok(())
}

pub async fn session_trace(
    pool: &PgPool,
    session_id: SessionId,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT traceparent FROM dialectic_sessions WHERE id = $1")
            .bind(session_id)
            .fetch_optional(pool)
            .await?
            .flatten(),
    )
}
