//! The OpenAI-compatible client against a local HTTP server speaking the wire
//! format: streamed and plain replies, usage, truncation, throttling with
//! Retry-After, server errors, auth failures, malformed bodies, a slow first byte.

mod support;

use dialectic_core::prompt::{ChatRequest, Message};
use dialectic_llm::{FinishReason, LlmError, ModelProvider, OpenAiProvider, OpenAiSettings};
use std::time::Duration;
use support::{http, serve, sse};

fn client(url: &str) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiSettings {
        base_url: url.to_string(),
        api_key: Some("sk-test".into()),
        first_byte_timeout: Duration::from_millis(500),
        total_timeout: Duration::from_secs(5),
        max_retries: 2,
        retry_base: Duration::from_millis(10),
        ..OpenAiSettings::default()
    })
    .expect("client")
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "gpt-test".into(),
        system_instruction: Some("Be brief.".into()),
        messages: vec![
            Message::user("Write it."),
            Message::assistant("{\"content\": \"Part one\"}", Some("c1".into())),
            Message::user("Continue."),
        ],
        max_tokens: 64,
        output_type: "business_case".into(),
        output_hints: vec![],
        required_keys: vec![],
        temperature: None,
        ..Default::default()
    }
}

const CHUNK_A: &str =
    r#"{"choices":[{"delta":{"content":"{\"content\": \"Hel"},"finish_reason":null}]}"#;
const CHUNK_B: &str = r#"{"choices":[{"delta":{"content":"lo\"}"},"finish_reason":"stop"}]}"#;
const USAGE: &str = r#"{"choices":[],"usage":{"prompt_tokens":42,"completion_tokens":7}}"#;

#[tokio::test]
async fn a_streamed_reply_is_buffered_with_exact_usage() {
    let server = serve(vec![sse(&[CHUNK_A, CHUNK_B, USAGE, "[DONE]"])]).await;
    let reply = client(&server.url).chat(&request()).await.expect("reply");
    assert_eq!(reply.text, "{\"content\": \"Hello\"}");
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    assert_eq!(
        (
            reply.input_tokens,
            reply.output_tokens,
            reply.usage_estimated
        ),
        (42, 7, false)
    );
    let sent = server.requests.lock().expect("lock")[0].clone();
    assert!(sent.starts_with("POST /v1/chat/completions"));
    assert!(
        sent.to_ascii_lowercase()
            .contains("authorization: bearer sk-test")
    );
    let body: serde_json::Value =
        serde_json::from_str(&sent[sent.find("\r\n\r\n").expect("body") + 4..]).expect("json");
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(body["stream"], true);
}

#[tokio::test]
async fn a_plain_reply_cut_at_max_tokens_says_length_and_estimates_missing_usage() {
    let body =
        r#"{"choices":[{"message":{"content":"{\"content\": \"Hal"},"finish_reason":"length"}]}"#;
    let server = serve(vec![http("200 OK", "application/json", "", body)]).await;
    let reply = client(&server.url).chat(&request()).await.expect("reply");
    assert_eq!(reply.finish_reason, FinishReason::Length);
    assert!(reply.usage_estimated);
    assert!(reply.output_tokens > 0);
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried_honouring_retry_after() {
    let server = serve(vec![
        http(
            "429 Too Many Requests",
            "application/json",
            "Retry-After: 0.05\r\n",
            r#"{"error":"slow down"}"#,
        ),
        http(
            "500 Internal Server Error",
            "application/json",
            "",
            r#"{"error":"oops"}"#,
        ),
        sse(&[CHUNK_A, CHUNK_B, "[DONE]"]),
    ])
    .await;
    let started = std::time::Instant::now();
    let reply = client(&server.url)
        .chat(&request())
        .await
        .expect("reply after retries");
    assert_eq!(reply.text, "{\"content\": \"Hello\"}");
    assert_eq!(server.requests.lock().expect("lock").len(), 3);
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "waited as Retry-After asked"
    );
}

#[tokio::test]
async fn a_retryable_status_is_tried_max_retries_plus_one_times_then_given_up() {
    let busy = || {
        http(
            "503 Service Unavailable",
            "application/json",
            "",
            r#"{"error":"busy"}"#,
        )
    };
    // More replies than the client may ask for: a fourth request would succeed.
    let server = serve(vec![
        busy(),
        busy(),
        busy(),
        sse(&[CHUNK_A, CHUNK_B, "[DONE]"]),
    ])
    .await;
    let started = std::time::Instant::now();
    let error = client(&server.url)
        .chat(&request())
        .await
        .expect_err("gives up after max_retries");
    assert!(
        matches!(&error, LlmError::Transient(m) if m.contains("gave up after 3 attempts") && m.contains("503")),
        "{error}"
    );
    assert_eq!(server.requests.lock().expect("lock").len(), 3);
    // retry_base 10 ms: waits of 10 then 20 ms, each plus up to as much again.
    assert!(started.elapsed() >= Duration::from_millis(30));

    // A 429 that says the quota is gone will not pass by waiting.
    let quota = serve(vec![
        http(
            "429 Too Many Requests",
            "application/json",
            "Retry-After: 0\r\n",
            r#"{"error":{"code":"insufficient_quota"}}"#,
        ),
        sse(&[CHUNK_A, CHUNK_B, "[DONE]"]),
    ])
    .await;
    let error = client(&quota.url)
        .chat(&request())
        .await
        .expect_err("quota exhausted");
    assert!(
        matches!(&error, LlmError::Permanent(m) if m.contains("quota exhausted")),
        "{error}"
    );
    assert_eq!(quota.requests.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn requests_that_cannot_succeed_are_not_retried() {
    let server = serve(vec![
        http(
            "401 Unauthorized",
            "application/json",
            "",
            r#"{"error":"bad key"}"#,
        ),
        sse(&[CHUNK_A, CHUNK_B, "[DONE]"]),
    ])
    .await;
    let error = client(&server.url)
        .chat(&request())
        .await
        .expect_err("auth fails");
    assert!(
        matches!(&error, LlmError::Permanent(m) if m.contains("authentication failed")),
        "{error}"
    );
    assert_eq!(server.requests.lock().expect("lock").len(), 1);

    let long = serve(vec![http(
        "400 Bad Request",
        "application/json",
        "",
        r#"{"error":{"code":"context_length_exceeded"}}"#,
    )])
    .await;
    let error = client(&long.url)
        .chat(&request())
        .await
        .expect_err("too long");
    assert!(error.to_string().contains("context too long"), "{error}");
}

#[tokio::test]
async fn malformed_bodies_and_a_slow_first_byte_are_retried_then_reported() {
    let mut slow = sse(&[CHUNK_A, CHUNK_B, "[DONE]"]);
    slow.delay = Duration::from_secs(2);
    let server = serve(vec![
        http("200 OK", "application/json", "", "{not json"),
        slow,
        sse(&[CHUNK_A, CHUNK_B, "[DONE]"]),
    ])
    .await;
    let reply = client(&server.url)
        .chat(&request())
        .await
        .expect("third time lucky");
    assert_eq!(reply.finish_reason, FinishReason::Stop);

    let broken = serve(vec![
        http("200 OK", "application/json", "", "{not json"),
        http("200 OK", "application/json", "", "{not json"),
        http("200 OK", "application/json", "", "{not json"),
    ])
    .await;
    let error = client(&broken.url)
        .chat(&request())
        .await
        .expect_err("never parses");
    assert!(
        matches!(&error, LlmError::Transient(m) if m.contains("gave up after 3 attempts")),
        "{error}"
    );
    assert_eq!(broken.requests.lock().expect("lock").len(), 3);
}

#[tokio::test]
async fn a_stream_that_ends_early_is_not_a_finished_document() {
    let server = serve(vec![sse(&[CHUNK_A])]).await;
    let reply = client(&server.url)
        .chat(&request())
        .await
        .expect("partial reply");
    assert_eq!(reply.text, "{\"content\": \"Hel");
    assert_eq!(reply.finish_reason, FinishReason::Error);
}

#[tokio::test]
async fn a_failing_model_falls_back_to_its_fallback() {
    use dialectic_llm::WithFallback;
    use std::sync::Arc;
    let primary = serve(vec![
        http("503 Service Unavailable", "application/json", "", "{}"),
        http("503 Service Unavailable", "application/json", "", "{}"),
        http("503 Service Unavailable", "application/json", "", "{}"),
    ])
    .await;
    let fallback = serve(vec![sse(&[CHUNK_A, CHUNK_B, "[DONE]"])]).await;
    let provider = WithFallback {
        primary: Arc::new(client(&primary.url)),
        fallback: Arc::new(client(&fallback.url)),
        fallback_model: "backup-model".into(),
    };
    let reply = provider
        .chat(&request())
        .await
        .expect("the fallback answers");
    assert_eq!(reply.text, "{\"content\": \"Hello\"}");
    let sent = fallback.requests.lock().expect("lock")[0].clone();
    assert!(sent.contains("\"model\":\"backup-model\""), "{sent}");
    assert_eq!(
        primary.requests.lock().expect("lock").len(),
        3,
        "the primary was tried in full first"
    );
}

#[tokio::test]
async fn characters_split_across_network_chunks_arrive_whole() {
    let text = "{\"content\": \"é—“”\"}";
    let events = [
        r#"{"choices":[{"delta":{"content":"{\"content\": \"é—"},"finish_reason":null}]}"#,
        r#"{"choices":[{"delta":{"content":"“”\"}"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ];
    let reply = sse(&events).split_inside_characters();
    assert!(reply.pieces.len() > 4, "every character is cut");
    let server = serve(vec![reply]).await;
    let reply = client(&server.url).chat(&request()).await.expect("reply");
    assert_eq!(reply.text, text);
    assert_eq!(reply.finish_reason, FinishReason::Stop);
}

#[tokio::test]
async fn a_model_rows_structured_output_reaches_the_wire() {
    use dialectic_llm::{ProviderConfig, SimulatedSettings, provider_for};
    let server = serve(vec![sse(&[CHUNK_A, CHUNK_B, "[DONE]"])]).await;
    let row = serde_json::json!({"base_url": server.url, "structured_output": "json_object"});
    let config = ProviderConfig::from_row(&row, None, &[]);
    let provider =
        provider_for("openai", &SimulatedSettings::default(), &config).expect("provider");
    let request = ChatRequest {
        response_schema: Some(serde_json::json!({"type": "object"})),
        ..request()
    };
    provider.chat(&request).await.expect("reply");
    let sent = server.requests.lock().expect("lock")[0].clone();
    let body: serde_json::Value =
        serde_json::from_str(&sent[sent.find("\r\n\r\n").expect("body") + 4..]).expect("json");
    assert_eq!(
        body["response_format"],
        serde_json::json!({"type": "json_object"})
    );
}
