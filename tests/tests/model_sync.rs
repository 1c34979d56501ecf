//! Models declared in a file (issue 56, item 4): the real `dialecticd model
//! sync FILE` against a fresh database, and the services reading what it
//! wrote. Syncing the same file twice changes nothing the second time;
//! leaving a model out retires it, and a session already running on it goes
//! on to its next stage on it, while a new session cannot pick it; a key
//! written inline is refused and nothing is written.

use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{CreateProjectRequest, StartSessionRequest, SubmitStageResponsesRequest};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;
use tonic::Code;

const PROMPT: &str = "A tool library run by neighbours.";

/// Two simulated models; sync-a falls back to sync-b.
const BOTH: &str = r#"
[[models]]
name = "sync-a"
provider = "simulated"
display_name = "Sync A"
context_window = 128000
max_output = 8192
tokenizer = "estimate"
fallback = "sync-b"
max_concurrency = 4
price_input_per_mtok = 1.25
price_output_per_mtok = 10.0
price_cached_input_per_mtok = 0.125
currency = "USD"

[[models]]
name = "sync-b"
provider = "simulated"
context_window = 128000
max_output = 8192
tokenizer = "estimate"
"#;

/// sync-a left out.
const ONLY_B: &str = r#"
[[models]]
name = "sync-b"
provider = "simulated"
context_window = 128000
max_output = 8192
tokenizer = "estimate"
"#;

struct Files(PathBuf);

impl Files {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("model-sync-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Files(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("models file");
        path
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `dialecticd model sync FILE` on the test's database.
async fn sync(env: &TestEnv, file: &Path) -> Output {
    let mut command =
        tokio::process::Command::new(dialectic_e2e::workspace_binary("dialecticd", "dialecticd"));
    command
        .args(["model", "sync"])
        .arg(file)
        .env("DIALECTIC_DATABASE__URL", &env.settings.database.url)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("dialecticd finished in time")
        .expect("dialecticd ran")
}

async fn synced(env: &TestEnv, file: &Path) -> String {
    let out = sync(env, file).await;
    assert!(
        out.status.success(),
        "model sync failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Every model row, as text.
async fn model_rows(env: &TestEnv) -> Vec<String> {
    sqlx::query_scalar("SELECT row_to_json(m)::text FROM ai_providers m ORDER BY api_identifier")
        .fetch_all(env.store.pool())
        .await
        .expect("model rows")
}

/// (model, status) → jobs of a stage.
async fn stage_jobs(env: &TestEnv, session_id: &str, stage: &str) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT m.api_identifier, j.status FROM dialectic_generation_jobs j
           JOIN ai_providers m ON m.id = j.model_id
          WHERE j.session_id = $1 AND j.stage_slug = $2 AND j.job_type = 'EXECUTE'
          ORDER BY 1, 2",
    )
    .bind(uuid::Uuid::parse_str(session_id).expect("uuid"))
    .bind(stage)
    .fetch_all(env.store.pool())
    .await
    .expect("jobs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_file_syncs_once_and_retiring_a_model_spares_its_running_session() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let files = Files::new();
    let both = files.write("models.toml", BOTH);

    // The seeded models are not in the file: retired.
    let first = synced(&env, &both).await;
    assert_eq!(
        first.lines().next(),
        Some(
            "models: added 2 (sync-a, sync-b), updated 0, retired 2 (simulated, simulated-b), unchanged 0"
        ),
        "{first}"
    );
    let rows = model_rows(&env).await;
    let second = synced(&env, &both).await;
    assert_eq!(
        second,
        "models: added 0, updated 0, retired 0, unchanged 2\nthe registry already matches the file; nothing changed\n"
    );
    assert_eq!(
        model_rows(&env).await,
        rows,
        "the second sync wrote nothing"
    );

    // A changed setting is an update, and only that model's.
    let changed = files.write(
        "changed.toml",
        &BOTH.replace("max_concurrency = 4", "max_concurrency = 2"),
    );
    let third = synced(&env, &changed).await;
    assert!(
        third.starts_with("models: added 0, updated 1 (sync-a), retired 0, unchanged 1"),
        "{third}"
    );
    // So is a changed price (prices are compared exactly, not as floats).
    let repriced = files.write(
        "repriced.toml",
        &BOTH
            .replace("max_concurrency = 4", "max_concurrency = 2")
            .replace(
                "price_output_per_mtok = 10.0",
                "price_output_per_mtok = 10.000000001",
            ),
    );
    let fourth = synced(&env, &repriced).await;
    assert!(
        fourth.starts_with("models: added 0, updated 1 (sync-a), retired 0, unchanged 1"),
        "{fourth}"
    );

    // A session on sync-a runs its first stage, then sync-a is retired.
    let (project_id, session_id) = env.new_session(PROMPT, &["sync-a"], false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let only_b = files.write("only-b.toml", ONLY_B);
    let retired = synced(&env, &only_b).await;
    assert!(
        retired.starts_with("models: added 0, updated 0, retired 1 (sync-a), unchanged 1"),
        "{retired}"
    );

    // The running session goes on to its next stage, still on sync-a.
    let mut client = env.gateway().await;
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            responses: vec![],
            client_request_id: String::new(),
        })
        .await
        .expect("the session on a retired model advances");
    env.wait_for_session(&session_id, "pending_synthesis", true)
        .await;
    let antithesis = stage_jobs(&env, &session_id, "antithesis").await;
    assert!(!antithesis.is_empty(), "antithesis ran no job");
    assert!(
        antithesis
            .iter()
            .all(|(model, status)| model == "sync-a" && status == "completed"),
        "{antithesis:?}"
    );

    // A new session cannot pick it.
    let project = client
        .create_project(CreateProjectRequest {
            name: "After retirement".into(),
            initial_user_prompt: PROMPT.into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    assert_ne!(project.id, project_id);
    let refused = client
        .start_session(StartSessionRequest {
            project_id: project.id.clone(),
            models: vec!["sync-a".into()],
            ..Default::default()
        })
        .await
        .expect_err("a retired model is refused");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(
        refused.message().contains("unknown model \"sync-a\""),
        "{refused:?}"
    );
    client
        .start_session(StartSessionRequest {
            project_id: project.id,
            models: vec!["sync-b".into()],
            ..Default::default()
        })
        .await
        .expect("a declared model starts a session");

    drop(client);
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_key_is_refused_and_nothing_is_written() {
    let env = TestEnv::new().await;
    let files = Files::new();
    let before = model_rows(&env).await;
    let secret = "sk-live-0123456789abcdef";
    for (name, text) in [
        (
            "inline.toml",
            format!(
                "{BOTH}\n[[models]]\nname = \"openai\"\nprovider = \"openai\"\napi_key = \"{secret}\"\ncontext_window = 8\nmax_output = 4\n"
            ),
        ),
        (
            "as-env.toml",
            BOTH.replace("max_concurrency = 4", &format!("key_env = \"{secret}\"")),
        ),
    ] {
        let out = sync(&env, &files.write(name, &text)).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} was synced");
        assert!(stderr.contains("key_env"), "{name}: {stderr}");
        if name == "inline.toml" {
            assert!(
                stderr.contains("\"api_key\" would put the key itself in the file"),
                "{stderr}"
            );
        }
        assert!(
            !stderr.contains(secret),
            "{name}: the key is echoed: {stderr}"
        );
    }
    assert_eq!(
        model_rows(&env).await,
        before,
        "a refused file writes nothing"
    );
    env.teardown().await;
}
