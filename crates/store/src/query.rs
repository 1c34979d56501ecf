//! What a project's questions are answered from (`Query`): its uploaded and
//! rendered documents, the resolved clauses of a contract-stack analysis, and
//! its sessions' blackboard findings.

use crate::StoreError;
use crate::project_documents::PROJECT_DOCUMENT;
use dialectic_core::ids::{BlackboardEntryId, ProjectId};
use uuid::Uuid;

/// A stored document a question may be answered from.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DocumentSource {
    /// A resource's id, or a contribution's for a resolved clause (`kind`
    /// says which), so no one typed id fits.
    pub id: Uuid,
    pub name: String,
    /// The object's key.
    pub storage_key: String,
    /// Whether the text is a reply's JSON whose `content` holds it.
    pub json: bool,
    /// What it is, as `dialectic_core::query::SourceKind` names it.
    pub kind: String,
}

/// The project's documents in the order they were made: its uploads (unless
/// a contract-stack analysis resolved their clauses, which then stand for
/// them: the seed answers from resolved clauses only), its current rendered
/// documents, and those resolved clauses.
pub async fn documents(
    pool: &sqlx::PgPool,
    project_id: ProjectId,
) -> Result<Vec<DocumentSource>, StoreError> {
    let resolved: Vec<DocumentSource> = sqlx::query_as(
        "SELECT c.id, c.document_key || ' ' || c.file_name AS name,
                c.raw_response_storage_path AS storage_key, true AS json,
                'contribution' AS kind
         FROM dialectic_contributions c JOIN dialectic_sessions s ON s.id = c.session_id
         WHERE s.project_id = $1 AND c.document_key = 'resolved_clause'
           AND c.is_latest_edit AND NOT c.is_archived
         ORDER BY c.created_at, c.id",
    )
    .bind(project_id)
    .fetch_all(pool)
    .await?;
    let kinds: Vec<&str> = if resolved.is_empty() {
        vec![PROJECT_DOCUMENT, "rendered_document"]
    } else {
        vec!["rendered_document"]
    };
    let mut documents: Vec<DocumentSource> = sqlx::query_as(
        // An upload's storage_path is its whole key; a rendered document's is its folder.
        "SELECT id, file_name AS name,
                CASE WHEN resource_type = $3 THEN storage_path ELSE storage_path || '/' || file_name END
                  AS storage_key,
                false AS json,
                CASE WHEN resource_type = $3 THEN 'uploaded_document' ELSE 'rendered_document' END
                  AS kind
         FROM dialectic_project_resources
         WHERE project_id = $1 AND resource_type = ANY($2)
         ORDER BY created_at, id",
    )
    .bind(project_id)
    .bind(&kinds)
    .bind(PROJECT_DOCUMENT)
    .fetch_all(pool)
    .await?;
    documents.extend(resolved);
    Ok(documents)
}

/// A blackboard finding of one of the project's sessions.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FindingSource {
    pub id: BlackboardEntryId,
    pub entry_type: String,
    pub data: sqlx::types::Json<serde_json::Value>,
}

pub async fn findings(
    pool: &sqlx::PgPool,
    project_id: ProjectId,
) -> Result<Vec<FindingSource>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT e.id, e.entry_type, e.data
         FROM dialectic_blackboard_entries e JOIN dialectic_sessions s ON s.id = e.session_id
         WHERE s.project_id = $1
         ORDER BY e.created_at, e.id",
    )
    .bind(project_id)
    .fetch_all(pool)
    .await?)
}
