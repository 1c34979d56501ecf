//! What makes a service observable from outside: the `/metrics` listener, the
//! gRPC server layer that counts and times every request and continues the
//! caller's trace (W3C `traceparent` in the request metadata), and the client
//! interceptor that sends the current trace along with outgoing calls. Requests
//! are counted twice while dashboards move: under the `dialectic_grpc_*` names
//! and under the grpc-ecosystem ones (`grpc_server_*`, code names such as `OK`).

use crate::RuntimeError;
use dialectic_telemetry::metrics;
use prost::Message;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::Instrument;

/// Serves the Prometheus text format on `GET /metrics` at `listen` (plain
/// HTTP/1.1, one request per connection: scrapers need nothing more). Returns
/// the bound address; the listener lives as long as the process.
pub async fn serve_metrics(listen: &str) -> Result<SocketAddr, RuntimeError> {
    let (listener, addr) = crate::bind(listen).await?;
    tracing::info!(%addr, "metrics listening on /metrics");
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(async move {
                        // A client that never finishes its request must not hold a task forever.
                        let _ = tokio::time::timeout(Duration::from_secs(10), answer(stream)).await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(addr)
}

/// Starts the metrics listener when `telemetry.metrics_listen` is set.
pub async fn serve_configured_metrics(
    settings: &dialectic_config::Settings,
) -> Result<Option<SocketAddr>, RuntimeError> {
    metrics::set_build_info(crate::build_info::VERSION, crate::build_info::commit());
    let listen = settings.telemetry.metrics_listen.trim();
    if listen.is_empty() {
        return Ok(None);
    }
    serve_metrics(listen).await.map(Some)
}

async fn answer(mut stream: TcpStream) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 * 1024 {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&request);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, content_type, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", metrics::CONTENT_TYPE, metrics::render()),
        ("GET", _) => ("404 Not Found", "text/plain", "try /metrics\n".to_string()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n".to_string(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// The label a request's method gets in metrics and spans for anything the
/// server does not serve: a client may send any path, and each distinct label
/// value is a series kept forever.
pub const UNKNOWN_METHOD: &str = "unknown";

/// The gRPC paths (`/package.Service/Method`) one server answers: its own
/// service's methods, read from the descriptors it is built from, plus health
/// and reflection.
#[derive(Debug, Clone)]
pub struct KnownMethods(Arc<HashMap<Arc<str>, GrpcMethod>>);

/// A method's labels under the grpc-ecosystem names (go-grpc-middleware's
/// Prometheus provider, what off-the-shelf gRPC dashboards and SLOs read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcMethod {
    /// `unary`, `client_stream`, `server_stream` or `bidi_stream`.
    pub grpc_type: &'static str,
    pub service: Arc<str>,
    pub method: Arc<str>,
}

impl GrpcMethod {
    fn unknown() -> Self {
        Self {
            grpc_type: UNKNOWN_METHOD,
            service: Arc::from(UNKNOWN_METHOD),
            method: Arc::from(UNKNOWN_METHOD),
        }
    }
}

fn grpc_type(method: &prost_types::MethodDescriptorProto) -> &'static str {
    match (method.client_streaming(), method.server_streaming()) {
        (false, false) => "unary",
        (true, false) => "client_stream",
        (false, true) => "server_stream",
        (true, true) => "bidi_stream",
    }
}

impl KnownMethods {
    /// Every method of `service` (a full name such as
    /// `dialectic.v1.wallet.WalletService`), health and reflection.
    pub fn serving(service: &str) -> Self {
        let mut paths = HashMap::new();
        let served = [
            (dialectic_proto::FILE_DESCRIPTOR_SET, Some(service)),
            (tonic_health::pb::FILE_DESCRIPTOR_SET, None),
            (tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET, None),
            (tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET, None),
        ];
        for (encoded, only) in served {
            // The sets are compiled in; one that does not decode serves nothing.
            let Ok(set) = prost_types::FileDescriptorSet::decode(encoded) else {
                continue;
            };
            for file in &set.file {
                for svc in &file.service {
                    let full = format!("{}.{}", file.package(), svc.name());
                    if only.is_some_and(|only| only != full) {
                        continue;
                    }
                    let service: Arc<str> = Arc::from(full.as_str());
                    paths.extend(svc.method.iter().map(|m| {
                        let path = Arc::from(format!("/{full}/{}", m.name()));
                        let labels = GrpcMethod {
                            grpc_type: grpc_type(m),
                            service: service.clone(),
                            method: Arc::from(m.name()),
                        };
                        (path, labels)
                    }));
                }
            }
        }
        Self(Arc::new(paths))
    }

    /// `path` itself when this server serves it, else [`UNKNOWN_METHOD`].
    pub fn label(&self, path: &str) -> Arc<str> {
        self.0
            .get_key_value(path)
            .map(|(path, _)| path.clone())
            .unwrap_or_else(|| Arc::from(UNKNOWN_METHOD))
    }

    /// `path`'s grpc-ecosystem labels, all [`UNKNOWN_METHOD`] for a path
    /// this server does not serve.
    pub fn grpc(&self, path: &str) -> GrpcMethod {
        self.0
            .get(path)
            .cloned()
            .unwrap_or_else(GrpcMethod::unknown)
    }
}

/// Tower layer for the gRPC server: per-request metrics and trace continuation.
#[derive(Clone)]
pub struct GrpcObserveLayer {
    service: Arc<str>,
    known: KnownMethods,
}

impl GrpcObserveLayer {
    /// Labels requests to `service` by the methods it serves.
    pub fn new(service: &str) -> Self {
        Self {
            service: Arc::from(service),
            known: KnownMethods::serving(service),
        }
    }
}

impl<S> tower::Layer<S> for GrpcObserveLayer {
    type Service = GrpcObserve<S>;
    fn layer(&self, inner: S) -> Self::Service {
        GrpcObserve {
            inner,
            service: self.service.clone(),
            known: self.known.clone(),
        }
    }
}

#[derive(Clone)]
pub struct GrpcObserve<S> {
    inner: S,
    service: Arc<str>,
    known: KnownMethods,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, RB> tower::Service<http::Request<B>> for GrpcObserve<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The clone is the one that was not polled ready; keep the ready one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let service = self.service.clone();
        // Labelled before authentication, so only by what this server serves.
        let method = self.known.label(request.uri().path());
        let grpc = self.known.grpc(request.uri().path());
        let grpc_labels = [grpc.grpc_type, &*grpc.service, &*grpc.method];
        metrics::GRPC_SERVER_STARTED.inc(&grpc_labels);
        // Probes hit health every few seconds; a trace each would drown real ones.
        let traced =
            !method.starts_with("/grpc.health.") && !method.starts_with("/grpc.reflection.");
        let span = if traced {
            let span = tracing::info_span!(
                "grpc.request",
                otel.name = %method,
                otel.kind = "server",
                rpc.system = "grpc",
                service = &*service,
                trace_id = tracing::field::Empty,
            );
            let traceparent = request
                .headers()
                .get(dialectic_telemetry::TRACEPARENT)
                .and_then(|v| v.to_str().ok());
            dialectic_telemetry::adopt_traceparent(&span, traceparent);
            span
        } else {
            tracing::Span::none()
        };
        let started = Instant::now();
        let future = span.in_scope(|| inner.call(request));
        Box::pin(
            async move {
                let result = future.await;
                // Errors returned by a handler come back "trailers-only": the
                // status is in the headers. Without it the call went on to
                // stream its answer, and its final status is in the trailers.
                let code = match &result {
                    Ok(response) => response
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("0")
                        .to_string(),
                    Err(_) => "transport".to_string(),
                };
                let seconds = started.elapsed().as_secs_f64();
                metrics::GRPC_REQUESTS.inc(&[&service, &method, &code]);
                metrics::GRPC_DURATION.observe(&[&service, &method], seconds);
                let grpc_labels = [grpc.grpc_type, &*grpc.service, &*grpc.method];
                let code_name = metrics::grpc_code_name(&code);
                metrics::GRPC_SERVER_HANDLED.inc(&[grpc_labels.as_slice(), &[code_name]].concat());
                metrics::GRPC_SERVER_HANDLING_SECONDS.observe(&grpc_labels, seconds);
                result
            }
            .instrument(span),
        )
    }
}

/// Sends the current span's trace context with every outgoing gRPC call, so
/// the callee's spans join the caller's trace.
#[derive(Clone, Copy, Default)]
pub struct TraceInterceptor;

impl tonic::service::Interceptor for TraceInterceptor {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(tp) = dialectic_telemetry::current_traceparent()
            && let Ok(value) = tp.parse()
        {
            request
                .metadata_mut()
                .insert(dialectic_telemetry::TRACEPARENT, value);
        }
        Ok(request)
    }
}

/// A client channel that carries the caller's trace.
pub type TracedChannel =
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, TraceInterceptor>;

pub fn traced(channel: tonic::transport::Channel) -> TracedChannel {
    tonic::service::interceptor::InterceptedService::new(channel, TraceInterceptor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_labels_its_own_methods_and_nothing_else() {
        let wallet = KnownMethods::serving("dialectic.v1.wallet.WalletService");
        for served in [
            "/dialectic.v1.wallet.WalletService/Hold",
            "/grpc.health.v1.Health/Check",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        ] {
            assert_eq!(&*wallet.label(served), served);
        }
        let labels = |path: &str| {
            let grpc = wallet.grpc(path);
            (
                grpc.grpc_type,
                grpc.service.to_string(),
                grpc.method.to_string(),
            )
        };
        let expected = |grpc_type, service: &str, method: &str| {
            (grpc_type, service.to_string(), method.to_string())
        };
        assert_eq!(
            labels("/dialectic.v1.wallet.WalletService/Hold"),
            expected("unary", "dialectic.v1.wallet.WalletService", "Hold")
        );
        assert_eq!(
            labels("/grpc.health.v1.Health/Watch"),
            expected("server_stream", "grpc.health.v1.Health", "Watch")
        );
        assert_eq!(
            labels("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            expected(
                "bidi_stream",
                "grpc.reflection.v1.ServerReflection",
                "ServerReflectionInfo"
            )
        );
        for other in [
            "/dialectic.v1.wallet.WalletService/Mint",
            "/dialectic.v1.planner.PlannerService/Pause",
            "/dialectic.v1.wallet.WalletService/Hold/",
            "/x7f3a",
            "",
        ] {
            assert_eq!(&*wallet.label(other), UNKNOWN_METHOD, "{other}");
            assert_eq!(wallet.grpc(other), GrpcMethod::unknown(), "{other}");
        }
    }
}
