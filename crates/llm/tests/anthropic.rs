//! The Anthropic messages client against a local server speaking its wire format.

mod support;

use dialectic_core::prompt::{ChatRequest, Message, SharedPrefix};
use dialectic_llm::{
    Dialect, FinishReason, LlmError, ModelProvider, OpenAiProvider, OpenAiSettings,
};
use std::time::Duration;
use support::{http, serve};

fn client(url: &str) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiSettings {
        dialect: Dialect::Anthropic,
        base_url: url.to_string(),
        api_key: Some("sk-ant-test".into()),
        max_retries: 2,
        retry_base: Duration::from_millis(10),
        ..OpenAiSettings::default()
    })
    .expect("client")
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "claude-test".into(),
        system_instruction: Some("Be brief.".into()),
        messages: vec![
            Message::user("Write it."),
            Message::assistant("{\"content\": \"one\"}", Some("c1".into())),
            Message::assistant("{\"content\": \"two\"}", Some("c2".into())),
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

fn event_stream(events: &[(&str, &str)]) -> support::Reply {
    let mut body = String::new();
    for (name, data) in events {
        body.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    http("200 OK", "text/event-stream", "", &body)
}

#[tokio::test]
async fn a_streamed_message_is_buffered_with_usage_and_stop_reason() {
    let server = serve(vec![event_stream(&[
        ("message_start", r#"{"type":"message_start","message":{"model":"claude-test-20260101","usage":{"input_tokens":31,"output_tokens":1}}}"#),
        ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\"content\": \"Hi"}}"#),
        ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"}"}}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ])])
    .await;
    let reply = client(&server.url).chat(&request()).await.expect("reply");
    assert_eq!(reply.text, "{\"content\": \"Hi\"}");
    assert_eq!(reply.finish_reason, FinishReason::Length);
    // Anthropic names the answering model in `message_start`; the text
    // streamed, so its first token was timed.
    assert_eq!(
        reply.response_model.as_deref(),
        Some("claude-test-20260101")
    );
    assert!(reply.time_to_first_token.is_some());
    assert_eq!(
        (
            reply.input_tokens,
            reply.output_tokens,
            reply.usage_estimated
        ),
        (31, 9, false)
    );
    let sent = server.requests.lock().expect("lock")[0].clone();
    assert!(sent.starts_with("POST /v1/messages"), "{sent}");
    let lower = sent.to_ascii_lowercase();
    assert!(lower.contains("x-api-key: sk-ant-test"));
    assert!(lower.contains("anthropic-version: 2023-06-01"));
    let body: serde_json::Value =
        serde_json::from_str(&sent[sent.find("\r\n\r\n").expect("body") + 4..]).expect("json");
    assert_eq!(body["system"][0]["text"], "Be brief.");
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"], "turns alternate");
    // The Messages API reference (https://docs.anthropic.com/en/api/messages):
    // `max_tokens` is required, and the only output limit it has.
    assert_eq!(body["max_tokens"], 64);
    assert!(body.get("max_completion_tokens").is_none(), "{body}");
}

#[tokio::test]
async fn a_whole_message_and_overload_retries() {
    let whole = r#"{"type":"message","content":[{"type":"text","text":"{\"content\": \"ok\"}"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":3}}"#;
    let server = serve(vec![
        http(
            "529 Overloaded",
            "application/json",
            "",
            r#"{"type":"error","error":{"type":"overloaded_error"}}"#,
        ),
        http("200 OK", "application/json", "", whole),
    ])
    .await;
    let reply = client(&server.url).chat(&request()).await.expect("reply");
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    assert_eq!((reply.input_tokens, reply.output_tokens), (5, 3));
    assert_eq!(server.requests.lock().expect("lock").len(), 2);

    let denied = serve(vec![http(
        "401 Unauthorized",
        "application/json",
        "",
        r#"{"error":"invalid x-api-key"}"#,
    )])
    .await;
    let error = client(&denied.url)
        .chat(&request())
        .await
        .expect_err("auth");
    assert!(matches!(error, LlmError::Permanent(_)));
}

#[tokio::test]
async fn characters_split_across_network_chunks_arrive_whole() {
    let reply = event_stream(&[
        ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\"content\": \"é—"}}"#),
        ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"“”\"}"}}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ])
    .split_inside_characters();
    assert!(reply.pieces.len() > 4, "every character is cut");
    let server = serve(vec![reply]).await;
    let reply = client(&server.url).chat(&request()).await.expect("reply");
    assert_eq!(reply.text, "{\"content\": \"é—“”\"}");
    assert_eq!(reply.finish_reason, FinishReason::Stop);
}

fn with_schema() -> ChatRequest {
    ChatRequest {
        response_schema: Some(serde_json::json!({
            "type": "object",
            "properties": {"content": {"type": "string"}},
            "required": ["content"],
        })),
        ..request()
    }
}

#[tokio::test]
async fn a_streamed_reply_tool_call_is_the_replys_json_text() {
    let server = serve(vec![event_stream(&[
        ("message_start", r#"{"type":"message_start","message":{"usage":{"input_tokens":31,"output_tokens":1}}}"#),
        ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"reply","input":{}}}"#),
        ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"content\": \"Hi"}}"#),
        ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" there\"}"}}"#),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ])])
    .await;
    let reply = client(&server.url)
        .chat(&with_schema())
        .await
        .expect("reply");
    assert_eq!(reply.text, "{\"content\": \"Hi there\"}");
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    let sent = server.requests.lock().expect("lock")[0].clone();
    let body: serde_json::Value =
        serde_json::from_str(&sent[sent.find("\r\n\r\n").expect("body") + 4..]).expect("json");
    assert_eq!(
        body["tools"][0]["input_schema"],
        with_schema().response_schema.expect("schema")
    );
    assert_eq!(body["tool_choice"]["name"], "reply");
}

#[tokio::test]
async fn a_whole_reply_tool_call_is_the_replys_json_text() {
    let whole = r#"{"type":"message","content":[{"type":"tool_use","id":"toolu_1","name":"reply","input":{"content":"ok"}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":3}}"#;
    let server = serve(vec![http("200 OK", "application/json", "", whole)]).await;
    let reply = client(&server.url)
        .chat(&with_schema())
        .await
        .expect("reply");
    assert_eq!(reply.text, r#"{"content":"ok"}"#);
    assert_eq!(reply.finish_reason, FinishReason::Stop);
}

/// The step's inputs, which its jobs share, then the job's instruction.
const INPUTS: &str = "--- header_context (thesis / document) ---\n{\"plan\": 1}\n\n";

fn with_inputs() -> ChatRequest {
    let mut request = request();
    request.messages[0].content = format!("{INPUTS}Write it.");
    request.shared_prefix = Some(SharedPrefix {
        message: 0,
        bytes: INPUTS.len(),
    });
    request
}

/// Anthropic's prompt caching reference
/// (https://platform.claude.com/docs/en/build-with-claude/prompt-caching):
/// `cache_control: {"type": "ephemeral"}` on a block caches the prompt up to
/// and including it (system first, then messages); the usage reports
/// `cache_creation_input_tokens` and `cache_read_input_tokens` apart from
/// `input_tokens`, the total input being the three added up.
#[tokio::test]
async fn the_shared_prefix_is_marked_for_the_cache_and_cache_reads_and_writes_are_counted() {
    let server = serve(vec![event_stream(&[
        ("message_start", r#"{"type":"message_start","message":{"usage":{"input_tokens":50,"cache_creation_input_tokens":1200,"cache_read_input_tokens":2000,"output_tokens":1}}}"#),
        ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\"content\": \"Hi\"}"}}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ])])
    .await;
    let reply = client(&server.url)
        .chat(&with_inputs())
        .await
        .expect("reply");
    assert_eq!(
        (
            reply.input_tokens,
            reply.cached_input_tokens,
            reply.cache_write_input_tokens,
            reply.output_tokens,
        ),
        (3250, 2000, 1200, 9),
        "reads and writes are parts of the input"
    );
    let sent = server.requests.lock().expect("lock")[0].clone();
    let body: serde_json::Value =
        serde_json::from_str(&sent[sent.find("\r\n\r\n").expect("body") + 4..]).expect("json");
    let ephemeral = serde_json::json!({"type": "ephemeral"});
    assert_eq!(
        body["system"],
        serde_json::json!([{"type": "text", "text": "Be brief.", "cache_control": ephemeral}])
    );
    // The inputs end the cached prefix; the instruction, which differs from
    // job to job, follows unmarked; the continuation's turns stay text.
    assert_eq!(
        body["messages"][0]["content"],
        serde_json::json!([
            {"type": "text", "text": INPUTS, "cache_control": ephemeral},
            {"type": "text", "text": "Write it."},
        ])
    );
    assert_eq!(
        body["messages"][1]["content"],
        "{\"content\": \"one\"}\n\n{\"content\": \"two\"}"
    );
    assert_eq!(body["messages"][2]["content"], "Continue.");
    assert_eq!(sent.matches("cache_control").count(), 2, "{body}");
}

#[tokio::test]
async fn a_whole_message_counts_cache_writes_and_a_request_without_inputs_marks_only_the_system() {
    let whole = r#"{"type":"message","content":[{"type":"text","text":"{\"content\": \"ok\"}"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"cache_creation_input_tokens":40,"output_tokens":3}}"#;
    let server = serve(vec![http("200 OK", "application/json", "", whole)]).await;
    let reply = client(&server.url).chat(&request()).await.expect("reply");
    assert_eq!(
        (
            reply.input_tokens,
            reply.cached_input_tokens,
            reply.cache_write_input_tokens
        ),
        (45, 0, 40)
    );
    let sent = server.requests.lock().expect("lock")[0].clone();
    let body: serde_json::Value =
        serde_json::from_str(&sent[sent.find("\r\n\r\n").expect("body") + 4..]).expect("json");
    assert_eq!(body["messages"][0]["content"], "Write it.");
    assert_eq!(sent.matches("cache_control").count(), 1, "{body}");
}
