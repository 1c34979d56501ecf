//! Every error the store returns, in one place, each with its gRPC contract
//! where it reaches a client as it is.

use dialectic_core::error::{ErrorCode, ErrorContract, Reason};
use dialectic_core::ids::{TransactionId, WalletId};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{resource} {name} not found")]
    NotFound {
        resource: &'static str,
        name: String,
    },
    #[error("invalid stored data: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Invalid(String),
}

impl StoreError {
    /// `resource` is what kind of thing was looked for ("session"), `name` which one.
    pub fn not_found(resource: &'static str, name: impl std::fmt::Display) -> Self {
        StoreError::NotFound {
            resource,
            name: name.to_string(),
        }
    }

    /// The database did not answer at all (down, failing over, no connection
    /// to be had), as opposed to answering with an error.
    pub fn is_unreachable(&self) -> bool {
        match self {
            StoreError::Database(e) => match e {
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed => true,
                sqlx::Error::Database(db) => {
                    matches!(db.code().as_deref(), Some("57P01" | "57P03"))
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// Worth retrying: the database is unreachable or the transaction lost a race.
    pub fn is_transient(&self) -> bool {
        let lost_a_race = matches!(
            self,
            StoreError::Database(sqlx::Error::Database(db))
                if matches!(db.code().as_deref(), Some("40001" | "40P01"))
        );
        lost_a_race || self.is_unreachable()
    }
}

impl ErrorContract for StoreError {
    fn code(&self) -> ErrorCode {
        match self {
            StoreError::NotFound { .. } => ErrorCode::NotFound,
            StoreError::Invalid(_) => ErrorCode::InvalidArgument,
            e if e.is_transient() => ErrorCode::Unavailable,
            _ => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            StoreError::NotFound { .. } => Reason::ResourceNotFound,
            StoreError::Invalid(_) => Reason::InvalidRequest,
            StoreError::Corrupt(_) => Reason::CorruptStoredData,
            e if e.is_transient() => Reason::DatabaseUnavailable,
            _ => Reason::DatabaseError,
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            StoreError::NotFound { resource, name } => {
                vec![
                    ("resource_type", resource.to_string()),
                    ("resource_name", name.clone()),
                ]
            }
            _ => Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("wallet {0} not found")]
    UnknownWallet(WalletId),
    #[error("hold {0} not found in this wallet")]
    UnknownHold(TransactionId),
    #[error("amount must be positive, got {0}")]
    NonPositiveAmount(i64),
    #[error("insufficient balance: {requested} requested, {available} available")]
    InsufficientFunds { requested: i64, available: i64 },
    #[error("capture of {requested} exceeds the hold of {held}")]
    CaptureExceedsHold { requested: i64, held: i64 },
    #[error("hold {0} is already captured, released or expired")]
    HoldClosed(TransactionId),
    #[error("idempotency key {0:?} was used before with different arguments")]
    KeyReuse(String),
    #[error("idempotency key is empty")]
    EmptyKey,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One mapping wherever a ledger error reaches a client (the wallet, the
/// gateway's credit path): a short balance is a precondition, not a bug.
impl ErrorContract for LedgerError {
    fn code(&self) -> ErrorCode {
        match self {
            LedgerError::UnknownWallet(_) | LedgerError::UnknownHold(_) => ErrorCode::NotFound,
            LedgerError::NonPositiveAmount(_)
            | LedgerError::EmptyKey
            | LedgerError::CaptureExceedsHold { .. } => ErrorCode::InvalidArgument,
            LedgerError::InsufficientFunds { .. } | LedgerError::HoldClosed(_) => {
                ErrorCode::FailedPrecondition
            }
            LedgerError::KeyReuse(_) => ErrorCode::AlreadyExists,
            LedgerError::Store(e) => e.code(),
        }
    }

    fn reason(&self) -> Reason {
        match self {
            LedgerError::UnknownWallet(_) => Reason::WalletNotFound,
            LedgerError::UnknownHold(_) => Reason::HoldNotFound,
            LedgerError::NonPositiveAmount(_) => Reason::NonPositiveAmount,
            LedgerError::InsufficientFunds { .. } => Reason::InsufficientFunds,
            LedgerError::CaptureExceedsHold { .. } => Reason::CaptureExceedsHold,
            LedgerError::HoldClosed(_) => Reason::HoldClosed,
            LedgerError::KeyReuse(_) => Reason::IdempotencyKeyReused,
            LedgerError::EmptyKey => Reason::IdempotencyKeyEmpty,
            LedgerError::Store(e) => e.reason(),
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            LedgerError::UnknownWallet(id) => vec![("wallet_id", id.to_string())],
            LedgerError::UnknownHold(id) | LedgerError::HoldClosed(id) => {
                vec![("hold_id", id.to_string())]
            }
            LedgerError::InsufficientFunds {
                requested,
                available,
            } => vec![
                ("requested", requested.to_string()),
                ("available", available.to_string()),
            ],
            LedgerError::CaptureExceedsHold { requested, held } => vec![
                ("requested", requested.to_string()),
                ("held", held.to_string()),
            ],
            LedgerError::Store(e) => e.metadata(),
            _ => Vec::new(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            LedgerError::NonPositiveAmount(_) => Some("amount"),
            LedgerError::EmptyKey => Some("idempotency_key"),
            _ => None,
        }
    }
}

impl From<sqlx::Error> for LedgerError {
    fn from(e: sqlx::Error) -> Self {
        LedgerError::Store(StoreError::from(e))
    }
}

/// Why a project cannot be deleted now.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "{0} job(s) of this project are running; pause its sessions (running jobs finish) or wait, then delete again"
    )]
    Busy(i64),
}

impl From<sqlx::Error> for DeleteError {
    fn from(e: sqlx::Error) -> Self {
        DeleteError::Store(e.into())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// `field` is the spec field (and `model add` flag, `_` for `-`) at fault.
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("no model is named {0:?}; `dialecticd model list` shows the registered ones")]
    NotFound(String),
    #[error(
        "fallback: no active model is named {0:?}; register it first (`dialecticd model add {0} …`)"
    )]
    UnknownFallback(String),
    #[error(
        "model {name:?} is the fallback of {}; give them another (`dialecticd model add … --fallback OTHER`) or remove them first",
        .users.join(", ")
    )]
    StillAFallback { name: String, users: Vec<String> },
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

#[derive(Debug, thiserror::Error)]
pub enum RecipeEditError {
    #[error("stage {0:?} does not exist or has no recipe")]
    UnknownStage(String),
    #[error("stage {stage:?} has no recipe step {step_key:?}")]
    UnknownStepKey { stage: String, step_key: String },
    #[error("stage {stage:?} already has a recipe step {step_key:?}")]
    DuplicateStepKey { stage: String, step_key: String },
    #[error("step {step_key:?} has no job type")]
    MissingJobType { step_key: String },
    #[error("step {step_key:?} has job type {value:?}; expected PLAN, EXECUTE or RENDER")]
    InvalidJobType { step_key: String, value: String },
    #[error("step {step_key:?} has granularity strategy {value:?}, which is not known")]
    InvalidGranularity { step_key: String, value: String },
    #[error("step {step_key:?}: {reason}")]
    InvalidStep { step_key: String, reason: String },
    #[error("the edit would make stage {stage:?}'s recipe cyclic: {}", path.join(" → "))]
    Cycle { stage: String, path: Vec<String> },
    #[error("edge {from:?} → {to:?}: both steps must be in stage {stage:?}'s recipe")]
    EdgeOutsideRecipe {
        stage: String,
        from: String,
        to: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}
