//! The public port's metrics stay bounded whatever clients send: requests are
//! counted by the method they name only when the server serves it, so paths
//! made up by an unauthenticated client all land in one `unknown` series.

use dialectic_e2e::TestEnv;
use dialectic_telemetry::metrics;
use tonic::codegen::http::uri::PathAndQuery;

const SERIES: [&str; 2] = [
    "dialectic_grpc_requests_total{",
    "dialectic_grpc_request_duration_seconds_count{",
];

/// How many series of the gRPC request metrics this process exposes.
fn grpc_series() -> usize {
    metrics::render()
        .lines()
        .filter(|l| SERIES.iter().any(|s| l.starts_with(s)))
        .count()
}

/// Calls `path` with an empty message; whatever the answer, the call was served.
async fn call(grpc: &mut tonic::client::Grpc<tonic::transport::Channel>, path: &str) {
    grpc.ready().await.expect("connection ready");
    let path = PathAndQuery::try_from(path).expect("a valid path");
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    let refused = grpc
        .unary(tonic::Request::new(()), path, codec)
        .await
        .expect_err("no such method");
    assert_ne!(refused.code(), tonic::Code::Ok);
}

fn random_path() -> String {
    let (a, b) = (uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    format!("/{a}.Service/{b}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_made_up_paths_add_no_series() {
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", env.addr("gateway")))
            .expect("gateway address")
            .connect()
            .await
            .expect("gateway connects");
    let mut grpc = tonic::client::Grpc::new(channel);

    // The first unknown path makes the one series unknown paths share.
    call(&mut grpc, &random_path()).await;
    let before = grpc_series();
    for _ in 0..999 {
        call(&mut grpc, &random_path()).await;
    }
    assert_eq!(grpc_series(), before, "made-up paths added series");
    let page = metrics::render();
    let unknown = page
        .lines()
        .find(|l| l.starts_with(SERIES[0]) && l.contains("method=\"unknown\""))
        .expect("an unknown-method series");
    let count: f64 = unknown
        .rsplit_once(' ')
        .and_then(|(_, v)| v.parse().ok())
        .expect("a sample");
    assert!(
        count >= 1000.0,
        "every made-up path counted as unknown: {unknown}"
    );
    env.teardown().await;
}
