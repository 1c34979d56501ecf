//! Rolling upgrades without an API outage: the migration Job runs before the new
//! pods exist, so for a while the previous release runs on the next release's
//! schema. This build plays the previous release here: a newer migration that
//! only expands the schema keeps it ready and working end to end, and one that
//! contracts it (raises `schema_compatibility.oldest_compatible`) makes it
//! refuse instead of failing on a missing column.

use dialectic_e2e::TestEnv;

/// What the next release might ship: a new table, a defaulted column, an index.
const EXPAND: &str = "
    CREATE TABLE next_release_notes (id uuid PRIMARY KEY, body text NOT NULL);
    ALTER TABLE dialectic_sessions ADD COLUMN next_release_label text NOT NULL DEFAULT '';
    CREATE INDEX next_release_sessions_label ON dialectic_sessions (next_release_label);
";

const PROMPT: &str =
    "# Upgrade\n\nA session run by the previous release on the next release's schema.";

/// The latest migration this build ships.
fn this_build() -> i64 {
    dialectic_store::MIGRATOR
        .iter()
        .map(|m| m.version)
        .max()
        .expect("migrations")
}

/// Applies a migration this build does not know, as a newer `dialecticd migrate` would.
async fn apply_newer(env: &TestEnv, version: i64, sql: &str) {
    sqlx::raw_sql(sql)
        .execute(env.store.pool())
        .await
        .expect("newer migration");
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, 'next release', true, '\\x00', 0)",
    )
    .bind(version)
    .execute(env.store.pool())
    .await
    .expect("migration recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_previous_release_runs_on_an_expanded_schema_and_refuses_a_contracted_one() {
    let mut env = TestEnv::new().await;
    let next = this_build() + 1;
    apply_newer(&env, next, EXPAND).await;
    assert_eq!(
        env.store.schema_status().await.expect("schema status"),
        dialectic_store::SchemaStatus::Compatible {
            database: next,
            code: this_build()
        }
    );

    // Every service reports ready on the newer schema and a session runs.
    env.start_all().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;

    // The release after drops something this build reads.
    sqlx::query("UPDATE schema_compatibility SET oldest_compatible = $1")
        .bind(next)
        .execute(env.store.pool())
        .await
        .expect("contract");
    let refused = dialectic_runtime::check_store(&env.store)
        .await
        .expect_err("a contracted schema is refused");
    assert!(
        refused.reason.contains("refusing") && refused.refuses_traffic,
        "{refused}"
    );
    env.teardown().await;
}
