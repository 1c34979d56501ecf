//! Provider call limits shared through Redis: four executor tasks, one limit of
//! two concurrent calls, a fake provider that counts what is in flight.

use dialectic_core::prompt::{ChatRequest, Message};
use dialectic_executor::limits::{Limits, RedisLimiter};
use dialectic_llm::{Limited, ModelProvider, OpenAiProvider, OpenAiSettings};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Answers every request after 100 ms, recording the most requests it ever held at once.
async fn counting_server() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>, Arrivals) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let (in_flight, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let arrivals: Arrivals = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (now, max, seen_at) = (in_flight.clone(), peak.clone(), arrivals.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (now, max, seen_at) = (now.clone(), max.clone(), seen_at.clone());
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
                let second = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                if let Ok(mut list) = seen_at.lock() {
                    list.push(second);
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
    (url, in_flight, peak, arrivals)
}

/// The wall-clock second each request reached the server.
type Arrivals = Arc<std::sync::Mutex<Vec<u64>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_executors_sharing_a_limit_of_two_never_exceed_it() {
    dialectic_e2e::init_logging();
    let settings = dialectic_e2e::base_settings();
    let cache = dialectic_cache::Cache::connect(&settings.redis.url, 60)
        .await
        .expect("redis");
    let (url, _, peak, _) = counting_server().await;
    let key = format!("model:test-{}", uuid::Uuid::now_v7());
    let request = ChatRequest {
        model: "m".into(),
        system_instruction: None,
        messages: vec![Message::user("hi")],
        max_tokens: 8,
        output_type: "x".into(),
        output_hints: vec![],
        required_keys: vec![],
        temperature: None,
        ..Default::default()
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
                Limits {
                    max_concurrency: Some(2),
                    ..Limits::default()
                },
                Duration::from_secs(60),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_requests_per_window_budget_spreads_calls_over_windows() {
    let settings = dialectic_e2e::base_settings();
    let cache = dialectic_cache::Cache::connect(&settings.redis.url, 60)
        .await
        .expect("redis");
    let (url, _, _, arrivals) = counting_server().await;
    let key = format!("model:rpm-{}", uuid::Uuid::now_v7());
    let slot = Arc::new(OnceLock::new());
    let _ = slot.set(cache);
    let provider = Arc::new(Limited {
        inner: Arc::new(
            OpenAiProvider::new(OpenAiSettings {
                base_url: url,
                ..OpenAiSettings::default()
            })
            .expect("client"),
        ),
        limiter: Arc::new(RedisLimiter::new(
            slot,
            Limits {
                requests_per_minute: Some(3),
                ..Limits::default()
            },
            // A one-second window stands in for the minute.
            Duration::from_secs(1),
            Duration::from_secs(30),
            Duration::from_secs(30),
        )),
        key,
    });
    let request = ChatRequest {
        model: "m".into(),
        system_instruction: None,
        messages: vec![Message::user("hi")],
        max_tokens: 8,
        output_type: "x".into(),
        output_hints: vec![],
        required_keys: vec![],
        temperature: None,
        ..Default::default()
    };
    let calls = (0..7).map(|_| {
        let provider = provider.clone();
        let request = request.clone();
        tokio::spawn(async move { provider.chat(&request).await })
    });
    for call in futures::future::join_all(calls).await {
        call.expect("task").expect("call");
    }
    // The budget windows are wall-clock seconds: no second saw more than three.
    let mut per_second: std::collections::BTreeMap<u64, usize> = Default::default();
    for second in arrivals.lock().expect("arrivals").iter() {
        *per_second.entry(*second).or_default() += 1;
    }
    assert_eq!(per_second.values().sum::<usize>(), 7);
    assert!(per_second.values().all(|n| *n <= 3), "{per_second:?}");
    assert!(
        per_second.len() >= 3,
        "seven calls needed three windows: {per_second:?}"
    );
}
