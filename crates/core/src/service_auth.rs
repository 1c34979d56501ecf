//! Service identity between internal services. Each service signs its calls
//! with its own Ed25519 key; every service verifies with the public keys
//! alone. A token names which service it is and which service it is for (its
//! audience), and expires within a minute; every internal method admits only
//! the callers listed here, and a path listed nowhere is refused. A pod that
//! holds only the executor's private key can sign only as the executor: it
//! can neither credit a wallet nor pass for the gateway, and a token the
//! gateway sent the indexer does not work at the wallet.

use hmac::{Hmac, Mac};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use sha2::Sha256;

/// The gRPC metadata key that carries the token.
pub const HEADER: &str = "x-dialectic-service";
/// How long a minted token is valid; callers mint one per call, so a token
/// seen in transit is worth at most this long.
pub const TOKEN_SECS: i64 = 60;
const VERSION: &str = "v3";
/// An Ed25519 seed (private key) and public key are both 32 bytes.
pub const KEY_BYTES: usize = 32;

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

/// `v3.<caller>.<audience>.<expires unix seconds>.<hex Ed25519 signature of
/// the rest>`, signed with the caller's own key.
pub fn mint(key: &SigningKey, caller: ServiceName, audience: ServiceName, now_unix: i64) -> String {
    let claims = format!(
        "{VERSION}.{}.{}.{}",
        caller.as_str(),
        audience.as_str(),
        now_unix + TOKEN_SECS
    );
    let signature = key.pair.sign(claims.as_bytes());
    format!("{claims}.{}", hex(signature.as_ref()))
}

/// The service a token names, when that service's own key signed it for
/// `audience` and it has not expired.
pub fn verify(
    keys: &PublicKeys,
    token: &str,
    audience: ServiceName,
    now_unix: i64,
) -> Result<ServiceName, TokenError> {
    let (claims, signature) = token.rsplit_once('.').ok_or(TokenError::Malformed)?;
    let mut parts = claims.split('.');
    let (Some(VERSION), Some(name), Some(aimed_at), Some(expires), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(TokenError::Malformed);
    };
    let caller = ServiceName::parse(name).ok_or(TokenError::Malformed)?;
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
    let expires: i64 = expires.parse().map_err(|_| TokenError::Malformed)?;
    if expires < now_unix {
        return Err(TokenError::Expired);
    }
    let aimed_at = ServiceName::parse(aimed_at).ok_or(TokenError::Malformed)?;
    if aimed_at != audience {
        return Err(TokenError::OtherAudience(aimed_at.as_str()));
    }
    Ok(caller)
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

    #[test]
    fn a_minted_token_verifies_as_its_service_for_a_minute() {
        const { assert!(TOKEN_SECS <= 60) };
        let keys = every_public_key();
        for service in ServiceName::ALL {
            let token = mint(&key(service), service, Wallet, NOW);
            assert_eq!(verify(&keys, &token, Wallet, NOW), Ok(service));
            assert_eq!(verify(&keys, &token, Wallet, NOW + TOKEN_SECS), Ok(service));
            assert_eq!(
                verify(&keys, &token, Wallet, NOW + TOKEN_SECS + 1),
                Err(TokenError::Expired)
            );
        }
    }

    #[test]
    fn a_token_for_one_service_is_refused_by_every_other() {
        let keys = every_public_key();
        let for_indexer = mint(&key(Gateway), Gateway, Indexer, NOW);
        assert_eq!(verify(&keys, &for_indexer, Indexer, NOW), Ok(Gateway));
        for other in ServiceName::ALL.into_iter().filter(|s| *s != Indexer) {
            assert_eq!(
                verify(&keys, &for_indexer, other, NOW),
                Err(TokenError::OtherAudience("indexer")),
                "{other:?}"
            );
        }
        let redirected = for_indexer.replacen(".indexer.", ".wallet.", 1);
        assert_eq!(
            verify(&keys, &redirected, Wallet, NOW),
            Err(TokenError::BadSignature("gateway"))
        );
    }

    /// The executor's key in hand, a token claiming the gateway still fails:
    /// the gateway's public key checks it.
    #[test]
    fn one_service_s_key_cannot_sign_for_another() {
        let keys = every_public_key();
        let forged = mint(&key(Executor), Gateway, Wallet, NOW);
        assert_eq!(
            verify(&keys, &forged, Wallet, NOW),
            Err(TokenError::BadSignature("gateway"))
        );
        let token = mint(&key(Executor), Executor, Wallet, NOW);
        let promoted = token.replacen("executor", "gateway", 1);
        assert_eq!(
            verify(&keys, &promoted, Wallet, NOW),
            Err(TokenError::BadSignature("gateway"))
        );
        let extended = token.replacen(&(NOW + TOKEN_SECS).to_string(), "9999999999", 1);
        assert_eq!(
            verify(&keys, &extended, Wallet, NOW),
            Err(TokenError::BadSignature("executor"))
        );
    }

    #[test]
    fn another_deployment_s_keys_or_none_fail() {
        let token = mint(&key(Executor), Executor, Wallet, NOW);
        let mut elsewhere = PublicKeys::default();
        elsewhere.insert(
            Executor,
            SigningKey::derived(b"another deployment", Executor).public_key(),
        );
        assert_eq!(
            verify(&elsewhere, &token, Wallet, NOW),
            Err(TokenError::BadSignature("executor"))
        );
        assert_eq!(
            verify(&PublicKeys::default(), &token, Wallet, NOW),
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
        let token = mint(&signing, Planner, Executor, NOW);
        assert_eq!(verify(&keys, &token, Executor, NOW), Ok(Planner));
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
            let token = mint(signing, Planner, Executor, NOW);
            assert_eq!(verify(&keys, &token, Executor, NOW), Ok(Planner));
        }
        let stranger = mint(&key(Wallet), Planner, Executor, NOW);
        assert_eq!(
            verify(&keys, &stranger, Executor, NOW),
            Err(TokenError::BadSignature("planner"))
        );
    }

    #[test]
    fn garbage_is_malformed() {
        let keys = every_public_key();
        for token in [
            "",
            "v3",
            "v3.gateway.wallet.1",
            "v3.gateway.wallet.1.zz",
            "v3.nobody.wallet.1.00",
            "v1.gateway.1.00",
            "v2.gateway.wallet.1.00",
        ] {
            assert_eq!(
                verify(&keys, token, Wallet, NOW),
                Err(TokenError::Malformed),
                "{token}"
            );
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
