//! `dialectic auth login` then `auth status` against the real gateway: the
//! stored key is used, and status says whether it works and whose wallet it is.

use dialectic_e2e::TestEnv;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn dialectic_binary() -> PathBuf {
    dialectic_e2e::workspace_binary("dialectic-cli", "dialectic")
}

/// `dialectic --config-file CONFIG args…` with `stdin`, no key or URL from
/// the environment: only what login stored.
fn dialectic(binary: &Path, config: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(binary)
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
    pipe.write_all(stdin.as_bytes()).expect("stdin written");
    drop(pipe);
    child.wait_with_output().expect("dialectic finished")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn login_then_status_says_the_key_works_and_names_its_wallet() {
    let binary = dialectic_binary();
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let gateway = format!("http://{}", env.addr("gateway"));
    let key = env.settings.gateway.bootstrap_key.clone();
    let dir = std::env::temp_dir().join(format!("dialectic-cli-auth-e2e-{}", std::process::id()));
    let config = dir.join("cli.toml");

    let login = dialectic(
        &binary,
        &config,
        &["--gateway", &gateway, "auth", "login"],
        &key,
    );
    assert!(login.status.success(), "{}", text(&login.stderr));

    let status = dialectic(&binary, &config, &["auth", "status"], "");
    let said = text(&status.stdout);
    assert!(status.status.success(), "{said}{}", text(&status.stderr));
    assert!(said.contains(&gateway), "{said}");
    assert!(said.contains(&format!("{}…", &key[..8])), "{said}");
    assert!(!said.contains(&key), "the whole key printed: {said}");
    assert!(said.contains("works    yes: wallet "), "{said}");

    let json = dialectic(
        &binary,
        &config,
        &["--output", "json", "auth", "status"],
        "",
    );
    let answer: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(answer["valid"], true, "{answer}");
    assert!(
        !answer["wallet_id"].as_str().unwrap_or("").is_empty(),
        "{answer}"
    );

    // A wrong key: exit 77 (auth), and stderr says which gateway and key failed.
    let relogin = dialectic(&binary, &config, &["auth", "login"], "dlk_wrongkey\n");
    assert!(relogin.status.success(), "{}", text(&relogin.stderr));
    let refused = dialectic(&binary, &config, &["auth", "status"], "");
    assert_eq!(refused.status.code(), Some(77), "{}", text(&refused.stderr));
    let why = text(&refused.stderr);
    assert!(why.contains("dlk_wron…") && why.contains(&gateway), "{why}");

    let _ = std::fs::remove_dir_all(dir);
    env.teardown().await;
}

fn exit_and_say(output: &Output) -> (Option<i32>, String) {
    (
        output.status.code(),
        format!("{}{}", text(&output.stdout), text(&output.stderr)),
    )
}

/// Two gateways in one config file, kubectl-style: the current context picks
/// the gateway and its key, `--context` overrides it for one call, and an
/// unknown name is a usage error that names the known ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_context_in_use_picks_the_gateway_and_its_key() {
    let binary = dialectic_binary();
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let gateway = format!("http://{}", env.addr("gateway"));
    let key = env.settings.gateway.bootstrap_key.clone();
    let dir =
        std::env::temp_dir().join(format!("dialectic-cli-context-e2e-{}", std::process::id()));
    let config = dir.join("cli.toml");
    let run = |args: &[&str], stdin: &str| dialectic(&binary, &config, args, stdin);

    let added = run(&["--gateway", &gateway, "context", "add", "local"], "");
    assert!(added.status.success(), "{:?}", exit_and_say(&added));
    let login = run(&["--context", "local", "auth", "login"], &key);
    assert!(login.status.success(), "{:?}", exit_and_say(&login));
    // Nothing listens on port 1: the current context must be the one tried.
    let dead = run(
        &[
            "--gateway",
            "http://127.0.0.1:1",
            "context",
            "add",
            "dead",
            "--use",
        ],
        "",
    );
    assert!(dead.status.success(), "{:?}", exit_and_say(&dead));
    let dead_login = run(&["auth", "login"], "dlk_deadkey\n");
    assert!(
        dead_login.status.success(),
        "{:?}",
        exit_and_say(&dead_login)
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&config)
            .expect("config file")
            .permissions(),
    ) & 0o777;
    assert_eq!(mode, 0o600, "the file holds a key");

    let (code, said) = exit_and_say(&run(&["auth", "status"], ""));
    assert_eq!(
        code,
        Some(69),
        "current context 'dead' is unreachable: {said}"
    );
    assert!(said.contains("127.0.0.1:1"), "{said}");

    let (code, said) = exit_and_say(&run(&["--context", "local", "auth", "status"], ""));
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains(&gateway) && said.contains("context local"),
        "{said}"
    );

    let used = run(&["context", "use", "local"], "");
    assert!(used.status.success(), "{:?}", exit_and_say(&used));
    let (code, said) = exit_and_say(&run(&["auth", "status"], ""));
    assert_eq!(code, Some(0), "{said}");

    let listed = run(&["--output", "json", "context", "list"], "");
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(listed["current_context"], "local", "{listed}");
    let by_name = |name: &str| {
        listed["contexts"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no context {name} in {listed}"))
    };
    assert_eq!(by_name("local")["gateway_url"], gateway.as_str());
    assert_eq!(by_name("local")["key_prefix"], format!("{}…", &key[..8]));
    assert_eq!(by_name("dead")["key_prefix"], "dlk_dead…");
    assert_eq!(by_name("default")["gateway_url"], serde_json::Value::Null);
    assert_eq!(by_name("local")["current"], true);

    let (code, said) = exit_and_say(&run(&["--context", "nope", "auth", "status"], ""));
    assert_eq!(code, Some(64), "{said}");
    assert!(
        said.contains("no context named \"nope\"") && said.contains("local"),
        "{said}"
    );

    let deleted = run(&["context", "delete", "local"], "");
    assert!(deleted.status.success(), "{:?}", exit_and_say(&deleted));
    let (code, said) = exit_and_say(&run(&["--context", "local", "auth", "status"], ""));
    assert_eq!(code, Some(64), "deleted: {said}");

    std::fs::remove_dir_all(dir).expect("temporary config removed");
    env.teardown().await;
}
