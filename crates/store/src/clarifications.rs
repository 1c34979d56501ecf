//! Clarification rounds (seed 004 `needs_clarification`): recorded by the
//! planner when a reply asks an earlier step a question; the jobs a round
//! replaces are superseded so the stage plans them again.

use crate::{StoreError, Tx};
use dialectic_core::clarify::Clarification;
use dialectic_core::ids::{JobId, SessionId, StepId};
use dialectic_core::job::{JobStatus, JobType};

/// The rounds a session has run, in every stage and iteration.
pub async fn rounds(tx: &mut Tx<'_>, session_id: SessionId) -> Result<u32, StoreError> {
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM dialectic_clarifications WHERE session_id = $1")
            .bind(session_id)
            .fetch_one(&mut **tx)
            .await?;
    Ok(u32::try_from(count).unwrap_or(u32::MAX))
}

/// Where a round happens, and who asked.
pub struct Asked<'a> {
    pub session_id: SessionId,
    pub iteration: i32,
    pub stage_slug: &'a str,
    pub job_id: JobId,
}

pub async fn record(
    tx: &mut Tx<'_>,
    at: &Asked<'_>,
    round: &Clarification,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO dialectic_clarifications
             (session_id, round, iteration, stage_slug, asked_by_job, asked_by_step, step_key, question)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(at.session_id)
    .bind(i32::try_from(round.round).unwrap_or(i32::MAX))
    .bind(at.iteration)
    .bind(at.stage_slug)
    .bind(at.job_id)
    .bind(&round.asked_by)
    .bind(&round.step_key)
    .bind(&round.question)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The newest round of one stage of one iteration, if it had any.
pub async fn latest(
    tx: &mut Tx<'_>,
    session_id: SessionId,
    iteration: i32,
    stage_slug: &str,
) -> Result<Option<Clarification>, StoreError> {
    let row: Option<(i32, String, String, String)> = sqlx::query_as(
        "SELECT round, asked_by_step, step_key, question FROM dialectic_clarifications
          WHERE session_id = $1 AND iteration = $2 AND stage_slug = $3
          ORDER BY round DESC LIMIT 1",
    )
    .bind(session_id)
    .bind(iteration)
    .bind(stage_slug)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(
        row.map(|(round, asked_by, step_key, question)| Clarification {
            round: u32::try_from(round).unwrap_or(0),
            asked_by,
            step_key,
            question,
        }),
    )
}

/// Supersedes the finished jobs of the given steps under one root, and what
/// they wrote, so the root plans those steps again; returns how many jobs.
pub async fn supersede_steps(
    tx: &mut Tx<'_>,
    root: JobId,
    steps: &[StepId],
) -> Result<u64, StoreError> {
    let jobs: Vec<JobId> = sqlx::query_scalar(
        "UPDATE dialectic_generation_jobs SET status = $3, updated_at = now()
          WHERE parent_job_id = $1 AND recipe_step_id = ANY($2) AND status = $4 AND job_type <> $5
         RETURNING id",
    )
    .bind(root)
    .bind(steps)
    .bind(JobStatus::Superseded.as_str())
    .bind(JobStatus::Completed.as_str())
    .bind(JobType::Render.as_str())
    .fetch_all(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE dialectic_contributions SET is_latest_edit = false, updated_at = now()
          WHERE job_id = ANY($1)",
    )
    .bind(&jobs)
    .execute(&mut **tx)
    .await?;
    Ok(jobs.len() as u64)
}

/// A job planned again after a round: its attempts (and so its file names)
/// continue after those of the step's superseded jobs under the same root.
pub async fn continue_attempts(
    tx: &mut Tx<'_>,
    job: JobId,
    root: JobId,
    step: StepId,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE dialectic_generation_jobs j
            SET attempt_count = b.base, max_retries = b.base + j.max_retries
           FROM (SELECT COALESCE(max(attempt_count), 0) AS base FROM dialectic_generation_jobs
                  WHERE parent_job_id = $2 AND recipe_step_id = $3 AND status = $4) b
          WHERE j.id = $1",
    )
    .bind(job)
    .bind(root)
    .bind(step)
    .bind(JobStatus::Superseded.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(())
}
