//! Stages (`dialectic_stages`) as a session's process template orders them.

use crate::StoreError;
use crate::sessions::session_process;
use dialectic_core::ids::{SessionId, StageId};

/// A stage within the session's process template, with its successor (seed 000 §3).
#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub struct StageRow {
    pub id: StageId,
    pub slug: String,
    pub display_name: String,
    pub stage_number: i32,
    pub system_prompt: Option<String>,
    pub next_stage_slug: Option<String>,
}

/// The stage whose slug is `slug` (an SQL expression) in the process of session `$1`.
pub(crate) fn stage_in_process_sql(session: &str, slug: &str) -> String {
    format!(
        "SELECT st.id, st.slug, st.display_name, pts.stage_number, sp.prompt_text AS system_prompt,
                (SELECT nxt.slug FROM dialectic_stage_transitions tr
                 JOIN dialectic_stages nxt ON nxt.id = tr.target_stage_id
                 WHERE tr.source_stage_id = st.id AND tr.process_template_id = pts.process_template_id
                 LIMIT 1) AS next_stage_slug
         FROM dialectic_process_template_stages pts
         JOIN dialectic_stages st ON st.id = pts.stage_id AND st.slug = {slug}
         LEFT JOIN system_prompts sp ON sp.id = st.default_system_prompt_id
         WHERE pts.process_template_id = {process}",
        process = session_process(session)
    )
}

pub async fn stage_in_process(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    stage_slug: &str,
) -> Result<StageRow, StoreError> {
    sqlx::query_as::<_, StageRow>(&stage_in_process_sql("$1", "$2"))
        .bind(session_id)
        .bind(stage_slug)
        .fetch_optional(executor)
        .await?
        .ok_or_else(|| {
            StoreError::not_found("stage", format!("{stage_slug} in the session's process"))
        })
}
