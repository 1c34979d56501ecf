//! What input rules match (DESIGN §8 gatherInputsForStage): finished documents
//! of earlier stages from rendered resources first, contributions only for
//! intermediate artifacts and for outputs that are never rendered; header
//! contexts and same-stage artifacts from the root model's own contributions;
//! feedback from `dialectic_feedback`.

use crate::{StoreError, Tx};
use dialectic_core::ids::{FeedbackId, ModelId, ProjectId, ResourceId, SessionId, UserId};
use dialectic_core::paths::whole_document_key;
use dialectic_core::recipe::InputRule;
use uuid::Uuid;

/// A matched document and where its bytes are.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InputDoc {
    /// A resource's id when `from_resource`, else a contribution's.
    pub id: Uuid,
    pub storage_key: String,
    pub document_key: String,
    pub model_id: Option<ModelId>,
    pub from_resource: bool,
}

/// Documents of an earlier stage: every model's rendered documents matching
/// `document_key` (`*` for all); when none is rendered under that key, its
/// contributions (JSON outputs such as `comparison_vector` are never
/// rendered, and the document of a JSON output such as the essay's outline
/// is for people: its JSON, with any edit parsed back into it, stays the data).
pub async fn earlier_stage_documents(
    executor: &mut sqlx::PgConnection,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
    document_key: &str,
) -> Result<Vec<InputDoc>, StoreError> {
    let rendered: Vec<InputDoc> = sqlx::query_as(
        "SELECT id, storage_path || '/' || file_name AS storage_key, COALESCE(document_key, '') AS document_key,
                model_id, true AS from_resource
         FROM dialectic_project_resources
         WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3
           AND resource_type = 'rendered_document' AND NOT is_json_backed
           AND ($4 = '*' OR document_key = $4)
         ORDER BY document_key, file_name",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(document_key)
    .fetch_all(&mut *executor)
    .await?;
    if !rendered.is_empty() || document_key == "*" {
        return Ok(rendered);
    }
    stage_outputs(executor, session_id, stage_slug, iteration, document_key).await
}

/// The current replies (or edits) of every model under `document_key` in a
/// stage iteration, one per document however many turns wrote it.
pub async fn stage_outputs(
    executor: &mut sqlx::PgConnection,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
    document_key: &str,
) -> Result<Vec<InputDoc>, StoreError> {
    let chunks = sqlx::query_as(
        "SELECT id, raw_response_storage_path AS storage_key, document_key, model_id, false AS from_resource
         FROM dialectic_contributions
         WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3 AND document_key = $4
           AND is_latest_edit AND NOT is_archived
         ORDER BY file_name",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(document_key)
    .fetch_all(&mut *executor)
    .await?;
    Ok(whole_documents(chunks))
}

/// A continued document has a row per turn; only its newest is the latest
/// edit, and it stands for the whole its chain assembled.
fn whole_documents(latest_chunks: Vec<InputDoc>) -> Vec<InputDoc> {
    latest_chunks
        .into_iter()
        .map(|doc| InputDoc {
            storage_key: whole_document_key(&doc.storage_key),
            ..doc
        })
        .collect()
}

/// Artifacts the root model produced earlier in this stage (header contexts,
/// pairwise and reduced JSON, earlier documents of a sequential recipe), one
/// per document however many turns wrote it.
pub async fn own_stage_artifacts(
    executor: &mut sqlx::PgConnection,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
    document_key: &str,
    model_id: ModelId,
) -> Result<Vec<InputDoc>, StoreError> {
    let chunks = sqlx::query_as(
        "SELECT id, raw_response_storage_path AS storage_key, document_key, model_id, false AS from_resource
         FROM dialectic_contributions
         WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3
           AND ($4 = '*' OR document_key = $4) AND model_id = $5 AND is_latest_edit AND NOT is_archived
         ORDER BY document_key, file_name",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .bind(document_key)
    .bind(model_id)
    .fetch_all(&mut *executor)
    .await?;
    Ok(whole_documents(chunks))
}

/// Where a `document` input rule of one job looks.
pub struct DocumentQuery<'a> {
    pub session_id: SessionId,
    /// The stage of the job that reads.
    pub job_stage: &'a str,
    /// Its root model, when it has one.
    pub model_id: Option<ModelId>,
    /// The stage the rule names.
    pub stage: &'a str,
    pub document_key: &'a str,
    pub iteration: i32,
    /// Whether `iteration` is the job's own.
    pub current_iteration: bool,
}

impl<'a> DocumentQuery<'a> {
    /// Where `rule` looks for a job of `job_stage` in `job_iteration`; None
    /// when the iteration it names does not exist yet.
    pub fn for_rule(
        session_id: SessionId,
        job_stage: &'a str,
        model_id: Option<ModelId>,
        job_iteration: i32,
        rule: &'a InputRule,
    ) -> Option<Self> {
        let iteration = rule.iteration.of(job_iteration)?;
        Some(DocumentQuery {
            session_id,
            job_stage,
            model_id,
            stage: rule.stage_slug.as_deref().unwrap_or(job_stage),
            document_key: rule.document_key.as_deref().unwrap_or("*"),
            iteration,
            current_iteration: iteration == job_iteration,
        })
    }
}

/// What a `document` rule matches: within the job's own stage and iteration,
/// its root model's artifacts; otherwise the finished documents of that
/// stage and iteration.
pub async fn rule_documents(
    executor: &mut sqlx::PgConnection,
    q: &DocumentQuery<'_>,
) -> Result<Vec<InputDoc>, StoreError> {
    match (q.stage == q.job_stage && q.current_iteration, q.model_id) {
        (true, Some(model)) => {
            own_stage_artifacts(
                executor,
                q.session_id,
                q.stage,
                q.iteration,
                q.document_key,
                model,
            )
            .await
        }
        _ => {
            earlier_stage_documents(executor, q.session_id, q.stage, q.iteration, q.document_key)
                .await
        }
    }
}

/// Feedback on a stage: this iteration's first, then earlier iterations'.
pub async fn feedback(
    executor: &mut sqlx::PgConnection,
    session_id: SessionId,
    stage_slug: &str,
    iteration: i32,
) -> Result<Vec<InputDoc>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, storage_path || '/' || file_name AS storage_key, COALESCE(document_key, '') AS document_key,
                NULL::uuid AS model_id, false AS from_resource
         FROM dialectic_feedback
         WHERE session_id = $1 AND ($2 = '*' OR stage_slug = $2) AND iteration_number <= $3
         ORDER BY iteration_number DESC, created_at",
    )
    .bind(session_id)
    .bind(stage_slug)
    .bind(iteration)
    .fetch_all(&mut *executor)
    .await?)
}

pub struct NewFeedback<'a> {
    pub id: FeedbackId,
    pub project_id: ProjectId,
    pub session_id: SessionId,
    pub user_id: UserId,
    pub stage_slug: &'a str,
    pub iteration: i32,
    pub document_key: Option<&'a str>,
    pub source_resource_id: Option<ResourceId>,
    pub bucket: &'a str,
    pub storage_path: &'a str,
    pub file_name: &'a str,
    pub size_bytes: i64,
}

pub async fn insert_feedback(tx: &mut Tx<'_>, f: &NewFeedback<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO dialectic_feedback
           (id, project_id, session_id, user_id, stage_slug, iteration_number, document_key, source_resource_id,
            feedback_type, storage_bucket, storage_path, file_name, size_bytes)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'user_feedback', $9, $10, $11, $12)",
    )
    .bind(f.id)
    .bind(f.project_id)
    .bind(f.session_id)
    .bind(f.user_id)
    .bind(f.stage_slug)
    .bind(f.iteration)
    .bind(f.document_key)
    .bind(f.source_resource_id)
    .bind(f.bucket)
    .bind(f.storage_path)
    .bind(f.file_name)
    .bind(f.size_bytes)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
