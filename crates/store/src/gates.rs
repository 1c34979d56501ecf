//! Confidence gates' record: the confidence a gated reply stated, and which
//! kept documents stayed below their gate (GetSession's notice).

use crate::{StoreError, Tx};
use dialectic_core::ids::{ContributionId, SessionId};
use sqlx::PgPool;

/// Records a gated reply's confidence, and whether it is kept below its gate.
pub async fn record(
    tx: &mut Tx<'_>,
    contribution: ContributionId,
    confidence: Option<f64>,
    low_confidence: bool,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_contributions SET confidence = $2, low_confidence = $3 WHERE id = $1",
    )
    .bind(contribution)
    .bind(confidence)
    .bind(low_confidence)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct LowConfidence {
    pub stage_slug: String,
    pub document_key: String,
    pub confidence: f64,
}

/// The documents of a session's current iteration kept below their gate.
pub async fn kept_low(
    pool: &PgPool,
    session_id: SessionId,
) -> Result<Vec<LowConfidence>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT c.stage_slug, c.document_key, COALESCE(c.confidence, 0) AS confidence
           FROM dialectic_contributions c JOIN dialectic_sessions s ON s.id = c.session_id
          WHERE c.session_id = $1 AND c.low_confidence AND c.is_latest_edit
            AND c.iteration_number = GREATEST(s.iteration_count, 1)
          ORDER BY c.created_at",
    )
    .bind(session_id)
    .fetch_all(pool)
    .await?)
}
