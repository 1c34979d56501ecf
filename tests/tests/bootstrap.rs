//! Declared bootstrap (issue 60, item 3): the real `dialecticd bootstrap
//! --file FILE`, as the chart's post-install and post-upgrade Job runs it,
//! against a fresh database. The first run stores the administrator's key
//! (read from the variable the file names), credits the starting tokens and
//! installs the pipeline; the second changes nothing and says so. A session
//! then runs with the declared key, on the declared model and pipeline.

use dialectic_e2e::TestEnv;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

const NOTES: &str = include_str!("../pipelines/notes.toml");

/// The models file, as the migrate Job syncs it before the bootstrap Job.
const MODELS: &str = r#"
[[models]]
name = "boot-model"
provider = "simulated"
context_window = 128000
max_output = 8192
tokenizer = "estimate"
"#;

/// The chart's JSON rendering: key by name, credits, a pipeline directory.
const BOOTSTRAP: &str = r#"{"admin_key":{"key_env":"BOOTSTRAP_ADMIN_KEY","name":"platform-admin"},
"credits":[{"amount":5000}],"pipelines":["pipelines"]}"#;

const ADMIN: &str = "00000000-0000-0000-0000-000000000001";

struct Files(PathBuf);

impl Files {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("bootstrap-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("pipelines")).expect("temp dir");
        Files(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("file");
        path
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `dialecticd ARGS` on the test's database, the key in the environment only.
async fn dialecticd(env: &TestEnv, args: &[&str], file: &Path, key: &str) -> Output {
    let mut command =
        tokio::process::Command::new(dialectic_e2e::workspace_binary("dialecticd", "dialecticd"));
    command
        .args(args)
        .arg(file)
        .env("DIALECTIC_DATABASE__URL", &env.settings.database.url)
        .env("BOOTSTRAP_ADMIN_KEY", key)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("dialecticd finished in time")
        .expect("dialecticd ran");
    assert!(
        out.status.success(),
        "dialecticd {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// What the bootstrap may write: key rows for the declared key, bootstrap
/// credits, and versions of the notes pipeline.
async fn rows(env: &TestEnv, key: &str) -> (Vec<(String, String)>, Vec<(i64, String)>, i64) {
    let pool = env.store.pool();
    let keys =
        sqlx::query_as("SELECT user_id::text, name FROM api_keys WHERE key_hash = $1 ORDER BY id")
            .bind(dialectic_core::apikey::hash(key))
            .fetch_all(pool)
            .await
            .expect("key rows");
    let credits = sqlx::query_as(
        "SELECT t.amount, t.kind FROM token_wallet_transactions t
           JOIN token_wallets w ON w.id = t.wallet_id
          WHERE w.user_id = $1::uuid AND t.idempotency_key LIKE 'bootstrap-%' ORDER BY t.id",
    )
    .bind(ADMIN)
    .fetch_all(pool)
    .await
    .expect("credit rows");
    let versions =
        sqlx::query_scalar("SELECT count(*) FROM dialectic_process_templates WHERE slug = 'notes'")
            .fetch_one(pool)
            .await
            .expect("versions");
    (keys, credits, versions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_file_applies_once_and_its_key_runs_a_session() {
    let mut env = TestEnv::new().await;
    let files = Files::new();
    let key = format!("dlk_{}", uuid::Uuid::new_v4().simple());
    let models = files.write("models.toml", MODELS);
    files.write("pipelines/notes.toml", NOTES);
    let file = files.write("bootstrap.json", BOOTSTRAP);
    dialecticd(&env, &["model", "sync"], &models, &key).await;

    let first = dialecticd(&env, &["bootstrap", "--file"], &file, &key).await;
    let first = String::from_utf8(first.stdout).expect("utf-8");
    let shown: String = key.chars().take(12).collect();
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(
        lines[0],
        format!("admin key {shown}… (platform-admin) for user {ADMIN}: stored"),
        "{first}"
    );
    assert!(
        lines[1].starts_with(&format!("credit 5000 to user {ADMIN}: credited, balance ")),
        "{first}"
    );
    assert!(
        lines[2].starts_with("installed pipeline notes version 1:"),
        "{first}"
    );
    assert_eq!(lines[3..], ["bootstrap: 3 change(s) applied"], "{first}");
    let after_first = rows(&env, &key).await;
    assert_eq!(
        after_first,
        (
            vec![(ADMIN.to_string(), "platform-admin".to_string())],
            vec![(5000, "credit".to_string())],
            1
        )
    );

    // The post-upgrade run: the same file again.
    let second = dialecticd(&env, &["bootstrap", "--file"], &file, &key).await;
    assert_eq!(
        String::from_utf8(second.stdout).expect("utf-8"),
        format!(
            "admin key {shown}… (platform-admin) for user {ADMIN}: already stored; unchanged\n\
             credit 5000 to user {ADMIN}: already credited; unchanged\n\
             pipeline notes version 1 is already this file; nothing installed\n\
             bootstrap: everything declared is in place; nothing changed\n"
        )
    );
    assert_eq!(
        rows(&env, &key).await,
        after_first,
        "the second run wrote nothing"
    );

    // The declared key, model and pipeline run a session.
    env.start_all().await;
    let mut client = env.gateway_with_key(&key).await;
    let (_, session_id) = dialectic_e2e::start_project_session(
        &mut client,
        "notes",
        "Notes on a declared install.",
        &["boot-model"],
        true,
    )
    .await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let models: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT m.api_identifier FROM dialectic_generation_jobs j
           JOIN ai_providers m ON m.id = j.model_id
          WHERE j.session_id = $1 AND j.job_type = 'EXECUTE'",
    )
    .bind(uuid::Uuid::parse_str(&session_id).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("models");
    assert_eq!(models, ["boot-model"]);
    env.teardown().await;
}
