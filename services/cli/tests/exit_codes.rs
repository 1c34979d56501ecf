//! The real binary's exit codes (docs/running.md, exit codes), against gateways
//! that are not there or never answer; none of this needs the stack.

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn dialectic(gateway: &str, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_dialectic"))
        .args(args)
        .env("DIALECTIC_GATEWAY_URL", gateway)
        .env("DIALECTIC_API_KEY", "dlk_test")
        .env(
            "XDG_CONFIG_HOME",
            std::env::temp_dir().join("dialectic-cli-test-none"),
        )
        .env_remove("DIALECTIC_CLI_CONFIG")
        .env_remove("DIALECTIC_OUTPUT")
        .env_remove("DIALECTIC_TIMEOUT")
        .output()
        .expect("dialectic runs");
    (output, started.elapsed())
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// An address nothing listens on: bound, then released.
fn stopped_gateway() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address")
}

#[test]
fn a_stopped_gateway_fails_at_once_as_unavailable() {
    let url = format!("http://{}", stopped_gateway());
    let (output, took) = dialectic(&url, &["session", "status", "--session", "s"]);
    assert_eq!(output.status.code(), Some(69), "{}", stderr(&output));
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(
        stderr(&output).contains(&format!("cannot reach the gateway at {url}")),
        "{}",
        stderr(&output)
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn a_gateway_that_never_answers_times_out() {
    // Accepts connections (the kernel's backlog does) and never speaks.
    let silent = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let url = format!("http://{}", silent.local_addr().expect("its address"));
    let (output, took) = dialectic(
        &url,
        &["--timeout", "1s", "session", "status", "--session", "s"],
    );
    let code = output.status.code();
    assert!(
        code == Some(75) || code == Some(69),
        "{code:?}: {}",
        stderr(&output)
    );
    assert!(took < Duration::from_secs(4), "took {took:?}");
}

#[test]
fn usage_and_configuration_errors_need_no_gateway() {
    let url = format!("http://{}", stopped_gateway());
    let typo = [
        "session",
        "watch",
        "--session",
        "s",
        "--until",
        "iteration_complete_pending_reviw",
    ];
    let (output, _) = dialectic(&url, &typo);
    assert_eq!(output.status.code(), Some(64), "{}", stderr(&output));
    assert!(stderr(&output).contains("not a session status"));
    let (output, _) = dialectic(&url, &["no-such-command"]);
    assert_eq!(output.status.code(), Some(64));
    let (output, _) = dialectic(&url, &["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let missing = [
        "--config-file",
        "/nonexistent/cli.toml",
        "session",
        "status",
        "--session",
        "s",
    ];
    let (output, _) = dialectic(&url, &missing);
    assert_eq!(output.status.code(), Some(78), "{}", stderr(&output));
}
