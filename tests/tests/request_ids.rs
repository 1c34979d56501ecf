//! Issue 61, items 3 and 5. Every answer names its call: `x-request-id` in a
//! response's headers, and an error's google.rpc.RequestInfo and trailer;
//! a client's own plain id is kept, anything else replaced. A refusal a
//! retry can cure says when (RetryInfo), one it cannot does not. The CLI
//! prints the id of a refused call, and the gateway's log line for that
//! call holds it. GetServerInfo, and `dialectic version` through the real
//! binary, tell the release, the API, and the limits this gateway enforces.

use dialectic_e2e::{GatewayClient, TestEnv, against_gateway, workspace_binary};
use dialectic_proto::v1::{
    CreateProjectRequest, GetProjectRequest, GetServerInfoRequest, StartSessionRequest,
    WatchSessionRequest,
};
use dialectic_runtime::error_status::{REQUEST_ID, StatusExt};
use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tonic::Code;
use tonic::metadata::MetadataMap;
use tracing_subscriber::fmt::MakeWriter;

/// The in-process gateway's log lines, as its process would print them.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("log buffer poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// One subscriber for this test binary, installed before any service runs.
fn gateway_logs() -> Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        tracing_subscriber::fmt()
            .with_env_filter("warn,dialectic_gateway=info")
            .with_writer(logs.clone())
            .with_ansi(false)
            .init();
        logs
    })
    .clone()
}

fn header(metadata: &MetadataMap) -> Option<String> {
    metadata
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn project_named(client: &mut GatewayClient, request_id: Option<&str>) -> MetadataMap {
    let mut request = tonic::Request::new(CreateProjectRequest {
        name: "Named calls".into(),
        initial_user_prompt: "A tool library for a small town.".into(),
        ..Default::default()
    });
    if let Some(id) = request_id {
        request
            .metadata_mut()
            .insert(REQUEST_ID, id.parse().expect("ascii id"));
    }
    client
        .create_project(request)
        .await
        .expect("project")
        .metadata()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_answer_names_its_call_and_a_curable_refusal_says_when_to_retry() {
    let logs = gateway_logs();
    let mut env = TestEnv::new().await;
    env.settings.gateway.max_watches_per_user = 1;
    // No planner: the session stays pending, so its watch stream never ends.
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;

    // A success names its call: a fresh UUIDv7, or the client's own plain id.
    let minted = header(&project_named(&mut client, None).await).expect("x-request-id");
    let minted_uuid = uuid::Uuid::parse_str(&minted).expect("a UUID");
    assert_eq!(minted_uuid.get_version_num(), 7, "{minted}");
    let kept = header(&project_named(&mut client, Some("ticket-42.a:b_c")).await);
    assert_eq!(kept.as_deref(), Some("ticket-42.a:b_c"));
    let replaced =
        header(&project_named(&mut client, Some("two words")).await).expect("x-request-id");
    assert!(uuid::Uuid::parse_str(&replaced).is_ok(), "{replaced}");

    // A refusal a retry cannot cure names its call and asks for no retry.
    let unknown = uuid::Uuid::now_v7().to_string();
    let missing = client
        .get_project(GetProjectRequest {
            project_id: unknown.clone(),
        })
        .await
        .expect_err("no such project");
    assert_eq!(missing.code(), Code::NotFound);
    let named = missing.get_details_request_info().map(|i| i.request_id);
    assert!(
        named.as_deref().is_some_and(|id| !id.is_empty()),
        "{missing:?}"
    );
    assert_eq!(named, header(missing.metadata()), "{missing:?}");
    assert!(missing.get_details_retry_info().is_none(), "{missing:?}");

    // One the end of a stream cures asks for a retry after 5 s.
    let project = client
        .create_project(CreateProjectRequest {
            name: "Watched".into(),
            initial_user_prompt: "A tool library for a small town.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    let session = client
        .start_session(StartSessionRequest {
            project_id: project.id,
            models: vec!["simulated".into()],
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner();
    let watch = || WatchSessionRequest {
        session_id: session.id.clone(),
        after_sequence: None,
    };
    let _open = client.watch_session(watch()).await.expect("first watch");
    let refused = client
        .watch_session(watch())
        .await
        .expect_err("past the cap");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        refused.get_details_retry_info().and_then(|r| r.retry_delay),
        Some(Duration::from_secs(5)),
        "{refused:?}"
    );
    assert!(refused.get_details_request_info().is_some(), "{refused:?}");

    // The CLI prints a refused call's id, and the gateway logged that call under it.
    let cli = workspace_binary("dialectic-cli", "dialectic");
    let mut command = tokio::process::Command::new(&cli);
    let output = against_gateway(&mut command, &env)
        .args(["project", "show", "--project", &unknown])
        .output()
        .await
        .expect("dialectic runs");
    assert_eq!(output.status.code(), Some(66), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let id = stderr
        .split("[request id ")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_else(|| panic!("no request id in {stderr:?}"))
        .to_string();
    let logged = logs
        .text()
        .lines()
        .filter(|line| line.contains(&id))
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert!(
        logged
            .iter()
            .any(|line| line.contains("call failed") && line.contains("get_project")),
        "the gateway's log has no line for request {id}: {logged:?}"
    );
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_server_says_what_it_runs_and_the_cli_shows_both_versions() {
    gateway_logs();
    let mut env = TestEnv::new().await;
    env.settings.gateway.max_projects_per_user = 7;
    env.settings.gateway.max_upload_pages = 3;
    env.settings.gateway.web_origins = "https://app.example.com".into();
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let info = client
        .get_server_info(GetServerInfoRequest {})
        .await
        .expect("server info")
        .into_inner();
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(info.api, "dialectic.v1");
    assert!(!info.build.is_empty());
    assert!(info.features.iter().any(|f| f == "grpc_web"), "{info:?}");
    assert!(!info.features.iter().any(|f| f == "tls"), "{info:?}");
    let limits = info.limits.expect("limits");
    assert_eq!(
        (limits.max_projects_per_user, limits.max_upload_pages),
        (7, 3)
    );
    assert_eq!(limits.max_page_size, 200);

    let cli = workspace_binary("dialectic-cli", "dialectic");
    let mut command = tokio::process::Command::new(&cli);
    let output = against_gateway(&mut command, &env)
        .arg("version")
        .output()
        .await
        .expect("dialectic runs");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    let version = env!("CARGO_PKG_VERSION");
    assert!(text.contains(&format!("client: {version}\n")), "{text}");
    assert!(
        text.contains(&format!(
            "server: {version} (build {}, api dialectic.v1)\n",
            info.build
        )),
        "{text}"
    );

    let mut command = tokio::process::Command::new(&cli);
    let output = against_gateway(&mut command, &env)
        .args(["version", "--output", "json"])
        .output()
        .await
        .expect("dialectic runs");
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(json["client"]["version"], version);
    assert_eq!(json["server"]["limits"]["max_projects_per_user"], "7");
    assert_eq!(json["server"]["limits"]["max_upload_pages"], 3);
    // With the gateway gone, the client's release still prints, then the failure.
    let mut command = tokio::process::Command::new(&cli);
    against_gateway(&mut command, &env).arg("version");
    env.stop("gateway").await;
    let output = command.output().await.expect("dialectic runs");
    assert_eq!(output.status.code(), Some(69), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(text, format!("client: {version}\n"));
    env.teardown().await;
}
