//! Service identity on the wire (rules in `dialectic_core::service_auth`): the
//! server layer every gRPC server runs, which refuses an internal call without
//! a valid token for it from an admitted caller (and any path listed nowhere),
//! and the client interceptor that signs every internal call this service
//! makes for the service it calls.

use crate::error_status::Failure;
use dialectic_core::error::{ErrorCode, Reason};
use dialectic_core::service_auth::{
    self, Access, HEADER, KeyError, PublicKeys, ServiceName, SigningKey, TokenError,
};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// This service's identity on the wire: its own private key, to sign the
/// calls it makes, and every service's public key, to check the calls it gets.
#[derive(Clone)]
pub struct ServiceKey {
    me: ServiceName,
    signing: Arc<SigningKey>,
    public: Arc<PublicKeys>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceKeyError {
    #[error("service key file {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the service key {path} is unusable: {source}")]
    Bad { path: PathBuf, source: KeyError },
}

impl ServiceKey {
    /// `me`'s key as `internal` configures it: from `key_dir` (this
    /// service's `.key`, every service's `.pub`), else derived from
    /// `token_secret`, which every service of the deployment then shares.
    pub fn from_settings(
        settings: &dialectic_config::Settings,
        me: ServiceName,
    ) -> Result<Self, ServiceKeyError> {
        let internal = &settings.internal;
        if internal.key_dir.trim().is_empty() {
            return Ok(Self::derived(internal.token_secret.as_bytes(), me));
        }
        let dir = Path::new(internal.key_dir.trim());
        let signing = SigningKey::from_hex(&read_key(&key_file(dir, me, "key"))?)
            .map_err(|source| bad(dir, me, "key", source))?;
        let mut public = PublicKeys::default();
        for service in ServiceName::ALL {
            let path = key_file(dir, service, "pub");
            match std::fs::read_to_string(&path) {
                Ok(text) => public
                    .insert_hex(service, &text)
                    .map_err(|source| bad(dir, service, "pub", source))?,
                // A service whose public key is absent is refused as a caller.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(ServiceKeyError::File { path, source }),
            }
        }
        Ok(Self {
            me,
            signing: Arc::new(signing),
            public: Arc::new(public),
        })
    }

    fn derived(secret: &[u8], me: ServiceName) -> Self {
        let mut public = PublicKeys::default();
        for service in ServiceName::ALL {
            public.insert(service, SigningKey::derived(secret, service).public_key());
        }
        Self {
            me,
            signing: Arc::new(SigningKey::derived(secret, me)),
            public: Arc::new(public),
        }
    }

    /// A fresh token naming this service, good only at `audience`.
    pub fn mint(&self, audience: ServiceName) -> String {
        service_auth::mint(&self.signing, self.me, audience, now_unix())
    }
}

/// Writes a new key pair for every service into `dir`: `{service}.key`
/// (owner-only) and `{service}.pub`. Existing keys are never overwritten:
/// rotation writes a new directory (docs: "Service keys").
pub fn generate_keys(dir: &Path) -> Result<(), ServiceKeyError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ServiceKeyError::File { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    for service in ServiceName::ALL {
        let seed = SigningKey::random_seed().map_err(|source| bad(dir, service, "key", source))?;
        let signing =
            SigningKey::from_seed(&seed).map_err(|source| bad(dir, service, "key", source))?;
        let private = key_file(dir, service, "key");
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&private)
            .and_then(|mut file| writeln!(file, "{}", service_auth::hex(&seed)))
            .map_err(io(&private))?;
        let public = key_file(dir, service, "pub");
        std::fs::write(
            &public,
            format!("{}\n", service_auth::hex(&signing.public_key())),
        )
        .map_err(io(&public))?;
    }
    Ok(())
}

/// `{dir}/{service}.{kind}`, as [`generate_keys`] writes them.
pub fn key_file(dir: &Path, service: ServiceName, kind: &str) -> PathBuf {
    dir.join(format!("{}.{kind}", service.as_str()))
}

fn read_key(path: &Path) -> Result<String, ServiceKeyError> {
    std::fs::read_to_string(path).map_err(|source| ServiceKeyError::File {
        path: path.to_path_buf(),
        source,
    })
}

fn bad(dir: &Path, service: ServiceName, kind: &str, source: KeyError) -> ServiceKeyError {
    ServiceKeyError::Bad {
        path: key_file(dir, service, kind),
        source,
    }
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The verified calling service, for handlers that trust it with more (the
/// wallet takes the acting user from the gateway only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller(pub ServiceName);

/// Whom `request` comes from, if it carries a valid service token.
pub fn caller<T>(request: &tonic::Request<T>) -> Option<ServiceName> {
    request.extensions().get::<Caller>().map(|c| c.0)
}

fn check<B>(key: &ServiceKey, request: &mut http::Request<B>) -> Result<(), tonic::Status> {
    let path = request.uri().path().to_string();
    let (audience, callers) = match service_auth::access(&path) {
        Access::Public => return Ok(()),
        Access::Internal { audience, callers } => (audience, callers),
        Access::Unlisted => {
            let message = format!("{path} is not a method anyone may call here");
            return Err(Failure::new(
                ErrorCode::PermissionDenied,
                Reason::MethodNotListed,
                message,
            )
            .into());
        }
    };
    let service = request
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or(TokenError::Missing)
        .and_then(|token| service_auth::verify(&key.public, token, audience, now_unix()))
        .map_err(|e| {
            let message = format!(
                "{path} is internal: {e}; each service signs with its own key \
                 (internal.key_dir, or keys derived from internal.token_secret)"
            );
            Failure::new(
                ErrorCode::Unauthenticated,
                Reason::ServiceTokenRejected,
                message,
            )
        })?;
    if !callers.contains(&service) {
        let message = format!("the {} service may not call {path}", service.as_str());
        let refused = Failure::new(
            ErrorCode::PermissionDenied,
            Reason::ServiceNotAdmitted,
            message,
        )
        .with("service", service.as_str());
        return Err(refused.into());
    }
    request.extensions_mut().insert(Caller(service));
    Ok(())
}

/// Refuses internal calls without an admitted service identity.
#[derive(Clone)]
pub struct ServiceAuthLayer {
    key: ServiceKey,
}

impl ServiceAuthLayer {
    pub fn new(key: ServiceKey) -> Self {
        Self { key }
    }
}

impl<S> tower::Layer<S> for ServiceAuthLayer {
    type Service = ServiceAuth<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ServiceAuth {
            inner,
            key: self.key.clone(),
        }
    }
}

#[derive(Clone)]
pub struct ServiceAuth<S> {
    inner: S,
    key: ServiceKey,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for ServiceAuth<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
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

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Err(status) = check(&self.key, &mut request) {
            return Box::pin(async move { Ok(status.into_http()) });
        }
        // The clone is the one that was not polled ready; keep the ready one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(inner.call(request))
    }
}

/// Signs every outgoing call as its key's service for the service it calls, and carries
/// the caller's trace.
#[derive(Clone)]
pub struct InternalInterceptor {
    key: ServiceKey,
}

impl tonic::service::Interceptor for InternalInterceptor {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let mut request = crate::observe::TraceInterceptor.call(request)?;
        // Generated clients name the method they call; its service is the audience.
        let audience = request
            .extensions()
            .get::<tonic::GrpcMethod<'static>>()
            .and_then(|m| ServiceName::serving(m.service()))
            .ok_or_else(|| {
                let message = "an internal call to a service that is no internal service";
                tonic::Status::from(Failure::new(ErrorCode::Internal, Reason::Internal, message))
            })?;
        let token = self.key.mint(audience).parse().map_err(|_| {
            let message = "a service token is not valid metadata";
            tonic::Status::from(Failure::new(ErrorCode::Internal, Reason::Internal, message))
        })?;
        request.metadata_mut().insert(HEADER, token);
        Ok(request)
    }
}

/// A client channel for calls from one internal service to another.
pub type InternalChannel =
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, InternalInterceptor>;

pub fn internal_channel(channel: tonic::transport::Channel, key: ServiceKey) -> InternalChannel {
    tonic::service::interceptor::InterceptedService::new(channel, InternalInterceptor { key })
}

/// A channel to the internal service at `url`, balanced over its replicas
/// (`crate::balance`) and signed as `me`.
pub fn internal_client(
    settings: &dialectic_config::Settings,
    url: &str,
    me: ServiceName,
) -> Result<InternalChannel, crate::RuntimeError> {
    let channel = crate::balance::balanced_channel(url.trim(), &settings.internal)?;
    Ok(internal_channel(
        channel,
        ServiceKey::from_settings(settings, me)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// A method missing from the table is refused at run time; this names it
    /// before it ships.
    #[test]
    fn every_method_of_every_service_is_in_the_table() {
        let set = prost_types::FileDescriptorSet::decode(dialectic_proto::FILE_DESCRIPTOR_SET)
            .expect("the compiled descriptors decode");
        let mut seen = 0;
        for file in &set.file {
            for svc in &file.service {
                for method in &svc.method {
                    let path = format!("/{}.{}/{}", file.package(), svc.name(), method.name());
                    assert_ne!(service_auth::access(&path), Access::Unlisted, "{path}");
                    seen += 1;
                }
            }
        }
        assert!(seen > 40, "only {seen} methods");
    }

    fn settings_with_keys(dir: &Path) -> dialectic_config::Settings {
        let mut settings = dialectic_config::Settings::default();
        settings.internal.key_dir = dir.display().to_string();
        settings
    }

    /// A pod holding only the executor's private key signs as the executor;
    /// claiming the gateway, it is refused by every verifier.
    #[test]
    fn generated_keys_sign_only_as_their_own_service() {
        let dir = std::env::temp_dir().join(format!("dialectic-keys-{}", uuid::Uuid::new_v4()));
        generate_keys(&dir).expect("keys written");
        let settings = settings_with_keys(&dir);
        let executor = ServiceKey::from_settings(&settings, ServiceName::Executor).expect("keys");
        let wallet = ServiceKey::from_settings(&settings, ServiceName::Wallet).expect("keys");
        let token = executor.mint(ServiceName::Wallet);
        let now = now_unix();
        assert_eq!(
            service_auth::verify(&wallet.public, &token, ServiceName::Wallet, now),
            Ok(ServiceName::Executor)
        );
        let forged = service_auth::mint(
            &executor.signing,
            ServiceName::Gateway,
            ServiceName::Wallet,
            now,
        );
        assert_eq!(
            service_auth::verify(&wallet.public, &forged, ServiceName::Wallet, now),
            Err(TokenError::BadSignature("gateway"))
        );
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(key_file(&dir, ServiceName::Executor, "key"))
                .expect("key file")
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert!(generate_keys(&dir).is_err(), "existing keys are kept");
        std::fs::remove_file(key_file(&dir, ServiceName::Gateway, "key")).expect("removed");
        let missing = ServiceKey::from_settings(&settings, ServiceName::Gateway);
        assert!(
            matches!(missing, Err(ServiceKeyError::File { .. })),
            "a service without its own key does not start"
        );
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }
}
