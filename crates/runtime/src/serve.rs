//! The accept loop and the life of each connection on a gRPC port, with the
//! deadlines tonic's own server lacks: a connection must bring its first
//! request within a deadline (after its TLS handshake, with TLS) and is
//! closed once no request has been in flight for the idle timeout, so one
//! that sends nothing, half an HTTP/1.1 header or only an HTTP/2 preface
//! cannot stay; HTTP/2 is PINGed and capped in streams and age; an accept
//! error (out of descriptors) pauses the loop instead of spinning it.

use crate::tls::{Conn, Handshakes};
use bytes::Bytes;
use dialectic_config::ConnectionConfig;
use futures::future::BoxFuture;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// After an idle connection is told to go (GOAWAY), how long a client that
/// does not answer may keep it before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// The first and the longest pause after a failed accept.
const ACCEPT_PAUSE: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(1));

/// [`ConnectionConfig`] as durations.
#[derive(Debug, Clone)]
pub struct Limits {
    pub first_request_timeout: Duration,
    pub idle_timeout: Duration,
    pub header_read_timeout: Duration,
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    pub max_connection_age: Option<Duration>,
    pub max_concurrent_streams: u32,
    pub tls_handshake_timeout: Duration,
    pub max_tls_handshakes: usize,
}

impl Limits {
    pub fn from_config(config: &ConnectionConfig) -> Self {
        let ms = Duration::from_millis;
        Self {
            first_request_timeout: ms(config.first_request_timeout_ms),
            idle_timeout: ms(config.idle_timeout_ms),
            header_read_timeout: ms(config.header_read_timeout_ms),
            keepalive_interval: ms(config.keepalive_interval_ms),
            keepalive_timeout: ms(config.keepalive_timeout_ms),
            max_connection_age: Some(Duration::from_secs(config.max_connection_age_secs))
                .filter(|age| !age.is_zero()),
            max_concurrent_streams: config.max_concurrent_streams,
            tls_handshake_timeout: ms(config.tls_handshake_timeout_ms),
            max_tls_handshakes: config.max_tls_handshakes as usize,
        }
    }
}

impl Default for Limits {
    /// The documented defaults, which every internal port keeps.
    fn default() -> Self {
        Self::from_config(&ConnectionConfig::default())
    }
}

/// How to speak on a port: HTTP/2 only, or HTTP/1.1 too (gRPC-Web).
fn http_builder(limits: &Limits, http1: bool) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if !http1 {
        builder = builder.http2_only();
    }
    // hyper enforces the header-read timeout only with a timer.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        // tonic passes None here, which lifts hyper's own cap: set it always.
        .max_concurrent_streams(limits.max_concurrent_streams)
        .keep_alive_interval(limits.keepalive_interval)
        .keep_alive_timeout(limits.keepalive_timeout);
    builder
}

/// The service every connection of a port calls: its tower stack, boxed.
pub(crate) type PortService = tower::util::BoxCloneService<
    http::Request<tonic::body::Body>,
    http::Response<tonic::body::Body>,
    BoxError,
>;

/// `stack` as a [`PortService`].
pub(crate) fn port_service<S, B>(stack: S) -> PortService
where
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    use tower::ServiceExt;
    tower::util::BoxCloneService::new(
        stack
            .map_err(Into::into)
            .map_response(|response| response.map(tonic::body::Body::new)),
    )
}

/// Accepts on `listener` until `shutdown`, serving each connection (past
/// its TLS handshake with `tls`) with `service` under `limits`. Then stops
/// accepting, lets each connection finish its calls, and returns once all
/// have closed.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Handshakes>,
    service: PortService,
    limits: Limits,
    http1: bool,
    shutdown: CancellationToken,
) {
    let builder = Arc::new(http_builder(&limits, http1));
    let limits = Arc::new(limits);
    // Each connection holds a receiver; the sender sees all gone when they end.
    let (open_tx, open_rx) = tokio::sync::watch::channel(());
    let mut pause = ACCEPT_PAUSE.0;
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => {
                pause = ACCEPT_PAUSE.0;
                tcp
            }
            Err(e) => {
                // Out of descriptors, say: accepting again at once would spin.
                tracing::warn!(error = %e, pause_ms = pause.as_millis() as u64, "accepting a connection failed");
                if !crate::sleep_or_shutdown(pause, &shutdown).await {
                    break;
                }
                pause = (pause * 2).min(ACCEPT_PAUSE.1);
                continue;
            }
        };
        // Without it a reply's separate writes wait for the client's delayed ACK.
        let _ = tcp.set_nodelay(true);
        let connection = Connection {
            builder: builder.clone(),
            limits: limits.clone(),
            shutdown: shutdown.clone(),
            _open: open_rx.clone(),
        };
        let (tls, service) = (tls.clone(), service.clone());
        tokio::spawn(async move {
            let io = match tls {
                Some(tls) => match tls.accept(tcp).await {
                    Some(io) => io,
                    None => return,
                },
                None => Conn::Plain(tcp),
            };
            connection.run(io, service).await;
        });
    }
    // Closes the port now: new clients are refused instead of left waiting.
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
}

/// One accepted connection's settings and its share of the server's life.
struct Connection {
    builder: Arc<auto::Builder<TokioExecutor>>,
    limits: Arc<Limits>,
    shutdown: CancellationToken,
    _open: tokio::sync::watch::Receiver<()>,
}

impl Connection {
    async fn run(self, io: Conn, service: PortService) {
        let activity = Arc::new(Activity::new());
        let counted = Counted {
            inner: service,
            activity: activity.clone(),
        };
        let conn = self.builder.serve_connection(TokioIo::new(io), counted);
        tokio::pin!(conn);
        let aged = async {
            match self.limits.max_connection_age {
                Some(age) => tokio::time::sleep(age).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(aged);
        let (mut going, mut told_to_go) = (false, None::<Instant>);
        loop {
            let check = activity.next_check(&self.limits, told_to_go);
            tokio::select! {
                served = conn.as_mut() => {
                    if let Err(e) = served {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = self.shutdown.cancelled(), if !going => {
                    going = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = &mut aged, if !going => {
                    going = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = tokio::time::sleep_until(check) => {
                    match activity.quiet(&self.limits, told_to_go, Instant::now()) {
                        Quiet::Busy => {}
                        Quiet::NeverAsked => {
                            tracing::debug!("no request before the deadline; closing the connection");
                            return;
                        }
                        Quiet::Idle => {
                            // GOAWAY: a client's call racing it is refused, not lost.
                            told_to_go = Some(Instant::now());
                            conn.as_mut().graceful_shutdown();
                        }
                        Quiet::Unanswered => return,
                    }
                }
            }
        }
    }
}

/// What a quiet connection has come to.
enum Quiet {
    /// A request is in flight, or a deadline is still ahead.
    Busy,
    /// No request ever came within the first-request deadline.
    NeverAsked,
    /// No request in flight for the idle timeout: time to tell it to go.
    Idle,
    /// Told to go, still open after the grace, and with nothing in flight.
    Unanswered,
}

/// The requests in flight on one connection, and since when it has had none.
struct Activity {
    in_flight: AtomicUsize,
    asked: AtomicBool,
    quiet_since: Mutex<Instant>,
}

impl Activity {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            asked: AtomicBool::new(false),
            quiet_since: Mutex::new(Instant::now()),
        }
    }

    fn quiet_since(&self) -> Instant {
        *self.quiet_since.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the deadline that applies now runs out.
    fn deadline(&self, limits: &Limits, told_to_go: Option<Instant>) -> Instant {
        if let Some(told) = told_to_go {
            return told + CLOSE_GRACE;
        }
        let allowed = if self.asked.load(Ordering::Acquire) {
            limits.idle_timeout
        } else {
            limits.first_request_timeout
        };
        self.quiet_since() + allowed
    }

    /// When to look again: the deadline, or (a request in flight) one idle
    /// timeout from now, as the deadline can only start once it ends.
    fn next_check(&self, limits: &Limits, told_to_go: Option<Instant>) -> Instant {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Instant::now() + limits.idle_timeout;
        }
        self.deadline(limits, told_to_go)
    }

    /// What the connection has come to at `now`.
    fn quiet(&self, limits: &Limits, told_to_go: Option<Instant>, now: Instant) -> Quiet {
        if self.in_flight.load(Ordering::Acquire) > 0 || now < self.deadline(limits, told_to_go) {
            return Quiet::Busy;
        }
        match (told_to_go, self.asked.load(Ordering::Acquire)) {
            (Some(_), _) => Quiet::Unanswered,
            (None, false) => Quiet::NeverAsked,
            (None, true) => Quiet::Idle,
        }
    }

    fn start(self: &Arc<Self>) -> InFlight {
        self.asked.store(true, Ordering::Release);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }
}

/// One request in flight, until its response body is done or dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        // The lock first, so the deadline never reads a stale start.
        let mut since = self.0.quiet_since.lock().unwrap_or_else(|e| e.into_inner());
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            *since = Instant::now();
        }
    }
}

/// The port's service, counting each request in flight on its connection.
struct Counted {
    inner: PortService,
    activity: Arc<Activity>,
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Counted {
    type Response = http::Response<CountedBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn call(&self, request: http::Request<hyper::body::Incoming>) -> Self::Future {
        use tower::ServiceExt;
        let in_flight = self.activity.start();
        let service = self.inner.clone();
        Box::pin(async move {
            let response = service.oneshot(request.map(tonic::body::Body::new)).await?;
            Ok(response.map(|inner| CountedBody {
                inner,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A response body that holds its request's place in flight until it ends.
struct CountedBody {
    inner: tonic::body::Body,
    _in_flight: InFlight,
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, tonic::Status>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            first_request_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(5),
            ..Limits::default()
        }
    }

    #[test]
    fn a_connection_is_quiet_by_its_deadlines_and_never_while_asked() {
        let (limits, activity) = (limits(), Arc::new(Activity::new()));
        let opened = activity.quiet_since();
        let at = |secs: u64| opened + Duration::from_secs(secs);
        let quiet = |told, now| activity.quiet(&limits, told, now);
        assert!(matches!(quiet(None, at(1)), Quiet::Busy));
        assert!(matches!(quiet(None, at(2)), Quiet::NeverAsked));

        let asked = activity.start();
        assert!(
            matches!(quiet(None, at(600)), Quiet::Busy),
            "a long call is not idle"
        );
        drop(asked);
        let ended = activity.quiet_since();
        assert!(ended >= opened);
        let after = |secs: u64| ended + Duration::from_secs(secs);
        assert!(matches!(quiet(None, after(4)), Quiet::Busy));
        assert!(matches!(quiet(None, after(5)), Quiet::Idle));

        let told = Some(after(5));
        assert!(matches!(quiet(told, after(5)), Quiet::Busy));
        assert!(matches!(
            quiet(told, after(5) + CLOSE_GRACE),
            Quiet::Unanswered
        ));
        let _late = activity.start();
        assert!(
            matches!(quiet(told, after(60)), Quiet::Busy),
            "a call that raced the GOAWAY finishes"
        );
    }
}
