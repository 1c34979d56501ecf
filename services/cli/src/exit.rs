//! Exit codes by kind of failure, so a script can tell "try again later" from
//! "you typed it wrong" without parsing messages. The gRPC status codes map
//! here and nowhere else; docs/running.md's exit-code table lists the same.

use std::fmt;
use std::process::ExitCode;
use tonic::{Code, Status};

/// What went wrong, as far as the caller can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Anything not named below (INTERNAL, UNKNOWN, a local I/O error, a
    /// session that ended before the awaited status).
    Failure,
    /// The command line is wrong: an unknown flag, a bad value, an `--until`
    /// status the session can never have.
    Usage,
    /// The gateway refused the input (INVALID_ARGUMENT, OUT_OF_RANGE).
    Invalid,
    /// NOT_FOUND: no such project, session or document (or not yours).
    NotFound,
    /// The gateway cannot be reached, or says a dependency is down.
    Unavailable,
    /// The call (`--timeout`) or the wait (`run --wait`) ran out.
    TimedOut,
    /// UNAUTHENTICATED or PERMISSION_DENIED: the key is missing, wrong or
    /// not allowed to do this.
    Auth,
    /// The CLI's own configuration is unusable: no API key, a bad or
    /// world-readable config file.
    Config,
    /// The state does not allow it now (FAILED_PRECONDITION, ABORTED,
    /// ALREADY_EXISTS, RESOURCE_EXHAUSTED): e.g. a running job, no funds.
    Precondition,
}

impl Kind {
    /// sysexits(3) numbers where one fits; 79 (past their range) for a
    /// refused precondition, which they have no name for.
    pub fn code(self) -> u8 {
        match self {
            Kind::Failure => 1,
            Kind::Usage => 64,
            Kind::Invalid => 65,
            Kind::NotFound => 66,
            Kind::Unavailable => 69,
            Kind::TimedOut => 75,
            Kind::Auth => 77,
            Kind::Config => 78,
            Kind::Precondition => 79,
        }
    }

    /// The one mapping from gRPC status codes.
    pub fn of_code(code: Code) -> Kind {
        match code {
            Code::InvalidArgument | Code::OutOfRange => Kind::Invalid,
            Code::NotFound => Kind::NotFound,
            Code::Unavailable => Kind::Unavailable,
            Code::DeadlineExceeded => Kind::TimedOut,
            Code::Unauthenticated | Code::PermissionDenied => Kind::Auth,
            Code::FailedPrecondition
            | Code::Aborted
            | Code::AlreadyExists
            | Code::ResourceExhausted => Kind::Precondition,
            Code::Ok
            | Code::Cancelled
            | Code::Unknown
            | Code::Unimplemented
            | Code::Internal
            | Code::DataLoss => Kind::Failure,
        }
    }
}

/// An error the CLI raises itself, with the kind it exits by.
#[derive(Debug)]
pub struct Failed {
    pub kind: Kind,
    pub message: String,
}

impl Failed {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failed {}

/// The kind of the first error in the chain that has one.
pub fn kind_of(error: &anyhow::Error) -> Kind {
    error
        .chain()
        .find_map(|cause| {
            if let Some(failed) = cause.downcast_ref::<Failed>() {
                Some(failed.kind)
            } else if let Some(status) = cause.downcast_ref::<Status>() {
                Some(Kind::of_code(status.code()))
            } else if cause.is::<tonic::transport::Error>() {
                Some(Kind::Unavailable)
            } else {
                cause
                    .is::<tokio::time::error::Elapsed>()
                    .then_some(Kind::TimedOut)
            }
        })
        .unwrap_or(Kind::Failure)
}

pub fn exit_code(kind: Kind) -> ExitCode {
    ExitCode::from(kind.code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn statuses_exit_by_kind() {
        let cases = [
            (Code::Unavailable, 69),
            (Code::NotFound, 66),
            (Code::Unauthenticated, 77),
            (Code::PermissionDenied, 77),
            (Code::FailedPrecondition, 79),
            (Code::ResourceExhausted, 79),
            (Code::InvalidArgument, 65),
            (Code::DeadlineExceeded, 75),
            (Code::Internal, 1),
        ];
        for (code, exit) in cases {
            let error = anyhow::Error::new(Status::new(code, "x")).context("calling");
            assert_eq!(kind_of(&error).code(), exit, "{code:?}");
        }
    }

    #[test]
    fn the_cli_s_own_errors_keep_their_kind_under_context() {
        let error = Err::<(), _>(Failed::new(Kind::Usage, "bad --until"))
            .context("watching")
            .unwrap_err();
        assert_eq!(kind_of(&error), Kind::Usage);
        assert_eq!(kind_of(&anyhow::anyhow!("disk full")), Kind::Failure);
    }
}
