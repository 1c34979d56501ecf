//! A local HTTP server that answers with scripted raw replies, for the
//! provider clients' tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One scripted reply: optional delay before answering, then raw HTTP in
/// one or more pieces.
#[derive(Clone)]
pub struct Reply {
    pub delay: Duration,
    /// Written in turn, each flushed and followed by [`PAUSE`], so the client
    /// reads each as a chunk of its own.
    pub pieces: Vec<Vec<u8>>,
    /// After the pieces, `filler` over and over until `bytes` of it are
    /// written or the client hangs up: a body of any size, never held.
    pub flood: Option<Flood>,
}

#[derive(Clone)]
pub struct Flood {
    pub filler: Vec<u8>,
    pub bytes: usize,
}

/// Long enough that two pieces never arrive in one read.
const PAUSE: Duration = Duration::from_millis(30);

impl Reply {
    /// The same bytes, cut after the first byte of every multi-byte UTF-8
    /// character, so no such character arrives whole.
    #[allow(dead_code)] // Not every test file splits characters.
    pub fn split_inside_characters(self) -> Reply {
        let raw = self.pieces.concat();
        let mut pieces = Vec::new();
        let mut start = 0;
        for (i, byte) in raw.iter().enumerate() {
            // A lead byte (11xxxxxx) opens a character of two bytes or more.
            if byte & 0b1100_0000 == 0b1100_0000 {
                pieces.push(raw[start..=i].to_vec());
                start = i + 1;
            }
        }
        pieces.push(raw[start..].to_vec());
        Reply { pieces, ..self }
    }
}

pub fn http(status: &str, content_type: &str, extra: &str, body: &str) -> Reply {
    let raw = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    );
    Reply {
        delay: Duration::ZERO,
        pieces: vec![raw.into_bytes()],
        flood: None,
    }
}

/// A reply whose head (status line, headers, the start of the body) is
/// `head` and whose body then runs on with `pattern` over and over for
/// `bytes` bytes.
#[allow(dead_code)] // Only the hostile-provider tests flood.
pub fn flood(head: &str, pattern: &[u8], bytes: usize) -> Reply {
    let filler: Vec<u8> = pattern
        .iter()
        .copied()
        .cycle()
        .take((64 << 10) / pattern.len() * pattern.len())
        .collect();
    Reply {
        delay: Duration::ZERO,
        pieces: vec![head.as_bytes().to_vec()],
        flood: Some(Flood { filler, bytes }),
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
    /// Body bytes of floods written so far (the client read them, or the
    /// kernel's buffers hold them).
    #[allow(dead_code)]
    pub flooded: Arc<AtomicUsize>,
}

/// Answers the requests in turn with `script`'s replies, then stops listening.
pub async fn serve(script: Vec<Reply>) -> FakeServer {
    let script = Mutex::new(script.into_iter());
    serve_fn(move |_| script.lock().expect("script").next()).await
}

/// Answers each request (as raw HTTP text) with what `answer` makes of it;
/// stops listening when it makes nothing.
pub async fn serve_fn(
    answer: impl Fn(&str) -> Option<Reply> + Send + Sync + 'static,
) -> FakeServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let flooded = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let written = flooded.clone();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = seen.clone();
            let written = written.clone();
            let answer = answer.clone();
            // Each piece goes out at once rather than waiting for the last one's ACK.
            let _ = socket.set_nodelay(true);
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
                let request = String::from_utf8_lossy(&buf).to_string();
                seen.lock().expect("lock").push(request.clone());
                let Some(reply) = answer(&request) else {
                    return;
                };
                tokio::time::sleep(reply.delay).await;
                for piece in &reply.pieces {
                    let _ = socket.write_all(piece).await;
                    let _ = socket.flush().await;
                    if reply.pieces.len() > 1 {
                        tokio::time::sleep(PAUSE).await;
                    }
                }
                if let Some(flood) = &reply.flood {
                    let mut left = flood.bytes;
                    while left > 0 {
                        let n = left.min(flood.filler.len());
                        if socket.write_all(&flood.filler[..n]).await.is_err() {
                            break;
                        }
                        written.fetch_add(n, Ordering::Relaxed);
                        left -= n;
                    }
                }
                let _ = socket.shutdown().await;
            });
        }
    });
    FakeServer {
        url,
        requests,
        flooded,
    }
}
