//! Hands the commit this binary is built from to `main` as DIALECTIC_COMMIT
//! (12 hex digits): the environment's value when set (an image build without
//! `.git`), else `git rev-parse`, else "unknown".

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=DIALECTIC_COMMIT");
    let commit = std::env::var("DIALECTIC_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=DIALECTIC_COMMIT={commit}");
}

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    output.status.success().then(|| text.trim().to_string())
}

/// The commit, and a rerun whenever HEAD or the branch it names moves, so a
/// new commit is never reported as the one before.
fn git_commit() -> Option<String> {
    let git_dir = PathBuf::from(git(&["rev-parse", "--absolute-git-dir"])?);
    rerun_if_changed(&git_dir.join("HEAD"));
    rerun_if_changed(&git_dir.join("packed-refs"));
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        rerun_if_changed(&git_dir.join(branch));
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}

fn rerun_if_changed(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
