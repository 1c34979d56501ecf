//! A hostile provider cannot pin an executor: a 200 MB streamed line, a
//! 200 MB JSON body and a 200 MB error body each fail at once, for good, as
//! "reply too large" naming the model and the cap, holding no more than the
//! cap. The fake server writes them lazily, 64 KiB at a time, and stops when
//! the client hangs up; nothing here holds 200 MB.
//!
//! Its own test binary, with one test: the heap it measures is this call's.

mod support;

use dialectic_core::prompt::{ChatRequest, Message};
use dialectic_llm::{Dialect, LlmError, ModelProvider, OpenAiProvider, OpenAiSettings};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::{flood, serve};

/// Counts the live heap, and its peak since the last [`reset_peak`].
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call goes straight to the system allocator; only counters
// are added around it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn reset_peak() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    live
}

const HOSTILE: usize = 200_000_000;
/// The issue's bound on the executor's memory growth per hostile reply.
const MAX_GROWTH: usize = 64 << 20;

fn client(url: &str, dialect: Dialect) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiSettings {
        dialect,
        base_url: url.to_string(),
        max_retries: 2,
        retry_base: Duration::from_millis(10),
        ..OpenAiSettings::default()
    })
    .expect("client")
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "hostile-model".into(),
        messages: vec![Message::user("Write it.")],
        max_tokens: 64,
        output_type: "business_case".into(),
        ..Default::default()
    }
}

/// A head that promises no length: the body runs until the server closes.
fn head(status: &str, content_type: &str, body_start: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n{body_start}"
    )
}

/// Calls a server flooding `reply`; asserts the call fails for good, within
/// 2 s, naming the model and `setting`, without retrying, and with the heap
/// grown by less than [`MAX_GROWTH`].
async fn refused_fast(name: &str, dialect: Dialect, reply: support::Reply, setting: &str) {
    let server = serve(vec![reply.clone(), reply.clone(), reply]).await;
    let provider = client(&server.url, dialect);
    let baseline = reset_peak();
    let started = Instant::now();
    let error = provider.chat(&request()).await.expect_err(name);
    let took = started.elapsed();
    let growth = PEAK.load(Ordering::Relaxed).saturating_sub(baseline);
    let flooded = server.flooded.load(Ordering::Relaxed);
    eprintln!(
        "{name}: failed in {took:?}, heap grew by {} KiB at most, {} KiB written before the client hung up",
        growth >> 10,
        flooded >> 10
    );
    let LlmError::Permanent(message) = &error else {
        panic!("{name}: a reply too large is permanent: {error}");
    };
    assert!(
        message.starts_with("reply too large: model \"hostile-model\"")
            && message.contains(setting),
        "{name}: {message}"
    );
    assert_eq!(
        server.requests.lock().expect("lock").len(),
        1,
        "{name}: not retried"
    );
    assert!(took < Duration::from_secs(2), "{name}: took {took:?}");
    assert!(
        growth < MAX_GROWTH,
        "{name}: the heap grew by {growth} bytes"
    );
    assert!(flooded < HOSTILE, "{name}: the whole flood was read");
}

#[tokio::test]
async fn two_hundred_megabyte_replies_fail_at_once_holding_no_more_than_the_cap() {
    // One SSE line that never ends, in the OpenAI and the Anthropic stream.
    refused_fast(
        "a streamed line",
        Dialect::OpenAi,
        flood(
            &head(
                "200 OK",
                "text/event-stream",
                r#"data: {"choices":[{"delta":{"content":""#,
            ),
            b"x",
            HOSTILE,
        ),
        "executor.max_reply_line_bytes",
    )
    .await;
    refused_fast(
        "an Anthropic streamed line",
        Dialect::Anthropic,
        flood(
            &head(
                "200 OK",
                "text/event-stream",
                "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"",
            ),
            b"x",
            HOSTILE,
        ),
        "executor.max_reply_line_bytes",
    )
    .await;
    // Lines of 1 KiB (SSE comments), each far under the line cap, adding
    // up past the reply cap.
    let comment = [b": ".as_slice(), &[b'x'; 1021], b"\n"].concat();
    refused_fast(
        "a streamed reply of short lines",
        Dialect::OpenAi,
        flood(&head("200 OK", "text/event-stream", ""), &comment, HOSTILE),
        "executor.max_reply_bytes",
    )
    .await;
    refused_fast(
        "a JSON body",
        Dialect::OpenAi,
        flood(
            &head(
                "200 OK",
                "application/json",
                r#"{"choices":[{"message":{"content":""#,
            ),
            b"x",
            HOSTILE,
        ),
        "executor.max_reply_bytes",
    )
    .await;
    // A 503 would be retried; one too large to read is not.
    refused_fast(
        "an error body",
        Dialect::OpenAi,
        flood(
            &head(
                "503 Service Unavailable",
                "application/json",
                r#"{"error":{"message":""#,
            ),
            b"x",
            HOSTILE,
        ),
        "executor.max_error_body_bytes",
    )
    .await;
    // A body that says how long it is, past the cap, is not read at all.
    let announced = format!(
        "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {HOSTILE}\r\nConnection: close\r\n\r\n"
    );
    refused_fast(
        "an announced error body",
        Dialect::OpenAi,
        flood(&announced, b"x", HOSTILE),
        "executor.max_error_body_bytes",
    )
    .await;
}
