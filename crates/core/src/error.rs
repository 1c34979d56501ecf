//! The error contract every crate's errors implement: a code a client acts on
//! (retry, fix the request, give up), a stable reason it can match without
//! parsing the message, and the facts behind it. The runtime turns it into a
//! gRPC status with google.rpc details; nothing here knows about gRPC
//! beyond the names of its codes.

mod reason;

pub use reason::{Reason, grpc_code_name};

/// What a client can do about a failure; each maps to one gRPC code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request is wrong; sending it again fails again.
    InvalidArgument,
    NotFound,
    AlreadyExists,
    /// The request is fine but the state it acts on does not take it.
    FailedPrecondition,
    PermissionDenied,
    Unauthenticated,
    /// A per-tenant limit is used up: the same request fails until something
    /// is freed or the limit is raised, so retrying alone does not help.
    ResourceExhausted,
    /// A dependency is out of reach or the write lost a race: retry later.
    Unavailable,
    /// A bug or corrupt data: nothing the client can change.
    Internal,
}

/// What an error says about itself to a client.
pub trait ErrorContract: std::fmt::Display {
    fn code(&self) -> ErrorCode;

    /// The stable name of this failure (google.rpc.ErrorInfo reason):
    /// clients match on it rather than on the message.
    fn reason(&self) -> Reason;

    /// Facts a client can act on without parsing the message (ErrorInfo metadata).
    fn metadata(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// For bad input, the request field at fault (a BadRequest field violation).
    fn field(&self) -> Option<&str> {
        None
    }
}

impl ErrorContract for crate::ids::InvalidId {
    fn code(&self) -> ErrorCode {
        ErrorCode::InvalidArgument
    }
    fn reason(&self) -> Reason {
        Reason::InvalidId
    }
    fn metadata(&self) -> Vec<(&'static str, String)> {
        vec![("kind", self.kind.to_string())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SessionId;

    #[test]
    fn an_invalid_id_names_its_kind() {
        let e = SessionId::parse("nope").unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(e.reason(), Reason::InvalidId);
        assert_eq!(e.metadata(), vec![("kind", "session".to_string())]);
    }
}
