//! The gateway client: one connection, the API key on every call, a deadline
//! on every call, and no waiting for a gateway that is down unless asked.

use crate::exit::{Failed, Kind};
use crate::output::note;
use crate::{format, progress};
use anyhow::{Result, anyhow};
use dialectic_core::pushback::Pushback;
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use dialectic_proto::v1::{
    CreateProjectRequest, GetProjectRequest, GetSessionRequest, ListPipelinesRequest,
    ListStageDocumentsRequest, Project, Session, SessionEventKind, StageDocument,
    StartSessionRequest, WatchSessionRequest,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request, Status};

/// How long a connection attempt may take: long enough for a gateway across
/// the world, short enough that a stopped one fails at once.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the TLS probe after a broken plaintext call waits for an
/// alert: a TLS server answers within a round trip; a plaintext one never.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a watch keeps re-watching a stream that keeps failing.
const REWATCH_PATIENCE: Duration = Duration::from_secs(30);
const RETRY_DELAY: Duration = Duration::from_millis(500);

/// Where the gateway is and how long to wait for it.
pub struct Target {
    pub url: String,
    pub api_key: Option<String>,
    /// The CA that signed an `https://` gateway's certificate; None trusts
    /// the system's roots.
    pub ca_cert: Option<std::path::PathBuf>,
    /// Check no certificate at all (`--insecure`): an `https://` gateway is
    /// reached whatever certificate it shows.
    pub insecure: bool,
    /// Every call's deadline (`--timeout`).
    pub timeout: Duration,
    /// How long to keep trying while the gateway is unreachable or
    /// UNAVAILABLE (`--wait-for-gateway`); zero fails at once.
    pub patience: Duration,
}

pub struct Gateway {
    client: DialecticServiceClient<Channel>,
    /// `Bearer <key>`, sent as `authorization` on every call.
    authorization: MetadataValue<tonic::metadata::Ascii>,
    timeout: Duration,
    patience: Duration,
    /// Where an `http://` URL points: to tell a TLS server behind it.
    plaintext: Option<Plaintext>,
}

/// An error and its causes on one line (tonic's own Display says only
/// "transport error").
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    let mut last = text.clone();
    while let Some(cause) = source {
        // hyper repeats a cause's text in its wrapper; say it once.
        let said = cause.to_string();
        if said != last {
            text.push_str(": ");
            text.push_str(&said);
        }
        last = said;
        source = cause.source();
    }
    text
}

/// The endpoint for `target.url`: TLS for `https://`, trusting `ca_cert`
/// when given, else the system's roots.
fn endpoint(target: &Target) -> Result<Endpoint, Failed> {
    let url = &target.url;
    let endpoint = Endpoint::from_shared(url.clone())
        .map_err(|e| Failed::new(Kind::Usage, format!("invalid gateway URL {url:?}: {e}")))?
        .connect_timeout(CONNECT_TIMEOUT);
    match endpoint.uri().scheme_str() {
        Some("https") => {}
        Some("http") if target.ca_cert.is_some() => {
            return Err(Failed::new(
                Kind::Usage,
                format!("--ca-cert needs an https:// gateway URL, not {url}"),
            ));
        }
        Some("http") => return Ok(endpoint),
        _ => {
            return Err(Failed::new(
                Kind::Usage,
                format!("invalid gateway URL {url:?}: it starts with https:// or http://"),
            ));
        }
    }
    let tls = ClientTlsConfig::new()
        .domain_name(host_of(endpoint.uri()))
        .timeout(CONNECT_TIMEOUT);
    let tls = match &target.ca_cert {
        Some(path) => tls.ca_certificate(Certificate::from_pem(read_ca(path)?)),
        None => tls.with_native_roots(),
    };
    endpoint.tls_config(tls).map_err(|e| {
        let trust = match &target.ca_cert {
            Some(path) => format!("the CA certificate {}", path.display()),
            None => "the system's CA certificates (or pass --ca-cert)".to_string(),
        };
        Failed::new(
            Kind::Config,
            format!("cannot set up TLS with {trust}: {}", causes(&e)),
        )
    })
}

/// How the channel is opened: through tonic's own TLS, which checks the
/// certificate (or plaintext), or, with `--insecure`, through a connector
/// whose rustls checks only that the handshake is signed by the certificate
/// shown, whoever issued it and whatever it names.
enum Dial {
    Checked(Endpoint),
    Unchecked(Unchecked),
}

struct Unchecked {
    /// `http://host:port` so tonic leaves TLS to the connector; its origin
    /// is the `https://` URL, which the requests carry.
    endpoint: Endpoint,
    config: Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
    host: String,
    port: u16,
}

impl Dial {
    async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        match self {
            Dial::Checked(endpoint) => endpoint.connect().await,
            Dial::Unchecked(unchecked) => {
                let (tls, name, host, port) = (
                    tokio_rustls::TlsConnector::from(unchecked.config.clone()),
                    unchecked.name.clone(),
                    unchecked.host.clone(),
                    unchecked.port,
                );
                let connector = tower::service_fn(move |_: tonic::codegen::http::Uri| {
                    let (tls, name, host) = (tls.clone(), name.clone(), host.clone());
                    async move {
                        let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
                        let _ = tcp.set_nodelay(true);
                        let stream = tls.connect(name, tcp).await?;
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                    }
                });
                unchecked.endpoint.connect_with_connector(connector).await
            }
        }
    }
}

/// `target`'s endpoint as [`endpoint`] makes it, or with `--insecure` one
/// that checks no certificate (an `https://` URL only).
fn dial(target: &Target) -> Result<Dial, Failed> {
    if !target.insecure {
        return endpoint(target).map(Dial::Checked);
    }
    let url = &target.url;
    let uri: tonic::codegen::http::Uri = url
        .parse()
        .map_err(|e| Failed::new(Kind::Usage, format!("invalid gateway URL {url:?}: {e}")))?;
    if uri.scheme_str() != Some("https") {
        return Err(Failed::new(
            Kind::Usage,
            format!("--insecure (DIALECTIC_INSECURE) applies to https:// gateway URLs, not {url}"),
        ));
    }
    let host = host_of(&uri);
    let port = uri.port_u16().unwrap_or(443);
    let name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| Failed::new(Kind::Usage, format!("invalid gateway host in {url}: {e}")))?;
    let endpoint =
        Endpoint::from_shared(format!("http://{}:{port}", uri.host().unwrap_or_default()))
            .map_err(|e| Failed::new(Kind::Usage, format!("invalid gateway URL {url:?}: {e}")))?
            .origin(uri)
            .connect_timeout(CONNECT_TIMEOUT);
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Failed::new(Kind::Config, format!("cannot set up TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Dial::Unchecked(Unchecked {
        endpoint,
        config: Arc::new(config),
        name,
        host,
        port,
    }))
}

/// `--insecure`'s verifier: any certificate for any name is accepted; the
/// handshake's signatures are still checked against it, so the connection
/// is at least with whoever holds that certificate's key.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The URL's host, an IPv6 address without its brackets: the name a
/// certificate must carry, or where to connect.
fn host_of(uri: &tonic::codegen::http::Uri) -> String {
    let host = uri.host().unwrap_or_default();
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

struct Plaintext {
    url: String,
    host: String,
    port: u16,
}

/// Whether the server at `host:port` speaks TLS. Five bytes it must read as
/// a TLS record header ("PRI *", an HTTP/2 preface's start) make a TLS
/// server answer with an alert record (content type 21) and close; a
/// plaintext server waits for the rest, until the probe gives up. Exactly
/// five, so the server has read everything sent and closes without a reset
/// that would discard its alert.
async fn speaks_tls(host: &str, port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const ALERT: u8 = 21;
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        stream.write_all(b"PRI *").await.ok()?;
        let mut first = [0u8; 1];
        stream.read_exact(&mut first).await.ok()?;
        Some(first[0] == ALERT)
    };
    tokio::time::timeout(PROBE_TIMEOUT, probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// The CA file's PEM, checked to hold at least one certificate: rustls
/// skips what it cannot parse, so a wrong file would otherwise show up only
/// as a certificate every gateway fails.
fn read_ca(path: &Path) -> Result<Vec<u8>, Failed> {
    let unusable = |why: String| {
        Failed::new(
            Kind::Config,
            format!(
                "cannot use the CA certificate {} (--ca-cert): {why}",
                path.display()
            ),
        )
    };
    let pem = std::fs::read(path).map_err(|e| unusable(e.to_string()))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unusable(e.to_string()))?;
    if certificates.is_empty() {
        return Err(unusable(
            "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(pem)
}

/// Why a TLS handshake failed, when it did.
enum TlsRefusal {
    /// The gateway's certificate is not one this client trusts for its name.
    Certificate(rustls::CertificateError),
    /// Anything else: most often a plaintext gateway behind an https:// URL.
    Handshake,
}

impl TlsRefusal {
    fn failure(&self, url: &str, error: &dyn std::error::Error) -> Failed {
        let message = match self {
            TlsRefusal::Certificate(rustls::CertificateError::UnknownIssuer) => format!(
                "cannot reach the gateway at {url}: its TLS certificate is signed by a CA \
                 this client does not trust; pass that CA's PEM file with --ca-cert \
                 (or DIALECTIC_CA_CERT)"
            ),
            TlsRefusal::Certificate(why) => format!(
                "cannot reach the gateway at {url}: its TLS certificate was refused ({why}); \
                 if a private CA signed it, pass that CA's PEM file with --ca-cert \
                 (or DIALECTIC_CA_CERT); if the certificate names another host, \
                 use that name in the URL"
            ),
            TlsRefusal::Handshake => format!(
                "cannot reach the gateway at {url}: the TLS handshake failed ({}); \
                 a gateway without TLS takes an http:// URL",
                causes(error)
            ),
        };
        Failed::new(Kind::Unavailable, message)
    }
}

/// The rustls error somewhere in `error`'s causes. tokio-rustls hands it
/// over inside an io::Error, whose `source()` skips it, so those are opened.
fn tls_refusal(error: &(dyn std::error::Error + 'static)) -> Option<TlsRefusal> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        let rustls = e.downcast_ref::<rustls::Error>().or_else(|| {
            e.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(rustls) = rustls {
            return Some(match rustls {
                rustls::Error::InvalidCertificate(why) => TlsRefusal::Certificate(why.clone()),
                _ => TlsRefusal::Handshake,
            });
        }
        cause = e.source();
    }
    None
}

impl Gateway {
    pub async fn connect(target: &Target) -> Result<Self> {
        let Some(key) = target
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
        else {
            return Err(Failed::new(
                Kind::Config,
                "no API key: pass --api-key or set DIALECTIC_API_KEY \
                 (locally, `eval \"$(deploy/stack.sh env)\"` sets the bootstrap key)",
            )
            .into());
        };
        let authorization = MetadataValue::try_from(format!("Bearer {key}"))
            .map_err(|_| Failed::new(Kind::Config, "the API key is not a valid header value"))?;
        let url = &target.url;
        let dial = dial(target)?;
        if let Dial::Unchecked(_) = dial {
            eprintln!(
                "warning: --insecure: the certificate of {url} is not checked; anyone \
                 on the way can read and change these calls, the API key included"
            );
        }
        let deadline = Instant::now() + target.patience;
        let channel = loop {
            let e = match dial.connect().await {
                Ok(channel) => break channel,
                Err(e) => e,
            };
            // Waiting does not fix a certificate or a protocol mismatch.
            if let Some(refused) = tls_refusal(&e) {
                return Err(refused.failure(url, &e).into());
            }
            if Instant::now() >= deadline {
                return Err(Failed::new(
                    Kind::Unavailable,
                    format!(
                        "cannot reach the gateway at {url}: {} \
                         (is it running? --gateway names another; \
                         --wait-for-gateway waits for one that is starting)",
                        causes(&e)
                    ),
                )
                .into());
            }
            note(&format!(
                "gateway {url} not reachable yet ({}); retrying",
                causes(&e)
            ));
            tokio::time::sleep(RETRY_DELAY).await;
        };
        Ok(Self {
            client: DialecticServiceClient::new(channel),
            authorization,
            timeout: target.timeout,
            patience: target.patience,
            plaintext: match &dial {
                Dial::Checked(endpoint) if endpoint.uri().scheme_str() == Some("http") => {
                    Some(Plaintext {
                        url: url.clone(),
                        host: host_of(endpoint.uri()),
                        port: endpoint.uri().port_u16().unwrap_or(80),
                    })
                }
                _ => None,
            },
        })
    }

    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert("authorization", self.authorization.clone());
        request
    }

    /// One call under `--timeout` (for a stream: until it starts); an
    /// UNAVAILABLE answer is retried only within `--wait-for-gateway`.
    pub async fn call<T, F, Fut>(&self, mut attempt: F) -> Result<T, Status>
    where
        F: FnMut(DialecticServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let deadline = Instant::now() + self.patience;
        loop {
            let answer = tokio::time::timeout(self.timeout, attempt(self.client.clone()))
                .await
                .unwrap_or_else(|_| {
                    Err(Status::deadline_exceeded(format!(
                        "no answer from the gateway within {} (--timeout)",
                        humantime::format_duration(self.timeout)
                    )))
                });
            match answer {
                Err(s) if s.code() == Code::Unavailable && Instant::now() < deadline => {
                    note(&format!("gateway unavailable ({}); retrying", s.message()));
                    tokio::time::sleep(RETRY_DELAY).await;
                }
                Ok(answer) => return Ok(answer.into_inner()),
                Err(s) => return Err(self.explain(s).await),
            }
        }
    }
    pub async fn create_project(&self, message: CreateProjectRequest) -> Result<Project> {
        let project = self
            .call(|mut c| {
                let request = self.request(message.clone());
                async move { c.create_project(request).await }
            })
            .await?;
        Ok(project)
    }

    pub async fn start_session(
        &self,
        project: &str,
        models: &[String],
        model_roles: &[(String, String)],
        auto_advance: bool,
        pushback: Option<Pushback>,
    ) -> Result<Session> {
        let message = StartSessionRequest {
            project_id: project.to_string(),
            models: models.to_vec(),
            model_roles: model_roles.iter().cloned().collect(),
            description: String::new(),
            client_request_id: client_request_id(),
            auto_advance,
            pushback: pushback.map_or(0, api_pushback),
        };
        Ok(self
            .call(|mut c| {
                let request = self.request(message.clone());
                async move { c.start_session(request).await }
            })
            .await?)
    }

    pub async fn session(&self, session: &str) -> Result<Session> {
        Ok(self
            .call(|mut c| {
                let request = self.request(GetSessionRequest {
                    session_id: session.to_string(),
                });
                async move { c.get_session(request).await }
            })
            .await?)
    }

    /// A plaintext client's calls to a TLS server fail in whatever way the
    /// connection happened to break (UNKNOWN "transport error", CANCELLED, an
    /// INTERNAL "h2 protocol error"), none of which says why. When such a
    /// failure, one no gateway would send (it carries no ErrorInfo), comes
    /// from an `http://` URL, ask the server whether it speaks TLS, and if
    /// so say so, as the unreachable gateway it is.
    async fn explain(&self, status: Status) -> Status {
        let Some(plain) = &self.plaintext else {
            return status;
        };
        let broken = matches!(
            status.code(),
            Code::Unknown | Code::Cancelled | Code::Internal | Code::Unavailable
        ) && status.details().is_empty();
        if !broken || !speaks_tls(&plain.host, plain.port).await {
            return status;
        }
        Status::unavailable(format!(
            "the gateway at {} serves TLS, so its URL starts with https:// \
             (plaintext gRPC to it failed: {})",
            plain.url,
            status.message()
        ))
    }

    /// Shows events in `view` until `format::Stop` says so. A dropped stream is
    /// watched again after the last event seen (`after_sequence`), so the
    /// gateway replays the ones missed; without a deadline it gives up after
    /// REWATCH_PATIENCE of failed attempts. Heartbeats only keep the stream open.
    pub async fn watch(
        &self,
        session: &str,
        until: Option<&str>,
        deadline: Option<Instant>,
        view: &mut progress::View,
    ) -> Result<()> {
        let mut stop = format::Stop::new(until);
        let mut last_ok = Instant::now();
        // The last event's sequence: where a new stream resumes.
        let mut cursor: Option<u64> = None;
        loop {
            let ended = async {
                let after_sequence = cursor;
                let mut stream = self
                    .call(|mut c| {
                        let request = self.request(WatchSessionRequest {
                            session_id: session.to_string(),
                            after_sequence,
                        });
                        async move { c.watch_session(request).await }
                    })
                    .await?;
                // Bars also need the job counts, which no event carries.
                let mut ticker = tokio::time::interval(progress::TICK);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    let item = tokio::select! {
                        item = stream.next() => item,
                        _ = ticker.tick(), if view.wants_counts() => {
                            self.read_counts(session, view, false).await;
                            continue;
                        }
                    };
                    let Some(item) = item else { break };
                    let event = item?;
                    if event.event_kind() == SessionEventKind::Heartbeat {
                        continue;
                    }
                    cursor = Some(event.sequence);
                    if event.history_truncated {
                        view.note("events were missed while the stream was down; from here on, the current state");
                    }
                    view.event(&event);
                    match stop.observe(&event.session_status) {
                        format::Verdict::Continue => {}
                        format::Verdict::Reached => {
                            self.read_counts(session, view, true).await;
                            return Ok(true);
                        }
                        format::Verdict::Ended(status) => {
                            // A failed stage's event says which step and how to retry.
                            let why = match event.message.as_str() {
                                "" => String::new(),
                                notice => format!(": {notice}"),
                            };
                            return Err(anyhow!(
                                "session ended as {status} before reaching {}{why}",
                                until.unwrap_or("a review state")
                            ));
                        }
                    }
                }
                Ok::<bool, anyhow::Error>(false)
            };
            let outcome = match deadline {
                Some(d) => match tokio::time::timeout_at(d.into(), ended).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        return Err(Failed::new(
                            Kind::TimedOut,
                            format!(
                                "timed out waiting for status {}; last status {}",
                                until.unwrap_or("a review state"),
                                stop.last().unwrap_or("unknown")
                            ),
                        )
                        .into());
                    }
                },
                None => ended.await,
            };
            match outcome {
                Ok(true) => return Ok(()),
                Ok(false) => last_ok = Instant::now(),
                Err(e) => {
                    let retryable = e
                        .downcast_ref::<Status>()
                        .is_some_and(|s| s.code() == Code::Unavailable);
                    if !retryable || (deadline.is_none() && last_ok.elapsed() > REWATCH_PATIENCE) {
                        return Err(e);
                    }
                }
            }
            match cursor {
                Some(n) => view.note(&format!("event stream ended; resuming after event {n}")),
                None => view.note("event stream ended; watching again"),
            }
            tokio::time::sleep(RETRY_DELAY).await;
        }
    }

    /// Reads the job counts `view`'s bars draw, when they are due (or
    /// `now`): one brief attempt, best effort, so events keep flowing.
    async fn read_counts(&self, session: &str, view: &mut progress::View, now: bool) {
        if !view.wants_counts() || !(now || view.counts_due(Instant::now())) {
            return;
        }
        let mut client = self.client.clone();
        let request = self.request(GetSessionRequest {
            session_id: session.to_string(),
        });
        let read = tokio::time::timeout(Duration::from_secs(2), client.get_session(request)).await;
        view.counts(
            read.ok()
                .and_then(Result::ok)
                .map(tonic::Response::into_inner),
        );
    }

    /// RENDER jobs do not gate a stage, so the last documents may still be
    /// rendering when the status moves on: wait until no job is in flight.
    pub async fn wait_for_renders(
        &self,
        session: &str,
        deadline: Instant,
        view: &mut progress::View,
    ) -> Result<()> {
        loop {
            let s = self.session(session).await?;
            let idle = s.jobs.iter().all(|j| j.in_flight == 0);
            view.counts(Some(s));
            if idle {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Failed::new(
                    Kind::TimedOut,
                    "timed out waiting for documents to render",
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn docs(&self, session: &str, stage: &str) -> Result<Vec<StageDocument>> {
        crate::paging::all("documents", |page_size, page_token| async move {
            let page = self
                .call(|mut c| {
                    let request = self.request(ListStageDocumentsRequest {
                        session_id: session.to_string(),
                        stage_slug: stage.to_string(),
                        iteration: 0,
                        page_size,
                        page_token: page_token.clone(),
                    });
                    async move { c.list_stage_documents(request).await }
                })
                .await?;
            Ok((page.documents, page.next_page_token))
        })
        .await
    }

    /// The stages of the pipeline version a session runs, to check `--until`
    /// against; None when the gateway does not list that version.
    pub async fn session_stages(&self, session: &Session) -> Result<Option<Vec<String>>> {
        let project = self
            .call(|mut c| {
                let request = self.request(GetProjectRequest {
                    project_id: session.project_id.clone(),
                });
                async move { c.get_project(request).await }
            })
            .await?;
        self.pipeline_stages(&project.pipeline, Some(session.pipeline_version))
            .await
    }

    /// The stages of a pipeline's `version`, or of its current one.
    pub async fn pipeline_stages(
        &self,
        slug: &str,
        version: Option<u32>,
    ) -> Result<Option<Vec<String>>> {
        let pipelines = crate::paging::all("pipelines", |page_size, page_token| async move {
            let page = self
                .call(|mut c| {
                    let request = self.request(ListPipelinesRequest {
                        page_size,
                        page_token: page_token.clone(),
                    });
                    async move { c.list_pipelines(request).await }
                })
                .await?;
            Ok((page.pipelines, page.next_page_token))
        })
        .await?;
        Ok(pipelines
            .into_iter()
            .find(|p| p.slug == slug && version.map_or(p.current, |v| v == p.version))
            .map(|p| p.stages))
    }
}

/// A request id that makes a retried create/start idempotent on the server.
pub fn client_request_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("cli-{}-{nanos}", std::process::id())
}

/// Pushback levels cross the API by name: `PUSHBACK_LIGHT` is `light`.
fn api_pushback(level: Pushback) -> i32 {
    dialectic_proto::names::to_api(
        "PUSHBACK",
        level.as_str(),
        dialectic_proto::v1::Pushback::from_str_name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str, ca_cert: Option<&str>) -> Target {
        Target {
            url: url.into(),
            api_key: Some("dlk_test".into()),
            ca_cert: ca_cert.map(Into::into),
            insecure: false,
            timeout: Duration::from_secs(1),
            patience: Duration::ZERO,
        }
    }

    #[test]
    fn a_ca_needs_https_and_a_readable_pem_file() {
        let refused = endpoint(&target("http://gw:7051", Some("/ca.pem"))).expect_err("http");
        assert_eq!(refused.kind, Kind::Usage);
        assert!(refused.message.contains("https://"), "{}", refused.message);

        let missing = "/nonexistent/dialectic-ca.pem";
        let refused = endpoint(&target("https://gw:7051", Some(missing))).expect_err("no file");
        assert_eq!(refused.kind, Kind::Config);
        assert!(refused.message.contains(missing), "{}", refused.message);

        let not_pem = std::env::temp_dir().join(format!("dialectic-ca-{}.pem", std::process::id()));
        std::fs::write(&not_pem, "not a certificate\n").expect("temp file");
        let refused =
            endpoint(&target("https://gw:7051", not_pem.to_str())).expect_err("no certificate");
        let _ = std::fs::remove_file(&not_pem);
        assert_eq!(refused.kind, Kind::Config);
        assert!(
            refused.message.contains("no PEM certificate"),
            "{}",
            refused.message
        );

        let refused = endpoint(&target("gw:7051", None)).expect_err("no scheme");
        assert_eq!(refused.kind, Kind::Usage);
        assert!(endpoint(&target("http://gw:7051", None)).is_ok());
    }
}
