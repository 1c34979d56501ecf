//! The one conversion from an error to what a gRPC client receives: the code,
//! the message, and google.rpc details — `ErrorInfo` (reason, domain,
//! metadata) always, `BadRequest` when a request field is at fault. Every
//! service's error type goes through [`status`], so a failure means the same
//! thing whichever service reports it.

use dialectic_core::error::{ErrorCode, ErrorContract, Reason};
use std::collections::HashMap;
use std::time::Duration;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};
use tonic_types::ErrorDetails;
pub use tonic_types::StatusExt;

/// `ErrorInfo.domain` of every error dialectic raises.
pub const DOMAIN: &str = "dialectic.dev";

pub fn code(code: ErrorCode) -> Code {
    match code {
        ErrorCode::InvalidArgument => Code::InvalidArgument,
        ErrorCode::NotFound => Code::NotFound,
        ErrorCode::AlreadyExists => Code::AlreadyExists,
        ErrorCode::FailedPrecondition => Code::FailedPrecondition,
        ErrorCode::PermissionDenied => Code::PermissionDenied,
        ErrorCode::Unauthenticated => Code::Unauthenticated,
        ErrorCode::ResourceExhausted => Code::ResourceExhausted,
        ErrorCode::Unavailable => Code::Unavailable,
        ErrorCode::Internal => Code::Internal,
    }
}

/// The status a client receives for `error`; internal failures are logged
/// here, once, so handlers need not.
pub fn status<E: ErrorContract + ?Sized>(error: &E) -> Status {
    let message = error.to_string();
    let metadata: HashMap<String, String> = error
        .metadata()
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect();
    let reason = error.reason().as_str();
    let mut details = ErrorDetails::with_error_info(reason, DOMAIN, metadata);
    if let Some(field) = error.field() {
        details.add_bad_request_violation(field, message.clone());
    }
    let code = code(error.code());
    match code {
        Code::Internal => tracing::error!(reason, %message, "request failed"),
        Code::Unavailable => tracing::warn!(reason, %message, "dependency unavailable"),
        _ => {}
    }
    Status::with_error_details(code, message, details)
}

/// An internal service's answer, passed on to the client: its code, message
/// and details as they are, unless the service itself was out of reach (the
/// connection failed), which is UNAVAILABLE with the reason
/// `UPSTREAM_UNAVAILABLE` and the service named in the metadata.
pub fn passed_on(service: &str, upstream: Status) -> Status {
    let connection_failed = matches!(upstream.code(), Code::Unknown | Code::Cancelled);
    let described = upstream.get_details_error_info().is_some();
    let service_metadata = || [("service".to_string(), service.to_string())];
    if described && !connection_failed {
        upstream
    } else if connection_failed || upstream.code() == Code::Unavailable {
        let reason = Reason::UpstreamUnavailable.as_str();
        let details = ErrorDetails::with_error_info(reason, DOMAIN, service_metadata());
        let message = format!("{service} unavailable: {}", upstream.message());
        Status::with_error_details(Code::Unavailable, message, details)
    } else {
        let reason = reason_for(upstream.code()).as_str();
        let details = ErrorDetails::with_error_info(reason, DOMAIN, service_metadata());
        Status::with_error_details(upstream.code(), upstream.message(), details)
    }
}

/// The details of a refusal tonic made itself: the code's reason
/// (`RESOURCE_EXHAUSTED` for an oversized request), no message of its own.
pub fn refusal(code: Code) -> Status {
    let details = ErrorDetails::with_error_info(reason_for(code).as_str(), DOMAIN, HashMap::new());
    Status::with_error_details(code, "", details)
}

/// A status built outside dialectic's errors (tonic's own, a peer without
/// details) still gets a reason: the code's name.
fn reason_for(code: Code) -> Reason {
    Reason::for_foreign_code(code.into())
}

/// The metadata key that names a call in both directions: a client may send
/// its own, and every answer, error or not, carries the one the server used
/// (also in its log lines and trace), for a user to quote in a ticket.
pub const REQUEST_ID: &str = "x-request-id";

/// `status` as the public caller receives it: google.rpc.RequestInfo naming
/// the call, RetryInfo with the wait its reason asks for (only where a retry
/// can succeed), and the id in the `x-request-id` trailer.
pub fn for_caller(status: Status, request_id: &str) -> Status {
    let mut details = status.get_error_details();
    details.set_request_info(request_id, "");
    if details.retry_info().is_none()
        && let Some(delay) = retry_delay(&status)
    {
        details.set_retry_info(Some(delay));
    }
    let mut metadata = status.metadata().clone();
    stamp_request_id(&mut metadata, request_id);
    Status::with_error_details_and_metadata(status.code(), status.message(), details, metadata)
}

/// Names the call in `metadata` (a response's headers, an error's trailers).
/// The request id a call answers under: the client's own when it is plain
/// (1-128 of `A-Z a-z 0-9 . _ : -`), else a fresh UUIDv7.
pub fn request_id_or_new(offered: Option<&str>) -> String {
    let plain = |id: &&str| {
        (1..=128).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b))
    };
    offered
        .filter(plain)
        .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_string)
}

pub fn stamp_request_id(metadata: &mut MetadataMap, request_id: &str) {
    if let Ok(value) = MetadataValue::try_from(request_id) {
        metadata.insert(REQUEST_ID, value);
    }
}

/// The reason's wait; a status without a known reason is retried after a
/// second only when its code says the server could not answer now.
fn retry_delay(status: &Status) -> Option<Duration> {
    match reason(status).as_deref().and_then(Reason::parse) {
        Some(reason) => reason.retry_delay(),
        None => (status.code() == Code::Unavailable).then_some(Duration::from_secs(1)),
    }
}

/// The `ErrorInfo` reason a status carries, if any: what clients and tests match on.
pub fn reason(status: &Status) -> Option<String> {
    status.get_details_error_info().map(|info| info.reason)
}

/// A failure described where it happens: for the few errors that are not a
/// variant of some crate's error type (a stream that ends, an interceptor).
#[derive(Debug, Clone)]
pub struct Failure {
    pub code: ErrorCode,
    pub reason: Reason,
    pub message: String,
    pub metadata: Vec<(&'static str, String)>,
}

impl Failure {
    pub fn new(code: ErrorCode, reason: Reason, message: impl Into<String>) -> Self {
        Failure {
            code,
            reason,
            message: message.into(),
            metadata: Vec::new(),
        }
    }

    pub fn with(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.metadata.push((key, value.into()));
        self
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ErrorContract for Failure {
    fn code(&self) -> ErrorCode {
        self.code
    }
    fn reason(&self) -> Reason {
        self.reason
    }
    fn metadata(&self) -> Vec<(&'static str, String)> {
        self.metadata.clone()
    }
}

impl From<Failure> for Status {
    fn from(failure: Failure) -> Self {
        status(&failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_core::ids::SessionId;

    #[test]
    fn a_status_carries_reason_domain_and_metadata() {
        let error = SessionId::parse("nope").unwrap_err();
        let status = status(&error);
        assert_eq!(status.code(), Code::InvalidArgument);
        let info = status.get_details_error_info().expect("ErrorInfo");
        assert_eq!(info.reason, "INVALID_ID");
        assert_eq!(info.domain, DOMAIN);
        assert_eq!(
            info.metadata.get("kind").map(String::as_str),
            Some("session")
        );
    }

    #[test]
    fn a_field_at_fault_is_a_bad_request_violation() {
        struct Empty;
        impl std::fmt::Display for Empty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("name is empty")
            }
        }
        impl ErrorContract for Empty {
            fn code(&self) -> ErrorCode {
                ErrorCode::InvalidArgument
            }
            fn reason(&self) -> Reason {
                Reason::InvalidField
            }
            fn field(&self) -> Option<&str> {
                Some("name")
            }
        }
        let bad = status(&Empty)
            .get_details_bad_request()
            .expect("BadRequest");
        assert_eq!(bad.field_violations.len(), 1);
        assert_eq!(bad.field_violations[0].field, "name");
        assert_eq!(bad.field_violations[0].description, "name is empty");
    }

    #[test]
    fn a_caller_learns_the_request_and_when_to_retry() {
        let outage = Status::from(Failure::new(
            ErrorCode::Unavailable,
            Reason::DatabaseUnavailable,
            "database unavailable",
        ));
        let answered = for_caller(outage, "req-1");
        assert_eq!(answered.code(), Code::Unavailable);
        assert_eq!(
            answered.get_details_request_info().map(|i| i.request_id),
            Some("req-1".to_string())
        );
        assert_eq!(
            answered
                .get_details_retry_info()
                .and_then(|r| r.retry_delay),
            Some(Duration::from_secs(1))
        );
        assert_eq!(reason(&answered).as_deref(), Some("DATABASE_UNAVAILABLE"));
        assert_eq!(
            answered
                .metadata()
                .get(REQUEST_ID)
                .and_then(|v| v.to_str().ok()),
            Some("req-1")
        );
        let refused = for_caller(
            Status::from(Failure::new(
                ErrorCode::InvalidArgument,
                Reason::InvalidField,
                "name is empty",
            )),
            "req-2",
        );
        assert!(refused.get_details_retry_info().is_none());
        assert_eq!(
            refused.get_details_request_info().map(|i| i.request_id),
            Some("req-2".to_string())
        );
    }

    #[test]
    fn a_passed_on_answer_keeps_its_details() {
        let planner = Status::from(Failure::new(
            ErrorCode::FailedPrecondition,
            Reason::TransitionRefused,
            "session is paused",
        ));
        let passed = passed_on("planner", planner);
        assert_eq!(passed.code(), Code::FailedPrecondition);
        assert_eq!(passed.message(), "session is paused");
        assert_eq!(reason(&passed).as_deref(), Some("TRANSITION_REFUSED"));
    }

    #[test]
    fn an_unreachable_service_is_upstream_unavailable() {
        let passed = passed_on("planner", Status::unknown("connection reset"));
        assert_eq!(passed.code(), Code::Unavailable);
        assert_eq!(reason(&passed).as_deref(), Some("UPSTREAM_UNAVAILABLE"));
        let info = passed.get_details_error_info().expect("ErrorInfo");
        assert_eq!(
            info.metadata.get("service").map(String::as_str),
            Some("planner")
        );
        let bare = passed_on("wallet", Status::not_found("hold"));
        assert_eq!(reason(&bare).as_deref(), Some("NOT_FOUND"));
    }
}
