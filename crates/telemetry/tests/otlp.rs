//! The OTLP span exporter against collector stand-ins on loopback: gRPC over
//! TLS with a private CA (`OTEL_EXPORTER_OTLP_CERTIFICATE`'s file), and
//! HTTP/protobuf (`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`) posting to
//! `/v1/traces`, as the OTLP specification describes them
//! (<https://opentelemetry.io/docs/specs/otlp/#otlphttp-request>). The CA
//! and the collector's certificate are made with the `openssl` command.

use dialectic_telemetry::otlp::{ExportSettings, Protocol, span_exporter};
use opentelemetry::trace::{Tracer, TracerProvider as _};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_sdk::trace::SdkTracerProvider;
use prost::Message;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Names of the spans a collector stand-in was sent, and how each request came.
#[derive(Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<String>>>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Received {
    fn keep(&self, request: ExportTraceServiceRequest) {
        let names = request
            .resource_spans
            .into_iter()
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .map(|s| s.name);
        self.spans.lock().expect("spans").extend(names);
    }

    fn spans(&self) -> Vec<String> {
        self.spans.lock().expect("spans").clone()
    }
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.keep(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command runs");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// In a fresh directory: `ca.pem`, and `tls.crt`/`tls.key` for 127.0.0.1
/// signed by it.
fn certificates() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dialectic-otlp-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
    ca.extend(["-subj", "/CN=otlp test CA"]);
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    openssl(&dir, &ca);
    let mut leaf = vec!["req", "-new", "-nodes", "-subj", "/CN=collector"];
    leaf.extend(ec);
    leaf.extend(["-keyout", "tls.key", "-out", "tls.csr"]);
    openssl(&dir, &leaf);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("extensions");
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "tls.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
            "-out",
            "tls.crt",
        ],
    );
    dir
}

/// A gRPC collector serving TLS with `dir`'s certificate; its endpoint.
async fn tls_collector(dir: &Path, received: Received) -> String {
    use tonic::transport::{Identity, Server, ServerTlsConfig};
    // As a service process does (the gateway's TLS, the exporter's).
    let _ = rustls::crypto::CryptoProvider::install_default(
        rustls::crypto::aws_lc_rs::default_provider(),
    );
    let read = |name: &str| std::fs::read(dir.join(name)).expect(name);
    let identity = Identity::from_pem(read("tls.crt"), read("tls.key"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("port");
    let endpoint = format!("https://{}", listener.local_addr().expect("addr"));
    let mut server = Server::builder()
        .tls_config(ServerTlsConfig::new().identity(identity))
        .expect("tls");
    tokio::spawn(async move {
        let _ = server
            .add_service(TraceServiceServer::new(received))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await;
    });
    endpoint
}

/// An OTLP/HTTP collector: answers each POST with 200 after decoding its
/// protobuf body; its base URL.
async fn http_collector(received: Received) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("port");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let received = received.clone();
            tokio::spawn(async move {
                let Some((head, body)) = read_request(&mut socket).await else {
                    return;
                };
                if let Ok(request) = ExportTraceServiceRequest::decode(body.as_slice()) {
                    received.keep(request);
                }
                received.heads.lock().expect("heads").push(head);
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n\
                          Content-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    base
}

/// One HTTP/1.1 request: its head, and its body by Content-Length.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        let n = socket.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < end + length {
        let n = socket.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    }
    Some((head, buffer[end..end + length].to_vec()))
}

/// Ends one span named `name` through an exporter to `endpoint` and flushes
/// it; whether the flush (the export) succeeded.
async fn export_one(endpoint: &str, settings: ExportSettings, name: &'static str) -> bool {
    let exporter = span_exporter(endpoint, &settings).expect("exporter");
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();
    provider.tracer("test").in_span(name, |_| {});
    // The batch processor exports on a thread of its own; wait for it off
    // the runtime's threads.
    tokio::task::spawn_blocking(move || {
        let flushed = provider.force_flush().is_ok();
        let _ = provider.shutdown();
        flushed
    })
    .await
    .expect("flush")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_grpc_collector_signed_by_the_given_ca_receives_spans() {
    let dir = certificates();
    let received = Received::default();
    let endpoint = tls_collector(&dir, received.clone()).await;
    let ca_pem = Some(std::fs::read(dir.join("ca.pem")).expect("ca"));

    // Without the CA the collector's certificate is not trusted: nothing goes.
    let untrusted = ExportSettings {
        protocol: Protocol::Grpc,
        ca_pem: None,
    };
    assert!(!export_one(&endpoint, untrusted, "untrusted").await);
    assert!(received.spans().is_empty(), "{:?}", received.spans());

    let trusted = ExportSettings {
        protocol: Protocol::Grpc,
        ca_pem,
    };
    assert!(export_one(&endpoint, trusted, "over tls").await);
    assert_eq!(received.spans(), ["over tls"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_protobuf_collector_receives_spans_at_v1_traces() {
    let received = Received::default();
    let base = http_collector(received.clone()).await;
    let settings = ExportSettings {
        protocol: Protocol::HttpProtobuf,
        ca_pem: None,
    };
    assert!(export_one(&base, settings, "over http").await);
    assert_eq!(received.spans(), ["over http"]);
    let heads = received.heads.lock().expect("heads").clone();
    let [head] = heads.as_slice() else {
        panic!("one request: {heads:?}");
    };
    assert!(head.starts_with("POST /v1/traces HTTP/1.1"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/x-protobuf"),
        "{head}"
    );
}
