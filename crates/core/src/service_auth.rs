//! Service identity between internal services. Each service signs its calls
//! with its own Ed25519 key; every service verifies with the public keys
//! alone. A token names which service it is and which service it is for (its
//! audience), and expires within a minute; every internal method admits only
//! the callers listed here, and a path listed nowhere is refused. A pod that
//! holds only the executor's private key can sign only as the executor: it
//! can neither credit a wallet nor pass for the gateway, and a token the
//! gateway sent the indexer does not work at the wallet.
//!
//! A token (v4) is also bound to its call: it signs the method path, the
//! acting user (`x-dialectic-user`) and a digest of the request body, so one
//! seen in transit does nothing for another method, user, wallet or amount;
//! and it carries a nonce, so the money-moving calls ([`single_use`]) refuse
//! it a second time. The previous format (v3, caller, audience and expiry
//! only) is verified by [`verify_previous`], which a verifier uses only while
//! a rolling upgrade is configured to accept it.

use hmac::{Hmac, Mac};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use sha2::{Digest, Sha256};

/// The gRPC metadata key that carries the token (v4).
pub const HEADER: &str = "x-dialectic-call";
/// Where the previous release carried its token (v3); read only while
/// previous tokens are accepted, and sent only then.
pub const PREVIOUS_HEADER: &str = "x-dialectic-service";
/// The user the gateway acts for on an internal call; the token signs it.
pub const USER_HEADER: &str = "x-dialectic-user";
/// How long a minted token is valid; callers mint one per call, so a token
/// seen in transit is worth at most this long.
pub const TOKEN_SECS: i64 = 60;
/// How far a caller's clock may run ahead of a verifier's: an expiry later
/// than `TOKEN_SECS + SKEW_SECS` from now was not minted by an honest caller.
pub const SKEW_SECS: i64 = 10;
const VERSION: &str = "v4";
const PREVIOUS_VERSION: &str = "v3";
/// An Ed25519 seed (private key) and public key are both 32 bytes.
pub const KEY_BYTES: usize = 32;
/// A token's nonce: random, so two calls never share one.
pub const NONCE_BYTES: usize = 16;
pub type Nonce = [u8; NONCE_BYTES];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServiceName {
    Gateway,
    Planner,
    Executor,
    Renderer,
    Indexer,
    Wallet,
}

impl ServiceName {
    pub const ALL: [ServiceName; 6] = [
        ServiceName::Gateway,
        ServiceName::Planner,
        ServiceName::Executor,
        ServiceName::Renderer,
        ServiceName::Indexer,
        ServiceName::Wallet,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ServiceName::Gateway => "gateway",
            ServiceName::Planner => "planner",
            ServiceName::Executor => "executor",
            ServiceName::Renderer => "renderer",
            ServiceName::Indexer => "indexer",
            ServiceName::Wallet => "wallet",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The service whose internal gRPC API is `api` (`package.Service`), the
    /// audience of a call to it.
    pub fn serving(api: &str) -> Option<Self> {
        Some(match api {
            WALLET => ServiceName::Wallet,
            PLANNER => ServiceName::Planner,
            INDEXER => ServiceName::Indexer,
            EXECUTOR => ServiceName::Executor,
            RENDERER => ServiceName::Renderer,
            _ => return None,
        })
    }
}

const WALLET: &str = "dialectic.v1.wallet.WalletService";
const PLANNER: &str = "dialectic.v1.planner.PlannerService";
const INDEXER: &str = "dialectic.v1.indexer.IndexerService";
const EXECUTOR: &str = "dialectic.v1.executor.ExecutorService";
const RENDERER: &str = "dialectic.v1.renderer.RendererService";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("no service token (metadata {HEADER})")]
    Missing,
    #[error("the service token is malformed")]
    Malformed,
    #[error("no public key of the {0} service is configured here")]
    UnknownCaller(&'static str),
    #[error("the service token is not signed by the {0} service's key")]
    BadSignature(&'static str),
    #[error("the service token expired")]
    Expired,
    #[error("the service token is for the {0} service")]
    OtherAudience(&'static str),
    #[error(
        "the service token expires further ahead than a token lives ({TOKEN_SECS} s + {SKEW_SECS} s skew)"
    )]
    TooFarAhead,
    #[error("the service token was signed for another call (method, acting user or request body)")]
    OtherCall,
    #[error("the service token was already used (a replayed call)")]
    Replayed,
    #[error(
        "the service token is the previous format (v3), accepted only while internal.accept_previous_tokens is on"
    )]
    Previous,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("a service key is {KEY_BYTES} bytes written as {} hex digits", KEY_BYTES * 2)]
    NotHex,
    #[error("the bytes are not a usable Ed25519 key")]
    Rejected,
    #[error("the system gave no random bytes for a new key")]
    NoRandomness,
}

/// One service's private key: it signs that service's calls and no other's.
pub struct SigningKey {
    pair: Ed25519KeyPair,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

impl SigningKey {
    pub fn from_seed(seed: &[u8; KEY_BYTES]) -> Result<Self, KeyError> {
        Ed25519KeyPair::from_seed_unchecked(seed)
            .map(|pair| Self { pair })
            .map_err(|_| KeyError::Rejected)
    }

    /// The seed as written in a `.key` file (hex).
    pub fn from_hex(text: &str) -> Result<Self, KeyError> {
        Self::from_seed(&key_bytes(text)?)
    }

    /// The key for `service` derived from a secret every service shares: for
    /// one process running every service, or a deployment that accepts that
    /// any holder of the secret can sign as any service.
    pub fn derived(secret: &[u8], service: ServiceName) -> Self {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
        mac.update(b"dialectic service key v3 ");
        mac.update(service.as_str().as_bytes());
        let seed: [u8; KEY_BYTES] = mac.finalize().into_bytes().into();
        Self::from_seed(&seed).unwrap_or_else(|_| unreachable!("every 32-byte seed is a key"))
    }

    /// A fresh random seed, as `dialecticd keys generate` writes one.
    pub fn random_seed() -> Result<[u8; KEY_BYTES], KeyError> {
        use ring::rand::SecureRandom;
        let mut seed = [0; KEY_BYTES];
        ring::rand::SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| KeyError::NoRandomness)?;
        Ok(seed)
    }

    pub fn public_key(&self) -> [u8; KEY_BYTES] {
        let mut public = [0; KEY_BYTES];
        public.copy_from_slice(self.pair.public_key().as_ref());
        public
    }
}

/// The public keys of the services a verifier knows, by service. A service
/// may have several while its key rotates: the old and the new both verify.
#[derive(Debug, Clone, Default)]
pub struct PublicKeys([Vec<[u8; KEY_BYTES]>; 6]);

impl PublicKeys {
    pub fn insert(&mut self, service: ServiceName, key: [u8; KEY_BYTES]) {
        self.0[service.index()].push(key);
    }

    /// A `.pub` file's text: one key in hex per line (two while rotating).
    pub fn insert_hex(&mut self, service: ServiceName, text: &str) -> Result<(), KeyError> {
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            self.insert(service, key_bytes(line)?);
        }
        Ok(())
    }

    fn of(&self, service: ServiceName) -> &[[u8; KEY_BYTES]] {
        &self.0[service.index()]
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn key_bytes(text: &str) -> Result<[u8; KEY_BYTES], KeyError> {
    unhex(text.trim())
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(KeyError::NotHex)
}

/// What a token is bound to: the method path, the acting user (empty when
/// none is named) and the request body as sent (the gRPC-framed, encoded
/// message). Lengths are hashed in, so no two calls share a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    binding: [u8; 32],
}

impl Call {
    pub fn new(path: &str, user: &[u8], body: &[u8]) -> Self {
        let mut hash = Sha256::new();
        hash.update(b"dialectic call v4");
        for part in [path.as_bytes(), user, Sha256::digest(body).as_slice()] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part);
        }
        Self {
            binding: hash.finalize().into(),
        }
    }
}

/// A fresh random nonce for one token.
pub fn random_nonce() -> Result<Nonce, KeyError> {
    use ring::rand::SecureRandom;
    let mut nonce = [0; NONCE_BYTES];
    ring::rand::SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| KeyError::NoRandomness)?;
    Ok(nonce)
}

/// `v4.<caller>.<audience>.<expires unix seconds>.<hex nonce>.<hex binding
/// of the call>.<hex Ed25519 signature of the rest>`, signed with the
/// caller's own key.
pub fn mint(
    key: &SigningKey,
    caller: ServiceName,
    audience: ServiceName,
    call: &Call,
    nonce: &Nonce,
    now_unix: i64,
) -> String {
    let claims = format!(
        "{VERSION}.{}.{}.{}.{}.{}",
        caller.as_str(),
        audience.as_str(),
        now_unix + TOKEN_SECS,
        hex(nonce),
        hex(&call.binding)
    );
    signed(key, claims)
}

/// The previous format: `v3.<caller>.<audience>.<expires>.<signature>`,
/// bound to no call; sent beside a v4 token only during an upgrade.
pub fn mint_previous(
    key: &SigningKey,
    caller: ServiceName,
    audience: ServiceName,
    now_unix: i64,
) -> String {
    let claims = format!(
        "{PREVIOUS_VERSION}.{}.{}.{}",
        caller.as_str(),
        audience.as_str(),
        now_unix + TOKEN_SECS
    );
    signed(key, claims)
}

fn signed(key: &SigningKey, claims: String) -> String {
    let signature = key.pair.sign(claims.as_bytes());
    format!("{claims}.{}", hex(signature.as_ref()))
}

/// A token that passed every check that needs no request body: its caller's
/// key signed it, for this audience, and it is in time. [`Signed::bound_to`]
/// then checks the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signed {
    pub caller: ServiceName,
    pub expires: i64,
    pub nonce: Nonce,
    binding: [u8; 32],
}

impl Signed {
    /// The token, if it was minted for `call`.
    pub fn bound_to(self, call: &Call) -> Result<Self, TokenError> {
        if self.binding != call.binding {
            return Err(TokenError::OtherCall);
        }
        Ok(self)
    }
}

/// The claims of a v4 token whose caller's key signed it for `audience` and
/// that is in time; its binding is still to be checked.
pub fn verify_signed(
    keys: &PublicKeys,
    token: &str,
    audience: ServiceName,
    now_unix: i64,
) -> Result<Signed, TokenError> {
    if token.starts_with("v3.") {
        return Err(TokenError::Previous);
    }
    let (caller, parts) = signed_claims(keys, token, VERSION, 6)?;
    let expires = in_time(parts[3], now_unix)?;
    aimed_at(parts[2], audience)?;
    let nonce = unhex(parts[4])
        .and_then(|n| n.try_into().ok())
        .ok_or(TokenError::Malformed)?;
    let binding = unhex(parts[5])
        .and_then(|b| b.try_into().ok())
        .ok_or(TokenError::Malformed)?;
    Ok(Signed {
        caller,
        expires,
        nonce,
        binding,
    })
}

/// The service a token names, when that service's own key signed it for
/// `audience` and for `call`, and it is in time.
pub fn verify(
    keys: &PublicKeys,
    token: &str,
    audience: ServiceName,
    call: &Call,
    now_unix: i64,
) -> Result<Signed, TokenError> {
    verify_signed(keys, token, audience, now_unix)?.bound_to(call)
}

/// [`verify`] for the previous format (v3): caller, audience and expiry.
pub fn verify_previous(
    keys: &PublicKeys,
    token: &str,
    audience: ServiceName,
    now_unix: i64,
) -> Result<ServiceName, TokenError> {
    let (caller, parts) = signed_claims(keys, token, PREVIOUS_VERSION, 4)?;
    in_time(parts[3], now_unix)?;
    aimed_at(parts[2], audience)?;
    Ok(caller)
}

/// The claims of `token` (`fields` of them, the first `version`) and the
/// caller they name, once that caller's key is seen to have signed them.
fn signed_claims<'t>(
    keys: &PublicKeys,
    token: &'t str,
    version: &str,
    fields: usize,
) -> Result<(ServiceName, Vec<&'t str>), TokenError> {
    let (claims, signature) = token.rsplit_once('.').ok_or(TokenError::Malformed)?;
    let parts: Vec<&str> = claims.split('.').collect();
    if parts.len() != fields || parts[0] != version {
        return Err(TokenError::Malformed);
    }
    let caller = ServiceName::parse(parts[1]).ok_or(TokenError::Malformed)?;
    let signature = unhex(signature).ok_or(TokenError::Malformed)?;
    // The claimed caller's keys decide: no other service's key can sign for it.
    let public = keys.of(caller);
    if public.is_empty() {
        return Err(TokenError::UnknownCaller(caller.as_str()));
    }
    let signed = |key: &[u8; KEY_BYTES]| {
        UnparsedPublicKey::new(&ED25519, key)
            .verify(claims.as_bytes(), &signature)
            .is_ok()
    };
    if !public.iter().any(signed) {
        return Err(TokenError::BadSignature(caller.as_str()));
    }
    Ok((caller, parts))
}

/// The expiry, if it has not passed and is no further ahead than a token
/// lives (plus skew): a signed expiry a day out would be a day-long token.
fn in_time(expires: &str, now_unix: i64) -> Result<i64, TokenError> {
    let expires: i64 = expires.parse().map_err(|_| TokenError::Malformed)?;
    if expires < now_unix {
        return Err(TokenError::Expired);
    }
    if expires > now_unix + TOKEN_SECS + SKEW_SECS {
        return Err(TokenError::TooFarAhead);
    }
    Ok(expires)
}

fn aimed_at(named: &str, audience: ServiceName) -> Result<(), TokenError> {
    let named = ServiceName::parse(named).ok_or(TokenError::Malformed)?;
    if named != audience {
        return Err(TokenError::OtherAudience(named.as_str()));
    }
    Ok(())
}

/// Whether a call to `path` moves money, so its token may be used once: the
/// wallet keeps the nonces of these calls until their tokens expire.
pub fn single_use(path: &str) -> bool {
    matches!(
        path.strip_prefix('/').and_then(|p| p.split_once('/')),
        Some((WALLET, "Credit" | "Capture" | "Hold" | "Release"))
    )
}

/// Who may call a gRPC path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone: probes, reflection, and the gateway's public API, whose every
    /// method authenticates its user by API key.
    Public,
    /// Only `callers`, with a token for `audience`, the service called.
    Internal {
        audience: ServiceName,
        callers: &'static [ServiceName],
    },
    /// Listed nowhere: refused, so a new RPC is closed until it is listed.
    Unlisted,
}

/// Who may call `path` (`/package.Service/Method`).
pub fn access(path: &str) -> Access {
    use ServiceName::*;
    let Some((api, method)) = path.strip_prefix('/').and_then(|p| p.split_once('/')) else {
        return Access::Unlisted;
    };
    let callers: &'static [ServiceName] = match (api, method) {
        (
            "dialectic.v1.DialecticService"
            | "grpc.reflection.v1.ServerReflection"
            | "grpc.reflection.v1alpha.ServerReflection",
            _,
        )
        | ("grpc.health.v1.Health", "Check" | "Watch") => return Access::Public,
        (WALLET, "Hold" | "Capture" | "Release") => &[Executor],
        (WALLET, "GetBalance") => &[Executor, Gateway],
        (WALLET, "Credit" | "ListTransactions") => &[Gateway],
        (
            PLANNER,
            "SweepNow"
            | "Pause"
            | "Resume"
            | "Cancel"
            | "Complete"
            | "SubmitStageResponses"
            | "RevisitStage"
            | "RegenerateDocument"
            | "DeleteProject"
            | "RetryStage",
        ) => &[Gateway],
        (INDEXER, "CountTokens" | "Index" | "Retrieve") => &[Executor, Gateway],
        // Uploads are converted for the gateway, which took them.
        (INDEXER, "Convert") => &[Gateway],
        // Answer spends the named user's wallet: only the gateway, which
        // authenticated that user, may ask.
        (EXECUTOR, "Answer") => &[Gateway],
        (EXECUTOR, "Status") | (RENDERER, "RenderPreview") => &ServiceName::ALL,
        _ => return Access::Unlisted,
    };
    match ServiceName::serving(api) {
        Some(audience) => Access::Internal { audience, callers },
        None => Access::Unlisted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ServiceName::*;

    const NOW: i64 = 1_800_000_000;

    fn key(service: ServiceName) -> SigningKey {
        SigningKey::derived(b"deployment secret", service)
    }

    fn every_public_key() -> PublicKeys {
        let mut keys = PublicKeys::default();
        for service in ServiceName::ALL {
            keys.insert(service, key(service).public_key());
        }
        keys
    }

    fn callers(path: &str) -> &'static [ServiceName] {
        match access(path) {
            Access::Internal { callers, .. } => callers,
            other => panic!("{path} is {other:?}"),
        }
    }

    const CREDIT: &str = "/dialectic.v1.wallet.WalletService/Credit";
    const NONCE: Nonce = [9; NONCE_BYTES];

    fn call() -> Call {
        Call::new(CREDIT, b"0192f0c0-user", b"\0\0\0\0\x05body!")
    }

    /// A token minted at NOW by `signing`, claiming `caller`, for [`call`].
    fn token(signing: &SigningKey, caller: ServiceName, audience: ServiceName) -> String {
        mint(signing, caller, audience, &call(), &NONCE, NOW)
    }

    fn check(
        keys: &PublicKeys,
        token: &str,
        audience: ServiceName,
    ) -> Result<ServiceName, TokenError> {
        check_at(keys, token, audience, NOW)
    }

    fn check_at(
        keys: &PublicKeys,
        token: &str,
        audience: ServiceName,
        now: i64,
    ) -> Result<ServiceName, TokenError> {
        verify(keys, token, audience, &call(), now).map(|signed| signed.caller)
    }

    #[test]
    fn a_minted_token_verifies_as_its_service_for_a_minute() {
        const { assert!(TOKEN_SECS <= 60) };
        let keys = every_public_key();
        for service in ServiceName::ALL {
            let token = token(&key(service), service, Wallet);
            assert_eq!(check(&keys, &token, Wallet), Ok(service));
            assert_eq!(
                check_at(&keys, &token, Wallet, NOW + TOKEN_SECS),
                Ok(service)
            );
            assert_eq!(
                check_at(&keys, &token, Wallet, NOW + TOKEN_SECS + 1),
                Err(TokenError::Expired)
            );
        }
        let verified = verify(
            &keys,
            &token(&key(Gateway), Gateway, Wallet),
            Wallet,
            &call(),
            NOW,
        );
        assert_eq!(
            verified.map(|s| (s.nonce, s.expires)),
            Ok((NONCE, NOW + TOKEN_SECS))
        );
    }

    /// The method, the acting user and the body are signed: a token seen on
    /// one call does nothing for another.
    #[test]
    fn a_token_is_bound_to_its_method_user_and_body() {
        let keys = every_public_key();
        let body = b"\0\0\0\0\x05body!";
        let token = token(&key(Gateway), Gateway, Wallet);
        for (what, other) in [
            (
                "method",
                Call::new(
                    "/dialectic.v1.wallet.WalletService/Hold",
                    b"0192f0c0-user",
                    body,
                ),
            ),
            ("user", Call::new(CREDIT, b"0192f0c0-usex", body)),
            ("no user", Call::new(CREDIT, b"", body)),
            (
                "body",
                Call::new(CREDIT, b"0192f0c0-user", b"\0\0\0\0\x05body?"),
            ),
            ("no body", Call::new(CREDIT, b"0192f0c0-user", b"")),
            // Lengths are hashed in: moving bytes between parts is another call.
            (
                "split",
                Call::new(CREDIT, b"0192f0c0-use", b"r\0\0\0\0\x05body!"),
            ),
        ] {
            assert_eq!(
                verify(&keys, &token, Wallet, &other, NOW).map(|s| s.caller),
                Err(TokenError::OtherCall),
                "{what}"
            );
        }
        assert_eq!(check(&keys, &token, Wallet), Ok(Gateway));
        // The binding is in the signed claims: swapping it in breaks the signature.
        let rebound = mint(
            &key(Gateway),
            Gateway,
            Wallet,
            &Call::new(CREDIT, b"x", b""),
            &NONCE,
            NOW,
        );
        let binding = |t: &str| t.split('.').nth(5).map(str::to_string).expect("binding");
        let swapped = token.replacen(&binding(&token), &binding(&rebound), 1);
        assert_eq!(
            verify(&keys, &swapped, Wallet, &Call::new(CREDIT, b"x", b""), NOW).map(|s| s.caller),
            Err(TokenError::BadSignature("gateway"))
        );
    }

    /// A key holder minting a long-lived token (a day ahead) is refused: an
    /// expiry is believed only up to the lifetime plus the clock skew.
    #[test]
    fn an_expiry_further_ahead_than_a_token_lives_is_refused() {
        let keys = every_public_key();
        let signing = key(Executor);
        let minted_at = |at: i64| mint(&signing, Executor, Wallet, &call(), &NONCE, at);
        assert_eq!(
            check(&keys, &minted_at(NOW + SKEW_SECS), Wallet),
            Ok(Executor)
        );
        assert_eq!(
            check(&keys, &minted_at(NOW + SKEW_SECS + 1), Wallet),
            Err(TokenError::TooFarAhead)
        );
        assert_eq!(
            check(&keys, &minted_at(NOW + 86_400), Wallet),
            Err(TokenError::TooFarAhead)
        );
        let previous = mint_previous(&signing, Executor, Wallet, NOW + 86_400);
        assert_eq!(
            verify_previous(&keys, &previous, Wallet, NOW),
            Err(TokenError::TooFarAhead)
        );
    }

    #[test]
    fn a_token_for_one_service_is_refused_by_every_other() {
        let keys = every_public_key();
        let for_indexer = token(&key(Gateway), Gateway, Indexer);
        assert_eq!(check(&keys, &for_indexer, Indexer), Ok(Gateway));
        for other in ServiceName::ALL.into_iter().filter(|s| *s != Indexer) {
            assert_eq!(
                check(&keys, &for_indexer, other),
                Err(TokenError::OtherAudience("indexer")),
                "{other:?}"
            );
        }
        let redirected = for_indexer.replacen(".indexer.", ".wallet.", 1);
        assert_eq!(
            check(&keys, &redirected, Wallet),
            Err(TokenError::BadSignature("gateway"))
        );
    }

    /// The executor's key in hand, a token claiming the gateway still fails:
    /// the gateway's public key checks it.
    #[test]
    fn one_service_s_key_cannot_sign_for_another() {
        let keys = every_public_key();
        let forged = token(&key(Executor), Gateway, Wallet);
        assert_eq!(
            check(&keys, &forged, Wallet),
            Err(TokenError::BadSignature("gateway"))
        );
        let token = token(&key(Executor), Executor, Wallet);
        let promoted = token.replacen("executor", "gateway", 1);
        assert_eq!(
            check(&keys, &promoted, Wallet),
            Err(TokenError::BadSignature("gateway"))
        );
        let extended = token.replacen(&(NOW + TOKEN_SECS).to_string(), &(NOW + 65).to_string(), 1);
        assert_eq!(
            check(&keys, &extended, Wallet),
            Err(TokenError::BadSignature("executor"))
        );
    }

    #[test]
    fn another_deployment_s_keys_or_none_fail() {
        let token = token(&key(Executor), Executor, Wallet);
        let mut elsewhere = PublicKeys::default();
        elsewhere.insert(
            Executor,
            SigningKey::derived(b"another deployment", Executor).public_key(),
        );
        assert_eq!(
            check(&elsewhere, &token, Wallet),
            Err(TokenError::BadSignature("executor"))
        );
        assert_eq!(
            check(&PublicKeys::default(), &token, Wallet),
            Err(TokenError::UnknownCaller("executor"))
        );
    }

    #[test]
    fn keys_round_trip_through_their_hex_files() {
        let seed = [7u8; KEY_BYTES];
        let signing = SigningKey::from_hex(&hex(&seed)).expect("a seed");
        let mut keys = PublicKeys::default();
        keys.insert_hex(Planner, &format!("{}\n", hex(&signing.public_key())))
            .expect("a public key");
        let token = token(&signing, Planner, Executor);
        assert_eq!(check(&keys, &token, Executor), Ok(Planner));
        assert_eq!(SigningKey::from_hex("abc").err(), Some(KeyError::NotHex));
        assert_eq!(
            keys.insert_hex(Planner, &"0".repeat(62)),
            Err(KeyError::NotHex)
        );
    }

    /// While a key rotates, every verifier lists both public keys, so calls
    /// signed with the old key and with the new one both pass.
    #[test]
    fn both_keys_verify_while_a_key_rotates() {
        let (old, new) = (key(Planner), SigningKey::derived(b"next", Planner));
        let mut keys = PublicKeys::default();
        keys.insert_hex(
            Planner,
            &format!("{}\n{}\n", hex(&old.public_key()), hex(&new.public_key())),
        )
        .expect("two keys");
        for signing in [&old, &new] {
            let token = token(signing, Planner, Executor);
            assert_eq!(check(&keys, &token, Executor), Ok(Planner));
        }
        let stranger = token(&key(Wallet), Planner, Executor);
        assert_eq!(
            check(&keys, &stranger, Executor),
            Err(TokenError::BadSignature("planner"))
        );
    }

    /// The previous format verifies only through [`verify_previous`]; the
    /// current verifier names it, so a refused upgrade says why.
    #[test]
    fn the_previous_format_verifies_only_as_such() {
        let keys = every_public_key();
        let previous = mint_previous(&key(Gateway), Gateway, Wallet, NOW);
        assert_eq!(verify_previous(&keys, &previous, Wallet, NOW), Ok(Gateway));
        assert_eq!(check(&keys, &previous, Wallet), Err(TokenError::Previous));
        let current = token(&key(Gateway), Gateway, Wallet);
        assert_eq!(
            verify_previous(&keys, &current, Wallet, NOW),
            Err(TokenError::Malformed)
        );
        assert_eq!(
            verify_previous(&keys, &previous, Indexer, NOW),
            Err(TokenError::OtherAudience("wallet"))
        );
    }

    #[test]
    fn garbage_is_malformed() {
        let keys = every_public_key();
        let nonce = hex(&NONCE);
        for token in [
            "",
            "v4",
            "v4.gateway.wallet.1",
            "v4.gateway.wallet.1.zz",
            "v4.nobody.wallet.1.00.00.00",
            &format!("v4.gateway.wallet.1.{nonce}.00"),
            "v1.gateway.1.00",
            "v2.gateway.wallet.1.00",
            "v5.gateway.wallet.1.00.00.00",
        ] {
            assert_eq!(
                check(&keys, token, Wallet),
                Err(TokenError::Malformed),
                "{token}"
            );
        }
    }

    #[test]
    fn only_the_money_moving_wallet_calls_are_single_use() {
        for method in ["Credit", "Capture", "Hold", "Release"] {
            assert!(single_use(&format!("/{WALLET}/{method}")), "{method}");
        }
        for path in [
            "/dialectic.v1.wallet.WalletService/GetBalance",
            "/dialectic.v1.wallet.WalletService/ListTransactions",
            "/dialectic.v1.planner.PlannerService/Cancel",
            "/dialectic.v1.DialecticService/CreditWallet",
            "",
        ] {
            assert!(!single_use(path), "{path}");
        }
    }

    #[test]
    fn only_executors_move_money_and_only_the_gateway_credits() {
        assert_eq!(
            access("/dialectic.v1.wallet.WalletService/Hold"),
            Access::Internal {
                audience: Wallet,
                callers: &[Executor]
            }
        );
        assert_eq!(
            callers("/dialectic.v1.wallet.WalletService/Credit"),
            &[Gateway]
        );
        assert!(!callers("/dialectic.v1.planner.PlannerService/Pause").contains(&Executor));
    }

    #[test]
    fn only_the_gateway_asks_an_executor_to_answer() {
        assert_eq!(
            access("/dialectic.v1.executor.ExecutorService/Answer"),
            Access::Internal {
                audience: Executor,
                callers: &[Gateway]
            }
        );
    }

    #[test]
    fn an_unlisted_path_is_refused_even_on_an_internal_service() {
        for path in [
            "/dialectic.v1.wallet.WalletService/Unknown",
            "/dialectic.v1.planner.PlannerService/Drop",
            "/dialectic.v1.internal.NewService/Do",
            "/grpc.health.v1.Health/Set",
            "/x",
            "",
        ] {
            assert_eq!(access(path), Access::Unlisted, "{path}");
        }
    }

    #[test]
    fn public_health_reflection_and_api_paths_need_no_identity() {
        for path in [
            "/dialectic.v1.DialecticService/GetSession",
            "/grpc.health.v1.Health/Check",
            "/grpc.health.v1.Health/Watch",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        ] {
            assert_eq!(access(path), Access::Public, "{path}");
        }
    }
}
