//! TLS on a public port (the gateway's): the certificate chain and key are
//! read and checked at startup, so a missing, unreadable or mismatched file
//! stops the process with its name instead of failing every handshake. Then
//! they are read again whenever the files change (the kubelet replaces a
//! mounted Secret's files in place when cert-manager renews it), so new
//! handshakes present the new certificate without a restart.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    NoCertificate { path: PathBuf },
    #[error("{path} is not a PEM certificate chain: {reason}")]
    BadCertificate { path: PathBuf, reason: String },
    #[error("{path} holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {reason}")]
    BadKey { path: PathBuf, reason: String },
    #[error("the key in {key} does not fit the certificate in {cert}: {reason}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("gateway.tls_cert and gateway.tls_key are set together or not at all")]
    Half,
    #[error("the server refused the certificate: {0}")]
    Unusable(String),
}

/// How often a handshake may look at the files' metadata for a change.
const RECHECK: Duration = Duration::from_secs(1);

/// A server's certificate chain and the private key that goes with it, as
/// the files named hold them now.
#[derive(Clone)]
pub struct TlsIdentity {
    resolver: Arc<Reloading>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsIdentity(<certificate and key>)")
    }
}

impl TlsIdentity {
    /// The identity a pair of settings names: None when both are empty,
    /// an error when only one is set.
    pub fn from_settings(cert: &str, key: &str) -> Result<Option<Self>, TlsError> {
        match (cert.trim(), key.trim()) {
            ("", "") => Ok(None),
            ("", _) | (_, "") => Err(TlsError::Half),
            (cert, key) => Self::load(Path::new(cert), Path::new(key)).map(Some),
        }
    }

    /// Reads `cert` (chain, leaf first) and `key`, and checks that the key
    /// is the certificate's.
    pub fn load(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let stamp = Stamp::of(cert, key);
        let current = read_pair(cert, key)?;
        // The acceptor's config names aws-lc-rs itself, but rustls cannot
        // pick a process default when, as here, both aws-lc-rs and ring are
        // compiled in (reqwest brings ring), and other TLS users ask for one.
        let _ = CryptoProvider::install_default(rustls::crypto::aws_lc_rs::default_provider());
        Ok(Self {
            resolver: Arc::new(Reloading {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
                state: Mutex::new(Loaded {
                    current,
                    stamp,
                    checked: Instant::now(),
                    refused: None,
                }),
            }),
        })
    }

    /// The server config of the public port: TLS 1.2 and 1.3, ALPN h2, the
    /// certificate the files hold at each handshake.
    fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Unusable(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(self.resolver.clone());
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The chain and key in `cert` and `key`, checked to belong together.
fn read_pair(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let (cert_pem, key_pem) = (read(cert)?, read(key)?);
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadCertificate {
            path: cert.to_path_buf(),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert.to_path_buf(),
        });
    }
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::BadKey {
        path: key.to_path_buf(),
        reason: e.to_string(),
    })?;
    let mismatch = |e: rustls::Error| TlsError::Mismatch {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        reason: e.to_string(),
    };
    // The same checks a server config makes of one certificate.
    rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .and_then(|builder| {
            builder
                .with_no_client_auth()
                .with_single_cert(chain.clone(), private.clone_key())
        })
        .map_err(mismatch)?;
    CertifiedKey::from_der(chain, private, &provider())
        .map(Arc::new)
        .map_err(mismatch)
}

/// What identifies the files' contents without reading them: each one's
/// modification time, inode and length (the kubelet swaps in new files,
/// so the inode changes even within one clock tick).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp([Option<(SystemTime, u64, u64)>; 2]);

impl Stamp {
    fn of(cert: &Path, key: &Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        let one = |path: &Path| {
            std::fs::metadata(path)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.ino(), m.len())))
        };
        Self([one(cert), one(key)])
    }
}

/// The certificate resolver: the pair last read, read again when the
/// files' stamp changes (looked at most once per [`RECHECK`]). A new pair
/// that does not load (half written, a key that does not fit) leaves the
/// old one in use, logged once, until the files change again.
#[derive(Debug)]
struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    current: Arc<CertifiedKey>,
    stamp: Stamp,
    checked: Instant,
    /// The stamp of files that failed to load: not tried again, not logged again.
    refused: Option<Stamp>,
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= RECHECK {
            state.checked = Instant::now();
            let stamp = Stamp::of(&self.cert, &self.key);
            if stamp != state.stamp && state.refused.as_ref() != Some(&stamp) {
                match read_pair(&self.cert, &self.key) {
                    Ok(pair) => {
                        tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
                        state.current = pair;
                        state.stamp = stamp;
                        state.refused = None;
                    }
                    Err(e) => {
                        tracing::warn!(
                            error = %e,
                            "the TLS certificate files changed but do not load; \
                             serving the previous certificate"
                        );
                        state.refused = Some(stamp);
                    }
                }
            }
        }
        Some(state.current.clone())
    }
}

/// A connection the public port accepted: plaintext, or TLS over TCP.
pub(crate) enum Conn {
    Plain(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>),
}

macro_rules! delegate {
    ($self:ident, $inner:ident => $call:expr) => {
        match $self.get_mut() {
            Conn::Plain($inner) => {
                let $inner = std::pin::Pin::new($inner);
                $call
            }
            Conn::Tls($inner) => {
                let $inner = std::pin::Pin::new($inner.as_mut());
                $call
            }
        }
    };
}

impl tokio::io::AsyncRead for Conn {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        delegate!(self, io => io.poll_read(cx, buf))
    }
}

impl tokio::io::AsyncWrite for Conn {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        delegate!(self, io => io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        delegate!(self, io => io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(tcp) => tcp.is_write_vectored(),
            Conn::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        delegate!(self, io => io.poll_flush(cx))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        delegate!(self, io => io.poll_shutdown(cx))
    }
}

/// The TLS handshakes of one port: each bounded by a timeout, and at most
/// so many at once past the client's hello (the part that costs the server
/// its key exchange and signature), the wait for a slot counted inside the
/// timeout. Reading a hello takes no slot, so clients that connect and send
/// nothing cannot keep a legitimate one waiting.
#[derive(Clone)]
pub(crate) struct Handshakes {
    config: Arc<rustls::ServerConfig>,
    slots: Arc<tokio::sync::Semaphore>,
    timeout: Duration,
}

impl Handshakes {
    pub(crate) fn new(
        identity: &TlsIdentity,
        slots: usize,
        timeout: Duration,
    ) -> Result<Self, TlsError> {
        Ok(Self {
            config: identity.server_config()?,
            slots: Arc::new(tokio::sync::Semaphore::new(slots)),
            timeout,
        })
    }

    /// `tcp` past its handshake; None (logged) when it failed or timed out.
    pub(crate) async fn accept(&self, tcp: tokio::net::TcpStream) -> Option<Conn> {
        let peer = tcp.peer_addr().ok();
        let handshake = async {
            let hello =
                tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), tcp)
                    .await?;
            // Never closed: a slot always comes, or the timeout first.
            let _slot = self.slots.acquire().await.map_err(std::io::Error::other)?;
            hello.into_stream(self.config.clone()).await
        };
        match tokio::time::timeout(self.timeout, handshake).await {
            Ok(Ok(stream)) => Some(Conn::Tls(Box::new(stream))),
            Ok(Err(e)) => {
                tracing::debug!(?peer, error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!(?peer, "TLS handshake timed out");
                None
            }
        }
    }
}

fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_a_pair_and_missing_files_are_named() {
        assert!(matches!(TlsIdentity::from_settings("", ""), Ok(None)));
        assert!(matches!(
            TlsIdentity::from_settings("/x.crt", " "),
            Err(TlsError::Half)
        ));
        let missing = TlsIdentity::from_settings("/nonexistent/tls.crt", "/nonexistent/tls.key")
            .expect_err("no such file");
        assert!(
            missing.to_string().contains("/nonexistent/tls.crt"),
            "{missing}"
        );
    }

    #[test]
    fn a_file_without_a_certificate_is_refused() {
        let dir = std::env::temp_dir().join(format!("dialectic-tls-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, "not a certificate\n").expect("write");
        std::fs::write(&key, "not a key\n").expect("write");
        let refused = TlsIdentity::load(&cert, &key).expect_err("no certificate");
        assert!(
            matches!(&refused, TlsError::NoCertificate { path } if path == &cert),
            "{refused}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
