//! The job table. Workers claim with a compare-and-set; the planner moves jobs
//! under `SELECT … FOR NO KEY UPDATE` and applies `dialectic_core::job::transition`.

use crate::attempts::{self, AttemptRows};
use crate::outbox::OutboxRow;
use crate::{StoreError, Tx};
use chrono::{DateTime, Utc};
use dialectic_core::ids::{ContributionId, JobId, ModelId, SessionId, StepId, UserId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::ledger::LedgerKind;
use dialectic_core::payload::JobPayload;
use dialectic_core::recipe::ProgressBand;
use dialectic_core::session::{FailedJob, RootJob, SessionStatus};
use sqlx::FromRow;
use sqlx::PgPool;
use sqlx::postgres::PgRow;
use sqlx::types::Json;

const PROCESSING: &str = JobStatus::Processing.as_str();
const PAUSED_NSF: &str = JobStatus::PausedNsf.as_str();

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct JobRow {
    pub id: JobId,
    pub job_key: String,
    pub session_id: SessionId,
    pub user_id: UserId,
    pub stage_slug: String,
    pub iteration_number: i32,
    pub job_type: String,
    pub status: String,
    pub recipe_step_id: Option<StepId>,
    pub step_key: Option<String>,
    pub model_id: Option<ModelId>,
    pub document_key: Option<String>,
    pub payload: Json<serde_json::Value>,
    pub parent_job_id: Option<JobId>,
    pub prerequisite_job_id: Option<JobId>,
    pub target_contribution_id: Option<ContributionId>,
    pub attempt_count: i32,
    pub max_retries: i32,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub error_details: Option<Json<serde_json::Value>>,
}

impl JobRow {
    pub fn status(&self) -> Result<JobStatus, StoreError> {
        self.status
            .parse()
            .map_err(|e: dialectic_core::job::UnknownValue| StoreError::Corrupt(e.to_string()))
    }
    pub fn job_type(&self) -> Result<JobType, StoreError> {
        self.job_type
            .parse()
            .map_err(|e: dialectic_core::job::UnknownValue| StoreError::Corrupt(e.to_string()))
    }
    pub fn payload(&self) -> Result<JobPayload, StoreError> {
        serde_json::from_value(self.payload.0.clone())
            .map_err(|e| StoreError::Corrupt(format!("job {} payload: {e}", self.id)))
    }
}

pub(crate) const JOB_COLUMNS: &str = "id, job_key, session_id, user_id, stage_slug, iteration_number, job_type, status, recipe_step_id,
    step_key, model_id, document_key, payload, parent_job_id, prerequisite_job_id, target_contribution_id, attempt_count,
    max_retries, lease_owner, lease_expires_at, error_details";

pub struct NewJob<'a> {
    pub id: JobId,
    pub job_key: String,
    pub session_id: SessionId,
    pub user_id: UserId,
    pub stage_slug: &'a str,
    pub iteration: i32,
    pub job_type: JobType,
    pub status: JobStatus,
    pub step_id: Option<StepId>,
    pub step_key: Option<&'a str>,
    pub model_id: Option<ModelId>,
    pub document_key: Option<&'a str>,
    pub payload: &'a JobPayload,
    pub parent_job_id: Option<JobId>,
    pub prerequisite_job_id: Option<JobId>,
    pub target_contribution_id: Option<ContributionId>,
    pub max_attempts: i32,
}

/// Inserts unless a job with the same natural key exists; returns the new id, or None.
pub async fn insert(tx: &mut Tx<'_>, j: &NewJob<'_>) -> Result<Option<JobId>, StoreError> {
    let payload =
        serde_json::to_value(j.payload).map_err(|e| StoreError::Invalid(e.to_string()))?;
    Ok(sqlx::query_scalar(
        "INSERT INTO dialectic_generation_jobs
           (id, job_key, session_id, user_id, stage_slug, iteration_number, job_type, status, recipe_step_id, step_key,
            model_id, document_key, payload, parent_job_id, prerequisite_job_id, target_contribution_id, max_retries)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17)
         ON CONFLICT (job_key) DO NOTHING
         RETURNING id",
    )
    .bind(j.id)
    .bind(&j.job_key)
    .bind(j.session_id)
    .bind(j.user_id)
    .bind(j.stage_slug)
    .bind(j.iteration)
    .bind(j.job_type.as_str())
    .bind(j.status.as_str())
    .bind(j.step_id)
    .bind(j.step_key)
    .bind(j.model_id)
    .bind(j.document_key)
    .bind(Json(payload))
    .bind(j.parent_job_id)
    .bind(j.prerequisite_job_id)
    .bind(j.target_contribution_id)
    .bind(j.max_attempts)
    .fetch_optional(&mut **tx)
    .await?)
}

pub async fn get(executor: impl sqlx::PgExecutor<'_>, id: JobId) -> Result<JobRow, StoreError> {
    sqlx::query_as::<_, JobRow>(&format!(
        "SELECT {JOB_COLUMNS} FROM dialectic_generation_jobs WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(executor)
    .await?
    .ok_or_else(|| StoreError::not_found("job", id))
}

/// Serialises the job's writers (`NO KEY UPDATE`: a contribution naming the
/// job checks its key without waiting for the planner's unit).
pub async fn lock(tx: &mut Tx<'_>, id: JobId) -> Result<JobRow, StoreError> {
    sqlx::query_as::<_, JobRow>(&format!(
        "SELECT {JOB_COLUMNS} FROM dialectic_generation_jobs WHERE id = $1 FOR NO KEY UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::not_found("job", id))
}

/// Writes a status the planner decided; `error` and `results` are kept when None.
pub async fn set_status(
    tx: &mut Tx<'_>,
    id: JobId,
    status: JobStatus,
    error: Option<&serde_json::Value>,
    results: Option<&serde_json::Value>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_generation_jobs
         SET status = $2,
             error_details = COALESCE($3, error_details),
             results = COALESCE($4, results),
             lease_owner = CASE WHEN $2 = $5 THEN lease_owner ELSE NULL END,
             lease_expires_at = CASE WHEN $2 = $5 THEN lease_expires_at ELSE NULL END,
             completed_at = CASE WHEN $2 = ANY($6) THEN now() ELSE completed_at END,
             updated_at = now()
         WHERE id = $1",
    )
    .bind(id)
    .bind(status.as_str())
    .bind(error.map(Json))
    .bind(results.map(Json))
    .bind(PROCESSING)
    .bind(&JobStatus::TERMINAL[..])
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn schedule_retry(tx: &mut Tx<'_>, id: JobId, delay_ms: u64) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_generation_jobs
         SET next_attempt_at = now() + make_interval(secs => $2::double precision / 1000.0), updated_at = now()
         WHERE id = $1",
    )
    .bind(id)
    .bind(delay_ms as i64)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Which claimable jobs a claim may take. A root PLAN job's claim starts its
/// stage, which its worker records in the claim's transaction; every other
/// claim is one statement and needs no transaction around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimScope {
    Any,
    StageStarts,
    NoStageStart,
}

impl ClaimScope {
    fn starts_stage(self) -> Option<bool> {
        match self {
            ClaimScope::Any => None,
            ClaimScope::StageStarts => Some(true),
            ClaimScope::NoStageStart => Some(false),
        }
    }
}

/// What a claim reads besides the job, in the claim's own statement: nothing
/// (`()`), or a model call's rows (`Result<AttemptRows, StoreError>`, whose Err
/// names the row that is gone: the job is claimed all the same, and its
/// attempt fails on that).
pub trait ClaimRead: Sized + Send {
    /// The columns selected beside the claimed job (`claimed`), if any.
    fn columns() -> Option<String>;
    fn from_claim(row: &PgRow, job: &JobRow) -> Result<Self, StoreError>;
}

impl ClaimRead for () {
    fn columns() -> Option<String> {
        None
    }

    fn from_claim(_: &PgRow, _: &JobRow) -> Result<Self, StoreError> {
        Ok(())
    }
}

impl ClaimRead for Result<AttemptRows, StoreError> {
    fn columns() -> Option<String> {
        Some(attempts::attempt_rows_sql(
            "claimed.session_id",
            "claimed.user_id",
            "claimed.stage_slug",
            "claimed.model_id",
        ))
    }

    fn from_claim(row: &PgRow, job: &JobRow) -> Result<Self, StoreError> {
        Ok(attempts::FoundAttemptRows::from_row(row)?.into_rows(
            job.session_id,
            &job.stage_slug,
            job.model_id,
        ))
    }
}

/// A claimed job, with what its claim read.
#[derive(Debug)]
pub struct Claimed<R> {
    pub job: JobRow,
    pub rows: R,
}

/// The worker's compare-and-set claim. Only one claimant wins; a duplicate or
/// stale dispatch message finds the job in another status and gets None, and
/// so does a job of a paused session (resuming dispatches it again) or of an
/// abandoned one (its project was deleted: nothing may run for it again), or
/// one outside `scope`.
pub async fn claim<R: ClaimRead>(
    executor: impl sqlx::PgExecutor<'_>,
    id: JobId,
    job_types: &[JobType],
    scope: ClaimScope,
    worker: &str,
    lease_secs: u64,
) -> Result<Option<Claimed<R>>, StoreError> {
    let claimable: Vec<&str> = JobStatus::claimable().iter().map(|s| s.as_str()).collect();
    let types: Vec<&str> = job_types.iter().map(|t| t.as_str()).collect();
    let update = format!(
        "UPDATE dialectic_generation_jobs
         SET status = $6, attempt_count = attempt_count + 1, lease_owner = $3,
             lease_expires_at = now() + make_interval(secs => $4::double precision),
             started_at = COALESCE(started_at, now()), next_attempt_at = NULL, updated_at = now()
         WHERE id = $1 AND status = ANY($2) AND job_type = ANY($5)
           AND NOT EXISTS (SELECT 1 FROM dialectic_sessions s WHERE s.id = session_id AND s.status IN ($7, $8))
           AND ($9::bool IS NULL OR (parent_job_id IS NULL AND job_type = $10) = $9)
         RETURNING {JOB_COLUMNS}"
    );
    let statement = match R::columns() {
        None => update,
        Some(columns) => {
            format!("WITH claimed AS ({update}) SELECT claimed.*, {columns} FROM claimed")
        }
    };
    let row = sqlx::query(&statement)
        .bind(id)
        .bind(&claimable)
        .bind(worker)
        .bind(lease_secs as f64)
        .bind(&types)
        .bind(PROCESSING)
        .bind(SessionStatus::PAUSED)
        .bind(SessionStatus::ABANDONED)
        .bind(scope.starts_stage())
        .bind(JobType::Plan.as_str())
        .fetch_optional(executor)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let job = JobRow::from_row(&row)?;
    let rows = R::from_claim(&row, &job)?;
    Ok(Some(Claimed { job, rows }))
}

/// Extends a lease while the worker still owns this attempt; false means it lost the job.
pub async fn heartbeat(
    pool: &PgPool,
    id: JobId,
    attempt: i32,
    worker: &str,
    lease_secs: u64,
) -> Result<bool, StoreError> {
    let updated = sqlx::query(
        "UPDATE dialectic_generation_jobs
         SET lease_expires_at = now() + make_interval(secs => $4::double precision)
         WHERE id = $1 AND attempt_count = $2 AND lease_owner = $3 AND status = $5",
    )
    .bind(id)
    .bind(attempt)
    .bind(worker)
    .bind(lease_secs as f64)
    .bind(PROCESSING)
    .execute(pool)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// Children of a parent as (type, status, step id). Not locked: callers hold
/// the parent's row lock, which serialises sibling completions, and under READ
/// COMMITTED this statement sees every sibling committed before that lock was won.
/// A planned child a moderate revisit kept: its id and its key after the id
/// of the root that planned it (`{step}` or `{step}:{discriminator}`, what
/// names it within any root).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeptChild {
    pub id: JobId,
    pub key_in_root: String,
}

/// The finished children of the stage's earlier roots for `root`'s model
/// whose output is still current: what a moderate revisit kept, for the
/// re-run root to adopt instead of running again. Continuations and renders
/// hang under those and are not planned steps; superseded and archived work
/// is not kept.
pub async fn kept_children(tx: &mut Tx<'_>, root: &JobRow) -> Result<Vec<KeptChild>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT j.id, substr(j.job_key, 38) AS key_in_root
         FROM dialectic_generation_jobs j
         JOIN dialectic_generation_jobs p ON p.id = j.parent_job_id AND p.parent_job_id IS NULL
         WHERE j.session_id = $1 AND j.stage_slug = $2 AND j.iteration_number = $3
           AND j.model_id IS NOT DISTINCT FROM $4 AND p.id <> $5
           AND j.status = $6 AND j.job_type <> $7 AND j.target_contribution_id IS NULL
           AND EXISTS (SELECT 1 FROM dialectic_contributions c WHERE c.job_id = j.id AND NOT c.is_archived)
         ORDER BY j.created_at, j.id",
    )
    .bind(root.session_id)
    .bind(&root.stage_slug)
    .bind(root.iteration_number)
    .bind(root.model_id)
    .bind(root.id)
    .bind(JobStatus::Completed.as_str())
    .bind(JobType::Render.as_str())
    .fetch_all(&mut **tx)
    .await?)
}

/// Moves a kept child under the root that re-runs its stage.
pub async fn adopt(tx: &mut Tx<'_>, child: JobId, root: JobId) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_generation_jobs SET parent_job_id = $2, updated_at = now() WHERE id = $1",
    )
    .bind(child)
    .bind(root)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn children(
    tx: &mut Tx<'_>,
    parent: JobId,
) -> Result<Vec<(JobType, JobStatus, Option<StepId>)>, StoreError> {
    let rows: Vec<(String, String, Option<StepId>)> = sqlx::query_as(
        "SELECT job_type, status, recipe_step_id FROM dialectic_generation_jobs WHERE parent_job_id = $1 ORDER BY id",
    )
    .bind(parent)
    .fetch_all(&mut **tx)
    .await?;
    rows.into_iter()
        .map(|(t, s, step)| {
            let t = t.parse().map_err(|e: dialectic_core::job::UnknownValue| {
                StoreError::Corrupt(e.to_string())
            })?;
            let s = s.parse().map_err(|e: dialectic_core::job::UnknownValue| {
                StoreError::Corrupt(e.to_string())
            })?;
            Ok((t, s, step))
        })
        .collect()
}

/// Root jobs of a stage iteration, from the job table's own columns (seed 000 §2).
/// Callers hold the session's row lock, the serialisation point of stage checks.
pub async fn root_jobs(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
) -> Result<Vec<RootJob>, StoreError> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT job_type, status FROM dialectic_generation_jobs
         WHERE parent_job_id IS NULL AND session_id = $1 AND stage_slug = $2 AND iteration_number = $3",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .fetch_all(&mut **tx)
    .await?;
    rows.into_iter()
        .map(|(t, s)| {
            Ok(RootJob {
                job_type: t.parse().map_err(|e: dialectic_core::job::UnknownValue| {
                    StoreError::Corrupt(e.to_string())
                })?,
                status: s.parse().map_err(|e: dialectic_core::job::UnknownValue| {
                    StoreError::Corrupt(e.to_string())
                })?,
            })
        })
        .collect()
}

/// The failed jobs (`failed`, `retry_loop_failed`) of a stage iteration,
/// locked newest first, so a child is locked before its parent as every
/// planner unit does.
pub async fn lock_failed_in_stage(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
) -> Result<Vec<JobRow>, StoreError> {
    let failed = [
        JobStatus::Failed.as_str(),
        JobStatus::RetryLoopFailed.as_str(),
    ];
    Ok(sqlx::query_as::<_, JobRow>(&format!(
        "SELECT {JOB_COLUMNS} FROM dialectic_generation_jobs
         WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3 AND status = ANY($4)
         ORDER BY created_at DESC, id DESC FOR NO KEY UPDATE"
    ))
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(&failed[..])
    .fetch_all(&mut **tx)
    .await?)
}

/// The failed PLAN and EXECUTE jobs of a stage iteration as a failed
/// stage's notice describes them, latest failure first (RENDER jobs never
/// fail a stage).
pub async fn failures_in_stage(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
) -> Result<Vec<FailedJob>, StoreError> {
    let failed = [
        JobStatus::Failed.as_str(),
        JobStatus::RetryLoopFailed.as_str(),
    ];
    type Row = (String, String, String, String, String, i32, String, String);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT job_type, status, COALESCE(step_key, ''),
                COALESCE(payload->'step'->>'step_name', ''),
                COALESCE(payload->>'model_api_identifier', ''), attempt_count,
                COALESCE(error_details->>'code', ''), COALESCE(error_details->>'message', '')
         FROM dialectic_generation_jobs
         WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3
           AND status = ANY($4) AND job_type <> $5
         ORDER BY updated_at DESC, id DESC",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(&failed[..])
    .bind(JobType::Render.as_str())
    .fetch_all(executor)
    .await?;
    let corrupt = |e: dialectic_core::job::UnknownValue| StoreError::Corrupt(e.to_string());
    rows.into_iter()
        .map(
            |(job_type, status, step_key, step_name, model, attempts, code, message)| {
                Ok(FailedJob {
                    job_type: job_type.parse().map_err(corrupt)?,
                    status: status.parse().map_err(corrupt)?,
                    step_key,
                    step_name,
                    model,
                    attempts,
                    code,
                    message,
                })
            },
        )
        .collect()
}

/// A retried job's fresh budget: `attempts` more claims from the ones it
/// used. Its attempt numbers go on from there, so every new attempt keeps
/// its own contribution and debit keys.
pub async fn renew_attempts(tx: &mut Tx<'_>, id: JobId, attempts: i32) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_generation_jobs
         SET max_retries = attempt_count + $2, next_attempt_at = NULL, completed_at = NULL,
             updated_at = now()
         WHERE id = $1",
    )
    .bind(id)
    .bind(attempts)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Jobs whose worker stopped heartbeating.
pub async fn expired_leases(tx: &mut Tx<'_>, limit: i64) -> Result<Vec<JobId>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM dialectic_generation_jobs
         WHERE status = $2 AND lease_expires_at < now()
         ORDER BY lease_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(limit)
    .bind(PROCESSING)
    .fetch_all(&mut **tx)
    .await?)
}

/// `retrying` jobs whose back-off has passed.
pub async fn due_retries(tx: &mut Tx<'_>, limit: i64) -> Result<Vec<JobId>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM dialectic_generation_jobs
         WHERE status = $2 AND next_attempt_at IS NOT NULL AND next_attempt_at <= now()
         ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(limit)
    .bind(JobStatus::Retrying.as_str())
    .fetch_all(&mut **tx)
    .await?)
}

pub async fn clear_next_attempt(tx: &mut Tx<'_>, id: JobId) -> Result<(), StoreError> {
    sqlx::query("UPDATE dialectic_generation_jobs SET next_attempt_at = NULL WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The newest job not over yet whose product a stage starting now would read:
/// a RENDER job (a stage reads earlier stages' rendered documents), or an
/// EXECUTE job of another stage, which in a session waiting between stages is
/// a regeneration still writing its document. The stage's root jobs wait for these.
pub async fn outstanding_input_work(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    stage_slug: &str,
) -> Result<Option<JobId>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM dialectic_generation_jobs
          WHERE session_id = $1
            AND (job_type = $4 OR (job_type = $5 AND stage_slug <> $2))
            AND status <> ALL($3)
          ORDER BY created_at DESC LIMIT 1",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(&JobStatus::TERMINAL[..])
    .bind(JobType::Render.as_str())
    .bind(JobType::Execute.as_str())
    .fetch_optional(&mut **tx)
    .await?)
}

/// Makes a waiting job wait for another prerequisite instead.
pub async fn set_prerequisite(
    tx: &mut Tx<'_>,
    id: JobId,
    prerequisite: JobId,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_generation_jobs SET prerequisite_job_id = $2, updated_at = now() WHERE id = $1",
    )
    .bind(id)
    .bind(prerequisite)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn waiting_on(tx: &mut Tx<'_>, prerequisite: JobId) -> Result<Vec<JobId>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM dialectic_generation_jobs WHERE prerequisite_job_id = $1 AND status = $2 FOR UPDATE",
    )
    .bind(prerequisite)
    .bind(JobStatus::WaitingForPrerequisite.as_str())
    .fetch_all(&mut **tx)
    .await?)
}

/// (stage, job type, status, count) for a session, stages in the order they started.
pub async fn session_counts(
    pool: &PgPool,
    session_id: SessionId,
) -> Result<Vec<(String, String, String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        // Stages in the order they ran, so callers can print them as a timeline.
        "SELECT stage_slug, job_type, status, count(*) FROM dialectic_generation_jobs
         WHERE session_id = $1 GROUP BY 1, 2, 3
         ORDER BY min(min(created_at)) OVER (PARTITION BY stage_slug), 1, 2, 3",
    )
    .bind(session_id)
    .fetch_all(pool)
    .await?)
}

/// How far a stage is, 0..=100: by the bands its steps declare when its jobs
/// carry any, else the share of its non-RENDER jobs that reached a terminal
/// status. One query per step either way: the planner asks on every job event.
pub async fn stage_percent(
    conn: &mut sqlx::PgConnection,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
) -> Result<u32, StoreError> {
    let steps: Vec<(Option<i16>, Option<i16>, i64, i64)> = sqlx::query_as(
        "SELECT (payload->'step'->'progress'->>0)::int2, (payload->'step'->'progress'->>1)::int2,
                count(*) FILTER (WHERE status = ANY($4)), count(*)
         FROM dialectic_generation_jobs
         WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3 AND job_type <> $5
         GROUP BY payload->'step'->>'step_key', 1, 2",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(&JobStatus::TERMINAL[..])
    .bind(JobType::Render.as_str())
    .fetch_all(&mut *conn)
    .await?;
    let percent = |v: i16| v.clamp(0, 100) as u8;
    let count = |n: i64| n.max(0) as u64;
    let banded: Vec<(ProgressBand, u64, u64)> = steps
        .iter()
        .filter_map(|(start, end, done, total)| {
            Some((
                ProgressBand(percent((*start)?), percent((*end)?)),
                count(*done),
                count(*total),
            ))
        })
        .collect();
    if !banded.is_empty() {
        return Ok(dialectic_core::recipe::banded_percent(&banded));
    }
    let done: u64 = steps.iter().map(|s| count(s.2)).sum();
    let total: u64 = steps.iter().map(|s| count(s.3)).sum();
    Ok((done * 100).checked_div(total).unwrap_or(0) as u32)
}

/// The worker's final write for an attempt: drops the lease and writes the
/// outcome's message (`routing_key`, `payload`) to the outbox in one statement,
/// if this worker still owns the attempt. None means it does not (its lease
/// ran out and the job moved on): nothing is written.
pub async fn release_lease(
    executor: impl sqlx::PgExecutor<'_>,
    id: JobId,
    attempt: i32,
    worker: &str,
    routing_key: &str,
    payload: &[u8],
    traceparent: Option<&str>,
) -> Result<Option<OutboxRow>, StoreError> {
    let written: Option<i64> = sqlx::query_scalar(
        "WITH released AS (
           UPDATE dialectic_generation_jobs
           SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
           WHERE id = $1 AND attempt_count = $2 AND lease_owner = $3 AND status = $4
           RETURNING id)
         INSERT INTO outbox (routing_key, payload, traceparent)
         SELECT $5, $6, $7 FROM released
         RETURNING id",
    )
    .bind(id)
    .bind(attempt)
    .bind(worker)
    .bind(PROCESSING)
    .bind(routing_key)
    .bind(payload)
    .bind(traceparent)
    .fetch_optional(executor)
    .await?;
    Ok(written.map(|id| OutboxRow::written(id, routing_key, payload, traceparent)))
}

/// How many jobs of a session wait for funds.
pub async fn paused_in_session(tx: &mut Tx<'_>, session_id: SessionId) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status = $2",
    )
    .bind(session_id)
    .bind(PAUSED_NSF)
    .fetch_one(&mut **tx)
    .await?)
}

/// Paused jobs whose owner's wallet was credited after they paused.
pub async fn resumable_after_credit(tx: &mut Tx<'_>, limit: i64) -> Result<Vec<JobId>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT j.id FROM dialectic_generation_jobs j
         WHERE j.status = $2 AND EXISTS (
             SELECT 1 FROM token_wallet_transactions t JOIN token_wallets w ON w.id = t.wallet_id
             WHERE w.user_id = j.user_id AND t.kind = $3 AND t.created_at > j.updated_at)
         ORDER BY j.updated_at LIMIT $1 FOR UPDATE OF j SKIP LOCKED",
    )
    .bind(limit)
    .bind(PAUSED_NSF)
    .bind(LedgerKind::Credit.as_str())
    .fetch_all(&mut **tx)
    .await?)
}

/// Jobs of a session that wait for a dispatch (after a pause): (id, type).
pub async fn awaiting_dispatch(
    tx: &mut Tx<'_>,
    session_id: SessionId,
) -> Result<Vec<(JobId, JobType)>, StoreError> {
    let rows: Vec<(JobId, String)> = sqlx::query_as(
        "SELECT id, job_type FROM dialectic_generation_jobs
         WHERE session_id = $1
           AND (status IN ($2, $3) OR (status = $4 AND next_attempt_at IS NULL))
         FOR UPDATE SKIP LOCKED",
    )
    .bind(session_id)
    .bind(JobStatus::Pending.as_str())
    .bind(JobStatus::PendingContinuation.as_str())
    .bind(JobStatus::Retrying.as_str())
    .fetch_all(&mut **tx)
    .await?;
    rows.into_iter()
        .map(|(id, t)| {
            t.parse()
                .map(|t| (id, t))
                .map_err(|e: dialectic_core::job::UnknownValue| StoreError::Corrupt(e.to_string()))
        })
        .collect()
}
