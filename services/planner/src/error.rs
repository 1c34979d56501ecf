//! The planner's one error type, mapped to a gRPC code and a reason a caller can act on.

use dialectic_core::error::{ErrorCode, ErrorContract, Reason};
use dialectic_core::session::InvalidTransition;
use dialectic_runtime::error_status;
use dialectic_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid message: {0}")]
    BadMessage(String),
    #[error("cannot plan stage {stage}: {reason}")]
    Recipe { stage: String, reason: String },
    /// A command the session's (or job's) state does not take.
    #[error("{0}")]
    Refused(String),
    /// Rows kept changing under a command; the caller may try again.
    #[error("{0}")]
    Unavailable(String),
    /// A retry found no failed job in its stage.
    #[error("nothing failed in stage {stage} of this iteration; there is nothing to retry")]
    NothingToRetry { stage: String },
    #[error("{0}")]
    Blob(#[from] dialectic_blob::BlobError),
}

impl PlannerError {
    pub fn is_transient(&self) -> bool {
        matches!(self, PlannerError::Store(e) if e.is_transient())
    }
}

impl From<InvalidTransition> for PlannerError {
    fn from(e: InvalidTransition) -> Self {
        PlannerError::Refused(e.to_string())
    }
}

impl ErrorContract for PlannerError {
    fn code(&self) -> ErrorCode {
        match self {
            PlannerError::Store(e) => e.code(),
            PlannerError::Blob(e) => e.code(),
            PlannerError::Refused(_) | PlannerError::NothingToRetry { .. } => {
                ErrorCode::FailedPrecondition
            }
            PlannerError::Unavailable(_) => ErrorCode::Unavailable,
            PlannerError::BadMessage(_) => ErrorCode::InvalidArgument,
            PlannerError::Recipe { .. } => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            PlannerError::Store(e) => e.reason(),
            PlannerError::Blob(e) => e.reason(),
            PlannerError::Refused(_) => Reason::TransitionRefused,
            PlannerError::Unavailable(_) => Reason::ConcurrentUpdate,
            PlannerError::NothingToRetry { .. } => Reason::NothingToRetry,
            PlannerError::BadMessage(_) => Reason::InvalidCommand,
            PlannerError::Recipe { .. } => Reason::RecipeUnplannable,
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            PlannerError::Store(e) => e.metadata(),
            PlannerError::Blob(e) => e.metadata(),
            PlannerError::Recipe { stage, .. } | PlannerError::NothingToRetry { stage } => {
                vec![("stage", stage.clone())]
            }
            _ => Vec::new(),
        }
    }
}

impl From<PlannerError> for tonic::Status {
    fn from(e: PlannerError) -> Self {
        error_status::status(&e)
    }
}
