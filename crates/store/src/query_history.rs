//! The questions asked of a project, newest first: one row per `Query` call
//! (a cached answer too), written by the gateway once it has answered.

use crate::StoreError;
use crate::listing::Cursor;
use chrono::{DateTime, Utc};
use dialectic_core::ids::{ProjectId, QueryId, UserId};
use sqlx::PgPool;

/// A question and its answer, as the gateway records it.
#[derive(Debug, Clone)]
pub struct NewQuestion<'a> {
    pub id: QueryId,
    pub project_id: ProjectId,
    pub user_id: UserId,
    pub question: &'a str,
    pub model: &'a str,
    pub query_type: &'a str,
    pub latency_ms: i64,
    pub cost: i64,
    pub cached: bool,
    /// The answer as the API returned it (an encoded `QueryResponse`).
    pub response: &'a [u8],
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct QuestionRow {
    pub id: QueryId,
    pub user_id: UserId,
    pub question: String,
    pub model: String,
    pub latency_ms: i64,
    pub response: Vec<u8>,
    pub created_at: DateTime<Utc>,
}

pub async fn record(pool: &PgPool, q: &NewQuestion<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO dialectic_query_history
           (id, project_id, user_id, question, model, query_type, latency_ms, cost, cached, response)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(q.id)
    .bind(q.project_id)
    .bind(q.user_id)
    .bind(q.question)
    .bind(q.model)
    .bind(q.query_type)
    .bind(q.latency_ms.max(0))
    .bind(q.cost)
    .bind(q.cached)
    .bind(q.response)
    .execute(pool)
    .await?;
    Ok(())
}

/// A page of the project's questions, newest first, after `after`.
pub async fn list(
    pool: &PgPool,
    project_id: ProjectId,
    limit: i64,
    after: Option<Cursor<QueryId>>,
) -> Result<Vec<QuestionRow>, StoreError> {
    let (at, id) = after.unzip();
    Ok(sqlx::query_as::<_, QuestionRow>(
        "SELECT id, user_id, question, model, latency_ms, response, created_at
         FROM dialectic_query_history
         WHERE project_id = $1
           AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
         ORDER BY created_at DESC, id DESC LIMIT $4",
    )
    .bind(project_id)
    .bind(at)
    .bind(id)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}
