//! The generated clients in `clients/` (docs/clients.md) against the real
//! stack: the Python example (grpcio) and the TypeScript example (gRPC-Web
//! through @connectrpc/connect-web, bundled by esbuild and run by node) each
//! create a project, start a session on the simulated model and follow it to
//! review, as a user of the client would, in a subprocess. The test reads the
//! session each one printed back through the Rust client: in review, in the
//! project that example created.
//!
//! The toolchains come from `deploy/clients.sh install` (deploy/test.sh runs
//! it, and exports `DIALECTIC_CLIENTS_PYTHON` with `deploy/clients.sh env`);
//! `DIALECTIC_SKIP_CLIENTS=1` skips the test.

use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{GetProjectRequest, SessionState};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Real time an example may take to run its session to review.
const EXAMPLE_SECONDS: u64 = 180;

fn skipped() -> bool {
    let skip = std::env::var("DIALECTIC_SKIP_CLIENTS").is_ok_and(|v| v == "1");
    if skip {
        eprintln!(
            "\n*** DIALECTIC_SKIP_CLIENTS=1: the Python and TypeScript clients are NOT tested ***\n"
        );
    }
    skip
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The virtualenv's interpreter, with grpcio and protobuf.
fn python() -> PathBuf {
    let found = std::env::var_os("DIALECTIC_CLIENTS_PYTHON").map(PathBuf::from);
    found.filter(|p| p.exists()).unwrap_or_else(|| {
        panic!(
            "DIALECTIC_CLIENTS_PYTHON names no interpreter: run `deploy/clients.sh install` and \
             `eval \"$(deploy/clients.sh env)\"` (deploy/test.sh does), or DIALECTIC_SKIP_CLIENTS=1"
        )
    })
}

/// Runs an example against `env`'s gateway with its bootstrap key; its
/// standard output, once it exited with success.
async fn run_example(env: &TestEnv, command: &mut tokio::process::Command, what: &str) -> String {
    command
        .current_dir(repo())
        .env(
            "DIALECTIC_GATEWAY_URL",
            format!("http://{}", env.addr("gateway")),
        )
        .env("DIALECTIC_API_KEY", &env.settings.gateway.bootstrap_key)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(EXAMPLE_SECONDS), command.output())
        .await
        .unwrap_or_else(|_| panic!("the {what} example ends within {EXAMPLE_SECONDS} s"))
        .unwrap_or_else(|e| panic!("the {what} example starts: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the {what} example succeeds ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("the {what} example printed:\n{stdout}");
    stdout
}

/// The example's last line, `session ID state STATE`: (ID, STATE).
fn printed_session(stdout: &str) -> (String, String) {
    let last = stdout.lines().last().unwrap_or_default();
    match last.split_whitespace().collect::<Vec<_>>()[..] {
        ["session", id, "state", state] => (id.to_string(), state.to_string()),
        _ => panic!("the example ends with `session ID state STATE`:\n{stdout}"),
    }
}

/// The session the example printed is in review, on the server too, in the
/// project named `project`.
async fn assert_reached_review(env: &TestEnv, stdout: &str, project: &str) {
    let (session_id, state) = printed_session(stdout);
    assert_eq!(
        state, "SESSION_STATE_REVIEW",
        "the example saw review:\n{stdout}"
    );
    let session = env.session(&session_id).await;
    assert_eq!(session.state(), SessionState::Review, "{session:?}");
    assert_eq!(session.status, "iteration_complete_pending_review");
    assert_eq!(session.models, ["simulated"]);
    let named = env
        .gateway()
        .await
        .get_project(GetProjectRequest {
            project_id: session.project_id.clone(),
        })
        .await
        .expect("the example's project")
        .into_inner()
        .name;
    assert_eq!(
        named, project,
        "the session is in the project the example created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_and_typescript_clients_run_a_session_to_review() {
    if skipped() {
        return;
    }
    let python = python();
    let mut env = TestEnv::new().await;
    // gRPC-Web over HTTP/1.1, the TypeScript client's transport, is served
    // once an origin is listed; node's fetch sends no Origin, so any will do.
    env.settings.gateway.web_origins = "http://127.0.0.1".into();
    env.start_all().await;

    let mut command = tokio::process::Command::new(python);
    command
        .arg("clients/python/example.py")
        .env("PYTHONPATH", repo().join("clients/python/gen"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let stdout = run_example(&env, &mut command, "Python").await;
    assert_reached_review(&env, &stdout, "From Python").await;

    let bundle =
        std::env::temp_dir().join(format!("dialectic-example-{}.mjs", uuid::Uuid::new_v4()));
    let bundled = tokio::process::Command::new(repo().join("deploy/clients.sh"))
        .arg("bundle-example")
        .arg(&bundle)
        .status()
        .await
        .expect("deploy/clients.sh runs");
    assert!(
        bundled.success(),
        "deploy/clients.sh bundle-example: {bundled}"
    );
    let mut command = tokio::process::Command::new("node");
    command.arg(&bundle);
    let stdout = run_example(&env, &mut command, "TypeScript").await;
    // Best effort: a leftover bundle in the temp directory harms nothing.
    let _ = std::fs::remove_file(&bundle);
    assert_reached_review(&env, &stdout, "From TypeScript").await;
    env.teardown().await;
}
