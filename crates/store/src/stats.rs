//! Aggregate reads for the Prometheus gauges. Cheap by design: they run every
//! few seconds in every planner and wallet replica.

use crate::StoreError;
use sqlx::PgPool;

/// (job_type, status, count) for every combination that has jobs.
pub async fn jobs_by_type_and_status(
    pool: &PgPool,
) -> Result<Vec<(String, String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT job_type, status, count(*) FROM dialectic_generation_jobs GROUP BY job_type, status",
    )
    .fetch_all(pool)
    .await?)
}

/// Units held by open holds, over all wallets.
pub async fn wallet_held(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT coalesce(sum(held), 0)::bigint FROM token_wallets")
            .fetch_one(pool)
            .await?,
    )
}
