//! The OpenAI-compatible client against a local HTTP server speaking the wire
//! format: streamed and plain replies, usage, truncation, throttling with
//! Retry-After, server errors, auth failures, malformed bodies, a slow first byte.

mod support;

use dialectic_core::prompt::{ChatRequest, Message};
use dialectic_llm::{FinishReason, LlmError, ModelProvider, OpenAiProvider, OpenAiSettings};
use std::time::Duration;
use support::{http, serve, serve_fn, sse};

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
    // The OpenAI Chat Completions API reference
    // (https://platform.openai.com/docs/api-reference/chat/create):
    // `max_completion_tokens` bounds the reply; `max_tokens` is deprecated
    // and "not compatible with o-series models".
    assert_eq!(body["max_completion_tokens"], 64);
    assert!(body.get("max_tokens").is_none(), "{body}");
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

/// The JSON body of a raw request the fake server saw.
fn sent_body(raw: &str) -> serde_json::Value {
    serde_json::from_str(&raw[raw.find("\r\n\r\n").expect("body") + 4..]).expect("json")
}

/// A reasoning model's reply as the Chat Completions reference
/// (https://platform.openai.com/docs/api-reference/chat/object) writes its
/// usage: the hidden reasoning is inside `completion_tokens` and broken out
/// in `completion_tokens_details.reasoning_tokens`.
const REASONING_USAGE: &str = r#"{"choices":[],"usage":{"prompt_tokens":42,"completion_tokens":900,"completion_tokens_details":{"reasoning_tokens":768}}}"#;

/// A server that answers as OpenAI's API answers a reasoning model
/// (o-series, GPT-5): a request with `max_tokens` is refused with the
/// error object the API reference documents
/// (https://platform.openai.com/docs/guides/error-codes; this is the body it
/// sends, `code` `unsupported_parameter`), so is one with a `temperature`
/// (`unsupported_value`: only the default is supported); any other is
/// answered.
async fn openai_reasoning_model() -> support::FakeServer {
    serve_fn(|raw| {
        let body = sent_body(raw);
        let refusal = |param: &str, code: &str, message: &str| {
            let error = serde_json::json!({"error": {
                "message": message, "type": "invalid_request_error",
                "param": param, "code": code,
            }});
            http("400 Bad Request", "application/json", "", &error.to_string())
        };
        Some(if body.get("max_tokens").is_some() {
            refusal(
                "max_tokens",
                "unsupported_parameter",
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            )
        } else if body.get("temperature").is_some() {
            refusal(
                "temperature",
                "unsupported_value",
                "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.",
            )
        } else {
            sse(&[CHUNK_A, CHUNK_B, REASONING_USAGE, "[DONE]"])
        })
    })
    .await
}

/// The provider a model row with `config` gets, on `url`.
fn provider_of(url: &str, mut config: serde_json::Value) -> std::sync::Arc<dyn ModelProvider> {
    use dialectic_llm::{ProviderConfig, SimulatedSettings, provider_for};
    config["base_url"] = url.into();
    provider_for(
        "openai",
        &SimulatedSettings::default(),
        &ProviderConfig::from_row(&config, None, &[]),
    )
    .expect("provider")
}

fn reasoning_request(temperature: Option<f64>) -> ChatRequest {
    ChatRequest {
        model: "gpt-5-mini".into(),
        temperature,
        ..request()
    }
}

#[tokio::test]
async fn the_max_tokens_refusal_cannot_happen_with_the_default_dialect() {
    let server = openai_reasoning_model().await;
    let reply = provider_of(&server.url, serde_json::json!({}))
        .chat(&reasoning_request(None))
        .await
        .expect("a default row is answered");
    assert_eq!(reply.text, "{\"content\": \"Hello\"}");
    // Reasoning is output: all 900 completion tokens are billed.
    assert_eq!((reply.input_tokens, reply.output_tokens), (42, 900));
    let body = sent_body(&server.requests.lock().expect("lock")[0]);
    assert_eq!(body["max_completion_tokens"], 64);
    assert!(body.get("max_tokens").is_none(), "{body}");
}

#[tokio::test]
async fn a_row_that_asks_for_max_tokens_sends_it_and_its_refusal_is_permanent_and_named() {
    let server = openai_reasoning_model().await;
    let error = provider_of(
        &server.url,
        serde_json::json!({"token_limit_param": "max_tokens"}),
    )
    .chat(&reasoning_request(None))
    .await
    .expect_err("refused");
    let LlmError::Permanent(message) = &error else {
        panic!("a refusal that cannot pass is not retryable: {error}");
    };
    assert!(
        message.contains("model \"gpt-5-mini\" does not take the parameter \"max_tokens\"")
            && message.contains("--token-limit-param"),
        "{message}"
    );
    let sent = server.requests.lock().expect("lock").clone();
    assert_eq!(sent.len(), 1, "not retried");
    let body = sent_body(&sent[0]);
    assert_eq!(body["max_tokens"], 64);
    assert!(body.get("max_completion_tokens").is_none(), "{body}");
}

#[tokio::test]
async fn a_reasoning_model_is_sent_no_temperature_and_its_effort() {
    let server = openai_reasoning_model().await;
    let reasoning = serde_json::json!({"reasoning": true, "reasoning_effort": "low"});
    let reply = provider_of(&server.url, reasoning)
        .chat(&reasoning_request(Some(0.2)))
        .await
        .expect("answered");
    assert_eq!(reply.output_tokens, 900);
    let body = sent_body(&server.requests.lock().expect("lock")[0]);
    // The reference: reasoning models take `reasoning_effort`, and refuse
    // sampling parameters (`temperature`, `top_p`) but at their defaults.
    assert!(body.get("temperature").is_none(), "{body}");
    assert!(body.get("top_p").is_none(), "{body}");
    assert_eq!(body["reasoning_effort"], "low");

    // The same step on a row that does not say so: the step's temperature
    // goes out, and the refusal names it and the fix.
    let plain = openai_reasoning_model().await;
    let error = provider_of(&plain.url, serde_json::json!({}))
        .chat(&reasoning_request(Some(0.2)))
        .await
        .expect_err("refused");
    assert!(
        matches!(&error, LlmError::Permanent(m)
            if m.contains("\"temperature\"") && m.contains("gpt-5-mini") && m.contains("--reasoning")),
        "{error}"
    );
    assert_eq!(plain.requests.lock().expect("lock").len(), 1, "not retried");
}

#[tokio::test]
async fn a_row_naming_an_unknown_token_limit_param_gets_no_provider() {
    use dialectic_llm::{ProviderConfig, SimulatedSettings, provider_for};
    let config = ProviderConfig::from_row(
        &serde_json::json!({"token_limit_param": "n_predict"}),
        None,
        &[],
    );
    let error = provider_for("openai-compatible", &SimulatedSettings::default(), &config)
        .err()
        .expect("refused");
    assert!(
        matches!(&error, LlmError::Permanent(m) if m.contains("\"n_predict\"") && m.contains("max_completion_tokens")),
        "{error}"
    );
}

#[tokio::test]
async fn a_stream_of_more_events_than_the_cap_is_refused() {
    let events = "data: {}\n\n".repeat(20);
    let server = serve(vec![http("200 OK", "text/event-stream", "", &events)]).await;
    let provider = OpenAiProvider::new(OpenAiSettings {
        base_url: server.url.clone(),
        limits: dialectic_llm::ReplyLimits {
            max_events: 10,
            ..Default::default()
        },
        ..OpenAiSettings::default()
    })
    .expect("client");
    let error = provider
        .chat(&request())
        .await
        .expect_err("too many events");
    assert!(
        matches!(&error, LlmError::Permanent(m) if m.contains("10 events") && m.contains("executor.max_reply_events")),
        "{error}"
    );
}

/// `sse` cut after each event, so each arrives after a pause of its own.
fn sse_in_pieces(events: &[&str]) -> support::Reply {
    let whole = sse(events).pieces.concat();
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut start = 0;
    for end in whole
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w == b"\n\n")
        .map(|(i, _)| i + 2)
    {
        pieces.push(whole[start..end].to_vec());
        start = end;
    }
    support::Reply {
        pieces,
        ..sse(events)
    }
}

#[tokio::test]
async fn a_streamed_reply_times_its_first_text_and_names_the_model_that_answered() {
    // The first event brings a role and no text; text comes one pause later,
    // the rest of the reply two and three pauses later.
    let opening = r#"{"model":"gpt-test-2026-01-01","choices":[{"delta":{"role":"assistant"},"finish_reason":null}]}"#;
    let server = serve(vec![sse_in_pieces(&[
        opening, CHUNK_A, CHUNK_B, USAGE, "[DONE]",
    ])])
    .await;
    let started = std::time::Instant::now();
    let reply = client(&server.url).chat(&request()).await.expect("reply");
    let total = started.elapsed();
    let first = reply
        .time_to_first_token
        .expect("a streamed reply has a time to first token");
    assert!(first >= Duration::from_millis(25), "{first:?}");
    assert!(
        first + Duration::from_millis(50) <= total,
        "{first:?} of {total:?}"
    );
    assert_eq!(reply.response_model.as_deref(), Some("gpt-test-2026-01-01"));

    // A reply that comes whole has no first token to time.
    let body = r#"{"model":"m-1","choices":[{"message":{"content":"{}"},"finish_reason":"stop"}]}"#;
    let whole = serve(vec![http("200 OK", "application/json", "", body)]).await;
    let reply = client(&whole.url).chat(&request()).await.expect("reply");
    assert_eq!(reply.time_to_first_token, None);
    assert_eq!(reply.response_model.as_deref(), Some("m-1"));
}

#[tokio::test]
async fn each_failure_has_its_reason_from_a_fixed_set() {
    let refusal = |status: &str, body: &str| http(status, "application/json", "", body);
    let mut slow = sse(&[CHUNK_A, "[DONE]"]);
    slow.delay = Duration::from_secs(2);
    let cases = [
        (vec![refusal("401 Unauthorized", "{}")], "auth"),
        (
            vec![refusal(
                "429 Too Many Requests",
                r#"{"error":{"code":"insufficient_quota"}}"#,
            )],
            "quota_exhausted",
        ),
        (
            vec![refusal("429 Too Many Requests", "{}"); 3],
            "rate_limited",
        ),
        (
            vec![refusal("503 Service Unavailable", "{}"); 3],
            "server_error",
        ),
        (
            vec![refusal(
                "400 Bad Request",
                r#"{"error":{"code":"context_length_exceeded"}}"#,
            )],
            "context_length",
        ),
        (
            vec![refusal(
                "400 Bad Request",
                r#"{"error":{"code":"unsupported_parameter","param":"max_tokens","message":"Unsupported parameter"}}"#,
            )],
            "unsupported_parameter",
        ),
        (vec![refusal("400 Bad Request", "{}")], "rejected"),
        (
            vec![http("200 OK", "application/json", "", "{not json"); 3],
            "bad_reply",
        ),
        (vec![slow; 3], "timeout"),
    ];
    for (script, reason) in cases {
        let server = serve(script).await;
        let error = client(&server.url)
            .chat(&request())
            .await
            .expect_err("the call fails");
        assert_eq!(error.reason().as_str(), reason, "{error}");
    }
    // Nobody listening.
    let error = client("http://127.0.0.1:9/v1")
        .chat(&request())
        .await
        .expect_err("no server");
    assert_eq!(error.reason().as_str(), "connection", "{error}");
}
