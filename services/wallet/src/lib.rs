//! The wallet service: the token ledger. Only this service writes wallets;
//! for now it answers balance queries.

use dialectic_config::Settings;
use dialectic_proto::v1::wallet::wallet_service_server::{WalletService, WalletServiceServer};
use dialectic_proto::v1::wallet::{Balance, GetBalanceRequest};
use dialectic_runtime::{CancellationToken, Dependencies, Running, RuntimeError, supervise};
use dialectic_store::{Store, StoreError, records};
use futures::future::BoxFuture;
use std::sync::Arc;
use tonic::{Request, Response, Status};
use tracing::Instrument;
use uuid::Uuid;

pub const SERVICE_NAME: &str = "dialectic.v1.wallet.WalletService";

#[derive(Debug, thiserror::Error)]
pub enum WalletError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

impl From<WalletError> for Status {
    fn from(e: WalletError) -> Self {
        match e {
            WalletError::InvalidArgument(m) => Status::invalid_argument(m),
            WalletError::Store(StoreError::NotFound(what)) => {
                Status::not_found(format!("{what} not found"))
            }
            WalletError::Store(e) if e.is_transient() => {
                tracing::warn!(error = %e, "database unavailable");
                Status::unavailable(format!("database unavailable: {e}"))
            }
            WalletError::Store(e) => {
                tracing::error!(error = %e, "request failed");
                Status::internal(e.to_string())
            }
            WalletError::Internal(m) => {
                tracing::error!(message = %m, "request failed");
                Status::internal(m)
            }
        }
    }
}

/// Which wallet a request names: `(wallet_id, user_id)` for `records::wallet_balance`.
/// Both empty means the default user's own wallet.
pub fn wallet_selector(
    wallet_id: &str,
    user_id: &str,
    default_user: &str,
) -> Result<(Option<Uuid>, Option<Uuid>), WalletError> {
    let parse = |field: &str, value: &str| {
        Uuid::parse_str(value.trim()).map_err(|_| {
            WalletError::InvalidArgument(format!(
                "{field} {:?} is not a valid UUID",
                value.chars().take(64).collect::<String>()
            ))
        })
    };
    let wallet_id = wallet_id.trim();
    let user_id = user_id.trim();
    if !wallet_id.is_empty() {
        return Ok((Some(parse("wallet_id", wallet_id)?), None));
    }
    if !user_id.is_empty() {
        return Ok((None, Some(parse("user_id", user_id)?)));
    }
    let default = Uuid::parse_str(default_user.trim()).map_err(|_| {
        WalletError::Internal(
            "no wallet_id or user_id given and gateway.default_user_id is not a valid UUID".into(),
        )
    })?;
    Ok((None, Some(default)))
}

pub struct Wallet {
    store: Store,
    default_user: String,
}

impl Wallet {
    pub fn new(store: Store, default_user: String) -> Self {
        Self {
            store,
            default_user,
        }
    }

    async fn balance(&self, req: GetBalanceRequest) -> Result<Balance, WalletError> {
        let (wallet_id, user_id) =
            wallet_selector(&req.wallet_id, &req.user_id, &self.default_user)?;
        let row = records::wallet_balance(self.store.pool(), wallet_id, user_id).await?;
        Ok(Balance {
            wallet_id: row.id.to_string(),
            total: row.balance,
            held: row.held,
            available: row.balance - row.held,
        })
    }
}

#[tonic::async_trait]
impl WalletService for Wallet {
    async fn get_balance(
        &self,
        request: Request<GetBalanceRequest>,
    ) -> Result<Response<Balance>, Status> {
        let req = request.into_inner();
        let span =
            tracing::info_span!("get_balance", wallet_id = %req.wallet_id, user_id = %req.user_id);
        let balance = self.balance(req).instrument(span).await?;
        Ok(Response::new(balance))
    }
}

pub fn start(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> BoxFuture<'static, Result<Running, RuntimeError>> {
    Box::pin(start_wallet(settings, shutdown))
}

async fn start_wallet(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> Result<Running, RuntimeError> {
    let store = dialectic_runtime::store(&settings)?;
    let server = dialectic_runtime::start_grpc(
        SERVICE_NAME,
        &settings.wallet.listen,
        tonic::service::Routes::new(WalletServiceServer::new(Wallet::new(
            store.clone(),
            settings.gateway.default_user_id.clone(),
        ))),
        shutdown.clone(),
    )
    .await?;
    let dependencies = Dependencies {
        store: Some(store),
        ..Default::default()
    };
    Ok(supervise(
        "wallet",
        &settings,
        server,
        dependencies,
        shutdown.child_token(),
        Vec::new(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_prefers_wallet_then_user_then_default() {
        let w = Uuid::now_v7();
        let u = Uuid::now_v7();
        let d = "00000000-0000-0000-0000-000000000001";
        assert_eq!(
            wallet_selector(&w.to_string(), &u.to_string(), d).ok(),
            Some((Some(w), None))
        );
        assert_eq!(
            wallet_selector("", &u.to_string(), d).ok(),
            Some((None, Some(u)))
        );
        assert_eq!(
            wallet_selector(" ", "", d).ok(),
            Some((None, Uuid::parse_str(d).ok()))
        );
        assert!(matches!(
            wallet_selector("nope", "", d),
            Err(WalletError::InvalidArgument(_))
        ));
        assert!(matches!(
            wallet_selector("", "", "bad"),
            Err(WalletError::Internal(_))
        ));
    }

    #[test]
    fn errors_map_to_codes() {
        assert_eq!(
            Status::from(WalletError::Store(StoreError::NotFound("wallet".into()))).code(),
            tonic::Code::NotFound
        );
        assert_eq!(
            Status::from(WalletError::InvalidArgument("x".into())).code(),
            tonic::Code::InvalidArgument
        );
    }
}
