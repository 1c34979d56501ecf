//! What every service process shares: signal handling, the gRPC server with
//! health and reflection, readiness that follows the dependencies, connecting
//! with back-off, and the manual-ack consumer loop.

pub mod balance;
pub mod blackboard;
pub mod build_info;
pub mod connect;
mod consumer;
pub mod courier;
pub mod error_status;
pub mod observe;
mod readiness;
mod serve;
pub mod service_auth;
pub mod tls;
pub mod web;
pub mod worker;

pub use consumer::{ConsumerOptions, Disposition, Handler, channel_losses, run_consumer};
pub use courier::Courier;
pub use readiness::{DEPENDENCIES_SERVICE, Dependencies, Health, check_store, spawn_readiness};
pub use serve::Limits;
pub use tokio_util::sync::CancellationToken;

use dialectic_blob::{BlobSettings, BlobStore};
use dialectic_config::Settings;
use dialectic_queue::Topology;
use dialectic_store::{Planning, Store};
use futures::future::BoxFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic_health::ServingStatus;

/// Health service name that reports SERVING whenever the process runs,
/// whatever its dependencies do: use it for Kubernetes liveness probes.
pub const LIVENESS_SERVICE: &str = "dialectic.liveness";

/// How often each process checks its dependencies: often enough for the
/// `dialectic_dependency_up` gauge and `dialectic.dependencies` health to show
/// an outage within seconds, rarely enough that the checks (an S3 bucket
/// HEAD among them) cost nothing worth counting.
const DEPENDENCY_CHECK_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("store: {0}")]
    Store(#[from] dialectic_store::StoreError),
    #[error("configuration: {0}")]
    BadOrigin(#[from] web::BadOrigin),
    #[error("TLS: {0}")]
    Tls(#[from] tls::TlsError),
    #[error("{0}")]
    ServiceKey(#[from] service_auth::ServiceKeyError),
    #[error("{0}")]
    Balance(#[from] balance::BalanceError),
    #[error("Connect JSON: {0}")]
    Connect(#[from] connect::ConnectError),
}

static DRAIN: std::sync::LazyLock<CancellationToken> =
    std::sync::LazyLock::new(CancellationToken::new);

/// Cancelled when this process is asked to take no new work (SIGUSR1, sent by
/// `dialecticd drain` from a Kubernetes preStop hook) before it is stopped.
/// Work in flight goes on; the process keeps running until SIGTERM.
pub fn drain_requested() -> CancellationToken {
    DRAIN.clone()
}

/// A token cancelled by `shutdown` or by a drain request: when to stop taking work.
pub fn stop_taking_work(shutdown: &CancellationToken) -> CancellationToken {
    let stop = shutdown.child_token();
    let (drain, trigger) = (drain_requested(), stop.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = drain.cancelled() => trigger.cancel(),
            _ = trigger.cancelled() => {}
        }
    });
    stop
}

/// Cancels the returned token on the first SIGTERM or SIGINT; a second signal
/// exits at once, for an operator who does not want to wait for the drain.
/// SIGUSR1 only stops new work ([`drain_requested`]).
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    spawn_drain_on_sigusr1();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested; finishing in-flight work");
        trigger.cancel();
        wait_for_signal().await;
        tracing::warn!("second signal; exiting now");
        std::process::exit(130);
    });
    token
}

fn spawn_drain_on_sigusr1() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::user_defined1()) {
            Ok(mut usr1) => {
                tokio::spawn(async move {
                    if usr1.recv().await.is_some() {
                        tracing::info!("drain requested; taking no new work");
                        DRAIN.cancel();
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGUSR1; drain requests are ignored")
            }
        }
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Sleeps for `delay` unless shutdown comes first; false means shut down.
pub async fn sleep_or_shutdown(delay: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(delay) => true,
        _ = shutdown.cancelled() => false,
    }
}

/// Calls `attempt` until it succeeds, backing off exponentially from 200 ms
/// to 5 s, each wait stretched at random by up to as much again (jitter), so
/// processes that lost a dependency together do not come back in step.
/// Returns None when shutdown comes first.
pub async fn retry_with_backoff<T, E, F, Fut>(
    what: &str,
    shutdown: &CancellationToken,
    mut attempt: F,
) -> Option<T>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    use backon::Retryable;
    /// Why a try came to nothing: shutdown ends the retries, a failure does not.
    enum Failure<E> {
        Shutdown,
        Failed(E),
    }
    let backoff = backon::ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(5))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    let try_once = || {
        let pending = (!shutdown.is_cancelled()).then(&mut attempt);
        async move {
            match pending {
                Some(pending) => pending.await.map_err(Failure::Failed),
                None => Err(Failure::Shutdown),
            }
        }
    };
    let token = shutdown.clone();
    try_once
        .retry(backoff)
        .sleep(move |delay| {
            let token = token.clone();
            async move {
                sleep_or_shutdown(delay, &token).await;
            }
        })
        .when(|failure| matches!(failure, Failure::Failed(_)))
        .notify(|failure, delay| {
            if let Failure::Failed(e) = failure {
                tracing::warn!(dependency = what, error = %e, retry_in_ms = delay.as_millis() as u64, "not reachable yet");
            }
        })
        .await
        .ok()
}

pub struct GrpcServer {
    pub addr: SocketAddr,
    pub health: Health,
    pub task: JoinHandle<Result<(), RuntimeError>>,
}

/// Binds `listen` and serves `routes` plus health and reflection until
/// `shutdown`, over HTTP/2 only with the default connection [`Limits`];
/// internal methods admit only callers with a service token signed by
/// `key`. Readiness starts NOT_SERVING; liveness is SERVING at once.
pub async fn start_grpc(
    service: &str,
    listen: &str,
    routes: tonic::service::Routes,
    key: service_auth::ServiceKey,
    shutdown: CancellationToken,
) -> Result<GrpcServer, RuntimeError> {
    serve_grpc(service, listen, routes, key, shutdown, None).await
}

/// How a public port (the gateway's) differs from an internal one.
#[derive(Debug, Default)]
pub struct Public {
    /// Origins whose pages may call through gRPC-Web ([`web`]).
    pub web_origins: Vec<http::HeaderValue>,
    /// Serve TLS only, with this certificate; None: plaintext.
    pub tls: Option<tls::TlsIdentity>,
    /// Also serve the health service alone, in plaintext, on this address,
    /// for probes that cannot speak TLS (the kubelet's).
    pub health_listen: Option<String>,
    /// Deadlines and caps of each connection (`gateway.connections`).
    pub limits: Limits,
    /// Connect's unary calls (JSON over HTTP POST) for these methods
    /// ([`connect`]); None: gRPC and gRPC-Web only.
    pub connect: Option<connect::Procedures>,
}

/// [`start_grpc`] with `public.limits`, TLS when `public.tls` is set, and,
/// when `public.web_origins` names any, gRPC-Web (HTTP/1.1 included) with
/// CORS for those pages ([`web`]); Connect's unary JSON calls (HTTP/1.1
/// included) with `public.connect`; with neither, HTTP/2 gRPC only.
pub async fn start_grpc_web(
    service: &str,
    listen: &str,
    routes: tonic::service::Routes,
    key: service_auth::ServiceKey,
    shutdown: CancellationToken,
    public: Public,
) -> Result<GrpcServer, RuntimeError> {
    serve_grpc(service, listen, routes, key, shutdown, Some(public)).await
}

async fn serve_grpc(
    service: &str,
    listen: &str,
    routes: tonic::service::Routes,
    key: service_auth::ServiceKey,
    shutdown: CancellationToken,
    public: Option<Public>,
) -> Result<GrpcServer, RuntimeError> {
    let public = public.unwrap_or_default();
    let limits = public.limits;
    // No origin, no browser: HTTP/1.1 and gRPC-Web stay off.
    let web_origins = Some(public.web_origins).filter(|o| !o.is_empty());
    let tls = match &public.tls {
        Some(identity) => Some(tls::Handshakes::new(
            identity,
            limits.max_tls_handshakes,
            limits.tls_handshake_timeout,
        )?),
        None => None,
    };
    let secure = tls.is_some();
    let (listener, addr) = bind(listen).await?;
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let health = Health::new(reporter.clone(), service);
    health.set_ready(false).await;
    reporter
        .set_service_status(LIVENESS_SERVICE, ServingStatus::Serving)
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(dialectic_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    // v1alpha too: older clients (grpcurl before 1.9, grpcio-reflection) speak only that.
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(dialectic_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    if let Some(listen) = &public.health_listen {
        serve_health(listen, health_service.clone(), &shutdown).await?;
    }
    let routes = routes
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_v1alpha);
    let connect = public.connect.map(connect::ConnectLayer::new);
    let http1 = web_origins.is_some() || connect.is_some();
    let cors = web_origins.as_deref().and_then(web::cors);
    // Outermost first: a preflight never reaches the gRPC layers, and
    // everything inside the translation sees a plain gRPC call.
    let stack = tower::ServiceBuilder::new()
        .layer(tower::util::option_layer(cors))
        .layer(tower::util::option_layer(connect))
        .layer(tower::util::option_layer(
            web_origins.map(|_| tonic_web::GrpcWebLayer::new()),
        ))
        .layer(observe::GrpcObserveLayer::new(service))
        .layer(service_auth::ServiceAuthLayer::new(key))
        .layer(tower::util::MapResponseLayer::new(describe_tonic_refusal))
        .service(routes.prepare());
    let stack = serve::port_service(stack);
    let name = service.to_string();
    let task = tokio::spawn(async move {
        tracing::info!(service = %name, %addr, tls = secure, http1, "gRPC listening");
        serve::serve(listener, tls, stack, limits, http1, shutdown).await;
        Ok(())
    });
    Ok(GrpcServer { addr, health, task })
}

/// `grpc.health.v1` alone, in plaintext over HTTP/2, on `listen` until `shutdown`.
async fn serve_health<H: tonic_health::pb::health_server::Health>(
    listen: &str,
    health_service: tonic_health::pb::health_server::HealthServer<H>,
    shutdown: &CancellationToken,
) -> Result<JoinHandle<()>, RuntimeError> {
    let (listener, addr) = bind(listen).await?;
    let shutdown = shutdown.clone();
    let routes = tonic::service::Routes::new(health_service).prepare();
    Ok(tokio::spawn(async move {
        tracing::info!(%addr, "gRPC health (plaintext) listening");
        let service = serve::port_service(routes);
        serve::serve(listener, None, service, Limits::default(), false, shutdown).await;
    }))
}

/// Binds `listen` and reports the address actually bound (port 0 picks one).
pub(crate) async fn bind(listen: &str) -> Result<(TcpListener, SocketAddr), RuntimeError> {
    let bind_error = |source| RuntimeError::Bind {
        addr: listen.to_string(),
        source,
    };
    let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    Ok((listener, addr))
}

/// tonic's own refusals (an oversized or undecodable request, an unknown
/// method) answer before any dialectic code runs, as trailers-only responses
/// with the status in the headers. They get the ErrorInfo every other error
/// carries here, so a client can rely on a reason whatever refused it.
fn describe_tonic_refusal(
    response: tonic::codegen::http::Response<tonic::body::Body>,
) -> tonic::codegen::http::Response<tonic::body::Body> {
    const DETAILS: &str = "grpc-status-details-bin";
    let mut response = oversized_request_is_resource_exhausted(response);
    let headers = response.headers_mut();
    let code = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(tonic::Code::from)
        .filter(|code| *code != tonic::Code::Ok);
    if let Some(code) = code
        && !headers.contains_key(DETAILS)
    {
        let mut described = tonic::codegen::http::HeaderMap::new();
        if error_status::refusal(code)
            .add_header(&mut described)
            .is_ok()
            && let Some(details) = described.remove(DETAILS)
        {
            headers.insert(DETAILS, details);
        }
    }
    response
}

/// tonic refuses a request above a server's `max_decoding_message_size` with
/// OUT_OF_RANGE, but gRPC's own convention (and what clients retry on or not)
/// is RESOURCE_EXHAUSTED. The refusal happens before any handler, so it is a
/// trailers-only response whose status sits in the headers, rewritten here.
fn oversized_request_is_resource_exhausted(
    mut response: tonic::codegen::http::Response<tonic::body::Body>,
) -> tonic::codegen::http::Response<tonic::body::Body> {
    const OUT_OF_RANGE: &str = "11";
    let headers = response.headers_mut();
    let status = headers.get("grpc-status").and_then(|v| v.to_str().ok());
    // grpc-message is percent-encoded: match on the words, read the numbers.
    let message = headers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(|m| m.replace("%20", " "))
        .filter(|m| m.contains("decoded message length too large"));
    if status == Some(OUT_OF_RANGE)
        && let Some(message) = message
    {
        let numbers: Vec<&str> = message
            .split(|c: char| !c.is_ascii_digit())
            .filter(|n| !n.is_empty())
            .collect();
        let (found, limit) = (
            numbers.first().copied().unwrap_or("?"),
            numbers.last().copied().unwrap_or("?"),
        );
        let reason = format!(
            "request message of {found} bytes is larger than this server's limit of {limit} bytes"
        );
        headers.insert(
            "grpc-status",
            tonic::codegen::http::HeaderValue::from_static("8"),
        );
        if let Ok(value) = tonic::codegen::http::HeaderValue::from_str(&reason.replace(' ', "%20"))
        {
            headers.insert("grpc-message", value);
        }
    }
    response
}

pub fn store(settings: &Settings) -> Result<Store, RuntimeError> {
    store_with(settings, Planning::Cached)
}

/// The store with its connections' [`Planning`] (the wallet plans each call).
pub fn store_with(settings: &Settings, planning: Planning) -> Result<Store, RuntimeError> {
    Ok(Store::connect_lazy_with(
        &settings.database.url,
        settings.database.max_connections,
        Duration::from_millis(settings.database.connect_timeout_ms),
        planning,
    )?)
}

pub fn blob(settings: &Settings) -> BlobStore {
    BlobStore::new(&BlobSettings {
        endpoint: settings.s3.endpoint.clone(),
        bucket: settings.s3.bucket.clone(),
        region: settings.s3.region.clone(),
        access_key: settings.s3.access_key.clone(),
        secret_key: settings.s3.secret_key.clone(),
        force_path_style: settings.s3.force_path_style,
    })
}

pub fn topology(settings: &Settings) -> Topology {
    Topology::new(settings.amqp.prefix.clone(), settings.amqp.delivery_limit)
}

/// Connects to Redis with back-off; None on shutdown.
pub async fn cache(
    settings: &Settings,
    shutdown: &CancellationToken,
) -> Option<dialectic_cache::Cache> {
    retry_with_backoff("redis", shutdown, || {
        dialectic_cache::Cache::connect(&settings.redis.url, settings.redis.progress_ttl_secs)
    })
    .await
}

/// Waits for the gRPC server, logging instead of failing the caller when it errs.
pub async fn join_server(service: &str, task: JoinHandle<Result<(), RuntimeError>>) {
    match task.await {
        Ok(Ok(())) => tracing::info!(service, "gRPC server stopped"),
        Ok(Err(e)) => tracing::error!(service, error = %e, "gRPC server failed"),
        Err(e) => tracing::error!(service, error = %e, "gRPC server task panicked"),
    }
}

/// A started service: where its gRPC server listens, and a task that ends
/// once the service has shut down completely.
pub struct Running {
    pub addr: SocketAddr,
    pub done: JoinHandle<()>,
}

pub type StartFn =
    fn(Arc<Settings>, CancellationToken) -> BoxFuture<'static, Result<Running, RuntimeError>>;

#[derive(clap::Parser)]
#[command(version, about = "A dialectic service")]
struct ServiceArgs {
    #[command(flatten)]
    config: dialectic_config::ConfigArgs,
}

/// The whole `main` of a single-service binary: config, telemetry, signals,
/// start, wait for the drain.
pub fn run_main(service: &'static str, start: StartFn) -> std::process::ExitCode {
    use clap::Parser;
    let args = ServiceArgs::parse();
    let settings = match args.config.load() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{service}: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.config.dump_config {
        return match settings.dump() {
            Ok(text) => {
                print!("{text}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{service}: {e}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{service}: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let _telemetry = match init_telemetry(service, &settings) {
            Ok(guard) => guard,
            Err(e) => {
                eprintln!("{service}: {e}");
                return std::process::ExitCode::FAILURE;
            }
        };
        if let Err(e) = observe::serve_configured_metrics(&settings).await {
            tracing::error!(service, error = %e, "could not serve /metrics");
            return std::process::ExitCode::FAILURE;
        }
        let shutdown = shutdown_on_signals();
        match start(Arc::new(settings), shutdown).await {
            Ok(running) => {
                let _ = running.done.await;
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!(service, error = %e, "could not start");
                std::process::ExitCode::FAILURE
            }
        }
    })
}

pub fn init_telemetry(
    service: &str,
    settings: &Settings,
) -> Result<dialectic_telemetry::TelemetryGuard, dialectic_telemetry::TelemetryError> {
    dialectic_telemetry::init(dialectic_telemetry::TelemetrySettings {
        service_name: service,
        log_filter: &settings.telemetry.log_filter,
        json: settings.telemetry.log_format == "json",
        otlp_endpoint: Some(settings.telemetry.otlp_endpoint.as_str()),
        span_timings: settings.telemetry.span_timings,
    })
}

/// The rest of a service's life after its gRPC server started: connects Redis
/// when the service uses it, keeps readiness current, and once the server stops,
/// stops the workers (`work_shutdown`, a child of the process shutdown) and waits for them.
pub fn supervise(
    service: &'static str,
    settings: &Arc<Settings>,
    server: GrpcServer,
    dependencies: Dependencies,
    work_shutdown: CancellationToken,
    mut tasks: Vec<JoinHandle<()>>,
) -> Running {
    if let Some(slot) = dependencies.cache.clone() {
        let settings = settings.clone();
        let shutdown = work_shutdown.clone();
        tasks.push(tokio::spawn(async move {
            if let Some(c) = cache(&settings, &shutdown).await {
                let _ = slot.set(c);
            }
        }));
    }
    let readiness = spawn_readiness(
        server.health.clone(),
        DEPENDENCY_CHECK_INTERVAL,
        dependencies,
        work_shutdown.clone(),
    );
    let addr = server.addr;
    let done = tokio::spawn(async move {
        join_server(service, server.task).await;
        work_shutdown.cancel();
        for task in tasks {
            let _ = task.await;
        }
        let _ = readiness.await;
        tracing::info!(service, "stopped");
    });
    Running { addr, done }
}

#[cfg(test)]
mod retry_tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Instant;

    #[tokio::test]
    async fn retries_after_growing_waits_until_the_dependency_answers() {
        let calls = AtomicU32::new(0);
        let started = Instant::now();
        let value = retry_with_backoff("test", &CancellationToken::new(), || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err("refused"),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(value, Some(2));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        // 200 ms then 400 ms, each with up to as much again of jitter.
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(600), "{waited:?}");
        assert!(waited < Duration::from_millis(2500), "{waited:?}");
    }

    #[tokio::test]
    async fn shutdown_ends_the_retries_even_mid_wait() {
        let shutdown = CancellationToken::new();
        let calls = AtomicU32::new(0);
        let cancel = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel.cancel();
        });
        let started = Instant::now();
        let value: Option<()> = retry_with_backoff("test", &shutdown, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err("refused")
        })
        .await;
        assert_eq!(value, None);
        assert!(started.elapsed() < Duration::from_secs(2));
        let tries = calls.load(Ordering::SeqCst);
        assert!((1..=2).contains(&tries), "{tries} tries");

        let calls = AtomicU32::new(0);
        let value: Option<()> = retry_with_backoff("test", &shutdown, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok::<(), &str>(())
        })
        .await;
        assert_eq!(value, None, "no attempt once shut down");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }
}
