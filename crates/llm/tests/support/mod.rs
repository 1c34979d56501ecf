//! A local HTTP server that answers with scripted raw replies, for the
//! provider clients' tests.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One scripted reply: optional delay before answering, then raw HTTP.
#[derive(Clone)]
pub struct Reply {
    pub delay: Duration,
    pub raw: String,
}

pub fn http(status: &str, content_type: &str, extra: &str, body: &str) -> Reply {
    Reply {
        delay: Duration::ZERO,
        raw: format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
            body.len()
        ),
    }
}

#[allow(dead_code)] // Only the OpenAI tests stream this way.
pub fn sse(events: &[&str]) -> Reply {
    let mut body = String::new();
    for e in events {
        body.push_str(&format!("data: {e}\n\n"));
    }
    http("200 OK", "text/event-stream", "", &body)
}

pub struct FakeServer {
    pub url: String,
    pub requests: Arc<Mutex<Vec<String>>>,
}

pub async fn serve(script: Vec<Reply>) -> FakeServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    tokio::spawn(async move {
        let mut script = script.into_iter();
        while let Ok((mut socket, _)) = listener.accept().await {
            let Some(reply) = script.next() else { break };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read headers, then the body by Content-Length.
                loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .and_then(|v| v.trim().parse::<usize>().ok())
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                seen.lock()
                    .expect("lock")
                    .push(String::from_utf8_lossy(&buf).to_string());
                tokio::time::sleep(reply.delay).await;
                let _ = socket.write_all(reply.raw.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    FakeServer { url, requests }
}
