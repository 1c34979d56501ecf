//! Browsers reach the API (issue 42): the gateway answers gRPC-Web over
//! HTTP/1.1 on its gRPC port — a unary call, an error with its status, and
//! `WatchSession`'s server stream — and CORS admits exactly the configured
//! origins. The requests are what a browser's gRPC-Web client sends.

use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{
    ListProjectsRequest, ListProjectsResponse, SessionEvent, WatchSessionRequest,
};
use futures::StreamExt;
use prost::Message;

const PAGE: &str = "http://page.example";
const OTHER_PAGE: &str = "http://elsewhere.example";
const GRPC_WEB: &str = "application/grpc-web+proto";
/// The flag of a gRPC-Web frame that holds the trailers.
const TRAILERS: u8 = 0x80;

/// A gRPC-Web message frame: flag, big-endian length, message.
fn frame(message: &impl Message) -> Vec<u8> {
    let body = message.encode_to_vec();
    let mut out = vec![0];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Splits a gRPC-Web body into (flag, payload) frames; None when it ends
/// inside a frame (a stream read so far).
fn frames(body: &[u8]) -> Option<Vec<(u8, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let header = rest.get(..5)?;
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let payload = rest.get(5..5 + len)?;
        out.push((header[0], payload.to_vec()));
        rest = &rest[5 + len..];
    }
    Some(out)
}

async fn call(
    http: &reqwest::Client,
    env: &TestEnv,
    method: &str,
    key: Option<&str>,
    message: &impl Message,
) -> reqwest::Response {
    let mut request = http
        .post(format!(
            "http://{}/dialectic.v1.DialecticService/{method}",
            env.addr("gateway")
        ))
        .header("content-type", GRPC_WEB)
        .header("x-grpc-web", "1")
        .header("origin", PAGE)
        .body(frame(message));
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    request.send().await.expect("gRPC-Web request")
}

/// The grpc-status of a gRPC-Web answer: in its headers (trailers-only) or
/// in its trailer frame.
fn status_of(headers: &reqwest::header::HeaderMap, frames: &[(u8, Vec<u8>)]) -> Option<String> {
    if let Some(status) = headers.get("grpc-status") {
        return status.to_str().ok().map(str::to_string);
    }
    let (_, trailers) = frames.iter().find(|(flag, _)| flag & TRAILERS != 0)?;
    String::from_utf8_lossy(trailers)
        .lines()
        .find_map(|l| l.strip_prefix("grpc-status:").map(|v| v.trim().to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_browser_calls_the_gateway_through_grpc_web() {
    let mut env = TestEnv::new().await;
    env.settings.gateway.web_origins = PAGE.into();
    env.start_all().await;
    let key = env.settings.gateway.bootstrap_key.clone();
    let (project_id, session_id) = env
        .new_session("A tool library for a village.", &["simulated"], false)
        .await;
    let http = reqwest::Client::builder()
        .http1_only()
        .build()
        .expect("an HTTP/1.1 client");

    // A unary call: the project, and the page may read the answer.
    let answer = call(
        &http,
        &env,
        "ListProjects",
        Some(&key),
        &ListProjectsRequest::default(),
    )
    .await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["content-type"], GRPC_WEB);
    assert_eq!(answer.headers()["access-control-allow-origin"], PAGE);
    let headers = answer.headers().clone();
    let body = answer.bytes().await.expect("body");
    let got = frames(&body).expect("whole frames");
    assert_eq!(status_of(&headers, &got).as_deref(), Some("0"));
    let listed = ListProjectsResponse::decode(got[0].1.as_slice()).expect("a ListProjectsResponse");
    assert!(
        listed.projects.iter().any(|p| p.id == project_id),
        "the project is listed: {listed:?}"
    );

    // An error keeps its status: no key is UNAUTHENTICATED (16).
    let refused = call(
        &http,
        &env,
        "ListProjects",
        None,
        &ListProjectsRequest::default(),
    )
    .await;
    let headers = refused.headers().clone();
    let body = refused.bytes().await.expect("body");
    let got = frames(&body).expect("whole frames");
    assert_eq!(status_of(&headers, &got).as_deref(), Some("16"));

    // A server stream over HTTP/1.1: WatchSession's first event is the session's snapshot.
    let watch = WatchSessionRequest {
        session_id: session_id.clone(),
        after_sequence: None,
    };
    let stream = call(&http, &env, "WatchSession", Some(&key), &watch).await;
    assert_eq!(stream.status(), 200);
    let mut chunks = stream.bytes_stream();
    let mut read = Vec::new();
    let first = loop {
        let chunk = chunks
            .next()
            .await
            .expect("the stream goes on")
            .expect("chunk");
        read.extend_from_slice(&chunk);
        if let Some(first) = frames(&read).and_then(|f| f.into_iter().next()) {
            break first;
        }
    };
    assert_eq!(first.0, 0, "a message, not the trailers");
    let event = SessionEvent::decode(first.1.as_slice()).expect("a SessionEvent");
    assert_eq!(event.session_id, session_id);
    drop(chunks);

    // CORS: the configured origin's preflight passes, another origin's does not.
    for (origin, admitted) in [(PAGE, true), (OTHER_PAGE, false)] {
        let preflight = http
            .request(
                reqwest::Method::OPTIONS,
                format!(
                    "http://{}/dialectic.v1.DialecticService/ListProjects",
                    env.addr("gateway")
                ),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type,x-grpc-web",
            )
            .send()
            .await
            .expect("preflight");
        let allowed = preflight
            .headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap_or_default().to_string());
        assert_eq!(allowed.as_deref(), admitted.then_some(origin), "{origin}");
        if admitted {
            let exposed = preflight.headers().get("access-control-allow-headers");
            assert!(exposed.is_some(), "the page may send its key and framing");
        }
    }
    env.teardown().await;
}
