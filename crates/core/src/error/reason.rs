//! Every `ErrorInfo` reason dialectic publishes, named once. Clients match
//! on these names, so each variant's string is fixed once published (a
//! variant may be renamed, its string may not); `docs/errors.md` lists
//! exactly these, which a test below checks.

use std::fmt;
use std::time::Duration;

/// Declares the enum, its list of every variant and each one's wire name
/// from a single table, so no reason can be in one and missing from another.
macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// A stable UPPER_SNAKE_CASE name of a failure (google.rpc.ErrorInfo reason).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[$doc])* $variant,)*
        }

        impl Reason {
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)*];

            /// The name clients receive and match on.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => $name,)*
                }
            }
        }
    };
}

reasons! {
    // INVALID_ARGUMENT
    InvalidField = "INVALID_FIELD",
    InvalidId = "INVALID_ID",
    /// The store refused the values (a constraint).
    InvalidRequest = "INVALID_REQUEST",
    InvalidCommand = "INVALID_COMMAND",
    UnknownEmbedder = "UNKNOWN_EMBEDDER",
    UnknownTokenizer = "UNKNOWN_TOKENIZER",
    EmbedderNotConfigured = "EMBEDDER_NOT_CONFIGURED",
    NonPositiveAmount = "NON_POSITIVE_AMOUNT",
    IdempotencyKeyEmpty = "IDEMPOTENCY_KEY_EMPTY",
    CaptureExceedsHold = "CAPTURE_EXCEEDS_HOLD",
    // NOT_FOUND
    ResourceNotFound = "RESOURCE_NOT_FOUND",
    WalletNotFound = "WALLET_NOT_FOUND",
    HoldNotFound = "HOLD_NOT_FOUND",
    // ALREADY_EXISTS
    IdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED",
    // FAILED_PRECONDITION
    InsufficientFunds = "INSUFFICIENT_FUNDS",
    HoldClosed = "HOLD_CLOSED",
    TransitionRefused = "TRANSITION_REFUSED",
    SessionNotAtReview = "SESSION_NOT_AT_REVIEW",
    SessionCompleted = "SESSION_COMPLETED",
    NothingToRetry = "NOTHING_TO_RETRY",
    DocumentNotRegenerable = "DOCUMENT_NOT_REGENERABLE",
    ExportUnwritable = "EXPORT_UNWRITABLE",
    EmbeddingRefused = "EMBEDDING_REFUSED",
    AttemptRefused = "ATTEMPT_REFUSED",
    // UNAUTHENTICATED
    ApiKeyRejected = "API_KEY_REJECTED",
    ServiceTokenRejected = "SERVICE_TOKEN_REJECTED",
    // PERMISSION_DENIED
    AdminRequired = "ADMIN_REQUIRED",
    ServiceNotAdmitted = "SERVICE_NOT_ADMITTED",
    CallerNotAllowed = "CALLER_NOT_ALLOWED",
    MethodNotListed = "METHOD_NOT_LISTED",
    // UNAVAILABLE
    DatabaseUnavailable = "DATABASE_UNAVAILABLE",
    ObjectStorageUnavailable = "OBJECT_STORAGE_UNAVAILABLE",
    CacheUnavailable = "CACHE_UNAVAILABLE",
    IndexerUnavailable = "INDEXER_UNAVAILABLE",
    EmbedderUnavailable = "EMBEDDER_UNAVAILABLE",
    TokenizerUnavailable = "TOKENIZER_UNAVAILABLE",
    /// An internal service could not be reached.
    UpstreamUnavailable = "UPSTREAM_UNAVAILABLE",
    ConcurrentUpdate = "CONCURRENT_UPDATE",
    ConcurrentRegeneration = "CONCURRENT_REGENERATION",
    ProgressFeedClosed = "PROGRESS_FEED_CLOSED",
    AttemptRetryable = "ATTEMPT_RETRYABLE",
    ModelCallFailed = "MODEL_CALL_FAILED",
    ModelReplyNotJson = "MODEL_REPLY_NOT_JSON",
    LeaseLost = "LEASE_LOST",
    RenderRetryable = "RENDER_RETRYABLE",
    // RESOURCE_EXHAUSTED
    /// Also tonic's refusal of an oversized message (the code's own name).
    ResourceExhausted = "RESOURCE_EXHAUSTED",
    ProjectDocumentLimitReached = "PROJECT_DOCUMENT_LIMIT_REACHED",
    ProjectBytesLimitReached = "PROJECT_BYTES_LIMIT_REACHED",
    UserProjectLimitReached = "USER_PROJECT_LIMIT_REACHED",
    UserBytesLimitReached = "USER_BYTES_LIMIT_REACHED",
    ExportTooLarge = "EXPORT_TOO_LARGE",
    WatchLimitReached = "WATCH_LIMIT_REACHED",
    ExportLimitReached = "EXPORT_LIMIT_REACHED",
    // INTERNAL
    DatabaseError = "DATABASE_ERROR",
    CorruptStoredData = "CORRUPT_STORED_DATA",
    CorruptProgressEvent = "CORRUPT_PROGRESS_EVENT",
    RecipeUnplannable = "RECIPE_UNPLANNABLE",
    RenderFailed = "RENDER_FAILED",
    /// Also the reason of a foreign status whose code names no reason.
    Internal = "INTERNAL",
    // The code's own name, given to a status from outside dialectic's errors
    // (tonic's own refusal, a peer without details): see `for_foreign_code`.
    InvalidArgument = "INVALID_ARGUMENT",
    NotFound = "NOT_FOUND",
    AlreadyExists = "ALREADY_EXISTS",
    FailedPrecondition = "FAILED_PRECONDITION",
    PermissionDenied = "PERMISSION_DENIED",
    Unauthenticated = "UNAUTHENTICATED",
    DeadlineExceeded = "DEADLINE_EXCEEDED",
    Unimplemented = "UNIMPLEMENTED",
}

impl Reason {
    pub fn parse(name: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.as_str() == name)
    }

    /// The reason of a status built outside dialectic's errors, by its gRPC
    /// code number: the code's own name where that is a published reason,
    /// else `INTERNAL` (an UNKNOWN or ABORTED status says nothing a client
    /// could act on).
    pub fn for_foreign_code(code: i32) -> Reason {
        Reason::parse(grpc_code_name(code)).unwrap_or(Reason::Internal)
    }

    /// How long a client should wait before sending the same request again
    /// (google.rpc.RetryInfo), for the failures a later retry cures: a lost
    /// race soon, a dependency outage after a second, a per-user stream
    /// limit once a stream had time to end. None where retrying alone fails
    /// again (bad input, a used-up quota, a refused state).
    pub fn retry_delay(self) -> Option<Duration> {
        use Reason::*;
        let millis = match self {
            ConcurrentUpdate
            | ConcurrentRegeneration
            | AttemptRetryable
            | LeaseLost
            | RenderRetryable => 200,
            DatabaseUnavailable
            | ObjectStorageUnavailable
            | CacheUnavailable
            | IndexerUnavailable
            | EmbedderUnavailable
            | TokenizerUnavailable
            | UpstreamUnavailable
            | ProgressFeedClosed
            | ModelCallFailed => 1_000,
            WatchLimitReached | ExportLimitReached => 5_000,
            _ => return None,
        };
        Some(Duration::from_millis(millis))
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The gRPC status codes' names as the gRPC spec spells them, by wire number.
const GRPC_CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// A gRPC status code's spec name from its wire number (`UNKNOWN` for a
/// number outside the spec, as gRPC itself reads one).
pub fn grpc_code_name(code: i32) -> &'static str {
    usize::try_from(code)
        .ok()
        .and_then(|i| GRPC_CODE_NAMES.get(i))
        .unwrap_or(&"UNKNOWN")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const ERRORS_MD: &str =
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/errors.md"));

    /// The backticked names in the first column of the table under `## Reasons`.
    fn documented() -> BTreeSet<String> {
        let table = ERRORS_MD
            .split("\n## Reasons\n")
            .nth(1)
            .expect("docs/errors.md has a Reasons section");
        table
            .lines()
            .take_while(|line| !line.starts_with("## "))
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|row| row.split(" | ").next())
            .flat_map(|cell| cell.split(", "))
            .map(|name| name.trim_matches('`').to_string())
            .collect()
    }

    #[test]
    fn the_docs_list_exactly_the_registry() {
        let registry: BTreeSet<String> = Reason::ALL.iter().map(|r| r.to_string()).collect();
        let documented = documented();
        let undocumented: Vec<_> = registry.difference(&documented).collect();
        let unknown: Vec<_> = documented.difference(&registry).collect();
        assert!(
            undocumented.is_empty() && unknown.is_empty(),
            "not in docs/errors.md: {undocumented:?}; in it but no Reason: {unknown:?}"
        );
    }

    #[test]
    fn names_are_unique_upper_snake_case() {
        let names: BTreeSet<_> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), Reason::ALL.len());
        for name in names {
            assert!(
                name.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
                "{name}"
            );
            assert_eq!(Reason::parse(name).map(Reason::as_str), Some(name));
        }
    }

    #[test]
    fn only_failures_a_retry_cures_ask_for_one() {
        assert_eq!(
            Reason::DatabaseUnavailable.retry_delay(),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            Reason::WatchLimitReached.retry_delay(),
            Some(Duration::from_secs(5))
        );
        for final_answer in [
            Reason::InvalidField,
            Reason::InsufficientFunds,
            Reason::UserProjectLimitReached,
            Reason::ResourceExhausted,
            Reason::Internal,
        ] {
            assert_eq!(final_answer.retry_delay(), None, "{final_answer}");
        }
    }

    #[test]
    fn a_foreign_status_gets_its_codes_name_or_internal() {
        assert_eq!(Reason::for_foreign_code(5), Reason::NotFound);
        assert_eq!(Reason::for_foreign_code(8), Reason::ResourceExhausted);
        assert_eq!(Reason::for_foreign_code(12), Reason::Unimplemented);
        // UNKNOWN, ABORTED, UNAVAILABLE and numbers outside the spec name no reason.
        for code in [2, 10, 14, 99, -1] {
            assert_eq!(Reason::for_foreign_code(code), Reason::Internal, "{code}");
        }
        assert_eq!(grpc_code_name(15), "DATA_LOSS");
    }
}
