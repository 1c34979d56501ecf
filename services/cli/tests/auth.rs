//! `auth login` keeps the key owner-only, and a key file others can read is
//! refused; none of this needs the stack.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A fresh directory of this test's own under the system temp dir.
fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("dialectic-cli-auth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn dialectic(config: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dialectic"))
        .arg("--config-file")
        .arg(config)
        .args(args)
        .env_remove("DIALECTIC_API_KEY")
        .env_remove("DIALECTIC_GATEWAY_URL")
        .env_remove("DIALECTIC_OUTPUT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dialectic runs");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(stdin.as_bytes()).expect("key written");
    drop(pipe);
    child.wait_with_output().expect("dialectic finished")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("exists")
        .permissions()
        .mode()
        & 0o777
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn login_stores_the_key_owner_only_and_keeps_the_gateway() {
    let dir = scratch("login");
    let config = dir.join("new").join("cli.toml");
    let login = ["--gateway", "http://gw.example:7051", "auth", "login"];
    let output = dialectic(&config, &login, "dlk_abcdefgh1234\n");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(mode(&config), 0o600);
    assert_eq!(mode(config.parent().expect("dir")), 0o700);
    let stored = std::fs::read_to_string(&config).expect("written");
    assert!(
        stored.contains("api_key = \"dlk_abcdefgh1234\""),
        "{stored}"
    );
    assert!(
        stored.contains("gateway_url = \"http://gw.example:7051\""),
        "{stored}"
    );
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains("dlk_abcd…") && !said.contains("dlk_abcdefgh1234"),
        "{said}"
    );

    // A file left readable by others is made owner-only again.
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let again = dialectic(&config, &["auth", "login"], "dlk_second\n");
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(mode(&config), 0o600);
    let stored = std::fs::read_to_string(&config).expect("written");
    assert!(
        stored.contains("dlk_second") && stored.contains("gw.example"),
        "{stored}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_empty_stdin_is_no_key() {
    let dir = scratch("empty");
    let config = dir.join("cli.toml");
    let output = dialectic(&config, &["auth", "login"], "\n");
    assert_eq!(output.status.code(), Some(64), "{}", stderr(&output));
    assert!(!config.exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_key_others_can_read_is_refused_before_any_call() {
    let dir = scratch("exposed");
    let config = dir.join("cli.toml");
    // A gateway nothing listens on: refusing the file must come first.
    std::fs::write(
        &config,
        "gateway_url = \"http://127.0.0.1:9\"\napi_key = \"dlk_x\"\n",
    )
    .expect("written");
    for exposed in [0o644, 0o640, 0o604, 0o620] {
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(exposed)).expect("chmod");
        let output = dialectic(&config, &["session", "status", "--session", "s"], "");
        assert_eq!(
            output.status.code(),
            Some(78),
            "{exposed:o}: {}",
            stderr(&output)
        );
        assert!(stderr(&output).contains("chmod 600"), "{}", stderr(&output));
    }
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let output = dialectic(&config, &["session", "status", "--session", "s"], "");
    assert_eq!(
        output.status.code(),
        Some(69),
        "owner-only is used: {}",
        stderr(&output)
    );
    let _ = std::fs::remove_dir_all(dir);
}
