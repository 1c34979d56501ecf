//! Document templates (`dialectic_document_templates`) and system prompts
//! (`system_prompts`), as the session's pipeline version has them.

use crate::StoreError;
use crate::sessions::session_process;
use dialectic_core::ids::SessionId;

/// Template text for a stage's document in the session's pipeline version
/// (seed 000 function 3).
pub async fn document_template(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    stage_slug: &str,
    document_key: &str,
) -> Result<String, StoreError> {
    sqlx::query_scalar(&format!(
        "SELECT d.content FROM dialectic_document_templates d
         JOIN dialectic_process_template_stages pts ON pts.stage_id = d.stage_id
         JOIN dialectic_stages st ON st.id = d.stage_id
         WHERE pts.process_template_id = {process} AND st.slug = $2 AND d.document_key = $3
           AND d.is_active",
        process = session_process("$1")
    ))
    .bind(session_id)
    .bind(stage_slug)
    .bind(document_key)
    .fetch_optional(executor)
    .await?
    .ok_or_else(|| {
        StoreError::not_found("document template", format!("{stage_slug}/{document_key}"))
    })
}

/// The document key and text of the template a stage's output names by file
/// name (`template_filename`): how an assembled document (the essay's draft,
/// made of every paragraph) finds its own template and key.
pub async fn document_template_by_file(
    executor: impl sqlx::PgExecutor<'_>,
    session_id: SessionId,
    stage_slug: &str,
    file_name: &str,
) -> Result<(String, String), StoreError> {
    sqlx::query_as(&format!(
        "SELECT d.document_key, d.content FROM dialectic_document_templates d
         JOIN dialectic_process_template_stages pts ON pts.stage_id = d.stage_id
         JOIN dialectic_stages st ON st.id = d.stage_id
         WHERE pts.process_template_id = {process} AND st.slug = $2 AND d.file_name = $3
           AND d.is_active",
        process = session_process("$1")
    ))
    .bind(session_id)
    .bind(stage_slug)
    .bind(file_name)
    .fetch_optional(executor)
    .await?
    .ok_or_else(|| StoreError::not_found("document template", format!("{stage_slug}/{file_name}")))
}

pub async fn prompt_text(
    executor: impl sqlx::PgExecutor<'_>,
    name: &str,
) -> Result<String, StoreError> {
    sqlx::query_scalar("SELECT prompt_text FROM system_prompts WHERE name = $1 AND is_active")
        .bind(name)
        .fetch_optional(executor)
        .await?
        .ok_or_else(|| StoreError::not_found("system prompt", name))
}
