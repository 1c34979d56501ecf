//! The query index's contract with the executor: a source is indexed once per
//! content (a newer row with the same hash keeps its chunks), a deleted source
//! takes its rows with it, an older analysis's outputs leave the index when a
//! newer one completes, and Postgres ranks the stored chunks by the
//! question's cosine, entities first, returning them in their sources' order.

mod common;

use common::{TestDb, USER};
use dialectic_core::ids::{ProjectId, ResourceId, SessionId};
use dialectic_core::query::{self, Source, SourceKind};
use dialectic_core::session::SessionStatus;
use dialectic_store::project_documents::{self, DocumentLimits, NewProjectDocument};
use dialectic_store::query::{self as index, IndexedSource, NewChunk, StaleSource};
use uuid::Uuid;

/// Two chunks each: a preamble long enough to be one, then the clause.
fn lease() -> String {
    format!(
        "{}\n\n4.2 Rent is due on the fifth day of each month.",
        "Preamble of the lease. ".repeat(60)
    )
}

fn notice() -> String {
    format!(
        "{}\n\n9.1 Either party may terminate on six months' notice.",
        "Preamble of the notice. ".repeat(60)
    )
}

async fn project_of(db: &TestDb, session: SessionId) -> ProjectId {
    sqlx::query_scalar("SELECT project_id FROM dialectic_sessions WHERE id = $1")
        .bind(session)
        .fetch_one(db.store.pool())
        .await
        .expect("project")
}

async fn upload(db: &TestDb, project: ProjectId, name: &str) -> ResourceId {
    let id = ResourceId::new();
    let key = format!("projects/{project}/{id}/{name}");
    project_documents::insert(
        db.store.pool(),
        &NewProjectDocument {
            id,
            project_id: project,
            user_id: USER,
            file_name: name,
            bucket: "b",
            storage_path: &key,
            mime_type: "text/markdown",
            size_bytes: 10,
            content_hash: "h",
            chunks: 1,
            client_request_id: None,
            role: None,
        },
        &DocumentLimits {
            max_documents: 100,
            max_bytes: 1 << 20,
            max_user_bytes: 1 << 20,
        },
    )
    .await
    .expect("upload");
    id
}

/// What the executor does with a stale source's text.
fn cut(stale: &StaleSource, text: &str) -> (String, Option<Vec<NewChunk>>) {
    let hash = dialectic_core::digest::sha256_hex(text.as_bytes());
    if stale.indexed_hash.as_deref() == Some(hash.as_str()) {
        return (hash, None);
    }
    let source = Source {
        id: stale.id.to_string(),
        name: stale.name.clone(),
        kind: SourceKind::parse(&stale.kind).expect("kind"),
        text: text.to_string(),
    };
    let chunks = query::chunks(&source)
        .into_iter()
        .enumerate()
        .map(|(i, c)| NewChunk {
            chunk_no: i as i32,
            start: c.start as i32,
            end: c.end as i32,
            embedding: query::embedding(&c.text),
            body: c.text,
        })
        .collect();
    (hash, Some(chunks))
}

/// Syncs and indexes with `text_of` each stale source; returns how many were stale.
async fn index_with(
    db: &TestDb,
    project: ProjectId,
    analysis: Option<SessionId>,
    text_of: impl Fn(&StaleSource) -> String,
) -> usize {
    let stale = index::sync(db.store.pool(), project, analysis)
        .await
        .expect("sync");
    let cut: Vec<_> = stale.iter().map(|s| cut(s, &text_of(s))).collect();
    let indexed: Vec<IndexedSource> = stale
        .iter()
        .zip(cut)
        .map(|(source, (content_hash, chunks))| IndexedSource {
            source,
            content_hash,
            chunks,
        })
        .collect();
    index::store_index(db.store.pool(), project, &indexed)
        .await
        .expect("store");
    stale.len()
}

fn uploads(s: &StaleSource) -> String {
    if s.name == "lease.md" {
        lease()
    } else {
        notice()
    }
}

async fn top(db: &TestDb, project: ProjectId, question: &str, entities: &[&str]) -> Vec<String> {
    let entities: Vec<String> = entities.iter().map(|e| e.to_string()).collect();
    index::top_chunks(
        db.store.pool(),
        project,
        &query::query_terms(question),
        &query::entity_needles(&entities),
        1,
    )
    .await
    .expect("top")
    .into_iter()
    .map(|c| c.body)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_are_indexed_once_ranked_in_postgres_and_removed_with_their_rows() {
    let db = TestDb::new(4).await;
    let session = db.session().await;
    let project = project_of(&db, session).await;
    let lease_id = upload(&db, project, "lease.md").await;
    upload(&db, project, "notice.md").await;
    let pool = db.store.pool();
    assert_eq!(
        index::analysis(pool, project).await.expect("analysis"),
        Some(session)
    );

    assert_eq!(index_with(&db, project, Some(session), uploads).await, 2);
    assert_eq!(
        index::index_size(pool, project).await.expect("size"),
        (2, 4)
    );
    assert_eq!(
        index_with(&db, project, Some(session), uploads).await,
        0,
        "indexed once"
    );

    assert_eq!(
        top(&db, project, "When is the rent due?", &[]).await,
        ["4.2 Rent is due on the fifth day of each month."]
    );
    assert_eq!(
        top(&db, project, "When is the rent due?", &["9.1"]).await,
        ["9.1 Either party may terminate on six months' notice."],
        "a chunk naming an entity comes first"
    );
    let all = index::top_chunks(pool, project, &query::query_terms("rent"), &[], 10)
        .await
        .expect("all");
    let order: Vec<(&str, i32)> = all.iter().map(|c| (c.name.as_str(), c.chunk_no)).collect();
    assert_eq!(
        order,
        [
            ("lease.md", 0),
            ("lease.md", 1),
            ("notice.md", 0),
            ("notice.md", 1)
        ],
        "in their sources' order"
    );
    let rent = &all[1];
    let at: String = lease()
        .chars()
        .skip(rent.start_char as usize)
        .take((rent.end_char - rent.start_char) as usize)
        .collect();
    assert_eq!(at, rent.body, "ranges are of the source's text");

    // A newer row with the same text keeps its chunks; changed text replaces them.
    sqlx::query("UPDATE dialectic_project_resources SET updated_at = now() WHERE id = $1")
        .bind(lease_id)
        .execute(pool)
        .await
        .expect("touch");
    assert_eq!(index_with(&db, project, Some(session), uploads).await, 1);
    assert_eq!(
        index::index_size(pool, project).await.expect("size"),
        (2, 4)
    );
    sqlx::query("UPDATE dialectic_project_resources SET updated_at = now() WHERE id = $1")
        .bind(lease_id)
        .execute(pool)
        .await
        .expect("touch");
    index_with(&db, project, Some(session), |_| "Replaced.".to_string()).await;
    assert_eq!(
        index::index_size(pool, project).await.expect("size"),
        (2, 3)
    );

    // A deleted source takes its index rows with it.
    sqlx::query("DELETE FROM dialectic_project_resources WHERE id = $1")
        .bind(lease_id)
        .execute(pool)
        .await
        .expect("delete");
    assert_eq!(
        index::index_size(pool, project).await.expect("size"),
        (1, 2)
    );
    db.drop_database().await;
}

async fn finding(db: &TestDb, session: SessionId, text: &str) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO dialectic_blackboard_entries
           (id, session_id, entry_type, seq, iteration, stage_slug, step_key, model_slug, job_id, data)
         VALUES ($1, $2, 'buried_change', 1, 1, 'analysis', 'detect', 'simulated', $3, $4)",
    )
    .bind(id)
    .bind(session)
    .bind(Uuid::now_v7())
    .bind(serde_json::json!({ "summary": text }))
    .execute(db.store.pool())
    .await
    .expect("finding");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_completed_analysis_replaces_the_older_ones_outputs() {
    let db = TestDb::new(4).await;
    let first = db.session().await;
    let project = project_of(&db, first).await;
    let pool = db.store.pool();
    let old = finding(
        &db,
        first,
        "Amendment 2 deletes Exhibit B, which 7.1 still cites.",
    )
    .await;
    sqlx::query("UPDATE dialectic_sessions SET status = $2 WHERE id = $1")
        .bind(first)
        .bind(SessionStatus::REVIEW)
        .execute(pool)
        .await
        .expect("complete");
    let text = |s: &StaleSource| query::finding_text(&s.data.as_ref().expect("data").0);
    assert_eq!(index_with(&db, project, Some(first), text).await, 1);

    // A second analysis: while it runs, the completed first one is read.
    let second: SessionId = sqlx::query_scalar(
        "INSERT INTO dialectic_sessions (id, project_id, user_id, status, selected_model_ids, created_at)
         SELECT $1, project_id, user_id, 'running_analysis', selected_model_ids,
                created_at + interval '1 second'
         FROM dialectic_sessions WHERE id = $2 RETURNING id",
    )
    .bind(SessionId::new())
    .bind(first)
    .fetch_one(pool)
    .await
    .expect("second session");
    let new = finding(&db, second, "Amendment 3 restores Exhibit B in full.").await;
    assert_eq!(
        index::analysis(pool, project).await.expect("analysis"),
        Some(first)
    );
    sqlx::query("UPDATE dialectic_sessions SET status = $2 WHERE id = $1")
        .bind(second)
        .bind(SessionStatus::REVIEW)
        .execute(pool)
        .await
        .expect("complete");
    assert_eq!(
        index::analysis(pool, project).await.expect("analysis"),
        Some(second)
    );
    assert_eq!(index_with(&db, project, Some(second), text).await, 1);
    let ids: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM query_sources WHERE project_id = $1")
        .bind(project)
        .fetch_all(pool)
        .await
        .expect("ids");
    assert_eq!(
        ids,
        [new],
        "the first analysis's finding {old} left the index"
    );
    db.drop_database().await;
}
