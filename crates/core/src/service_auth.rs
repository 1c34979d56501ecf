//! Service identity between internal services. A caller sends a short-lived
//! token, signed with the deployment's shared secret, that names which service
//! it is and which service it is for (its audience); every internal method
//! admits only the callers listed here, and a path listed nowhere is refused.
//! A pod that reaches the wallet without the secret can neither hold nor
//! credit, an executor's identity cannot credit, and a token the gateway sent
//! the indexer does not work at the wallet.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The gRPC metadata key that carries the token.
pub const HEADER: &str = "x-dialectic-service";
/// How long a minted token is valid; callers mint one per call, so a token
/// seen in transit is worth at most this long.
pub const TOKEN_SECS: i64 = 60;
const VERSION: &str = "v2";

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
    #[error("the service token's signature does not match this deployment's secret")]
    BadSignature,
    #[error("the service token expired")]
    Expired,
    #[error("the service token is for the {0} service")]
    OtherAudience(&'static str),
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

/// `v2.<caller>.<audience>.<expires unix seconds>.<hex HMAC-SHA256 of the rest>`.
pub fn mint(secret: &[u8], caller: ServiceName, audience: ServiceName, now_unix: i64) -> String {
    let claims = format!(
        "{VERSION}.{}.{}.{}",
        caller.as_str(),
        audience.as_str(),
        now_unix + TOKEN_SECS
    );
    let tag = signature(secret, &claims).finalize().into_bytes();
    format!("{claims}.{}", hex(&tag))
}

/// The service a token names, when this deployment's secret signed it for
/// `audience` and it has not expired.
pub fn verify(
    secret: &[u8],
    token: &str,
    audience: ServiceName,
    now_unix: i64,
) -> Result<ServiceName, TokenError> {
    let (claims, tag) = token.rsplit_once('.').ok_or(TokenError::Malformed)?;
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
    let tag = unhex(tag).ok_or(TokenError::Malformed)?;
    signature(secret, claims)
        .verify_slice(&tag)
        .map_err(|_| TokenError::BadSignature)?;
    let expires: i64 = expires.parse().map_err(|_| TokenError::Malformed)?;
    if expires < now_unix {
        return Err(TokenError::Expired);
    }
    let aimed_at = ServiceName::parse(aimed_at).ok_or(TokenError::Malformed)?;
    if aimed_at != audience {
        return Err(TokenError::OtherAudience(aimed_at.as_str()));
    }
    ServiceName::parse(name).ok_or(TokenError::Malformed)
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

    const SECRET: &[u8] = b"deployment secret";
    const NOW: i64 = 1_800_000_000;

    fn callers(path: &str) -> &'static [ServiceName] {
        match access(path) {
            Access::Internal { callers, .. } => callers,
            other => panic!("{path} is {other:?}"),
        }
    }

    #[test]
    fn a_minted_token_verifies_as_its_service_for_a_minute() {
        const { assert!(TOKEN_SECS <= 60) };
        for service in ServiceName::ALL {
            let token = mint(SECRET, service, Wallet, NOW);
            assert_eq!(verify(SECRET, &token, Wallet, NOW), Ok(service));
            assert_eq!(
                verify(SECRET, &token, Wallet, NOW + TOKEN_SECS),
                Ok(service)
            );
            assert_eq!(
                verify(SECRET, &token, Wallet, NOW + TOKEN_SECS + 1),
                Err(TokenError::Expired)
            );
        }
    }

    #[test]
    fn a_token_for_one_service_is_refused_by_every_other() {
        let for_indexer = mint(SECRET, Gateway, Indexer, NOW);
        assert_eq!(verify(SECRET, &for_indexer, Indexer, NOW), Ok(Gateway));
        for other in ServiceName::ALL.into_iter().filter(|s| *s != Indexer) {
            assert_eq!(
                verify(SECRET, &for_indexer, other, NOW),
                Err(TokenError::OtherAudience("indexer")),
                "{other:?}"
            );
        }
        let redirected = for_indexer.replacen(".indexer.", ".wallet.", 1);
        assert_eq!(
            verify(SECRET, &redirected, Wallet, NOW),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn another_secret_or_an_edited_claim_fails_the_signature() {
        let token = mint(SECRET, Executor, Wallet, NOW);
        assert_eq!(
            verify(b"another deployment", &token, Wallet, NOW),
            Err(TokenError::BadSignature)
        );
        let promoted = token.replacen("executor", "gateway", 1);
        assert_eq!(
            verify(SECRET, &promoted, Wallet, NOW),
            Err(TokenError::BadSignature)
        );
        let extended = token.replacen(&(NOW + TOKEN_SECS).to_string(), "9999999999", 1);
        assert_eq!(
            verify(SECRET, &extended, Wallet, NOW),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn garbage_is_malformed() {
        for token in [
            "",
            "v2",
            "v2.gateway.wallet.1",
            "v2.gateway.wallet.1.zz",
            "v1.gateway.1.00",
            "v3.gateway.wallet.1.00",
        ] {
            assert_eq!(
                verify(SECRET, token, Wallet, NOW),
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
