//! Reads the public API needs beyond the per-entity ones the workers share
//! (`projects`, `sessions`, `contributions`, …).

use crate::StoreError;
use dialectic_core::ids::StageId;

/// The slug of a stage by id; None when the stage no longer exists.
pub async fn stage_slug(
    executor: impl sqlx::PgExecutor<'_>,
    stage_id: StageId,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT slug FROM dialectic_stages WHERE id = $1")
            .bind(stage_id)
            .fetch_optional(executor)
            .await?,
    )
}
