//! Steps a plan skipped for one session (seed 004 adaptive execution). The
//! planner writes them (from a PLAN reply's `skip_steps`) and treats them as
//! done when it plans a stage; the recipe itself never changes.

use crate::sessions::session_process;
use crate::{StoreError, Tx};
use dialectic_core::ids::{JobId, SessionId};
use dialectic_core::shape::SkipStep;
use dialectic_core::skip_rule::SkipCondition;
use sqlx::PgPool;
use sqlx::types::Json;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SkipRow {
    pub iteration: i32,
    pub step_key: String,
    pub reason: String,
}

/// Step keys of every stage of the session's pipeline version (templates and
/// edited copies), each with the condition under which a plan may skip it:
/// a skip can only name one of these. Where a template and its edited copy
/// both name a step, a condition either gives holds.
pub async fn step_rules(
    tx: &mut Tx<'_>,
    session_id: SessionId,
) -> Result<BTreeMap<String, Option<SkipCondition>>, StoreError> {
    let rows: Vec<(String, Option<Json<SkipCondition>>)> = sqlx::query_as(&format!(
        "SELECT ts.step_key, ts.skip_only_when FROM dialectic_process_template_stages pts
           JOIN dialectic_stages st ON st.id = pts.stage_id
           JOIN dialectic_recipe_template_steps ts ON ts.template_id = st.recipe_template_id
          WHERE pts.process_template_id = {process}
         UNION ALL
         SELECT rs.step_key, rs.skip_only_when FROM dialectic_process_template_stages pts
           JOIN dialectic_stages st ON st.id = pts.stage_id
           JOIN dialectic_stage_recipe_steps rs ON rs.instance_id = st.active_recipe_instance_id
          WHERE pts.process_template_id = {process}",
        process = session_process("$1")
    ))
    .bind(session_id)
    .fetch_all(&mut **tx)
    .await?;
    let mut rules: BTreeMap<String, Option<SkipCondition>> = BTreeMap::new();
    for (key, condition) in rows {
        let slot = rules.entry(key).or_default();
        *slot = slot.or(condition.map(|c| c.0));
    }
    Ok(rules)
}

/// Records the skips; returns those not recorded before (a repeated reply or
/// a second plan naming the same step adds nothing).
pub async fn record(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
    requested_by: JobId,
    skips: &[SkipStep],
) -> Result<Vec<SkipStep>, StoreError> {
    let mut added = Vec::new();
    for skip in skips {
        let inserted = sqlx::query(
            "INSERT INTO dialectic_step_skips (session_id, iteration, step_key, reason, requested_by)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(session_id)
        .bind(iteration)
        .bind(&skip.step_key)
        .bind(&skip.reason)
        .bind(requested_by)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if inserted == 1 {
            added.push(skip.clone());
        }
    }
    Ok(added)
}

/// The step keys skipped in one iteration of a session.
pub async fn skipped_keys(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
) -> Result<BTreeSet<String>, StoreError> {
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT step_key FROM dialectic_step_skips WHERE session_id = $1 AND iteration = $2",
    )
    .bind(session_id)
    .bind(iteration)
    .fetch_all(&mut **tx)
    .await?;
    Ok(keys.into_iter().collect())
}

/// Every skip of a session, oldest first (GetSession).
pub async fn list(pool: &PgPool, session_id: SessionId) -> Result<Vec<SkipRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT iteration, step_key, reason FROM dialectic_step_skips
          WHERE session_id = $1 ORDER BY iteration, created_at, step_key",
    )
    .bind(session_id)
    .fetch_all(pool)
    .await?)
}
