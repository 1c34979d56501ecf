//! `dialecticd --version` names the commit it was built from, so an operator
//! (and GetServerInfo's `build`) can tell which code a pod runs.

use std::process::Command;

fn git_head() -> Option<String> {
    let output = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let output = Command::new(env!("CARGO_BIN_EXE_dialecticd"))
        .arg("--version")
        .output()
        .expect("dialecticd runs");
    assert!(output.status.success(), "{output:?}");
    let line = String::from_utf8_lossy(&output.stdout).trim().to_string();
    // A checkout built with DIALECTIC_COMMIT set names that commit instead.
    let expected = std::env::var("DIALECTIC_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_head)
        .unwrap_or_else(|| "unknown".to_string());
    assert_eq!(
        line,
        format!(
            "dialecticd {} (build {expected})",
            env!("CARGO_PKG_VERSION")
        )
    );
}
