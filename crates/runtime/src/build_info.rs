//! What this server is: its release and the commit it was built from. The
//! commit is handed over by the binary at start (`set_commit`), so only the
//! binary, not every crate below it, is rebuilt when the commit changes.

use std::sync::OnceLock;

/// The release every crate of the workspace shares.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

static COMMIT: OnceLock<&'static str> = OnceLock::new();

/// Called once by the binary with the commit its build script found; later
/// calls are ignored.
pub fn set_commit(commit: &'static str) {
    // A second binary-level caller (a test harness) cannot change what the
    // first one recorded; that is what "once" means here.
    let _ = COMMIT.set(commit);
}

/// The commit set at start, or "unknown" (a build without git, a test).
pub fn commit() -> &'static str {
    COMMIT
        .get()
        .copied()
        .filter(|c| !c.is_empty())
        .unwrap_or("unknown")
}
