//! TLS on a public port (the gateway's): the certificate chain and key are
//! read and checked once at startup, so a missing, unreadable or mismatched
//! file stops the process with its name instead of failing every handshake.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Identity, ServerTlsConfig};

/// A client that opens a connection and never finishes its handshake gives
/// up its slot after this long, rather than holding a task until it leaves.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// A server's certificate chain and the private key that goes with it.
#[derive(Clone)]
pub struct TlsIdentity {
    identity: Identity,
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
        rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .and_then(|builder| {
                builder
                    .with_no_client_auth()
                    .with_single_cert(chain, private)
            })
            .map_err(|e| TlsError::Mismatch {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
                reason: e.to_string(),
            })?;
        // tonic builds its acceptor with the process's default provider, and
        // rustls cannot pick one itself when, as here, both aws-lc-rs and ring
        // are compiled in (reqwest brings ring): it would panic.
        let _ = CryptoProvider::install_default(rustls::crypto::aws_lc_rs::default_provider());
        Ok(Self {
            identity: Identity::from_pem(cert_pem, key_pem),
        })
    }

    pub(crate) fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .timeout(HANDSHAKE_TIMEOUT)
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
