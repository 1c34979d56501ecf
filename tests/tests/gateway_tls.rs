//! TLS on the gateway's port (issues 41 and 42): with `gateway.tls_cert` and
//! `gateway.tls_key` set it serves TLS only, and the `dialectic` CLI reaches
//! it through an `https://` URL, trusting a private CA given with --ca-cert.
//! The CA and the certificate are made here with the `openssl` command.
//! Probes that cannot speak TLS ask `gateway.health_listen` in plaintext.

use dialectic_e2e::TestEnv;
use dialectic_proto::v1::CreateProjectRequest;
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The CLI's exit code for "the gateway cannot be reached" (README, "Exit codes").
const UNAVAILABLE: i32 = 69;
const USAGE: i32 = 64;

fn openssl(dir: &Path, args: &[&str]) {
    let output = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command runs");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// In a fresh directory: `ca.pem` (a CA), `tls.crt` and `tls.key` (a server
/// certificate for localhost, not for 127.0.0.1, that CA signed), and
/// `other-ca.pem`, a CA that signed nothing here.
fn certificates() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dialectic-tls-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    for (name, subject) in [
        ("ca", "/CN=dialectic test CA"),
        ("other-ca", "/CN=other CA"),
    ] {
        let (key, pem) = (format!("{name}.key"), format!("{name}.pem"));
        let mut args = vec!["req", "-x509", "-nodes", "-days", "2", "-subj", subject];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &pem]);
        openssl(&dir, &args);
    }
    leaf(&dir, "tls");
    dir
}

/// `{stem}.crt` and `{stem}.key` in `dir`: a new key and a certificate for
/// localhost that `dir`'s `ca.pem` signed.
fn leaf(dir: &Path, stem: &str) {
    let (key, csr, crt) = (
        format!("{stem}.key"),
        format!("{stem}.csr"),
        format!("{stem}.crt"),
    );
    let mut request = vec!["req", "-new", "-nodes", "-subj", "/CN=localhost"];
    request.extend(["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]);
    request.extend(["-keyout", &key, "-out", &csr]);
    openssl(dir, &request);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost\n\
         basicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\n\
         extendedKeyUsage=serverAuth\n",
    )
    .expect("extensions file");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
            "-out",
            &crt,
        ],
    );
}

/// `dialectic args…` with `env_vars`, none of the caller's own CLI settings,
/// and a bound on how long it may take: a CLI that hangs fails the test.
async fn dialectic(api_key: &str, args: &[&str], env_vars: &[(&str, &Path)]) -> (Output, Duration) {
    let binary = dialectic_e2e::workspace_binary("dialectic-cli", "dialectic");
    let mut command = tokio::process::Command::new(binary);
    command.args(args).env("DIALECTIC_API_KEY", api_key).env(
        "XDG_CONFIG_HOME",
        std::env::temp_dir().join("dialectic-cli-test-none"),
    );
    for name in [
        "DIALECTIC_GATEWAY_URL",
        "DIALECTIC_CA_CERT",
        "DIALECTIC_INSECURE",
        "DIALECTIC_CLI_CONFIG",
        "DIALECTIC_CONTEXT",
        "DIALECTIC_OUTPUT",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    ] {
        command.env_remove(name);
    }
    for (name, value) in env_vars {
        command.env(name, value);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let started = Instant::now();
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        command
            .spawn()
            .expect("dialectic starts")
            .wait_with_output(),
    )
    .await
    .unwrap_or_else(|_| panic!("dialectic {args:?} still running after 120 s"))
    .expect("dialectic ran");
    // Shown only when the test fails: every run, in order.
    eprintln!(
        "dialectic {args:?} {env_vars:?}: exit {:?} in {:?}\n{}",
        output.status.code(),
        started.elapsed(),
        String::from_utf8_lossy(&output.stderr)
    );
    (output, started.elapsed())
}

fn described(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_gateway_serves_tls_and_the_cli_trusts_a_private_ca() {
    let dir = certificates();
    let (ca, other_ca) = (dir.join("ca.pem"), dir.join("other-ca.pem"));
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let mut env = TestEnv::new().await;

    // A key that is not the certificate's, or a file that is not there, stops
    // the start with the file's name.
    let mut mismatched = env.settings.clone();
    mismatched.gateway.tls_cert = cert.display().to_string();
    mismatched.gateway.tls_key = dir.join("ca.key").display().to_string();
    let refused = dialectic_gateway::start(Arc::new(mismatched), Default::default())
        .await
        .err()
        .expect("a mismatched key is refused");
    let said = refused.to_string();
    assert!(
        said.contains("ca.key") && said.contains("tls.crt"),
        "{said}"
    );
    let mut missing = env.settings.clone();
    missing.gateway.tls_cert = dir.join("absent.crt").display().to_string();
    missing.gateway.tls_key = key.display().to_string();
    let refused = dialectic_gateway::start(Arc::new(missing), Default::default())
        .await
        .err()
        .expect("a missing certificate is refused");
    assert!(refused.to_string().contains("absent.crt"), "{refused}");

    env.settings.gateway.tls_cert = cert.display().to_string();
    env.settings.gateway.tls_key = key.display().to_string();
    // The kubelet's probes cannot speak TLS: they ask a plaintext health port.
    let health_port = dialectic_e2e::free_ports(1)[0];
    env.settings.gateway.health_listen = format!("127.0.0.1:{health_port}");
    env.start(&["gateway"]).await;
    let port = env.addr("gateway").port();
    let https = format!("https://localhost:{port}");
    let api_key = env.settings.gateway.bootstrap_key.clone();

    // Any gRPC client with the CA: health, then a project to list.
    let channel = Endpoint::from_shared(https.clone())
        .expect("url")
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(std::fs::read(&ca).expect("ca.pem")))
                .domain_name("localhost"),
        )
        .expect("client TLS")
        .connect()
        .await
        .expect("a TLS client connects");
    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: "dialectic.liveness".into(),
        })
        .await
        .expect("health over TLS")
        .into_inner();
    assert_eq!(health.status, ServingStatus::Serving as i32);
    let probed = dialectic_e2e::wait_for_status(
        ([127, 0, 0, 1], health_port).into(),
        "",
        ServingStatus::Serving,
    )
    .await;
    assert_eq!(probed, ServingStatus::Serving, "the plaintext health port");
    let project = DialecticServiceClient::with_interceptor(
        channel,
        dialectic_e2e::BearerKey(api_key.clone()),
    )
    .create_project(CreateProjectRequest {
        name: "over TLS".into(),
        initial_user_prompt: "A project created through TLS.".into(),
        client_request_id: uuid::Uuid::new_v4().to_string(),
        ..Default::default()
    })
    .await
    .expect("create over TLS")
    .into_inner();

    // (a) The CLI with --ca-cert lists it.
    let list = [
        "--gateway",
        &https,
        "--ca-cert",
        ca.to_str().expect("utf-8"),
        "project",
        "list",
        "--output",
        "json",
    ];
    let (output, _) = dialectic(&api_key, &list, &[]).await;
    assert!(output.status.success(), "{}", described(&output));
    let listed: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("projects as JSON");
    assert!(
        listed
            .as_array()
            .is_some_and(|all| all.iter().any(|p| p["id"] == project.id.as_str())),
        "{project:?} not in {listed}"
    );
    // DIALECTIC_CA_CERT does what the flag does.
    let (output, _) = dialectic(
        &api_key,
        &["--gateway", &https, "project", "list"],
        &[("DIALECTIC_CA_CERT", &ca)],
    )
    .await;
    assert!(output.status.success(), "{}", described(&output));
    // Without --ca-cert the system's roots decide; here they are a CA that
    // signed nothing (SSL_CERT_FILE), then the test CA itself.
    let (output, _) = dialectic(
        &api_key,
        &["--gateway", &https, "project", "list"],
        &[("SSL_CERT_FILE", &ca)],
    )
    .await;
    assert!(output.status.success(), "{}", described(&output));

    // (b) A certificate the CLI does not trust: unavailable, and it says why.
    // Without --ca-cert (the system's roots: here a CA that signed nothing)
    // and with the wrong CA.
    for (args, roots) in [
        (
            vec!["--gateway", &https, "project", "list"],
            Some(other_ca.as_path()),
        ),
        (
            vec![
                "--gateway",
                &https,
                "--ca-cert",
                other_ca.to_str().expect("utf-8"),
                "project",
                "list",
            ],
            None,
        ),
    ] {
        let roots: Vec<(&str, &Path)> = roots.map(|r| ("SSL_CERT_FILE", r)).into_iter().collect();
        let (output, _) = dialectic(&api_key, &args, &roots).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(UNAVAILABLE),
            "{args:?}: {}",
            described(&output)
        );
        assert!(
            stderr.contains("certificate") && stderr.contains("--ca-cert"),
            "{args:?}: {}",
            described(&output)
        );
    }
    // The name checked is the URL's host: the same server by its address,
    // which the certificate does not name, is refused.
    let elsewhere = format!("https://127.0.0.1:{port}");
    let (output, _) = dialectic(
        &api_key,
        &[
            "--gateway",
            &elsewhere,
            "--ca-cert",
            ca.to_str().expect("utf-8"),
            "project",
            "list",
        ],
        &[],
    )
    .await;
    if output.status.code() != Some(UNAVAILABLE)
        || !String::from_utf8_lossy(&output.stderr).contains("certificate")
    {
        panic!("a certificate for another name: {}", described(&output));
    }

    // (c) Plaintext to the TLS port fails, at once rather than hanging, as
    // an unreachable gateway, and says what to use instead.
    let plain = format!("http://localhost:{port}");
    let (output, took) = dialectic(&api_key, &["--gateway", &plain, "project", "list"], &[]).await;
    assert_eq!(
        output.status.code(),
        Some(UNAVAILABLE),
        "{}",
        described(&output)
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("https://"),
        "{}",
        described(&output)
    );
    assert!(
        took < Duration::from_secs(20),
        "took {took:?}: {}",
        described(&output)
    );

    // (d) --insecure (or DIALECTIC_INSECURE) checks no certificate: with no
    // CA, and by an address the certificate does not name, the CLI lists the
    // project, warning on stderr that nothing was checked. With an http://
    // URL it is a usage error.
    for (args, vars) in [
        (vec!["--gateway", &https, "--insecure"], vec![]),
        (
            vec!["--gateway", &elsewhere],
            vec![("DIALECTIC_INSECURE", Path::new("1"))],
        ),
    ] {
        let args = [args, vec!["project", "list", "--output", "json"]].concat();
        let (output, _) = dialectic(&api_key, &args, &vars).await;
        assert!(output.status.success(), "{args:?}: {}", described(&output));
        let listed: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("projects as JSON");
        assert!(
            listed
                .as_array()
                .is_some_and(|all| all.iter().any(|p| p["id"] == project.id.as_str())),
            "{project:?} not in {listed}"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("warning: --insecure") && stderr.contains("not checked"),
            "{args:?}: {}",
            described(&output)
        );
    }
    let (output, _) = dialectic(
        &api_key,
        &["--gateway", &plain, "--insecure", "project", "list"],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(USAGE), "{}", described(&output));

    // --ca-cert with an http:// URL is a usage error; an unreadable CA file a
    // configuration error naming it.
    let (output, _) = dialectic(
        &api_key,
        &[
            "--gateway",
            &plain,
            "--ca-cert",
            ca.to_str().expect("utf-8"),
            "project",
            "list",
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(USAGE), "{}", described(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("https://"),
        "{}",
        described(&output)
    );
    let absent = dir.join("absent-ca.pem");
    let (output, _) = dialectic(
        &api_key,
        &[
            "--gateway",
            &https,
            "--ca-cert",
            absent.to_str().expect("utf-8"),
            "project",
            "list",
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(78), "{}", described(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("absent-ca.pem"),
        "{}",
        described(&output)
    );

    env.teardown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The SHA-256 fingerprint of the certificate the server at `port` presents
/// to a new connection (asking for localhost), or of the PEM file `pem`.
fn fingerprint(port: Option<u16>, pem: Option<&Path>) -> String {
    let script = match (port, pem) {
        (Some(port), _) => format!(
            "openssl s_client -connect 127.0.0.1:{port} -servername localhost </dev/null 2>/dev/null \
             | openssl x509 -noout -fingerprint -sha256"
        ),
        (_, Some(pem)) => format!(
            "openssl x509 -noout -fingerprint -sha256 -in {}",
            pem.display()
        ),
        _ => unreachable!("a port or a file"),
    };
    let output = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("sh runs");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// The kubelet replaces a renewed Secret's files in place; the gateway then
/// presents the new certificate to new connections without a restart, and
/// keeps serving calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_gateway_presents_a_renewed_certificate_without_a_restart() {
    let dir = certificates();
    leaf(&dir, "renewed");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let mut env = TestEnv::new().await;
    env.settings.gateway.tls_cert = cert.display().to_string();
    env.settings.gateway.tls_key = key.display().to_string();
    env.start(&["gateway"]).await;
    let port = env.addr("gateway").port();
    let (old, new) = (
        fingerprint(None, Some(&cert)),
        fingerprint(None, Some(&dir.join("renewed.crt"))),
    );
    assert!(old.contains("Fingerprint") && old != new, "{old} / {new}");
    assert_eq!(
        fingerprint(Some(port), None),
        old,
        "the certificate at start"
    );

    // As an update of the files does: each one replaced whole.
    for (from, to) in [("renewed.crt", &cert), ("renewed.key", &key)] {
        std::fs::copy(dir.join(from), dir.join("swap")).expect("copy");
        std::fs::rename(dir.join("swap"), to).expect("rename");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = fingerprint(Some(port), None);
        if seen == new {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still presenting {seen}, not the renewed {new}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A gRPC client that trusts the CA still gets answers over the new certificate.
    let channel = Endpoint::from_shared(format!("https://localhost:{port}"))
        .expect("url")
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(
                    std::fs::read(dir.join("ca.pem")).expect("ca.pem"),
                ))
                .domain_name("localhost"),
        )
        .expect("client TLS")
        .connect()
        .await
        .expect("a TLS client connects after the renewal");
    let health = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "dialectic.liveness".into(),
        })
        .await
        .expect("health over the renewed certificate")
        .into_inner();
    assert_eq!(health.status, ServingStatus::Serving as i32);

    env.teardown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CLI runs a whole session through a TLS gateway, trusting the test CA:
/// project, session, the watched progress stream and the documents, all over
/// `https://`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cli_runs_a_session_to_review_through_a_tls_gateway() {
    let dir = certificates();
    let mut env = TestEnv::new().await;
    env.settings.gateway.tls_cert = dir.join("tls.crt").display().to_string();
    env.settings.gateway.tls_key = dir.join("tls.key").display().to_string();
    // The gateway's health is asked on its plaintext health port.
    let health_port = dialectic_e2e::free_ports(1)[0];
    env.settings.gateway.health_listen = format!("127.0.0.1:{health_port}");
    for name in dialectic_e2e::ALL_SERVICES {
        env.start(&[name]).await;
        if name != "gateway" {
            env.wait_serving(name).await;
        }
    }
    let ready = dialectic_e2e::wait_for_status(
        ([127, 0, 0, 1], health_port).into(),
        "",
        ServingStatus::Serving,
    )
    .await;
    assert_eq!(ready, ServingStatus::Serving, "the gateway");
    let https = format!("https://localhost:{}", env.addr("gateway").port());
    let api_key = env.settings.gateway.bootstrap_key.clone();
    let ca = dir.join("ca.pem");
    let (output, _) = dialectic(
        &api_key,
        &[
            "--gateway",
            &https,
            "--ca-cert",
            ca.to_str().expect("utf-8"),
            "run",
            "--name",
            "Over TLS",
            "--prompt",
            "A lending library for power tools, run by neighbours for neighbours.",
            "--model",
            "simulated",
        ],
        &[],
    )
    .await;
    assert!(output.status.success(), "{}", described(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let session = stdout
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("session ")?.split(' ').next())
        .unwrap_or_else(|| panic!("run's second line names the session:\n{stdout}"))
        .to_string();
    assert!(
        stdout.contains(&format!(
            "session {session} is iteration_complete_pending_review"
        )),
        "{}",
        described(&output)
    );
    let status: String =
        sqlx::query_scalar("SELECT status FROM dialectic_sessions WHERE id = $1::uuid")
            .bind(&session)
            .fetch_one(env.store.pool())
            .await
            .expect("the session row");
    assert_eq!(status, "iteration_complete_pending_review");
    env.teardown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
