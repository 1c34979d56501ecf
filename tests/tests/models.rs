//! Models are registered by a command, never by SQL: the real `dialecticd
//! model` binary against a fresh database, and the gateway reading what it
//! wrote. add → list → ListModels → a session on it by name → add again
//! updates → remove (refused while another model falls back to it) → the
//! model is gone from ListModels and a new session on it is refused → add
//! again brings it back. Bad input is refused with its reason and writes
//! nothing.

use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{
    CreateProjectRequest, ListModelsRequest, Model, Session, StartSessionRequest,
};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;
use tonic::Code;

const MODEL: &str = "e2e-local";

fn dialecticd_binary() -> PathBuf {
    dialectic_e2e::workspace_binary("dialecticd", "dialecticd")
}

struct Dialecticd<'a> {
    binary: PathBuf,
    env: &'a TestEnv,
}

impl Dialecticd<'_> {
    /// `dialecticd model args…` on the test's database.
    async fn run(&self, args: &[&str]) -> Output {
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .arg("model")
            .args(args)
            .env("DIALECTIC_DATABASE__URL", &self.env.settings.database.url)
            // The error line alone, as an operator sees it by default.
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        tokio::time::timeout(Duration::from_secs(60), command.output())
            .await
            .expect("dialecticd finished in time")
            .expect("dialecticd ran")
    }

    /// Stdout of a command that must succeed.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success(),
            "dialecticd model {args:?} failed: {}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// Stderr of a command that must fail.
    async fn refused(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            !out.status.success(),
            "dialecticd model {args:?} succeeded:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stderr).expect("utf-8 output")
    }

    async fn listed(&self, name: &str) -> Value {
        let text = self.ok(&["list", "--output", "json"]).await;
        let rows: Vec<Value> = serde_json::from_str(&text).expect("model list is JSON");
        rows.into_iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not in `model list`: {text}"))
    }
}

async fn listed_models(client: &mut GatewayClient) -> Vec<Model> {
    client
        .list_models(ListModelsRequest::default())
        .await
        .expect("ListModels")
        .into_inner()
        .models
}

async fn listed_model(client: &mut GatewayClient, name: &str) -> Option<Model> {
    listed_models(client)
        .await
        .into_iter()
        .find(|m| m.api_identifier == name)
}

async fn start_session(
    client: &mut GatewayClient,
    project_id: &str,
    model: &str,
) -> Result<Session, tonic::Status> {
    client
        .start_session(StartSessionRequest {
            project_id: project_id.into(),
            models: vec![model.into()],
            ..Default::default()
        })
        .await
        .map(tonic::Response::into_inner)
}

/// The add flags of the test's model; `extra` adds to them.
fn add_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "add",
        MODEL,
        "--provider",
        "simulated",
        "--display-name",
        "E2E local",
        "--context-window",
        "4096",
        "--max-output",
        "512",
    ];
    args.extend_from_slice(extra);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_is_registered_used_updated_and_removed_without_sql() {
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let cli = Dialecticd {
        binary: dialecticd_binary(),
        env: &env,
    };
    let mut client = env.gateway().await;

    let added = cli
        .ok(&add_args(&[
            "--structured-output",
            "json_object_schema",
            "--max-concurrency",
            "3",
            "--requests-per-minute",
            "60",
            "--tokens-per-minute",
            "50000",
            "--fallback",
            "simulated-b",
        ]))
        .await;
    assert_eq!(added.trim(), format!("registered model {MODEL}"));

    let table = cli.ok(&["list"]).await;
    let row = table
        .lines()
        .find(|l| l.starts_with(MODEL))
        .unwrap_or_else(|| panic!("{MODEL} is not in the table:\n{table}"));
    for shown in [
        "simulated",
        "4096",
        "512",
        "json_object_schema",
        "3 at once, 60 req/min, 50000 tok/min",
        "simulated-b",
        "yes",
    ] {
        assert!(row.contains(shown), "{shown:?} missing from {row:?}");
    }
    let json = cli.listed(MODEL).await;
    assert_eq!(json["display_name"], "E2E local");
    assert_eq!(json["fallback"], "simulated-b");
    assert_eq!(json["active"], true);

    let model = listed_model(&mut client, MODEL)
        .await
        .expect("ListModels shows the new model");
    assert_eq!(
        (
            model.provider.as_str(),
            model.name.as_str(),
            model.context_window_tokens,
            model.max_output_tokens,
            model.structured_output.as_str(),
            model.fallback_model.as_str(),
            model.max_concurrency,
            model.requests_per_minute,
            model.tokens_per_minute,
        ),
        (
            "simulated",
            "E2E local",
            4096,
            512,
            "json_object_schema",
            "simulated-b",
            3,
            60,
            50000
        )
    );

    let project = client
        .create_project(CreateProjectRequest {
            name: "Models".into(),
            initial_user_prompt: "A tool library run by neighbours.".into(),
            ..Default::default()
        })
        .await
        .expect("create project")
        .into_inner();
    let session = start_session(&mut client, &project.id, MODEL)
        .await
        .expect("a session on the registered model starts");
    assert_eq!(session.models, [MODEL]);

    // A model another active model falls back to stays.
    let refused = cli.refused(&["remove", "simulated-b"]).await;
    assert!(
        refused.contains("is the fallback of e2e-local"),
        "{refused}"
    );
    assert!(listed_model(&mut client, "simulated-b").await.is_some());

    // Re-adding states the model anew: new window, no fallback, no limits.
    let updated = cli
        .ok(&add_args(&[])
            .into_iter()
            .map(|a| if a == "4096" { "8192" } else { a })
            .collect::<Vec<_>>())
        .await;
    assert_eq!(updated.trim(), format!("updated model {MODEL}"));
    let model = listed_model(&mut client, MODEL)
        .await
        .expect("still listed");
    assert_eq!(model.context_window_tokens, 8192);
    assert_eq!(model.structured_output, "json_schema");
    assert_eq!(model.fallback_model, "");
    assert_eq!(
        (
            model.max_concurrency,
            model.requests_per_minute,
            model.tokens_per_minute
        ),
        (0, 0, 0)
    );

    let removed = cli.ok(&["remove", MODEL]).await;
    assert!(
        removed.starts_with(&format!("removed model {MODEL}")),
        "{removed}"
    );
    assert!(
        listed_model(&mut client, MODEL).await.is_none(),
        "a removed model is not listed"
    );
    assert_eq!(cli.listed(MODEL).await["active"], false);
    let status = start_session(&mut client, &project.id, MODEL)
        .await
        .expect_err("a session on a removed model is refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status
            .message()
            .contains(&format!("unknown model {MODEL:?}")),
        "{status:?}"
    );
    // The session started before the removal still names it.
    assert_eq!(
        env.count(
            "SELECT count(*) FROM dialectic_sessions s JOIN ai_providers m ON m.id = ANY(s.selected_model_ids) WHERE s.id = $1 AND m.api_identifier = 'e2e-local'",
            uuid::Uuid::parse_str(&session.id).expect("session id"),
        )
        .await,
        1
    );

    let back = cli.ok(&add_args(&[])).await;
    assert_eq!(back.trim(), format!("updated model {MODEL} (active again)"));
    assert!(listed_model(&mut client, MODEL).await.is_some());
    start_session(&mut client, &project.id, MODEL)
        .await
        .expect("a session on the model added again starts");

    drop(client);
    env.teardown().await;
}

/// Every model row, active or not, as text.
async fn model_rows(env: &TestEnv) -> Vec<String> {
    sqlx::query_scalar("SELECT row_to_json(m)::text FROM ai_providers m ORDER BY api_identifier")
        .fetch_all(env.store.pool())
        .await
        .expect("model rows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_registrations_are_refused_with_their_reason_and_write_nothing() {
    let env = TestEnv::new().await;
    let cli = Dialecticd {
        binary: dialecticd_binary(),
        env: &env,
    };
    let before = model_rows(&env).await;
    let openai = |extra: &[&'static str]| {
        let mut args = vec![
            "add",
            "bad-model",
            "--provider",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--context-window",
            "8192",
            "--max-output",
            "1024",
        ];
        args.extend_from_slice(extra);
        args
    };
    let cases: [(&str, Vec<&str>, &[&str]); 6] = [
        (
            "the platform's own secret as the key",
            openai(&["--key-env", "DIALECTIC_INTERNAL__TOKEN_SECRET"]),
            &[
                "invalid --key-env",
                "platform's own variables (DIALECTIC_*)",
            ],
        ),
        (
            "an unknown structured-output dialect",
            openai(&["--structured-output", "xml"]),
            &[
                "unknown structured-output dialect \"xml\"",
                "json_object_schema",
            ],
        ),
        (
            "an unknown fallback",
            openai(&["--fallback", "no-such-model"]),
            &["no active model is named \"no-such-model\""],
        ),
        (
            "itself as its fallback",
            openai(&["--fallback", "bad-model"]),
            &["invalid --fallback", "its own fallback"],
        ),
        (
            "a zero context window",
            openai(&[])
                .into_iter()
                .map(|a| if a == "8192" { "0" } else { a })
                .collect(),
            &["invalid --context-window", "positive"],
        ),
        (
            "a base URL that is not http(s)",
            openai(&[])
                .into_iter()
                .map(|a| {
                    if a.starts_with("http://") {
                        "ftp://127.0.0.1/v1"
                    } else {
                        a
                    }
                })
                .collect(),
            &["invalid --base-url", "not an http or https URL"],
        ),
    ];
    for (what, args, reasons) in cases {
        let stderr = cli.refused(&args).await;
        for reason in reasons {
            assert!(
                stderr.contains(reason),
                "{what}: {reason:?} missing from:\n{stderr}"
            );
        }
    }
    let removed = cli.refused(&["remove", "no-such-model"]).await;
    assert!(
        removed.contains("no model is named \"no-such-model\""),
        "{removed}"
    );
    let after = model_rows(&env).await;
    assert_eq!(after, before, "a refused command changed a model row");
    env.teardown().await;
}
