//! What a session's position (GetSession) is read from: its stage's place in
//! the pipeline version it runs, and the jobs of that stage's steps.

use crate::StoreError;
use crate::sessions::session_process;
use dialectic_core::ids::SessionId;
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::position::{ItemJob, StepTally, unit_of};
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

/// The jobs of a step that fans out over the items of documents, in the
/// order they were made (superseded ones aside): the document each reads an
/// item of (the anchor selection's key) and whether it is done.
pub async fn item_jobs(
    conn: &mut sqlx::PgConnection,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
    step_key: &str,
) -> Result<Vec<ItemJob>, StoreError> {
    let rows: Vec<(String, bool)> = sqlx::query_as(
        "SELECT src.key, j.status = ANY($5)
         FROM dialectic_generation_jobs j,
              LATERAL (SELECT s->'keys'->>0 AS key FROM jsonb_array_elements(j.payload->'sources') s
                       WHERE s ? 'item' LIMIT 1) src
         WHERE j.session_id = $1 AND j.stage_slug = $2 AND j.iteration_number = $3
           AND j.step_key = $4 AND j.status <> $6 AND src.key IS NOT NULL
         ORDER BY j.created_at, j.id",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(step_key)
    .bind(&JobStatus::TERMINAL[..])
    .bind(JobStatus::Superseded.as_str())
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(source, done)| ItemJob { source, done })
        .collect())
}

/// What one of the documents a step reads items of stands for ("section"):
/// the unit of the step that wrote them, read from one of its jobs.
pub async fn written_unit(
    conn: &mut sqlx::PgConnection,
    session_id: SessionId,
    stage_slug: &str,
    document_key: &str,
) -> Result<Option<String>, StoreError> {
    let step: Option<Json<RecipeStep>> = sqlx::query_scalar(
        "SELECT payload->'step' FROM dialectic_generation_jobs
         WHERE session_id = $1 AND stage_slug = $2 AND payload->'step'->'outputs_required' @> $3
         LIMIT 1",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(Json(serde_json::json!([{ "document_key": document_key }])))
    .fetch_optional(conn)
    .await?;
    Ok(step.map(|s| unit_of(&s.0)))
}
