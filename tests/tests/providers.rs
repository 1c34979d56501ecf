//! Provider call limits shared through Redis: four executor tasks, one limit of
//! two concurrent calls, a fake provider that counts what is in flight.

use dialectic_core::prompt::{ChatRequest, Message};
use dialectic_executor::limits::RedisLimiter;
use dialectic_llm::{Limited, ModelProvider, OpenAiProvider, OpenAiSettings};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Answers every request after 100 ms, recording the most requests it ever held at once.
async fn counting_server() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let (in_flight, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (now, max) = (in_flight.clone(), peak.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (now, max) = (now.clone(), max.clone());
            tokio::spawn(async move {
                let mut buf = [0u8; 8192];
                let mut seen = Vec::new();
                while !String::from_utf8_lossy(&seen).contains("\r\n\r\n") {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                }
                let current = now.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(current, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                let body = r#"{"choices":[{"message":{"content":"{\"content\": \"ok\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, in_flight, peak)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_executors_sharing_a_limit_of_two_never_exceed_it() {
    dialectic_e2e::init_logging();
    let settings = dialectic_e2e::base_settings();
    let cache = dialectic_cache::Cache::connect(&settings.redis.url, 60)
        .await
        .expect("redis");
    let (url, _, peak) = counting_server().await;
    let key = format!("model:test-{}", uuid::Uuid::now_v7());
    let request = ChatRequest {
        model: "m".into(),
        system_instruction: None,
        messages: vec![Message::user("hi")],
        max_tokens: 8,
        output_type: "x".into(),
        output_hints: vec![],
        required_keys: vec![],
    };
    // Four "executors": each its own provider and limiter, sharing only Redis.
    let tasks = (0..4).map(|_| {
        let slot = Arc::new(OnceLock::new());
        let _ = slot.set(cache.clone());
        let provider = Limited {
            inner: Arc::new(
                OpenAiProvider::new(OpenAiSettings {
                    base_url: url.clone(),
                    ..OpenAiSettings::default()
                })
                .expect("client"),
            ),
            limiter: Arc::new(RedisLimiter::new(
                slot,
                2,
                Duration::from_secs(30),
                Duration::from_secs(30),
            )),
            key: key.clone(),
        };
        let request = request.clone();
        tokio::spawn(async move {
            for _ in 0..3 {
                provider.chat(&request).await.expect("call");
            }
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.expect("task");
    }
    assert_eq!(
        peak.load(Ordering::SeqCst),
        2,
        "two calls at once, never more"
    );
}
