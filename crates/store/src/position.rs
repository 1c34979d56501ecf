//! What a session's position (GetSession) is read from: its stage's place in
//! the pipeline version it runs, and the jobs of that stage's steps.

use crate::StoreError;
use crate::sessions::session_process;
use dialectic_core::ids::SessionId;
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::position::StepTally;
use dialectic_core::recipe::RecipeStep;
use sqlx::types::Json;

/// The stage's number, the number of stages and the stage's display name in
/// the session's pipeline version; None when the stage is not in it.
pub async fn stage_place(
    conn: &mut sqlx::PgConnection,
    session_id: SessionId,
    stage_slug: &str,
) -> Result<Option<(i32, i64, String)>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT pts.stage_number,
                (SELECT count(*) FROM dialectic_process_template_stages c
                 WHERE c.process_template_id = pts.process_template_id),
                st.display_name
         FROM dialectic_process_template_stages pts
         JOIN dialectic_stages st ON st.id = pts.stage_id AND st.slug = $2
         WHERE pts.process_template_id = {process}",
        process = session_process("$1")
    ))
    .bind(session_id)
    .bind(stage_slug)
    .fetch_optional(conn)
    .await?)
}

/// Each step of the stage's iteration with jobs (superseded ones aside), in
/// the order they started, with how many of its jobs are done: a plan that
/// waits for the jobs it planned has done its own part.
pub async fn step_tallies(
    conn: &mut sqlx::PgConnection,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
) -> Result<Vec<StepTally>, StoreError> {
    let rows: Vec<(Json<serde_json::Value>, i64, i64)> = sqlx::query_as(
        "SELECT (array_agg(payload->'step' ORDER BY created_at))[1],
                count(*) FILTER (WHERE status = ANY($4) OR status = $6), count(*)
         FROM dialectic_generation_jobs
         WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3
           AND job_type <> $7 AND status <> $5 AND payload ? 'step'
         GROUP BY step_key ORDER BY min(created_at)",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(&JobStatus::TERMINAL[..])
    .bind(JobStatus::Superseded.as_str())
    .bind(JobStatus::WaitingForChildren.as_str())
    .bind(JobType::Render.as_str())
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|(step, done, total)| {
            let step: RecipeStep = serde_json::from_value(step.0)
                .map_err(|e| StoreError::Corrupt(format!("a job's recipe step: {e}")))?;
            Ok(StepTally {
                step,
                done: done.max(0) as u64,
                total: total.max(0) as u64,
            })
        })
        .collect()
}
