use dialectic_blob::BlobError;
use dialectic_cache::CacheError;
use dialectic_core::error::{ErrorCode, ErrorContract, Reason};
use dialectic_core::ids::InvalidId;
use dialectic_runtime::error_status::{self, passed_on};
use dialectic_store::StoreError;
use dialectic_store::ledger::LedgerError;
use tonic::Status;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A request field is wrong; `field` names it in the BadRequest detail.
    #[error("{message}")]
    BadField {
        field: &'static str,
        message: String,
    },
    #[error("{resource} {name} not found")]
    NotFound {
        resource: &'static str,
        name: String,
    },
    /// The request is well formed but the state it acts on does not take it.
    #[error("{message}")]
    Refused { reason: Reason, message: String },
    /// Retry later: a dependency is down or a concurrent request won.
    #[error("{message}")]
    Unavailable { reason: Reason, message: String },
    /// A per-tenant limit is used up (RESOURCE_EXHAUSTED): `limit` and the
    /// tenant's `current` figure go in the metadata, so a client can tell how
    /// much to free without parsing the message.
    #[error("{message}")]
    Exhausted {
        reason: Reason,
        message: String,
        limit: i64,
        current: i64,
    },
    /// The request names something that exists with other contents (a
    /// client_request_id reused for another request).
    #[error("{message}")]
    Conflict { reason: Reason, message: String },
    #[error("{0}")]
    Unauthenticated(String),
    /// Only an administrator may do this.
    #[error("{0}")]
    AdminOnly(String),
    #[error(transparent)]
    Id(#[from] InvalidId),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("{0}")]
    Internal(String),
    /// The planner's answer to a command, passed on with its code and details.
    #[error("{}", .0.message())]
    Planner(Status),
    /// The wallet's answer to a credit, passed on with its code and details.
    #[error("{}", .0.message())]
    Wallet(Status),
    /// An executor's answer to a question, passed on with its code and details.
    #[error("{}", .0.message())]
    Executor(Status),
}

impl GatewayError {
    pub fn bad(field: &'static str, message: impl Into<String>) -> Self {
        GatewayError::BadField {
            field,
            message: message.into(),
        }
    }

    pub fn not_found(resource: &'static str, name: impl std::fmt::Display) -> Self {
        GatewayError::NotFound {
            resource,
            name: name.to_string(),
        }
    }

    pub fn refused(reason: Reason, message: impl Into<String>) -> Self {
        GatewayError::Refused {
            reason,
            message: message.into(),
        }
    }

    pub fn unavailable(reason: Reason, message: impl Into<String>) -> Self {
        GatewayError::Unavailable {
            reason,
            message: message.into(),
        }
    }

    /// The error of a wrapped crate, which describes itself.
    fn inner(&self) -> Option<&dyn ErrorContract> {
        match self {
            GatewayError::Id(e) => Some(e),
            GatewayError::Store(e) => Some(e),
            GatewayError::Blob(e) => Some(e),
            GatewayError::Cache(e) => Some(e),
            GatewayError::Ledger(e) => Some(e),
            _ => None,
        }
    }
}

impl ErrorContract for GatewayError {
    fn code(&self) -> ErrorCode {
        if let Some(inner) = self.inner() {
            return inner.code();
        }
        match self {
            GatewayError::BadField { .. } => ErrorCode::InvalidArgument,
            GatewayError::NotFound { .. } => ErrorCode::NotFound,
            GatewayError::Refused { .. } => ErrorCode::FailedPrecondition,
            GatewayError::Unavailable { .. } => ErrorCode::Unavailable,
            GatewayError::Exhausted { .. } => ErrorCode::ResourceExhausted,
            GatewayError::Conflict { .. } => ErrorCode::AlreadyExists,
            GatewayError::Unauthenticated(_) => ErrorCode::Unauthenticated,
            GatewayError::AdminOnly(_) => ErrorCode::PermissionDenied,
            // Upstream answers are passed on whole (see `From`); never described here.
            _ => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Reason {
        if let Some(inner) = self.inner() {
            return inner.reason();
        }
        match self {
            GatewayError::BadField { .. } => Reason::InvalidField,
            GatewayError::NotFound { .. } => Reason::ResourceNotFound,
            GatewayError::Refused { reason, .. }
            | GatewayError::Unavailable { reason, .. }
            | GatewayError::Conflict { reason, .. }
            | GatewayError::Exhausted { reason, .. } => *reason,
            GatewayError::Unauthenticated(_) => Reason::ApiKeyRejected,
            GatewayError::AdminOnly(_) => Reason::AdminRequired,
            _ => Reason::Internal,
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        if let Some(inner) = self.inner() {
            return inner.metadata();
        }
        match self {
            GatewayError::NotFound { resource, name } => vec![
                ("resource_type", resource.to_string()),
                ("resource_name", name.clone()),
            ],
            GatewayError::Exhausted { limit, current, .. } => {
                vec![
                    ("limit", limit.to_string()),
                    ("current", current.to_string()),
                ]
            }
            _ => Vec::new(),
        }
    }

    fn field(&self) -> Option<&str> {
        if let Some(inner) = self.inner() {
            return inner.field();
        }
        match self {
            GatewayError::BadField { field, .. } => Some(field),
            _ => None,
        }
    }
}

impl From<GatewayError> for Status {
    fn from(e: GatewayError) -> Self {
        match e {
            GatewayError::Planner(status) => passed_on("planner", status),
            GatewayError::Wallet(status) => passed_on("wallet", status),
            GatewayError::Executor(status) => passed_on("executor", status),
            e => error_status::status(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn described(e: GatewayError) -> (Code, Option<String>) {
        let status = Status::from(e);
        (status.code(), error_status::reason(&status))
    }

    #[test]
    fn errors_map_to_codes_and_reasons() {
        let cases = [
            (
                GatewayError::bad("name", "name is required"),
                Code::InvalidArgument,
                "INVALID_FIELD",
            ),
            (
                StoreError::not_found("session", "1").into(),
                Code::NotFound,
                "RESOURCE_NOT_FOUND",
            ),
            (
                StoreError::Corrupt("bad".into()).into(),
                Code::Internal,
                "CORRUPT_STORED_DATA",
            ),
            (
                dialectic_core::ids::SessionId::parse("nope")
                    .unwrap_err()
                    .into(),
                Code::InvalidArgument,
                "INVALID_ID",
            ),
            (
                GatewayError::unavailable(Reason::CacheUnavailable, "redis"),
                Code::Unavailable,
                "CACHE_UNAVAILABLE",
            ),
            (
                LedgerError::InsufficientFunds {
                    requested: 5,
                    available: 1,
                }
                .into(),
                Code::FailedPrecondition,
                "INSUFFICIENT_FUNDS",
            ),
            (
                GatewayError::Exhausted {
                    reason: Reason::ProjectDocumentLimitReached,
                    message: "full".into(),
                    limit: 2,
                    current: 2,
                },
                Code::ResourceExhausted,
                "PROJECT_DOCUMENT_LIMIT_REACHED",
            ),
            (
                GatewayError::AdminOnly("no".into()),
                Code::PermissionDenied,
                "ADMIN_REQUIRED",
            ),
        ];
        for (error, code, reason) in cases {
            assert_eq!(described(error), (code, Some(reason.to_string())));
        }
    }

    #[test]
    fn a_bad_field_names_the_field() {
        use dialectic_runtime::error_status::StatusExt;
        let status = Status::from(GatewayError::bad("name", "name is required"));
        let bad = status.get_details_bad_request().expect("BadRequest");
        assert_eq!(bad.field_violations[0].field, "name");
    }
}
