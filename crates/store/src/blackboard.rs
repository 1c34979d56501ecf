//! The blackboard's record (seed 004 §1): every entry a step published, per
//! session. Redis holds a copy for fast reads; this table is what the copy is
//! rebuilt from, so losing Redis loses nothing.

use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::blackboard::{BoardEntry, StoredEntry};
use dialectic_core::ids::{BlackboardEntryId, JobId, SessionId};
use sqlx::types::Json;
use sqlx::{PgExecutor, PgPool};

#[derive(Debug, Clone, sqlx::FromRow)]
struct EntryRow {
    id: BlackboardEntryId,
    entry_type: String,
    seq: i32,
    iteration: i32,
    stage_slug: String,
    step_key: String,
    model_slug: String,
    job_id: JobId,
    data: Json<serde_json::Value>,
    created_at: DateTime<Utc>,
}

impl From<EntryRow> for StoredEntry {
    fn from(row: EntryRow) -> Self {
        StoredEntry {
            id: row.id.to_string(),
            entry_type: row.entry_type,
            seq: row.seq,
            iteration: row.iteration,
            stage_slug: row.stage_slug,
            step_key: row.step_key,
            model: row.model_slug,
            job_id: row.job_id.to_string(),
            data: row.data.0,
            at_ms: row.created_at.timestamp_millis(),
        }
    }
}

/// Who published a reply's entries.
pub struct Publisher<'a> {
    pub session_id: SessionId,
    pub iteration: i32,
    pub stage_slug: &'a str,
    pub step_key: &'a str,
    pub model_slug: &'a str,
    pub job_id: JobId,
}

/// A recorded entry and how many entries of its type the session then had:
/// the length its Redis list must have once the entry is pushed.
pub struct Recorded {
    pub entry: StoredEntry,
    pub count: i64,
}

/// Records a reply's entries in order, numbering each within its session and type.
pub async fn record(
    tx: &mut Tx<'_>,
    by: &Publisher<'_>,
    entries: &[BoardEntry],
) -> Result<Vec<Recorded>, StoreError> {
    let mut recorded = Vec::with_capacity(entries.len());
    for entry in entries {
        // Two planners publishing one type for one session take turns.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("blackboard:{}:{}", by.session_id, entry.entry_type))
            .execute(&mut **tx)
            .await?;
        let row: EntryRow = sqlx::query_as(
            "INSERT INTO dialectic_blackboard_entries
                 (id, session_id, entry_type, seq, iteration, stage_slug, step_key, model_slug, job_id, data)
             SELECT $1, $2, $3, COALESCE(max(seq), 0) + 1, $4, $5, $6, $7, $8, $9
               FROM dialectic_blackboard_entries WHERE session_id = $2 AND entry_type = $3
             RETURNING id, entry_type, seq, iteration, stage_slug, step_key, model_slug, job_id, data, created_at",
        )
        .bind(BlackboardEntryId::new())
        .bind(by.session_id)
        .bind(&entry.entry_type)
        .bind(by.iteration)
        .bind(by.stage_slug)
        .bind(by.step_key)
        .bind(by.model_slug)
        .bind(by.job_id)
        .bind(Json(&entry.data))
        .fetch_one(&mut **tx)
        .await?;
        let count = count_of(&mut **tx, by.session_id, &entry.entry_type).await?;
        recorded.push(Recorded {
            entry: row.into(),
            count,
        });
    }
    Ok(recorded)
}

async fn count_of(
    db: impl PgExecutor<'_>,
    session_id: SessionId,
    entry_type: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_blackboard_entries WHERE session_id = $1 AND entry_type = $2",
    )
    .bind(session_id)
    .bind(entry_type)
    .fetch_one(db)
    .await?)
}

/// How many entries of each type a session has (one type, or all), by type.
pub async fn counts(
    pool: &PgPool,
    session_id: SessionId,
    entry_type: Option<&str>,
) -> Result<Vec<(String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT entry_type, count(*) FROM dialectic_blackboard_entries
          WHERE session_id = $1 AND ($2::text IS NULL OR entry_type = $2)
          GROUP BY entry_type ORDER BY entry_type",
    )
    .bind(session_id)
    .bind(entry_type)
    .fetch_all(pool)
    .await?)
}

/// A session's entries of one type, oldest first.
pub async fn of_type(
    pool: &PgPool,
    session_id: SessionId,
    entry_type: &str,
) -> Result<Vec<StoredEntry>, StoreError> {
    let rows: Vec<EntryRow> = sqlx::query_as(
        "SELECT id, entry_type, seq, iteration, stage_slug, step_key, model_slug, job_id, data, created_at
           FROM dialectic_blackboard_entries
          WHERE session_id = $1 AND entry_type = $2 ORDER BY seq",
    )
    .bind(session_id)
    .bind(entry_type)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(StoredEntry::from).collect())
}

/// A moderate revisit: drops what the jobs it archived published (they run
/// again and publish afresh); what it kept stays. Returns how many went.
pub async fn clear_jobs(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    jobs: &[JobId],
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM dialectic_blackboard_entries WHERE session_id = $1 AND job_id = ANY($2)",
    )
    .bind(session_id)
    .bind(jobs)
    .execute(&mut **tx)
    .await?
    .rows_affected())
}

/// Re-processing: drops what the named stages of an iteration published
/// (they run again and publish afresh). Returns how many entries went.
pub async fn clear_stages(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
    stages: &[String],
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM dialectic_blackboard_entries
          WHERE session_id = $1 AND iteration = $2 AND stage_slug = ANY($3)",
    )
    .bind(session_id)
    .bind(iteration)
    .bind(stages)
    .execute(&mut **tx)
    .await?
    .rows_affected())
}
