//! What a project's questions are answered from (`Query`) and its index:
//! its uploaded documents, and the rendered documents, resolved clauses and
//! blackboard findings of one analysis (session). Each source is cut into
//! chunks once per content (`query_sources`, `query_chunks`); a question
//! ranks the stored chunks here and reads only the ones it takes.

use crate::StoreError;
use crate::project_documents::PROJECT_DOCUMENT;
use chrono::{DateTime, Utc};
use dialectic_core::ids::{ProjectId, SessionId, UserId};
use dialectic_core::query::{ENTITY_BOOST, SourceKind};
use dialectic_core::session::SessionStatus;
use sqlx::{PgPool, QueryBuilder};
use uuid::Uuid;

/// The session whose outputs a project's questions read: the newest that
/// finished its analysis (at review, paused there, or completed), or before
/// any has, the newest not abandoned.
pub async fn analysis(
    pool: &PgPool,
    project_id: ProjectId,
) -> Result<Option<SessionId>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM dialectic_sessions
         WHERE project_id = $1 AND status <> $3
         ORDER BY (status IN ($2, $4) OR paused_from IS NOT DISTINCT FROM $2) DESC, created_at DESC, id DESC
         LIMIT 1",
    )
    .bind(project_id)
    .bind(SessionStatus::REVIEW)
    .bind(SessionStatus::ABANDONED)
    .bind(SessionStatus::COMPLETED)
    .fetch_optional(pool)
    .await?)
}

/// A source a question reads whose index is missing or older than its row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StaleSource {
    /// A resource's id, a contribution's (a resolved clause) or a blackboard
    /// entry's, as `kind` says, so no one typed id fits.
    pub id: Uuid,
    /// `dialectic_core::query::SourceKind`'s name.
    pub kind: String,
    pub name: String,
    /// The object holding its text; none for a finding, whose text is `data`.
    pub storage_key: Option<String>,
    pub data: Option<sqlx::types::Json<serde_json::Value>>,
    pub version: DateTime<Utc>,
    pub rank: i32,
    pub made_at: DateTime<Utc>,
    /// The content hash it was indexed with, when it was.
    pub indexed_hash: Option<String>,
}

/// Brings the project's index up to what its questions read now, as far as
/// the database knows it: removes the index of every source no longer read
/// (deleted, archived, superseded, of an older analysis) and returns the
/// sources whose text must be read and indexed ([`store_index`]). The current
/// sources are the project's uploads (unless the analysis resolved their
/// clauses: the seed answers from resolved clauses then), and the analysis's
/// current rendered documents, resolved clauses and findings.
pub async fn sync(
    pool: &PgPool,
    project_id: ProjectId,
    analysis: Option<SessionId>,
) -> Result<Vec<StaleSource>, StoreError> {
    Ok(sqlx::query_as(
        "WITH clauses AS (
           SELECT c.id, $7::text AS kind, c.document_key || ' ' || c.file_name AS name,
                  c.raw_response_storage_path AS storage_key, NULL::jsonb AS data,
                  c.created_at AS version, 1 AS rank, c.created_at AS made_at
           FROM dialectic_contributions c
           WHERE c.session_id = $2 AND c.document_key = 'resolved_clause'
             AND c.is_latest_edit AND NOT c.is_archived
         ), current AS (
           -- An upload's storage_path is its whole key; a rendered document's is its folder.
           SELECT r.id, CASE WHEN r.resource_type = $3 THEN $5::text ELSE $6::text END AS kind,
                  r.file_name AS name,
                  CASE WHEN r.resource_type = $3 THEN r.storage_path
                       ELSE r.storage_path || '/' || r.file_name END AS storage_key,
                  NULL::jsonb AS data, r.updated_at AS version, 0 AS rank, r.created_at AS made_at
           FROM dialectic_project_resources r
           WHERE r.project_id = $1
             -- A JSON output's rendered copy (a resolved clause's) is read as the contribution.
             AND ((r.resource_type = $4 AND r.session_id = $2 AND NOT r.is_json_backed)
               OR (r.resource_type = $3 AND NOT EXISTS (SELECT 1 FROM clauses)))
           UNION ALL SELECT * FROM clauses
           UNION ALL
           SELECT e.id, $8::text, 'blackboard:' || e.entry_type, NULL, e.data, e.created_at, 2, e.created_at
           FROM dialectic_blackboard_entries e WHERE e.session_id = $2
         ), gone AS (
           -- NOT IN runs as a hashed subplan: NOT EXISTS became a nested-loop
           -- anti-join over the CTE (estimated at a row or two), 500,000
           -- comparisons and 118 ms a question at 1,000 documents.
           DELETE FROM query_sources q WHERE q.project_id = $1
             AND q.id NOT IN (SELECT c.id FROM current c)
         )
         SELECT c.id, c.kind, c.name, c.storage_key, c.data, c.version, c.rank, c.made_at,
                q.content_hash AS indexed_hash
         FROM current c LEFT JOIN query_sources q ON q.id = c.id
         WHERE q.id IS NULL OR q.version <> c.version
         ORDER BY c.id",
    )
    .bind(project_id)
    .bind(analysis)
    .bind(PROJECT_DOCUMENT)
    .bind("rendered_document")
    .bind(SourceKind::UploadedDocument.as_str())
    .bind(SourceKind::RenderedDocument.as_str())
    .bind(SourceKind::Contribution.as_str())
    .bind(SourceKind::BlackboardEntry.as_str())
    .fetch_all(pool)
    .await?)
}

/// A chunk of a source as the index keeps it.
#[derive(Debug, Clone)]
pub struct NewChunk {
    pub chunk_no: i32,
    pub start: i32,
    pub end: i32,
    pub body: String,
    pub embedding: Vec<f32>,
}

/// A stale source, read and (when its content changed) cut again.
#[derive(Debug, Clone)]
pub struct IndexedSource<'a> {
    pub source: &'a StaleSource,
    pub content_hash: String,
    /// None: the content hash is the one indexed, so its chunks stay.
    pub chunks: Option<Vec<NewChunk>>,
}

/// Records what [`sync`] found stale, in one transaction: each source's row
/// (locked in id order, so concurrent questions indexing the same sources
/// wait for each other instead of deadlocking) and, where its content
/// changed, its chunks in place of the old ones.
pub async fn store_index(
    pool: &PgPool,
    project_id: ProjectId,
    sources: &[IndexedSource<'_>],
) -> Result<(), StoreError> {
    let mut sorted: Vec<&IndexedSource> = sources.iter().collect();
    sorted.sort_by_key(|s| s.source.id);
    let mut tx = pool.begin().await?;
    for batch in sorted.chunks(200) {
        let mut qb = QueryBuilder::new(
            "INSERT INTO query_sources (id, project_id, resource_id, contribution_id, entry_id,
               kind, name, version, content_hash, rank, made_at) ",
        );
        qb.push_values(batch, |mut b, s| {
            let of = |kinds: &[SourceKind]| {
                kinds
                    .iter()
                    .any(|k| k.as_str() == s.source.kind)
                    .then_some(s.source.id)
            };
            b.push_bind(s.source.id)
                .push_bind(project_id)
                .push_bind(of(&[
                    SourceKind::UploadedDocument,
                    SourceKind::RenderedDocument,
                ]))
                .push_bind(of(&[SourceKind::Contribution]))
                .push_bind(of(&[SourceKind::BlackboardEntry]))
                .push_bind(&s.source.kind)
                .push_bind(&s.source.name)
                .push_bind(s.source.version)
                .push_bind(&s.content_hash)
                .push_bind(s.source.rank)
                .push_bind(s.source.made_at);
        });
        qb.push(
            " ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, version = EXCLUDED.version,
               content_hash = EXCLUDED.content_hash, indexed_at = now()",
        );
        qb.build().execute(&mut *tx).await?;
    }
    let changed: Vec<&IndexedSource> = sorted.into_iter().filter(|s| s.chunks.is_some()).collect();
    let ids: Vec<Uuid> = changed.iter().map(|s| s.source.id).collect();
    sqlx::query("DELETE FROM query_chunks WHERE source_id = ANY($1)")
        .bind(&ids)
        .execute(&mut *tx)
        .await?;
    let rows: Vec<(Uuid, &NewChunk)> = changed
        .iter()
        .flat_map(|s| s.chunks.iter().flatten().map(|c| (s.source.id, c)))
        .collect();
    // Batches of rows per statement: a large text has hundreds of chunks.
    for batch in rows.chunks(200) {
        let mut qb = QueryBuilder::new(
            "INSERT INTO query_chunks (source_id, chunk_no, start_char, end_char, body, embedding) ",
        );
        qb.push_values(batch, |mut b, (id, c)| {
            b.push_bind(id)
                .push_bind(c.chunk_no)
                .push_bind(c.start)
                .push_bind(c.end)
                .push_bind(&c.body)
                .push_bind(&c.embedding);
        });
        qb.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A stored chunk a question takes.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredChunk {
    pub source_id: Uuid,
    pub name: String,
    pub kind: String,
    pub rank: i32,
    pub made_at: DateTime<Utc>,
    pub chunk_no: i32,
    pub start_char: i32,
    pub end_char: i32,
    pub body: String,
}

/// The `limit` chunks of the project's index most like a question, in their
/// sources' order: ranked by the dot product of the question's non-zero
/// dimensions `terms` (`dialectic_core::query::query_terms`) with each
/// chunk's stored unit vector, i.e. their cosine, plus
/// [`ENTITY_BOOST`] when the chunk's lower-cased text contains one of
/// `needles`. Postgres computes it from the stored rows; only the chosen
/// chunks' text leaves the database.
pub async fn top_chunks(
    pool: &PgPool,
    project_id: ProjectId,
    terms: &[(usize, f32)],
    needles: &[String],
    limit: usize,
) -> Result<Vec<StoredChunk>, StoreError> {
    let mut qb = QueryBuilder::new(
        "SELECT s.id AS source_id, s.name, s.kind, s.rank, s.made_at,
                c.chunk_no, c.start_char, c.end_char, c.body
         FROM query_chunks c JOIN query_sources s ON s.id = c.source_id
         WHERE s.project_id = ",
    );
    qb.push_bind(project_id);
    qb.push(" ORDER BY (0");
    if !needles.is_empty() {
        qb.push(" + CASE WHEN ");
        for (i, needle) in needles.iter().enumerate() {
            if i > 0 {
                qb.push(" OR ");
            }
            qb.push("strpos(lower(c.body), ");
            qb.push_bind(needle);
            qb.push(") > 0");
        }
        qb.push(" THEN ");
        qb.push_bind(ENTITY_BOOST);
        qb.push(" ELSE 0 END");
    }
    // Dimensions are our own integers (1-based in SQL); weights are bound.
    for (dim, weight) in terms {
        qb.push(format_args!(" + c.embedding[{}] * ", dim + 1));
        qb.push_bind(*weight);
    }
    qb.push(") DESC, s.rank, s.made_at, s.id, c.chunk_no LIMIT ");
    qb.push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
    let mut picked: Vec<StoredChunk> = qb.build_query_as().fetch_all(pool).await?;
    picked.sort_by_key(|c| (c.rank, c.made_at, c.source_id, c.chunk_no));
    Ok(picked)
}

/// How many sources and chunks the project's index holds (tests, operators).
pub async fn index_size(pool: &PgPool, project_id: ProjectId) -> Result<(i64, i64), StoreError> {
    Ok(sqlx::query_as(
        "SELECT (SELECT count(*) FROM query_sources WHERE project_id = $1),
                (SELECT count(*) FROM query_chunks c JOIN query_sources s ON s.id = c.source_id
                 WHERE s.project_id = $1)",
    )
    .bind(project_id)
    .fetch_one(pool)
    .await?)
}

/// A cited source that is not a document row: a JSON contribution (a
/// resolved clause) or a blackboard entry, with what a client is shown for it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CitedSource {
    pub id: Uuid,
    /// `dialectic_core::query::SourceKind`'s name.
    pub kind: String,
    pub name: String,
    pub stage_slug: String,
    pub iteration: i32,
    /// The contribution's object; none for an entry, whose text is `data`.
    pub storage_key: Option<String>,
    pub data: Option<sqlx::types::Json<serde_json::Value>>,
}

/// The contribution or blackboard entry `id` of one of `user_id`'s sessions
/// (another user's, or one of a deleted project, is NOT_FOUND), so a client
/// can open what a citation names.
pub async fn cited_source(
    pool: &PgPool,
    user_id: UserId,
    id: Uuid,
) -> Result<CitedSource, StoreError> {
    sqlx::query_as(
        "WITH mine AS (
           SELECT s.id FROM dialectic_sessions s JOIN dialectic_projects p ON p.id = s.project_id
           WHERE s.user_id = $2 AND p.deleted_at IS NULL
         )
         SELECT c.id, $3::text AS kind, c.document_key || ' ' || c.file_name AS name,
                c.stage_slug, c.iteration_number AS iteration,
                c.raw_response_storage_path AS storage_key, NULL::jsonb AS data
         FROM dialectic_contributions c
         WHERE c.id = $1 AND c.session_id IN (SELECT id FROM mine)
         UNION ALL
         SELECT e.id, $4::text, 'blackboard:' || e.entry_type, e.stage_slug, e.iteration,
                NULL, e.data
         FROM dialectic_blackboard_entries e
         WHERE e.id = $1 AND e.session_id IN (SELECT id FROM mine)",
    )
    .bind(id)
    .bind(user_id)
    .bind(SourceKind::Contribution.as_str())
    .bind(SourceKind::BlackboardEntry.as_str())
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| StoreError::not_found("document", id))
}
