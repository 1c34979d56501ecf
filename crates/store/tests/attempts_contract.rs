//! The rows a model call works from, read by its claim in one statement: the
//! same rows the separate reads give, and nothing for another user, a stage
//! outside the session's process, a missing model or a deleted project; the
//! job is claimed either way.

mod common;

use common::{MODEL, TestDb, USER};
use dialectic_core::ids::{JobId, SessionId};
use dialectic_core::job::JobType;
use dialectic_store::jobs::{self, ClaimScope};
use dialectic_store::{StoreError, attempts, models, projects, sessions, stages};
use uuid::Uuid;

async fn claim_with_rows(db: &TestDb, job: JobId) -> Result<attempts::AttemptRows, StoreError> {
    let claimed = jobs::claim::<Result<attempts::AttemptRows, StoreError>>(
        db.store.pool(),
        job,
        &[JobType::Plan],
        ClaimScope::Any,
        "worker",
        60,
    )
    .await
    .expect("claim query")
    .expect("the job is claimed whatever its rows");
    assert_eq!(claimed.job.attempt_count, 1);
    claimed.rows
}

/// A new pending job of `session` with one column set to `value` (text, or
/// NULL) before it is claimed.
async fn job_with(db: &TestDb, session: SessionId, change: &str, value: Option<&str>) -> JobId {
    let job = db.pending_job(session).await;
    sqlx::query(&format!(
        "UPDATE dialectic_generation_jobs SET {change} WHERE id = $1"
    ))
    .bind(job)
    .bind(value)
    .execute(db.store.pool())
    .await
    .expect("change the job");
    job
}

fn missing(found: Result<attempts::AttemptRows, StoreError>, what: &str) {
    match found {
        Err(StoreError::NotFound { resource, .. }) => assert_eq!(resource, what),
        other => panic!("expected {what} not found, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_reads_the_owners_rows_with_the_job() {
    let db = TestDb::new(4).await;
    let pool = db.store.pool();
    let session = db.session().await;
    let rows = claim_with_rows(&db, db.pending_job(session).await)
        .await
        .expect("the attempt's rows");
    let model = models::model(pool, MODEL).await.expect("model");
    let alone = sessions::session_for_user(pool, USER, session)
        .await
        .expect("session");
    let project = projects::project_for_user(pool, USER, alone.project_id)
        .await
        .expect("project");
    let stage = stages::stage_in_process(pool, session, "thesis")
        .await
        .expect("stage");
    assert_eq!(format!("{:?}", rows.model), format!("{model:?}"));
    assert_eq!(format!("{:?}", rows.session), format!("{alone:?}"));
    assert_eq!(format!("{:?}", rows.project), format!("{project:?}"));
    assert_eq!(format!("{:?}", rows.stage), format!("{stage:?}"));

    let stranger = Uuid::now_v7();
    sqlx::query("INSERT INTO users (id, display_name) VALUES ($1, 'stranger')")
        .bind(stranger)
        .execute(pool)
        .await
        .expect("another user");
    let stranger = stranger.to_string();
    let theirs = job_with(&db, session, "user_id = $2::uuid", Some(&stranger)).await;
    missing(claim_with_rows(&db, theirs).await, "session");
    let elsewhere = job_with(&db, session, "stage_slug = $2", Some("nowhere")).await;
    missing(claim_with_rows(&db, elsewhere).await, "stage");
    let modelless = job_with(&db, session, "model_id = $2::uuid", None).await;
    missing(claim_with_rows(&db, modelless).await, "model");
    let orphan = db.pending_job(session).await;
    sqlx::query("UPDATE dialectic_projects SET deleted_at = now() WHERE id = $1")
        .bind(alone.project_id)
        .execute(pool)
        .await
        .expect("delete the project");
    missing(claim_with_rows(&db, orphan).await, "session");
    db.drop_database().await;
}
