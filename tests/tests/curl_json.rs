//! Issue 61 item 2: every unary RPC is an HTTP POST with a JSON body on the
//! gateway's port (Connect's unary protocol), through the same stack as
//! gRPC. README's curl example runs here as written, with the real `curl`;
//! errors come back as Connect's JSON error under the HTTP status their code
//! maps to, naming the call in `x-request-id` and a RequestInfo detail.

use dialectic_e2e::{TestEnv, against_gateway};
use dialectic_proto::v1::{GetProjectRequest, ListProjectsRequest, ListProjectsResponse};
use prost::Message;
use serde_json::{Value, json};

const SERVICE: &str = "dialectic.v1.DialecticService";
/// What README.md puts right before the example this test runs.
const README_MARK: &str = "<!-- run by tests/tests/curl_json.rs -->";

/// The shell block that follows [`README_MARK`] in README.md.
fn readme_example() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let readme = std::fs::read_to_string(path).expect("README.md");
    let (_, after) = readme
        .split_once(README_MARK)
        .expect("README marks its curl example");
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block.to_string())
        .expect("a ```sh block after the mark");
    assert!(
        block.contains("curl "),
        "the marked block is a curl call: {block}"
    );
    block
}

/// POSTs `body` as JSON to `method`, as curl would (HTTP/1.1).
async fn post(
    http: &reqwest::Client,
    env: &TestEnv,
    method: &str,
    key: Option<&str>,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut request = http
        .post(format!("http://{}/{SERVICE}/{method}", env.addr("gateway")))
        .header("content-type", "application/json")
        .body(body);
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("an HTTP answer");
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let body = response.bytes().await.expect("the body").to_vec();
    (status, headers, body)
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

fn header<'h>(headers: &'h reqwest::header::HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The `debug` of the detail of type `kind` in a Connect error.
fn detail<'e>(error: &'e Value, kind: &str) -> Option<&'e Value> {
    error["details"]
        .as_array()?
        .iter()
        .find(|d| d["type"] == kind)
        .map(|d| &d["debug"])
}

/// A Connect error: its code, its reason and the request id it names, which
/// must be the `x-request-id` header too.
fn refusal(
    status: u16,
    headers: &reqwest::header::HeaderMap,
    body: &[u8],
) -> (u16, String, String, String) {
    assert_eq!(header(headers, "content-type"), Some("application/json"));
    let error = json_of(body);
    let request_id = detail(&error, "google.rpc.RequestInfo")
        .and_then(|d| d["requestId"].as_str())
        .unwrap_or_else(|| panic!("no RequestInfo: {error}"))
        .to_string();
    assert_eq!(
        header(headers, "x-request-id"),
        Some(request_id.as_str()),
        "{error}"
    );
    let info =
        detail(&error, "google.rpc.ErrorInfo").unwrap_or_else(|| panic!("no ErrorInfo: {error}"));
    assert_eq!(info["domain"], "dialectic.dev", "{error}");
    let code = error["code"].as_str().unwrap_or_default().to_string();
    let reason = info["reason"].as_str().unwrap_or_default().to_string();
    (status, code, reason, request_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readme_curl_example_creates_a_project_and_errors_are_connect_json() {
    let mut env = TestEnv::new().await;
    env.settings.gateway.max_message_bytes = 64 * 1024;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let key = env.settings.gateway.bootstrap_key.clone();
    let mut grpc = env.gateway().await;

    // README's example, through the real curl, against this gateway.
    let output = against_gateway(
        tokio::process::Command::new("sh")
            .arg("-c")
            .arg(readme_example()),
        &env,
    )
    .output()
    .await
    .expect("sh runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "curl failed: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let project = json_of(&output.stdout);
    assert_eq!(project["name"], "x", "{project}");
    assert!(
        project["created_at"]
            .as_str()
            .is_some_and(|t| t.contains('T')),
        "{project}"
    );
    let id = project["id"].as_str().expect("an id").to_string();
    let stored = grpc
        .get_project(GetProjectRequest {
            project_id: id.clone(),
        })
        .await
        .expect("the project curl made is there over gRPC")
        .into_inner();
    assert_eq!(
        (stored.name.as_str(), stored.id.as_str()),
        ("x", id.as_str())
    );

    let http = reqwest::Client::builder()
        .http1_only()
        .build()
        .expect("an HTTP/1.1 client");

    // A success names its call too; every field is present, by .proto name.
    let (status, headers, body) = post(
        &http,
        &env,
        "GetProject",
        Some(&key),
        &[("x-request-id", "ticket-7")],
        json!({ "project_id": id }).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&headers, "x-request-id"), Some("ticket-7"));
    assert_eq!(json_of(&body)["pipeline"], stored.pipeline);

    // An unknown project: 404, Connect's not_found, the caller's own id kept.
    let unknown = uuid::Uuid::new_v4().to_string();
    let (status, headers, body) = post(
        &http,
        &env,
        "GetProject",
        Some(&key),
        &[("x-request-id", "ticket-8")],
        json!({ "project_id": unknown }).to_string(),
    )
    .await;
    let (status, code, reason, request_id) = refusal(status, &headers, &body);
    assert_eq!(
        (status, code.as_str(), request_id.as_str()),
        (404, "not_found", "ticket-8"),
        "{reason}"
    );
    assert!(!reason.is_empty());

    // No key: 401, a minted UUIDv7 as the id.
    let (status, headers, body) = post(&http, &env, "ListProjects", None, &[], "{}").await;
    let (status, code, _, request_id) = refusal(status, &headers, &body);
    assert_eq!((status, code.as_str()), (401, "unauthenticated"));
    assert!(uuid::Uuid::parse_str(&request_id).is_ok(), "{request_id}");

    // A misspelt field is refused, not dropped; so is JSON that is no JSON.
    let (status, headers, body) = post(
        &http,
        &env,
        "CreateProject",
        Some(&key),
        &[],
        r#"{"nmae": "x"}"#,
    )
    .await;
    let (status, code, _, _) = refusal(status, &headers, &body);
    assert_eq!((status, code.as_str()), (400, "invalid_argument"));
    assert!(
        json_of(&body)["message"]
            .as_str()
            .is_some_and(|m| m.contains("nmae"))
    );
    let (status, headers, body) = post(&http, &env, "CreateProject", Some(&key), &[], "{").await;
    assert_eq!(refusal(status, &headers, &body).0, 400);

    // Streams need gRPC; an unknown method is unimplemented too.
    for method in ["WatchSession", "NoSuchMethod"] {
        let (status, headers, body) = post(&http, &env, method, Some(&key), &[], "{}").await;
        let (status, code, _, _) = refusal(status, &headers, &body);
        assert_eq!((status, code.as_str()), (501, "unimplemented"), "{method}");
    }

    // A body over the limit (twice max_message_bytes for JSON) is refused.
    let big = json!({ "name": "big", "initial_user_prompt": "p".repeat(130 * 1024) }).to_string();
    let (status, headers, body) = post(&http, &env, "CreateProject", Some(&key), &[], big).await;
    let (status, code, _, _) = refusal(status, &headers, &body);
    assert_eq!((status, code.as_str()), (429, "resource_exhausted"));

    // The same stack as gRPC: a retried creation with one client_request_id is one project.
    let again =
        json!({ "name": "once", "initial_user_prompt": "p", "client_request_id": "curl-once" })
            .to_string();
    let (_, _, first) = post(&http, &env, "CreateProject", Some(&key), &[], again.clone()).await;
    let (_, _, second) = post(&http, &env, "CreateProject", Some(&key), &[], again).await;
    assert_eq!(json_of(&first)["id"], json_of(&second)["id"]);

    // application/proto: protobuf in and out, same paths.
    let response = http
        .post(format!(
            "http://{}/{SERVICE}/ListProjects",
            env.addr("gateway")
        ))
        .header("content-type", "application/proto")
        .header("authorization", format!("Bearer {key}"))
        .body(ListProjectsRequest::default().encode_to_vec())
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(response.headers(), "content-type"),
        Some("application/proto")
    );
    let listed =
        ListProjectsResponse::decode(response.bytes().await.expect("body")).expect("protobuf");
    assert!(listed.projects.iter().any(|p| p.id == id));

    // The server says it serves JSON.
    let (status, _, body) = post(&http, &env, "GetServerInfo", Some(&key), &[], "").await;
    assert_eq!(status, 200);
    let features = json_of(&body)["features"].clone();
    assert!(
        features
            .as_array()
            .is_some_and(|f| f.contains(&json!("json_api"))),
        "{features}"
    );
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_off_leaves_the_port_to_grpc() {
    let mut env = TestEnv::new().await;
    env.settings.gateway.json_api = false;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let http = reqwest::Client::builder()
        .http1_only()
        .build()
        .expect("client");
    let answer = http
        .post(format!(
            "http://{}/{SERVICE}/ListProjects",
            env.addr("gateway")
        ))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await;
    assert!(
        answer.is_err(),
        "HTTP/1.1 answered with json_api off: {answer:?}"
    );
    env.teardown().await;
}
