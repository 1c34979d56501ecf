//! Service identity between internal services. A caller sends a short-lived
//! token, signed with the deployment's shared secret, that names which service
//! it is; every internal method admits only the callers listed here. A pod
//! that reaches the wallet without the secret can neither hold nor credit, and
//! an executor's identity cannot credit: only the gateway's admin path can.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The gRPC metadata key that carries the token.
pub const HEADER: &str = "x-dialectic-service";
/// How long a minted token is valid; callers mint one per call.
pub const TOKEN_SECS: i64 = 300;
const VERSION: &str = "v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("no service token (metadata {HEADER})")]
    Missing,
    #[error("the service token is malformed")]
    Malformed,
    #[error("the service token's signature does not match this deployment's secret")]
    BadSignature,
    #[error("the service token expired")]
    Expired,
}

fn signature(secret: &[u8], claims: &str) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(claims.as_bytes());
    mac
}

fn hex(bytes: &[u8]) -> String {
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

/// `v1.<service>.<expires unix seconds>.<hex HMAC-SHA256 of the rest>`.
pub fn mint(secret: &[u8], caller: ServiceName, now_unix: i64) -> String {
    let claims = format!("{VERSION}.{}.{}", caller.as_str(), now_unix + TOKEN_SECS);
    let tag = signature(secret, &claims).finalize().into_bytes();
    format!("{claims}.{}", hex(&tag))
}

/// The service a token names, when this deployment's secret signed it and it
/// has not expired.
pub fn verify(secret: &[u8], token: &str, now_unix: i64) -> Result<ServiceName, TokenError> {
    let (claims, tag) = token.rsplit_once('.').ok_or(TokenError::Malformed)?;
    let mut parts = claims.split('.');
    let (Some(VERSION), Some(name), Some(expires), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let tag = unhex(tag).ok_or(TokenError::Malformed)?;
    signature(secret, claims)
        .verify_slice(&tag)
        .map_err(|_| TokenError::BadSignature)?;
    let expires: i64 = expires.parse().map_err(|_| TokenError::Malformed)?;
    if expires < now_unix {
        return Err(TokenError::Expired);
    }
    ServiceName::parse(name).ok_or(TokenError::Malformed)
}

/// Whether the internal RPC at `path` (`/package.Service/Method`) admits
/// `caller`. None: the path is not an internal service's (the public API,
/// health, reflection), so service identity does not apply.
pub fn admits(path: &str, caller: ServiceName) -> Option<bool> {
    use ServiceName::*;
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    let callers: &[ServiceName] = match (service, method) {
        ("dialectic.v1.wallet.WalletService", "Hold" | "Capture" | "Release") => &[Executor],
        ("dialectic.v1.wallet.WalletService", "GetBalance") => &[Executor, Gateway],
        ("dialectic.v1.wallet.WalletService", "Credit" | "ListTransactions") => &[Gateway],
        ("dialectic.v1.wallet.WalletService", _) => &[],
        ("dialectic.v1.planner.PlannerService", _) => &[Gateway],
        ("dialectic.v1.indexer.IndexerService", _) => &[Executor, Gateway],
        ("dialectic.v1.executor.ExecutorService" | "dialectic.v1.renderer.RendererService", _) => {
            &ServiceName::ALL
        }
        _ => return None,
    };
    Some(callers.contains(&caller))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"deployment secret";
    const NOW: i64 = 1_800_000_000;

    #[test]
    fn a_minted_token_verifies_as_its_service_until_it_expires() {
        for service in ServiceName::ALL {
            let token = mint(SECRET, service, NOW);
            assert_eq!(verify(SECRET, &token, NOW), Ok(service));
            assert_eq!(verify(SECRET, &token, NOW + TOKEN_SECS), Ok(service));
            assert_eq!(
                verify(SECRET, &token, NOW + TOKEN_SECS + 1),
                Err(TokenError::Expired)
            );
        }
    }

    #[test]
    fn another_secret_or_an_edited_claim_fails_the_signature() {
        let token = mint(SECRET, ServiceName::Executor, NOW);
        assert_eq!(
            verify(b"another deployment", &token, NOW),
            Err(TokenError::BadSignature)
        );
        let promoted = token.replacen("executor", "gateway", 1);
        assert_eq!(
            verify(SECRET, &promoted, NOW),
            Err(TokenError::BadSignature)
        );
        let extended = token.replacen(&(NOW + TOKEN_SECS).to_string(), "9999999999", 1);
        assert_eq!(
            verify(SECRET, &extended, NOW),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn garbage_is_malformed() {
        for token in [
            "",
            "v1",
            "v1.gateway.1",
            "v1.gateway.1.zz",
            "v2.gateway.1.00",
        ] {
            assert_eq!(
                verify(SECRET, token, NOW),
                Err(TokenError::Malformed),
                "{token}"
            );
        }
    }

    #[test]
    fn only_executors_move_money_and_only_the_gateway_credits() {
        let hold = "/dialectic.v1.wallet.WalletService/Hold";
        let credit = "/dialectic.v1.wallet.WalletService/Credit";
        assert_eq!(admits(hold, ServiceName::Executor), Some(true));
        assert_eq!(admits(hold, ServiceName::Gateway), Some(false));
        assert_eq!(admits(credit, ServiceName::Gateway), Some(true));
        assert_eq!(admits(credit, ServiceName::Executor), Some(false));
        assert_eq!(
            admits(
                "/dialectic.v1.wallet.WalletService/Unknown",
                ServiceName::Gateway
            ),
            Some(false)
        );
        assert_eq!(
            admits(
                "/dialectic.v1.planner.PlannerService/Pause",
                ServiceName::Executor
            ),
            Some(false)
        );
    }

    #[test]
    fn public_health_and_reflection_paths_need_no_identity() {
        for path in [
            "/dialectic.v1.DialecticService/GetSession",
            "/grpc.health.v1.Health/Check",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        ] {
            assert_eq!(admits(path, ServiceName::Gateway), None, "{path}");
        }
    }
}
