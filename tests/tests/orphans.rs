//! A failed database write after an S3 upload leaves nothing behind. The
//! retry writes its chunk under the next attempt's name, so the failed
//! attempt's chunk must go. Postgres itself refuses the first two thesis
//! contribution rows (a trigger in this test's database); afterwards every raw
//! object of the stage is one a contribution row names, no more, no fewer.

use dialectic_e2e::TestEnv;
use std::collections::BTreeSet;

const PROMPT: &str = "# Orphans\n\nA seed library that swaps heirloom seeds by post.";
const INJECTED: i64 = 2;

async fn refuse_first_thesis_rows(env: &TestEnv) {
    let refuse = format!(
        "CREATE FUNCTION refuse_contribution() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.stage_slug = 'thesis' AND NEW.document_key <> 'header_context'
              AND nextval('injected_failures') <= {INJECTED} THEN
             RAISE EXCEPTION 'injected failure after the upload';
           END IF;
           RETURN NEW;
         END $$"
    );
    for statement in [
        "CREATE SEQUENCE injected_failures",
        // nextval is not rolled back with the failing transaction, so exactly
        // INJECTED inserts fail, whichever jobs they belong to.
        &refuse,
        "CREATE TRIGGER refuse_contribution BEFORE INSERT ON dialectic_contributions
         FOR EACH ROW EXECUTE FUNCTION refuse_contribution()",
    ] {
        sqlx::query(statement)
            .execute(env.store.pool())
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_row_write_after_the_upload_leaves_no_object_behind() {
    let mut env = TestEnv::new().await;
    refuse_first_thesis_rows(&env).await;
    env.start_all().await;
    let (project_id, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;

    let calls: i64 = sqlx::query_scalar("SELECT last_value FROM injected_failures")
        .fetch_one(env.store.pool())
        .await
        .expect("sequence");
    assert!(
        calls > INJECTED,
        "the trigger refused {INJECTED} rows and let later ones in ({calls} calls)"
    );
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let recorded: BTreeSet<String> = sqlx::query_scalar(
        "SELECT raw_response_storage_path FROM dialectic_contributions
          WHERE session_id = $1 AND stage_slug = 'thesis'",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("recorded paths")
    .into_iter()
    .collect();
    let short = dialectic_core::ids::SessionId::parse(&session_id)
        .expect("session id")
        .short();
    let stage = format!("projects/{project_id}/session_{short}/iteration_1/1_thesis/");
    let stored: BTreeSet<String> = env
        .blob
        .list(&stage)
        .await
        .expect("list")
        .into_iter()
        .filter(|k| k.contains("/raw_responses/") || k.contains("/_work/"))
        .collect();
    assert_eq!(
        stored.difference(&recorded).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "objects no row names"
    );
    assert_eq!(
        recorded.difference(&stored).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "rows whose object is gone"
    );
    let retried = env
        .count(
            "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1 AND attempt > 1",
            session,
        )
        .await;
    assert!(retried >= 1, "the refused writes were retried");
    env.teardown().await;
}
