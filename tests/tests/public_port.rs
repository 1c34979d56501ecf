//! The gateway's public port against strangers (issue 57), with its
//! deadlines configured short (`gateway.connections`, 2 s) so each test is
//! quick: quiet connections are closed within the deadline while ordinary
//! calls go on answering; one HTTP/2 connection gets no more streams than it
//! was told; HTTP/1.1 is spoken only with a web origin or the JSON API
//! (`gateway.json_api`) configured; and TLS
//! handshakes left half done neither outlive their timeout nor take more
//! than the configured slots, nor keep a real client out.

use dialectic_config::Settings;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::ListProjectsRequest;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// Every deadline the tests configure.
const DEADLINE: Duration = Duration::from_secs(2);
/// What a closing may take past its deadline on a loaded machine: the
/// server's grace for a client told to go (1 s), and a flood's connections
/// waiting in the listen queue and for a core (2 shared ones here). A
/// connection the deadline does not close stays open for good, so this
/// bounds the test's time, not what it proves.
const SLACK: Duration = Duration::from_secs(8);

/// The two floods run one at a time, each with the machine to itself.
static FLOOD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
/// Quiet connections of each kind: 300 in all. With 1,002 a clean-clone CI
/// run saw one connection still unaccepted 10 s after its connect: the
/// kernel completes a handshake before the server accepts it, and a flood
/// near the listen backlog (1,024) leaves some waiting in the queue, where
/// no deadline of the server's can reach them.
const QUIET_EACH: usize = 100;
/// HTTP/2's connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn short_deadlines(settings: &mut Settings) {
    let limits = &mut settings.gateway.connections;
    let ms = DEADLINE.as_millis() as u64;
    limits.first_request_timeout_ms = ms;
    limits.idle_timeout_ms = ms;
    limits.header_read_timeout_ms = ms;
    limits.tls_handshake_timeout_ms = ms;
}

/// Reads from `socket` until the server closes it (EOF or reset) or
/// `within` passes; how long after `opened` it closed, None if it did not.
async fn closed_after(
    mut socket: TcpStream,
    opened: Instant,
    within: Duration,
) -> Option<Duration> {
    let mut buf = [0u8; 4096];
    let closing = async {
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return opened.elapsed(),
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within.saturating_sub(opened.elapsed()), closing)
        .await
        .ok()
}

/// A connection to `addr` that sends `first` (maybe nothing) and then
/// nothing more; when the server closed it, measured from the connect.
async fn quiet(addr: SocketAddr, first: &'static [u8]) -> Option<Duration> {
    let mut socket = TcpStream::connect(addr).await.expect("connects");
    let opened = Instant::now();
    if !first.is_empty() {
        socket.write_all(first).await.expect("writes");
    }
    closed_after(socket, opened, DEADLINE + SLACK).await
}

/// The HTTP/2 preface and an empty SETTINGS frame: a client's opening.
fn h2_opening() -> &'static [u8] {
    static OPENING: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    OPENING.get_or_init(|| [PREFACE.to_vec(), frame(0x4, 0, 0, &[])].concat())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quiet_connections_are_closed_while_calls_answer() {
    let _flood = FLOOD.lock().await;
    let mut env = TestEnv::new().await;
    short_deadlines(&mut env.settings);
    // An origin, so HTTP/1.1 is spoken and its header deadline is the one met.
    env.settings.gateway.web_origins = "https://app.example.com".into();
    env.start(&["gateway"]).await;
    let addr = env.addr("gateway");

    // A client calling throughout: each answer within 2 s.
    let calling = Arc::new(AtomicBool::new(true));
    let mut client = env.gateway().await;
    let caller = {
        let calling = calling.clone();
        tokio::spawn(async move {
            let mut answered = 0;
            while calling.load(Ordering::Acquire) {
                let asked = Instant::now();
                let answer = tokio::time::timeout(
                    Duration::from_secs(2),
                    client.list_projects(ListProjectsRequest::default()),
                )
                .await;
                match answer {
                    Ok(Ok(_)) => answered += 1,
                    Ok(Err(status)) => {
                        panic!("a call failed after {:?}: {status:?}", asked.elapsed())
                    }
                    Err(_) => panic!("a call took over 2 s"),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            answered
        })
    };

    let half_header: &'static [u8] =
        b"POST /dialectic.v1.DialecticService/ListProjects HTTP/1.1\r\n\
        Host: localhost\r\nContent-Type: application/grpc-web+proto\r\n";
    let kinds: [(&str, &'static [u8]); 3] = [
        ("nothing", b""),
        ("half an HTTP/1.1 header", half_header),
        ("an HTTP/2 preface", h2_opening()),
    ];
    let mut waits = Vec::new();
    for (kind, first) in kinds {
        for _ in 0..QUIET_EACH {
            waits.push((kind, tokio::spawn(quiet(addr, first))));
        }
    }
    let mut slowest = Duration::ZERO;
    for (kind, wait) in waits {
        let closed = wait.await.expect("the wait ran");
        let after = closed.unwrap_or_else(|| {
            panic!(
                "a connection that sent {kind} was still open {:?} after it opened",
                DEADLINE + SLACK
            )
        });
        slowest = slowest.max(after);
    }
    calling.store(false, Ordering::Release);
    let answered = caller.await.expect("every call answered in time");
    assert!(answered > 10, "only {answered} calls");
    eprintln!(
        "{} quiet connections closed, the last {slowest:?} after it opened; {answered} calls answered meanwhile",
        3 * QUIET_EACH
    );
    env.teardown().await;
}

/// A frame: type, flags, stream and payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// A HEADERS frame opening a `Health/Watch` call on `stream` and leaving it
/// open (no END_STREAM): the server then waits for its message. HPACK
/// literals without indexing, so no table state is shared.
fn open_watch(stream: u32) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/grpc.health.v1.Health/Watch"),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        block.push(0x00);
        block.push(name.len() as u8);
        block.extend(name.as_bytes());
        block.push(value.len() as u8);
        block.extend(value.as_bytes());
    }
    // END_HEADERS only.
    frame(0x1, 0x4, stream, &block)
}

/// The next frame: (type, flags, stream, payload).
async fn read_frame(socket: &mut TcpStream) -> std::io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    socket.read_exact(&mut head).await?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    socket.read_exact(&mut payload).await?;
    Ok((head[3], head[4], stream, payload))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_gets_no_more_streams_than_advertised() {
    const MAX: u32 = 8;
    let mut env = TestEnv::new().await;
    env.settings.gateway.connections.max_concurrent_streams = MAX;
    env.start(&["gateway"]).await;
    let mut socket = TcpStream::connect(env.addr("gateway"))
        .await
        .expect("connects");
    socket.write_all(h2_opening()).await.expect("preface");

    // The server's SETTINGS name the limit (SETTINGS_MAX_CONCURRENT_STREAMS, 0x3).
    let advertised = loop {
        let (kind, flags, _, payload) = read_frame(&mut socket).await.expect("server SETTINGS");
        if kind == 0x4 && flags & 0x1 == 0 {
            break payload
                .chunks_exact(6)
                .find(|p| u16::from_be_bytes([p[0], p[1]]) == 0x3)
                .map(|p| u32::from_be_bytes([p[2], p[3], p[4], p[5]]));
        }
    };
    assert_eq!(advertised, Some(MAX), "SETTINGS_MAX_CONCURRENT_STREAMS");
    socket
        .write_all(&frame(0x4, 0x1, 0, &[]))
        .await
        .expect("SETTINGS ACK");

    // One stream more than allowed, all left open.
    let streams: Vec<u32> = (0..=MAX).map(|i| 2 * i + 1).collect();
    for stream in &streams {
        socket
            .write_all(&open_watch(*stream))
            .await
            .expect("HEADERS");
    }
    let excess = *streams.last().expect("streams");
    let refused = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let (kind, _, stream, payload) = read_frame(&mut socket).await.expect("frames");
            if kind == 0x3 {
                let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                assert_eq!(
                    stream, excess,
                    "only the excess stream is reset (code {code})"
                );
                return code;
            }
            assert_ne!(
                kind, 0x7,
                "GOAWAY instead of refusing one stream: {payload:?}"
            );
        }
    })
    .await
    .expect("the stream over the limit is refused");
    assert_eq!(refused, 0x7, "REFUSED_STREAM");
    // Its calls never end by themselves: a server stopping would wait for them.
    drop(socket);
    env.teardown().await;
}

/// What the server answers a whole HTTP/1.1 request with, up to 5 s.
async fn answer_to_http1(addr: SocketAddr) -> Vec<u8> {
    let mut socket = TcpStream::connect(addr).await.expect("connects");
    socket
        .write_all(b"OPTIONS /dialectic.v1.DialecticService/ListProjects HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("writes");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_is_spoken_only_with_web_origins() {
    let mut env = TestEnv::new().await;
    // The JSON API speaks HTTP/1.1 too (tests/curl_json.rs); off here.
    env.settings.gateway.json_api = false;
    env.start(&["gateway"]).await;
    let without = answer_to_http1(env.addr("gateway")).await;
    assert!(
        !without.starts_with(b"HTTP/1.1"),
        "no origin configured, yet HTTP/1.1 answered: {}",
        String::from_utf8_lossy(&without)
    );
    env.stop("gateway").await;
    env.settings.gateway.web_origins = "https://app.example.com".into();
    env.start(&["gateway"]).await;
    let with = answer_to_http1(env.addr("gateway")).await;
    assert!(
        with.starts_with(b"HTTP/1.1"),
        "with an origin: {}",
        String::from_utf8_lossy(&with)
    );
    env.teardown().await;
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

/// In a fresh directory: `ca.pem`, and `tls.crt`/`tls.key` for localhost signed by it.
fn certificates() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dialectic-tls-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec![
        "req",
        "-x509",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=test CA",
    ];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    openssl(&dir, &ca);
    let mut request = vec!["req", "-new", "-nodes", "-subj", "/CN=localhost"];
    request.extend(ec);
    request.extend(["-keyout", "tls.key", "-out", "tls.csr"]);
    openssl(&dir, &request);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("extensions file");
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

/// A rustls client for localhost trusting `ca`.
fn tls_client(ca: &Path) -> rustls::ClientConnection {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).expect("ca.pem") {
        roots.add(cert.expect("a certificate")).expect("a root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    rustls::ClientConnection::new(Arc::new(config), "localhost".try_into().expect("a name"))
        .expect("a client")
}

/// A client's first flight (its ClientHello), as bytes to send by hand.
fn client_hello(ca: &Path) -> Vec<u8> {
    let mut hello = Vec::new();
    tls_client(ca).write_tls(&mut hello).expect("hello");
    hello
}

/// Half a handshake: `hello` (or its first half) sent, and nothing after.
/// Returns when the server answered anything, if it did, and when it
/// closed the connection, if it did within the deadline and slack.
async fn half_handshake(
    addr: SocketAddr,
    hello: Arc<Vec<u8>>,
    whole: bool,
    placed: Arc<AtomicUsize>,
) -> (Option<Instant>, Option<Duration>) {
    let mut socket = TcpStream::connect(addr).await.expect("connects");
    let opened = Instant::now();
    let sent = if whole {
        &hello[..]
    } else {
        &hello[..hello.len() / 2]
    };
    socket.write_all(sent).await.expect("hello");
    placed.fetch_add(1, Ordering::AcqRel);
    let mut buf = [0u8; 4096];
    let answered = match tokio::time::timeout(DEADLINE + SLACK, socket.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => Some(Instant::now()),
        Ok(_) => return (None, Some(opened.elapsed())),
        Err(_) => return (None, None),
    };
    (
        answered,
        closed_after(socket, opened, DEADLINE + SLACK).await,
    )
}

/// A full handshake with nothing after it; when the server closed it.
fn silent_after_handshake(addr: SocketAddr, ca: &Path) -> Option<Duration> {
    use std::io::Read;
    let mut tcp = std::net::TcpStream::connect(addr).expect("connects");
    tcp.set_read_timeout(Some(DEADLINE + SLACK))
        .expect("timeout");
    let mut client = tls_client(ca);
    while client.is_handshaking() {
        client.complete_io(&mut tcp).expect("handshake");
    }
    let done = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => return Some(done.elapsed()),
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return None;
            }
            Err(_) => return Some(done.elapsed()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn half_done_handshakes_neither_stay_nor_keep_a_tls_client_out() {
    /// Handshakes past their hello at once.
    const SLOTS: u32 = 16;
    /// Clients that send half a hello (no slot) and a whole one (a slot each).
    const HALF: usize = 1_500;
    const WHOLE: usize = 500;
    let _flood = FLOOD.lock().await;
    let dir = certificates();
    let ca = dir.join("ca.pem");
    let mut env = TestEnv::new().await;
    short_deadlines(&mut env.settings);
    env.settings.gateway.connections.max_tls_handshakes = SLOTS;
    env.settings.gateway.tls_cert = dir.join("tls.crt").display().to_string();
    env.settings.gateway.tls_key = dir.join("tls.key").display().to_string();
    env.start(&["gateway"]).await;
    let addr = env.addr("gateway");

    let hello = Arc::new(client_hello(&ca));
    let placed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut attacks = Vec::new();
    for i in 0..HALF + WHOLE {
        let whole = i % 4 == 3;
        attacks.push(tokio::spawn(half_handshake(
            addr,
            hello.clone(),
            whole,
            placed.clone(),
        )));
    }
    dialectic_e2e::eventually(30, "every half-done handshake sent", || {
        let placed = placed.load(Ordering::Acquire);
        async move { (placed == HALF + WHOLE).then_some(()) }
    })
    .await;
    // The last of them accepted too: a client behind them has that much of
    // its deadline left once theirs have run out.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // While every slot is held and hundreds wait for one, a real client
    // still gets in: slots are granted in turn, and those ahead of it give
    // theirs up at their deadline, before its own.
    let https = format!("https://localhost:{}", addr.port());
    let asked = Instant::now();
    let channel = tonic::transport::Endpoint::from_shared(https)
        .expect("url")
        .connect_timeout(DEADLINE + SLACK)
        .tls_config(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(
                    std::fs::read(&ca).expect("ca.pem"),
                ))
                .domain_name("localhost"),
        )
        .expect("client TLS")
        .connect()
        .await;
    let checked = match channel {
        Ok(channel) => HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: "dialectic.liveness".into(),
            })
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    assert!(
        checked.is_ok(),
        "a TLS client among half-done handshakes, {:?} in: {checked:?}",
        asked.elapsed()
    );
    eprintln!("the TLS client answered in {:?}", asked.elapsed());

    let (mut answered_early, mut slowest) = (0, Duration::ZERO);
    // No slot frees before the first holder's deadline.
    let first_release = started + DEADLINE - Duration::from_millis(300);
    for attack in attacks {
        let (answered, closed) = attack.await.expect("the attack ran");
        let closed =
            closed.expect("a half-done handshake was still open after its deadline and slack");
        slowest = slowest.max(closed);
        if answered.is_some_and(|at| at < first_release) {
            answered_early += 1;
        }
    }
    assert!(
        answered_early <= SLOTS as usize,
        "{answered_early} handshakes went on at once; the cap is {SLOTS}"
    );
    // After a handshake, silence is closed as on a plaintext port.
    let silent = tokio::task::spawn_blocking(move || silent_after_handshake(addr, &ca))
        .await
        .expect("the silent client ran");
    assert!(silent.is_some(), "a silent TLS connection stayed open");
    eprintln!(
        "{} half-done handshakes closed, the last {slowest:?} after it opened; {answered_early} answered before the first slot freed",
        HALF + WHOLE
    );
    env.teardown().await;
    let _ = std::fs::remove_dir_all(dir);
}
