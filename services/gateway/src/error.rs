use dialectic_blob::BlobError;
use dialectic_cache::CacheError;
use dialectic_core::ids::InvalidId;
use dialectic_store::StoreError;
use tonic::Status;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error("{0}")]
    Internal(String),
    #[error(transparent)]
    Ledger(#[from] dialectic_store::ledger::LedgerError),
    /// The planner's answer to a command, passed on with its code.
    #[error("{}", .0.message())]
    Planner(#[from] Status),
    /// The wallet's answer to a credit, passed on with its code.
    #[error("{}", .0.message())]
    Wallet(Status),
    /// An executor's answer to a question, passed on with its code.
    #[error("{}", .0.message())]
    Executor(Status),
}

impl From<InvalidId> for GatewayError {
    fn from(e: InvalidId) -> Self {
        GatewayError::InvalidArgument(e.to_string())
    }
}

/// An internal service's answer: its code, unless the service itself was
/// out of reach (its connection failed), which is UNAVAILABLE.
fn passed_on(service: &str, status: Status) -> Status {
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled => {
            Status::unavailable(format!("{service} unavailable: {}", status.message()))
        }
        code => Status::new(code, status.message()),
    }
}

impl From<GatewayError> for Status {
    fn from(e: GatewayError) -> Self {
        let status = match e {
            GatewayError::InvalidArgument(m) => Status::invalid_argument(m),
            GatewayError::NotFound(what) => Status::not_found(format!("{what} not found")),
            GatewayError::Unavailable(m) => Status::unavailable(m),
            GatewayError::Unauthenticated(m) => Status::unauthenticated(m),
            GatewayError::PermissionDenied(m) => Status::permission_denied(m),
            GatewayError::FailedPrecondition(m) => Status::failed_precondition(m),
            GatewayError::Store(StoreError::NotFound(what)) => {
                Status::not_found(format!("{what} not found"))
            }
            GatewayError::Store(StoreError::Invalid(m)) => Status::invalid_argument(m),
            GatewayError::Store(e) if e.is_transient() => {
                Status::unavailable(format!("database unavailable: {e}"))
            }
            GatewayError::Store(e) => Status::internal(e.to_string()),
            GatewayError::Blob(BlobError::NotFound(key)) => {
                Status::not_found(format!("stored object {key} not found"))
            }
            // The S3 adapter cannot tell an outage from a misconfiguration;
            // UNAVAILABLE lets clients retry the common case, a store that is down.
            GatewayError::Blob(e) => Status::unavailable(format!("object storage: {e}")),
            GatewayError::Cache(e) => Status::unavailable(format!("progress cache: {e}")),
            GatewayError::Internal(m) => Status::internal(m),
            GatewayError::Ledger(dialectic_store::ledger::LedgerError::Store(e)) => {
                Status::from(GatewayError::Store(e))
            }
            GatewayError::Ledger(e) => Status::internal(e.to_string()),
            GatewayError::Planner(status) => passed_on("planner", status),
            GatewayError::Wallet(status) => passed_on("wallet", status),
            GatewayError::Executor(status) => passed_on("executor", status),
        };
        match status.code() {
            tonic::Code::Internal => tracing::error!(message = status.message(), "request failed"),
            tonic::Code::Unavailable => {
                tracing::warn!(message = status.message(), "dependency unavailable")
            }
            _ => {}
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_codes() {
        let code = |e: GatewayError| Status::from(e).code();
        assert_eq!(
            code(GatewayError::InvalidArgument("x".into())),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            code(StoreError::NotFound("session 1".into()).into()),
            tonic::Code::NotFound
        );
        assert_eq!(
            code(StoreError::Corrupt("bad".into()).into()),
            tonic::Code::Internal
        );
        assert_eq!(
            code(
                dialectic_core::ids::SessionId::parse("nope")
                    .unwrap_err()
                    .into()
            ),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            code(GatewayError::Unavailable("redis".into())),
            tonic::Code::Unavailable
        );
    }
}
