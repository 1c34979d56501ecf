//! The rows a model call works from, read in one statement: the same rows the
//! separate reads give, and nothing for another user or a deleted project.

mod common;

use common::{MODEL, TestDb, USER};
use dialectic_core::ids::{ModelId, UserId};
use dialectic_store::{StoreError, records};
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempts_rows_are_the_owners_rows_read_at_once() {
    let db = TestDb::new(4).await;
    let pool = db.store.pool();
    let session = db.session().await;
    let rows = records::attempt_rows(pool, USER, session, "thesis", MODEL)
        .await
        .expect("the attempt's rows");
    let model = records::model(pool, MODEL).await.expect("model");
    let alone = records::session_for_user(pool, USER, session)
        .await
        .expect("session");
    let project = records::project_for_user(pool, USER, alone.project_id)
        .await
        .expect("project");
    let stage = records::stage_in_process(pool, session, "thesis")
        .await
        .expect("stage");
    assert_eq!(format!("{:?}", rows.model), format!("{model:?}"));
    assert_eq!(format!("{:?}", rows.session), format!("{alone:?}"));
    assert_eq!(format!("{:?}", rows.project), format!("{project:?}"));
    assert_eq!(format!("{:?}", rows.stage), format!("{stage:?}"));

    let stranger = UserId(Uuid::now_v7());
    let missing = |r: Result<records::AttemptRows, StoreError>, what: &str| match r {
        Err(StoreError::NotFound { resource, .. }) => assert_eq!(resource, what),
        other => panic!("expected {what} not found, got {other:?}"),
    };
    missing(
        records::attempt_rows(pool, stranger, session, "thesis", MODEL).await,
        "session",
    );
    missing(
        records::attempt_rows(pool, USER, session, "nowhere", MODEL).await,
        "stage",
    );
    let unknown = ModelId(Uuid::now_v7());
    missing(
        records::attempt_rows(pool, USER, session, "thesis", unknown).await,
        "model",
    );
    sqlx::query("UPDATE dialectic_projects SET deleted_at = now() WHERE id = $1")
        .bind(alone.project_id)
        .execute(pool)
        .await
        .expect("delete the project");
    missing(
        records::attempt_rows(pool, USER, session, "thesis", MODEL).await,
        "session",
    );
    db.drop_database().await;
}
