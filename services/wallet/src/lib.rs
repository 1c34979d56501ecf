//! The wallet service: the token ledger. Only this service writes wallets;
//! for now it answers balance queries.

use dialectic_config::Settings;
use dialectic_core::error::{ErrorCode, ErrorContract, Reason};
use dialectic_core::ids::{InvalidId, TransactionId, UserId, WalletId};
use dialectic_core::service_auth::ServiceName;
use dialectic_proto::v1::wallet::wallet_service_server::{WalletService, WalletServiceServer};
use dialectic_proto::v1::wallet::{
    Balance, CallUsage, CaptureRequest, CreditRequest, GetBalanceRequest, HoldRequest, LedgerEntry,
    ListTransactionsRequest, ListTransactionsResponse, ReleaseRequest,
};
use dialectic_runtime::error_status;
use dialectic_runtime::{CancellationToken, Dependencies, Running, RuntimeError, supervise};
use dialectic_store::ledger::{self, LedgerError, References, Transaction};
use dialectic_store::listing::Cursor;
use dialectic_store::{Planning, Store, StoreError, wallets};
use dialectic_telemetry::metrics;
use futures::future::BoxFuture;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tonic::{Request, Response, Status};
use tracing::Instrument;

pub const SERVICE_NAME: &str = "dialectic.v1.wallet.WalletService";

#[derive(Debug, thiserror::Error)]
pub enum WalletError {
    #[error("{message}")]
    InvalidArgument {
        field: &'static str,
        message: String,
    },
    #[error("{0}")]
    PermissionDenied(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

impl WalletError {
    fn bad(field: &'static str, message: impl Into<String>) -> Self {
        WalletError::InvalidArgument {
            field,
            message: message.into(),
        }
    }
}

impl ErrorContract for WalletError {
    fn code(&self) -> ErrorCode {
        match self {
            WalletError::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            WalletError::PermissionDenied(_) => ErrorCode::PermissionDenied,
            WalletError::Ledger(e) => e.code(),
            WalletError::Store(e) => e.code(),
            WalletError::Internal(_) => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            WalletError::InvalidArgument { .. } => Reason::InvalidField,
            WalletError::PermissionDenied(_) => Reason::CallerNotAllowed,
            WalletError::Ledger(e) => e.reason(),
            WalletError::Store(e) => e.reason(),
            WalletError::Internal(_) => Reason::Internal,
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            WalletError::Ledger(e) => e.metadata(),
            WalletError::Store(e) => e.metadata(),
            _ => Vec::new(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            WalletError::InvalidArgument { field, .. } => Some(field),
            WalletError::Ledger(e) => e.field(),
            _ => None,
        }
    }
}

impl From<WalletError> for Status {
    fn from(e: WalletError) -> Self {
        error_status::status(&e)
    }
}

/// Which wallet a request names: `(wallet_id, user_id)` for `wallets::wallet_balance`.
/// Both empty means the default user's own wallet.
pub fn wallet_selector(
    wallet_id: &str,
    user_id: &str,
    default_user: &str,
) -> Result<(Option<WalletId>, Option<UserId>), WalletError> {
    let wallet_id = wallet_id.trim();
    let user_id = user_id.trim();
    if !wallet_id.is_empty() {
        return Ok((Some(id("wallet_id", wallet_id)?), None));
    }
    if !user_id.is_empty() {
        return Ok((None, Some(id("user_id", user_id)?)));
    }
    let default = UserId::parse(default_user).map_err(|_| {
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
        let row = wallets::wallet_balance(self.store.pool(), wallet_id, user_id).await?;
        Ok(Balance {
            wallet_id: row.id.to_string(),
            total: row.balance,
            held: row.held,
            available: row.balance - row.held,
        })
    }
}

/// Default lifetime of a hold that is never captured.
const DEFAULT_HOLD_SECS: i64 = 15 * 60;
const MAX_PAGE: u32 = 200;

/// A typed id from a request field. The error names the field the client
/// filled in, which says more to it than the id's kind would, and echoes at
/// most 64 characters of what it sent (`InvalidId` keeps no more).
fn id<T: FromStr<Err = InvalidId>>(field: &'static str, value: &str) -> Result<T, WalletError> {
    value.parse().map_err(|e: InvalidId| {
        WalletError::bad(field, format!("{field} {:?} is not a valid UUID", e.value))
    })
}

fn optional_id<T: FromStr<Err = InvalidId>>(
    field: &'static str,
    value: &str,
) -> Result<Option<T>, WalletError> {
    if value.trim().is_empty() {
        Ok(None)
    } else {
        id(field, value).map(Some)
    }
}

fn timestamp(at: chrono::DateTime<chrono::Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.timestamp(),
        nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

pub fn entry(t: Transaction) -> LedgerEntry {
    let usage = call_usage(&t);
    LedgerEntry {
        id: t.id.to_string(),
        wallet_id: t.wallet_id.to_string(),
        kind: t.kind.to_string(),
        amount: t.amount,
        balance_after: t.balance_after,
        held_after: t.held_after,
        idempotency_key: t.idempotency_key,
        reason: t.reason.unwrap_or_default(),
        hold_id: t.hold_id.map(|h| h.to_string()).unwrap_or_default(),
        session_id: t.session_id.map(|h| h.to_string()).unwrap_or_default(),
        job_id: t.job_id.map(|h| h.to_string()).unwrap_or_default(),
        attempt: t.attempt.and_then(|a| u32::try_from(a).ok()).unwrap_or(0),
        purpose: t.purpose.unwrap_or_default(),
        expires_at: t.expires_at.map(timestamp),
        created_at: Some(timestamp(t.created_at)),
        usage,
    }
}

/// The usage a model call's entry recorded; None for any other entry.
fn call_usage(t: &Transaction) -> Option<CallUsage> {
    let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
    t.input_tokens?;
    let money = t.money();
    Some(CallUsage {
        input_tokens: count(t.input_tokens),
        output_tokens: count(t.output_tokens),
        cached_input_tokens: count(t.cached_input_tokens),
        cache_write_input_tokens: count(t.cache_write_input_tokens),
        currency_code: money
            .as_ref()
            .map(|m| m.currency.clone())
            .unwrap_or_default(),
        money_nanos: money.map_or(0, |m| m.nanos),
    })
}

/// A capture's usage as the ledger records it: counts that fit its columns,
/// money in a currency code and never negative.
fn recorded_usage(usage: &CallUsage) -> Result<ledger::CallUsage, WalletError> {
    let count = |field: &'static str, n: u64| {
        i64::try_from(n).map_err(|_| WalletError::bad(field, format!("{field} is too large")))
    };
    let money = if usage.currency_code.is_empty() {
        None
    } else {
        dialectic_core::price::check_currency(&usage.currency_code)
            .map_err(|e| WalletError::bad("usage.currency_code", e.to_string()))?;
        if usage.money_nanos < 0 {
            return Err(WalletError::bad(
                "usage.money_nanos",
                "a call's cost is never negative",
            ));
        }
        Some(dialectic_core::price::Money {
            currency: usage.currency_code.clone(),
            nanos: usage.money_nanos,
        })
    };
    Ok(ledger::CallUsage {
        input_tokens: count("usage.input_tokens", usage.input_tokens)?,
        output_tokens: count("usage.output_tokens", usage.output_tokens)?,
        cached_input_tokens: count("usage.cached_input_tokens", usage.cached_input_tokens)?,
        cache_write_input_tokens: count(
            "usage.cache_write_input_tokens",
            usage.cache_write_input_tokens,
        )?,
        money,
    })
}

fn page_token(t: &Transaction) -> String {
    format!("{}_{}", t.created_at.timestamp_micros(), t.id)
}

fn parse_page_token(token: &str) -> Result<Option<Cursor<TransactionId>>, WalletError> {
    if token.is_empty() {
        return Ok(None);
    }
    let bad = || WalletError::bad("page_token", "page_token is not one this service issued");
    let (micros, id) = token.split_once('_').ok_or_else(bad)?;
    let at = chrono::DateTime::from_timestamp_micros(micros.parse().map_err(|_| bad())?)
        .ok_or_else(bad)?;
    let id: TransactionId = id.parse().map_err(|_| bad())?;
    Ok(Some((at, id)))
}

impl Wallet {
    /// The user the gateway acts for: it names the one it authenticated in
    /// `x-dialectic-user`. No other service acts for a user.
    fn caller<T>(&self, request: &Request<T>) -> Result<UserId, WalletError> {
        if dialectic_runtime::service_auth::caller(request) != Some(ServiceName::Gateway) {
            return Err(WalletError::PermissionDenied(
                "only the gateway acts for a user".into(),
            ));
        }
        let user = request
            .metadata()
            .get("x-dialectic-user")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| WalletError::bad("x-dialectic-user", "x-dialectic-user is required"))?;
        id("x-dialectic-user", user)
    }
}

/// Counts one ledger operation by its outcome, for `/metrics`.
fn record<T>(operation: &str, result: &Result<T, WalletError>) {
    let outcome = match result {
        Ok(_) => "ok",
        Err(WalletError::Ledger(LedgerError::InsufficientFunds { .. })) => "insufficient_funds",
        Err(WalletError::Ledger(LedgerError::KeyReuse(_))) => "key_reuse",
        Err(WalletError::Ledger(_)) | Err(WalletError::InvalidArgument { .. }) => "rejected",
        Err(WalletError::PermissionDenied(_)) => "denied",
        Err(WalletError::Store(_)) | Err(WalletError::Internal(_)) => "error",
    };
    metrics::WALLET_OPERATIONS.inc(&[operation, outcome]);
}

#[tonic::async_trait]
impl WalletService for Wallet {
    async fn hold(&self, request: Request<HoldRequest>) -> Result<Response<LedgerEntry>, Status> {
        let r = request.into_inner();
        let span = tracing::info_span!("hold", wallet_id = %r.wallet_id, job_id = %r.job_id, session_id = %r.session_id);
        let result = async {
            let refs = References {
                session_id: optional_id("session_id", &r.session_id)?,
                job_id: optional_id("job_id", &r.job_id)?,
                attempt: (r.attempt > 0).then_some(r.attempt as i32),
                purpose: (!r.purpose.is_empty()).then(|| r.purpose.clone()),
            };
            let expires = if r.expires_in_secs == 0 {
                DEFAULT_HOLD_SECS
            } else {
                i64::from(r.expires_in_secs)
            };
            let t = ledger::hold(
                self.store.pool(),
                id::<WalletId>("wallet_id", &r.wallet_id)?,
                r.amount,
                &r.idempotency_key,
                &refs,
                expires,
            )
            .await?;
            Ok::<_, WalletError>(Response::new(entry(t)))
        }
        .instrument(span)
        .await;
        record("hold", &result);
        result.map_err(Status::from)
    }

    async fn capture(
        &self,
        request: Request<CaptureRequest>,
    ) -> Result<Response<LedgerEntry>, Status> {
        let r = request.into_inner();
        let t = async {
            let usage = r.usage.as_ref().map(recorded_usage).transpose()?;
            Ok::<_, WalletError>(
                ledger::capture_call(
                    self.store.pool(),
                    id::<WalletId>("wallet_id", &r.wallet_id)?,
                    id::<TransactionId>("hold_id", &r.hold_id)?,
                    r.amount,
                    &r.idempotency_key,
                    usage.as_ref(),
                )
                .await?,
            )
        }
        .instrument(tracing::info_span!("capture", wallet_id = %r.wallet_id, hold_id = %r.hold_id))
        .await;
        record("capture", &t);
        let t = t?;
        Ok(Response::new(entry(t)))
    }

    async fn release(
        &self,
        request: Request<ReleaseRequest>,
    ) -> Result<Response<LedgerEntry>, Status> {
        let r = request.into_inner();
        let reason = if r.reason.trim().is_empty() {
            "released by request"
        } else {
            r.reason.trim()
        };
        let t = async {
            Ok::<_, WalletError>(
                ledger::release(
                    self.store.pool(),
                    id::<WalletId>("wallet_id", &r.wallet_id)?,
                    id::<TransactionId>("hold_id", &r.hold_id)?,
                    &r.idempotency_key,
                    reason,
                )
                .await?,
            )
        }
        .instrument(tracing::info_span!("release", wallet_id = %r.wallet_id, hold_id = %r.hold_id))
        .await;
        record("release", &t);
        let t = t?;
        Ok(Response::new(entry(t)))
    }

    async fn credit(
        &self,
        request: Request<CreditRequest>,
    ) -> Result<Response<LedgerEntry>, Status> {
        let caller = self.caller(&request)?;
        let r = request.into_inner();
        let t = async {
            if !ledger::is_admin(self.store.pool(), caller).await? {
                return Err(WalletError::PermissionDenied(
                    "only an administrator can credit a wallet".into(),
                ));
            }
            let reason = if r.reason.trim().is_empty() {
                "credit"
            } else {
                r.reason.trim()
            };
            Ok(ledger::credit(
                self.store.pool(),
                id::<WalletId>("wallet_id", &r.wallet_id)?,
                r.amount,
                &r.idempotency_key,
                reason,
            )
            .await?)
        }
        .instrument(tracing::info_span!("credit", wallet_id = %r.wallet_id, user_id = %caller))
        .await;
        record("credit", &t);
        let t = t?;
        Ok(Response::new(entry(t)))
    }

    async fn list_transactions(
        &self,
        request: Request<ListTransactionsRequest>,
    ) -> Result<Response<ListTransactionsResponse>, Status> {
        let r = request.into_inner();
        let wallet = id::<WalletId>("wallet_id", &r.wallet_id)?;
        let size = if r.page_size == 0 {
            50
        } else {
            r.page_size.min(MAX_PAGE)
        };
        let before = parse_page_token(&r.page_token)?;
        let rows = ledger::transactions(self.store.pool(), wallet, i64::from(size), before)
            .await
            .map_err(WalletError::from)?;
        let next_page_token = if rows.len() == size as usize {
            rows.last().map(page_token).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(ListTransactionsResponse {
            entries: rows.into_iter().map(entry).collect(),
            next_page_token,
        }))
    }

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
    let store = dialectic_runtime::store_with(&settings, Planning::EachCall)?;
    let server = dialectic_runtime::start_grpc(
        SERVICE_NAME,
        &settings.wallet.listen,
        tonic::service::Routes::new(WalletServiceServer::new(Wallet::new(
            store.clone(),
            settings.gateway.default_user_id.clone(),
        ))),
        dialectic_runtime::service_auth::ServiceKey::from_settings(&settings, ServiceName::Wallet)?,
        shutdown.clone(),
    )
    .await?;
    let work_shutdown = shutdown.child_token();
    let sweeper = {
        let store = store.clone();
        let every = Duration::from_millis(settings.wallet.hold_sweep_interval_ms.max(50));
        let shutdown = work_shutdown.clone();
        tokio::spawn(async move {
            while dialectic_runtime::sleep_or_shutdown(every, &shutdown).await {
                if let Ok(held) = dialectic_store::stats::wallet_held(store.pool()).await {
                    metrics::WALLET_HELD.set(&[], held as f64);
                }
                match ledger::settle_abandoned(store.pool(), 500).await {
                    Ok(ledger::Settled {
                        captured: 0,
                        released: 0,
                    }) => {}
                    Ok(ledger::Settled { captured, released }) => {
                        metrics::WALLET_OPERATIONS.add(&["abandon", "ok"], released as f64);
                        metrics::WALLET_OPERATIONS.add(&["late_capture", "ok"], captured as f64);
                        tracing::info!(captured, released, "holds of ended attempts settled")
                    }
                    Err(e) => tracing::warn!(error = %e, "abandoned-hold sweep failed"),
                }
                match ledger::release_expired(store.pool(), 500).await {
                    Ok(0) => {}
                    Ok(n) => {
                        metrics::WALLET_OPERATIONS.add(&["expire", "ok"], n as f64);
                        tracing::info!(released = n, "expired holds released")
                    }
                    Err(e) => tracing::warn!(error = %e, "expired-hold sweep failed"),
                }
            }
        })
    };
    let dependencies = Dependencies {
        store: Some(store),
        ..Default::default()
    };
    Ok(supervise(
        "wallet",
        &settings,
        server,
        dependencies,
        work_shutdown,
        vec![sweeper],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_prefers_wallet_then_user_then_default() {
        let w = WalletId::new();
        let u = UserId::new();
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
            Some((None, UserId::parse(d).ok()))
        );
        assert!(matches!(
            wallet_selector("nope", "", d),
            Err(WalletError::InvalidArgument { .. })
        ));
        assert!(matches!(
            wallet_selector("", "", "bad"),
            Err(WalletError::Internal(_))
        ));
    }

    #[test]
    fn errors_map_to_codes() {
        assert_eq!(
            Status::from(WalletError::Store(StoreError::not_found("wallet", "w"))).code(),
            tonic::Code::NotFound
        );
        let bad = Status::from(WalletError::bad("amount", "x"));
        assert_eq!(bad.code(), tonic::Code::InvalidArgument);
        assert_eq!(error_status::reason(&bad).as_deref(), Some("INVALID_FIELD"));
        // A short balance is the same failure here and at the gateway.
        let short = WalletError::Ledger(LedgerError::InsufficientFunds {
            requested: 2,
            available: 1,
        });
        let status = Status::from(short);
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert_eq!(
            error_status::reason(&status).as_deref(),
            Some("INSUFFICIENT_FUNDS")
        );
    }
}
