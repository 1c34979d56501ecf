//! `dialecticd secret-hook` as the chart runs it, against a fake Kubernetes
//! API on loopback: the Secret arrives in the request body, and while the
//! request is in flight no value of it is on the process's command line
//! (`/proc/PID/cmdline`, readable by anyone who may list processes).
//!
//! The request shape is Kubernetes' "create a Secret"
//! (<https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/secret-v1/#create-create-a-secret>):
//! `POST /api/v1/namespaces/{namespace}/secrets`, a v1 Secret as JSON, the
//! service-account token as a bearer token; 201 Created, 409 Conflict when
//! the name is taken.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};

struct Seen {
    head: String,
    body: Value,
}

/// Reads one HTTP/1.1 request (headers, then content-length bytes).
fn read_request(stream: &mut std::net::TcpStream) -> Seen {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).expect("read") > 0,
            "closed early"
        );
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().expect("length"))
        })
        .expect("content-length");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("body");
    Seen {
        head,
        body: serde_json::from_slice(&body).expect("json"),
    }
}

/// Every process's command line on this machine, now: whichever process
/// sends the request (dialecticd, or a helper it might spawn) is alive while
/// the request waits for its answer.
fn every_cmdline() -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(raw) = std::fs::read(entry.path().join("cmdline")) {
            all.push_str(&String::from_utf8_lossy(&raw).replace('\0', " "));
            all.push('\n');
        }
    }
    all
}

#[test]
fn the_keys_travel_in_the_body_and_never_on_the_command_line() {
    let dir = std::env::temp_dir().join(format!("secret-hook-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("token"), "test-token\n").expect("token");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));

    let child = Command::new(env!("CARGO_BIN_EXE_dialecticd"))
        .args([
            "secret-hook",
            "service-keys",
            "--api-url",
            &url,
            "--api-dir",
        ])
        .arg(&dir)
        .env("SECRET_NAME", "dialectic-service-keys")
        .env("NAMESPACE", "dialectic")
        .env("RELEASE_NAME", "dialectic")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dialecticd");
    let own = format!("secret-hook service-keys --api-url {url}");

    // The request has arrived and is not answered yet: the process holds
    // the keys now, so its command line is read now.
    let (mut stream, _) = listener.accept().expect("accept");
    let seen = read_request(&mut stream);
    let argv = every_cmdline();
    let reply = r#"{"kind":"Secret","apiVersion":"v1"}"#;
    write!(
        stream,
        "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    )
    .expect("reply");
    drop(stream);
    let out = child.wait_with_output().expect("wait");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("created Secret dialectic-service-keys"),
        "{stdout}"
    );

    assert!(
        seen.head
            .starts_with("POST /api/v1/namespaces/dialectic/secrets HTTP/1.1"),
        "{}",
        seen.head
    );
    assert!(
        seen.head
            .to_ascii_lowercase()
            .contains("authorization: bearer test-token"),
        "{}",
        seen.head
    );
    assert_eq!(seen.body["kind"], "Secret");
    assert_eq!(seen.body["metadata"]["name"], "dialectic-service-keys");
    let members = seen.body["stringData"].as_object().expect("stringData");
    assert_eq!(members.len(), 12, "{members:?}");
    for (name, value) in members {
        let value = value.as_str().expect("text").trim();
        assert_eq!(value.len(), 64, "{name}: a 32-byte hex key");
        for text in [&argv, &*stdout, &*stderr] {
            assert!(!text.contains(value), "{name}'s value is shown: {text}");
        }
    }
    assert!(
        argv.contains(&own),
        "dialecticd was not seen running: {argv}"
    );
}
