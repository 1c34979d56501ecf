//! Service identity on the wire (rules in `dialectic_core::service_auth`): the
//! server layer every gRPC server runs, which refuses an internal call without
//! a valid token for it from an admitted caller (and any path listed nowhere),
//! and the client service that signs every internal call this service makes
//! for the service it calls, bound to that call.
//!
//! A token signs the call's method, acting user and body, so both ends read
//! the body whole: the client before it sends, the server before the handler
//! decodes it. Every internal method takes a single (unary) request message,
//! bounded by tonic's decoding limit, so buffering one costs what decoding it
//! does. The server checks the token's signature, time and caller before it
//! reads a byte of the body, so only an admitted service can make it buffer.
//! A streaming request would be read whole too: an internal method that
//! streams its requests must not be added without changing this.

use crate::error_status::Failure;
use bytes::Bytes;
use dialectic_core::error::{ErrorCode, Reason};
use dialectic_core::service_auth::{
    self, Access, Call, HEADER, KeyError, Nonce, PREVIOUS_HEADER, PublicKeys, ServiceName, Signed,
    SigningKey, TokenError, USER_HEADER,
};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

/// The largest request body a token is checked against (both ends buffer
/// it): far above tonic's 4 MiB default decoding limit, so it bounds only
/// what an admitted caller can make a server hold.
pub const MAX_SIGNED_BODY: usize = 64 * 1024 * 1024;

/// This service's identity on the wire: its own private key, to sign the
/// calls it makes, and every service's public key, to check the calls it gets.
#[derive(Clone)]
pub struct ServiceKey {
    me: ServiceName,
    signing: Arc<SigningKey>,
    public: Arc<PublicKeys>,
    /// `internal.accept_previous_tokens`: verify v3 tokens too, and send one
    /// beside each v4 token, for one release's rolling upgrade.
    previous: bool,
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
            return Ok(Self::derived(internal.token_secret.as_bytes(), me)
                .with_previous(internal.accept_previous_tokens));
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
            previous: internal.accept_previous_tokens,
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
            previous: false,
        }
    }

    /// This key, accepting (and sending) previous-format tokens or not.
    pub fn with_previous(mut self, previous: bool) -> Self {
        self.previous = previous;
        self
    }

    /// A fresh token naming this service, good only at `audience` for `call`.
    pub fn sign(&self, audience: ServiceName, call: &Call) -> Result<String, KeyError> {
        let nonce = service_auth::random_nonce()?;
        Ok(self.sign_at(audience, call, &nonce, now_unix()))
    }

    /// [`Self::sign`] with a chosen nonce and clock.
    pub fn sign_at(&self, audience: ServiceName, call: &Call, nonce: &Nonce, now: i64) -> String {
        service_auth::mint(&self.signing, self.me, audience, call, nonce, now)
    }

    /// A previous-format (v3) token naming this service for `audience`.
    pub fn sign_previous(&self, audience: ServiceName) -> String {
        service_auth::mint_previous(&self.signing, self.me, audience, now_unix())
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

/// What the layer decided before reading a request's body.
enum Gate {
    /// Public, or admitted on a previous-format token: passed on as it is.
    Open,
    /// An admitted caller's token, in time, whose binding to the call (and,
    /// for a money-moving call, whose nonce) is still to be checked.
    Bound(Signed),
}

fn token<B>(request: &http::Request<B>, header: &str) -> Option<String> {
    let value = request.headers().get(header)?;
    Some(value.to_str().unwrap_or_default().to_string())
}

fn rejected(path: &str, e: TokenError) -> tonic::Status {
    let message = format!(
        "{path} is internal: {e}; each service signs with its own key \
         (internal.key_dir, or keys derived from internal.token_secret)"
    );
    Failure::new(
        ErrorCode::Unauthenticated,
        Reason::ServiceTokenRejected,
        message,
    )
    .into()
}

/// Everything that needs no request body: the path's table entry, the
/// token's signature, time and audience, and whether its caller is admitted.
fn gate<B>(key: &ServiceKey, request: &mut http::Request<B>) -> Result<Gate, tonic::Status> {
    let path = request.uri().path().to_string();
    let (audience, callers) = match service_auth::access(&path) {
        Access::Public => return Ok(Gate::Open),
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
    let now = now_unix();
    let checked = match (token(request, HEADER), token(request, PREVIOUS_HEADER)) {
        (Some(token), _) => service_auth::verify_signed(&key.public, &token, audience, now)
            .map(|signed| (signed.caller, Gate::Bound(signed))),
        (None, Some(token)) if key.previous => {
            service_auth::verify_previous(&key.public, &token, audience, now)
                .map(|caller| (caller, Gate::Open))
        }
        (None, Some(_)) => Err(TokenError::Previous),
        (None, None) => Err(TokenError::Missing),
    };
    let (service, gate) = checked.map_err(|e| rejected(&path, e))?;
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
    Ok(gate)
}

/// The request, once its body is read and `signed` is seen to be for it
/// (and, for a money-moving call, used for the first time).
async fn bound(
    request: http::Request<tonic::body::Body>,
    signed: Signed,
    replays: &ReplayCache,
) -> Result<http::Request<tonic::body::Body>, tonic::Status> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let body = buffered(body).await?;
    let user = parts
        .headers
        .get(USER_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    let signed = signed
        .bound_to(&Call::new(&path, user, &body))
        .map_err(|e| rejected(&path, e))?;
    if service_auth::single_use(&path) && !replays.first_use(signed.nonce, signed.expires) {
        return Err(rejected(&path, TokenError::Replayed));
    }
    Ok(http::Request::from_parts(parts, whole(body)))
}

/// A request body read whole, up to [`MAX_SIGNED_BODY`].
async fn buffered(body: tonic::body::Body) -> Result<Bytes, tonic::Status> {
    use http_body_util::BodyExt;
    let read = http_body_util::Limited::new(body, MAX_SIGNED_BODY)
        .collect()
        .await;
    read.map(|collected| collected.to_bytes()).map_err(|e| {
        let message =
            format!("an internal request body is unreadable or above {MAX_SIGNED_BODY} bytes: {e}");
        Failure::new(
            ErrorCode::ResourceExhausted,
            Reason::ResourceExhausted,
            message,
        )
        .into()
    })
}

fn whole(body: Bytes) -> tonic::body::Body {
    tonic::body::Body::new(http_body_util::Full::new(body))
}

/// The nonces of money-moving calls this process has taken, each kept until
/// its token expires (a token is refused after that anyway), so a token is
/// honoured once. Per process: a wallet replica does not see another's
/// nonces (OPERATIONS.md, "Service identity", says what that leaves).
#[derive(Debug, Default)]
pub struct ReplayCache {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    nonces: HashMap<Nonce, i64>,
    pruned_at: i64,
}

impl ReplayCache {
    /// True the first time `nonce` is offered, false ever after (until
    /// `expires`, when its token is dead).
    pub fn first_use(&self, nonce: Nonce, expires: i64) -> bool {
        self.first_use_at(nonce, expires, now_unix())
    }

    fn first_use_at(&self, nonce: Nonce, expires: i64, now: i64) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        // At most once a second: the map holds a minute's money-moving calls.
        if seen.pruned_at < now {
            seen.nonces.retain(|_, until| *until >= now);
            seen.pruned_at = now;
        }
        match seen.nonces.entry(nonce) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(expires);
                true
            }
        }
    }

    pub fn len(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .nonces
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Refuses internal calls without an admitted service identity.
/// One per server: the money-moving calls it serves (the wallet's) share
/// its replay cache.
#[derive(Clone)]
pub struct ServiceAuthLayer {
    key: ServiceKey,
    replays: Arc<ReplayCache>,
}

impl ServiceAuthLayer {
    pub fn new(key: ServiceKey) -> Self {
        Self {
            key,
            replays: Arc::default(),
        }
    }
}

impl<S> tower::Layer<S> for ServiceAuthLayer {
    type Service = ServiceAuth<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ServiceAuth {
            inner,
            key: self.key.clone(),
            replays: self.replays.clone(),
        }
    }
}

#[derive(Clone)]
pub struct ServiceAuth<S> {
    inner: S,
    key: ServiceKey,
    replays: Arc<ReplayCache>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> tower::Service<http::Request<tonic::body::Body>> for ServiceAuth<S>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        let gate = match gate(&self.key, &mut request) {
            Ok(gate) => gate,
            Err(status) => return Box::pin(async move { Ok(status.into_http()) }),
        };
        // The clone is the one that was not polled ready; keep the ready one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let Gate::Bound(signed) = gate else {
            return Box::pin(inner.call(request));
        };
        let replays = self.replays.clone();
        Box::pin(async move {
            match bound(request, signed, &replays).await {
                Ok(request) => inner.call(request).await,
                Err(status) => Ok(status.into_http()),
            }
        })
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Signs every outgoing call as its key's service for the service it calls,
/// bound to the call: its path, its acting user ([`USER_HEADER`], set by the
/// caller before this sees it) and its body, read whole here.
#[derive(Clone)]
pub struct Signing<S> {
    inner: S,
    key: ServiceKey,
    /// Sign for this service whatever the path names (tests aim tokens wrong).
    audience: Option<ServiceName>,
}

impl<S> Signing<S> {
    pub fn new(inner: S, key: ServiceKey) -> Self {
        Self {
            inner,
            key,
            audience: None,
        }
    }

    /// Tokens for `audience` on every call, whichever service it goes to.
    pub fn aimed_at(mut self, audience: ServiceName) -> Self {
        self.audience = Some(audience);
        self
    }
}

fn internal_error(message: &str) -> BoxError {
    Box::new(tonic::Status::from(Failure::new(
        ErrorCode::Internal,
        Reason::Internal,
        message,
    )))
}

/// `request` with its body read whole and its token(s) in its headers.
async fn signed(
    request: http::Request<tonic::body::Body>,
    key: &ServiceKey,
    audience: Option<ServiceName>,
) -> Result<http::Request<tonic::body::Body>, BoxError> {
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    // Generated clients call `/package.Service/Method`; that service is the audience.
    let audience = audience
        .or_else(|| {
            let api = path.strip_prefix('/')?.split_once('/')?.0;
            ServiceName::serving(api)
        })
        .ok_or_else(|| {
            internal_error("an internal call to a service that is no internal service")
        })?;
    let body = buffered(body).await?;
    let user = parts
        .headers
        .get(USER_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    let call = Call::new(&path, user, &body);
    let token = key
        .sign(audience, &call)
        .map_err(|e| internal_error(&format!("cannot sign an internal call: {e}")))?;
    let value = |token: String| {
        http::HeaderValue::try_from(token)
            .map_err(|_| internal_error("a service token is not valid metadata"))
    };
    parts.headers.insert(HEADER, value(token)?);
    if key.previous {
        // Previous-release verifiers read only this one.
        parts
            .headers
            .insert(PREVIOUS_HEADER, value(key.sign_previous(audience))?);
    }
    Ok(http::Request::from_parts(parts, whole(body)))
}

impl<S, RB> tower::Service<http::Request<tonic::body::Body>> for Signing<S>
where
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<RB>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<RB>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        // The clone is the one that was not polled ready; keep the ready one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (key, audience) = (self.key.clone(), self.audience);
        Box::pin(async move {
            let request = signed(request, &key, audience).await?;
            inner.call(request).await.map_err(Into::into)
        })
    }
}

/// A client channel for calls from one internal service to another: traced
/// and signed.
pub type InternalChannel = Signing<crate::observe::TracedChannel>;

pub fn internal_channel(channel: tonic::transport::Channel, key: ServiceKey) -> InternalChannel {
    Signing::new(crate::observe::traced(channel), key)
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
        let call = Call::new(HOLD, b"", b"hold");
        let token = executor.sign(ServiceName::Wallet, &call).expect("signed");
        let now = now_unix();
        let verify = |token: &str| {
            service_auth::verify(&wallet.public, token, ServiceName::Wallet, &call, now)
                .map(|signed| signed.caller)
        };
        assert_eq!(verify(&token), Ok(ServiceName::Executor));
        let forged = service_auth::mint(
            &executor.signing,
            ServiceName::Gateway,
            ServiceName::Wallet,
            &call,
            &[0; 16],
            now,
        );
        assert_eq!(verify(&forged), Err(TokenError::BadSignature("gateway")));
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

    const CREDIT: &str = "/dialectic.v1.wallet.WalletService/Credit";
    const HOLD: &str = "/dialectic.v1.wallet.WalletService/Hold";
    const BALANCE: &str = "/dialectic.v1.wallet.WalletService/GetBalance";
    const ADMIN: &str = "0192f0c0-0000-7000-8000-000000000001";
    const OTHER: &str = "0192f0c0-0000-7000-8000-000000000002";

    fn key(me: ServiceName) -> ServiceKey {
        ServiceKey::derived(b"unit test deployment", me)
    }

    /// What a request looks like on the wire, to send again as it is or altered.
    #[derive(Debug, Clone)]
    struct Wire {
        path: String,
        headers: http::HeaderMap,
        body: Bytes,
    }

    impl Wire {
        fn new(path: &str, user: Option<&str>, body: &[u8]) -> Self {
            let mut headers = http::HeaderMap::new();
            headers.insert(
                "content-type",
                http::HeaderValue::from_static("application/grpc"),
            );
            if let Some(user) = user {
                headers.insert(USER_HEADER, user.parse().expect("header"));
            }
            Self {
                path: path.to_string(),
                headers,
                body: Bytes::copy_from_slice(body),
            }
        }

        fn request(&self) -> http::Request<tonic::body::Body> {
            let mut request = http::Request::builder()
                .method("POST")
                .uri(format!("http://wallet{}", self.path))
                .body(whole(self.body.clone()))
                .expect("request");
            *request.headers_mut() = self.headers.clone();
            request
        }

        fn at(&self, path: &str) -> Self {
            Self {
                path: path.to_string(),
                ..self.clone()
            }
        }

        fn acting_for(&self, user: &str) -> Self {
            let mut moved = self.clone();
            moved
                .headers
                .insert(USER_HEADER, user.parse().expect("header"));
            moved
        }

        fn carrying(&self, body: &[u8]) -> Self {
            Self {
                body: Bytes::copy_from_slice(body),
                ..self.clone()
            }
        }
    }

    /// `wire` as the [`Signing`] client of `key` sends it.
    async fn signed_by(key: ServiceKey, wire: &Wire) -> Wire {
        use tower::ServiceExt;
        let seen = Arc::new(Mutex::new(None));
        let capture = tower::service_fn({
            let seen = seen.clone();
            move |request: http::Request<tonic::body::Body>| {
                let seen = seen.clone();
                async move {
                    let (parts, body) = request.into_parts();
                    let body = buffered(body).await?;
                    let path = parts.uri.path().to_string();
                    *seen.lock().expect("capture") = Some(Wire {
                        path,
                        headers: parts.headers,
                        body,
                    });
                    Ok::<_, BoxError>(http::Response::new(tonic::body::Body::empty()))
                }
            }
        });
        Signing::new(capture, key)
            .oneshot(wire.request())
            .await
            .expect("signed and sent");
        let sent = seen.lock().expect("capture").take();
        sent.expect("the call went out")
    }

    type Handler = tower::util::BoxCloneService<
        http::Request<tonic::body::Body>,
        http::Response<tonic::body::Body>,
        std::convert::Infallible,
    >;

    /// A server behind `key`'s auth layer whose handler answers with the
    /// caller the layer admitted.
    fn server(key: ServiceKey) -> ServiceAuth<Handler> {
        use tower::Layer;
        let handler = tower::service_fn(|request: http::Request<tonic::body::Body>| async move {
            let caller = caller_of(&request).unwrap_or("nobody");
            let mut response = http::Response::new(tonic::body::Body::empty());
            response
                .headers_mut()
                .insert("x-caller", http::HeaderValue::from_static(caller));
            Ok(response)
        });
        ServiceAuthLayer::new(key).layer(Handler::new(handler))
    }

    fn caller_of<B>(request: &http::Request<B>) -> Option<&'static str> {
        request.extensions().get::<Caller>().map(|c| c.0.as_str())
    }

    /// The caller the server admitted, or its refusal.
    async fn deliver(server: &ServiceAuth<Handler>, wire: &Wire) -> Result<String, String> {
        use tower::ServiceExt;
        let response = server
            .clone()
            .oneshot(wire.request())
            .await
            .expect("an answer");
        if let Some(status) = tonic::Status::from_header_map(response.headers())
            && status.code() != tonic::Code::Ok
        {
            return Err(format!("{:?}: {}", status.code(), status.message()));
        }
        let caller = response.headers().get("x-caller").expect("the handler ran");
        Ok(caller.to_str().expect("ascii").to_string())
    }

    fn refused_for(outcome: Result<String, String>, why: &str) {
        match outcome {
            Err(refusal) => assert!(
                refusal.starts_with("Unauthenticated") && refusal.contains(why),
                "{refusal}"
            ),
            Ok(caller) => panic!("accepted from {caller}, expected a refusal for {why}"),
        }
    }

    const ANOTHER_CALL: &str = "signed for another call";

    /// A credit the gateway signed is taken once, and only as it was signed:
    /// not at another method, not for another acting user, not with another
    /// body (another wallet or amount), and not a second time.
    #[tokio::test]
    async fn a_signed_call_is_taken_once_and_only_as_signed() {
        let wallet = server(key(ServiceName::Wallet));
        let credit = Wire::new(CREDIT, Some(ADMIN), b"\0\0\0\0\x04w1:5");
        let sent = signed_by(key(ServiceName::Gateway), &credit).await;
        assert!(sent.headers.contains_key(HEADER));
        assert!(
            !sent.headers.contains_key(PREVIOUS_HEADER),
            "no v3 unless configured"
        );

        refused_for(deliver(&wallet, &sent.at(BALANCE)).await, ANOTHER_CALL);
        refused_for(
            deliver(&wallet, &sent.acting_for(OTHER)).await,
            ANOTHER_CALL,
        );
        let mut anonymous = sent.clone();
        anonymous.headers.remove(USER_HEADER);
        refused_for(deliver(&wallet, &anonymous).await, ANOTHER_CALL);
        refused_for(
            deliver(&wallet, &sent.carrying(b"\0\0\0\0\x04w2:9")).await,
            ANOTHER_CALL,
        );
        // Refusals spend no nonce: the call as signed is still taken, once.
        assert_eq!(deliver(&wallet, &sent).await.as_deref(), Ok("gateway"));
        refused_for(deliver(&wallet, &sent).await, "already used");
        // Every replica clone of the layer shares one cache.
        let replica = wallet.clone();
        refused_for(deliver(&replica, &sent).await, "already used");

        // Reads are not single-use: a balance asked twice is answered twice.
        let balance = signed_by(
            key(ServiceName::Gateway),
            &Wire::new(BALANCE, Some(ADMIN), b"\0\0\0\0\x02w1"),
        )
        .await;
        assert_eq!(deliver(&wallet, &balance).await.as_deref(), Ok("gateway"));
        assert_eq!(deliver(&wallet, &balance).await.as_deref(), Ok("gateway"));
    }

    /// An executor's hold token is refused as a hold on another wallet.
    #[tokio::test]
    async fn a_hold_token_holds_only_its_own_wallet() {
        let wallet = server(key(ServiceName::Wallet));
        let hold = Wire::new(HOLD, None, b"\0\0\0\0\x04w1:5");
        let sent = signed_by(key(ServiceName::Executor), &hold).await;
        refused_for(
            deliver(&wallet, &sent.carrying(b"\0\0\0\0\x04w2:5")).await,
            ANOTHER_CALL,
        );
        assert_eq!(deliver(&wallet, &sent).await.as_deref(), Ok("executor"));
    }

    /// A token whose signed expiry is further ahead than a token lives (plus
    /// the skew) is refused, however well signed.
    #[tokio::test]
    async fn an_expiry_further_ahead_than_a_token_lives_is_refused() {
        let wallet = server(key(ServiceName::Wallet));
        let gateway = key(ServiceName::Gateway);
        let wire = Wire::new(BALANCE, Some(ADMIN), b"\0\0\0\0\x02w1");
        let call = Call::new(BALANCE, ADMIN.as_bytes(), &wire.body);
        let minted_ahead = |secs: i64| {
            let token = gateway.sign_at(ServiceName::Wallet, &call, &[1; 16], now_unix() + secs);
            let mut ahead = wire.clone();
            ahead.headers.insert(HEADER, token.parse().expect("header"));
            ahead
        };
        refused_for(
            deliver(&wallet, &minted_ahead(3_600)).await,
            "further ahead",
        );
        refused_for(
            deliver(&wallet, &minted_ahead(service_auth::SKEW_SECS + 5)).await,
            "further ahead",
        );
        // A caller whose clock runs a little ahead is within the skew.
        assert_eq!(
            deliver(&wallet, &minted_ahead(service_auth::SKEW_SECS - 2))
                .await
                .as_deref(),
            Ok("gateway")
        );
    }

    /// The previous format is refused, naming the setting, unless the
    /// verifier is configured for an upgrade; a caller so configured sends
    /// it beside its bound token, which a current verifier still checks.
    #[tokio::test]
    async fn previous_tokens_pass_only_while_configured() {
        let mut previous = Wire::new(CREDIT, Some(ADMIN), b"\0\0\0\0\x04w1:5");
        let v3 = key(ServiceName::Gateway).sign_previous(ServiceName::Wallet);
        previous
            .headers
            .insert(PREVIOUS_HEADER, v3.parse().expect("header"));
        let strict = server(key(ServiceName::Wallet));
        refused_for(
            deliver(&strict, &previous).await,
            "internal.accept_previous_tokens",
        );
        let upgrading = server(key(ServiceName::Wallet).with_previous(true));
        assert_eq!(
            deliver(&upgrading, &previous).await.as_deref(),
            Ok("gateway")
        );

        let from_new = signed_by(key(ServiceName::Gateway).with_previous(true), &previous).await;
        assert!(from_new.headers.contains_key(PREVIOUS_HEADER));
        assert_eq!(deliver(&strict, &from_new).await.as_deref(), Ok("gateway"));
        // With a bound token present, that one decides, even when upgrading.
        refused_for(
            deliver(&upgrading, &from_new.carrying(b"\0\0\0\0\x04w2:9")).await,
            ANOTHER_CALL,
        );
    }

    #[test]
    fn the_replay_cache_forgets_a_nonce_once_its_token_is_dead() {
        let cache = ReplayCache::default();
        assert!(cache.first_use_at([1; 16], 100, 40));
        assert!(!cache.first_use_at([1; 16], 100, 41));
        assert!(!cache.first_use_at([1; 16], 100, 100));
        assert!(cache.first_use_at([2; 16], 160, 100));
        assert_eq!(cache.len(), 2);
        assert!(cache.first_use_at([3; 16], 170, 101));
        assert_eq!(cache.len(), 2, "the expired nonce is gone");
    }
}
