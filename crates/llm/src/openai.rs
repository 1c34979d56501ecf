//! HTTP model providers: OpenAI-compatible chat completions (OpenAI, vLLM,
//! llama.cpp server, Ollama, OpenRouter) and Anthropic messages, one client
//! with a wire dialect each. Streams internally and buffers the reply, so a long generation
//! is never cut by an idle timeout; retries 429/5xx/connection errors with
//! exponential back-off and jitter, honouring `Retry-After`; never retries a
//! request that cannot succeed.
//!
//! A request's `response_schema` goes out in the model's structured-output
//! dialect (`response_format`, or a forced `reply` tool for Anthropic, whose
//! streamed input is the reply's text). Continuation fits constrained
//! decoding: a reply cut off at `max_tokens` is still a cut-off JSON text
//! (finish reason `Length`), and the executor continues it with a new turn
//! whose schema requires only the keys the chunks so far lack (core
//! `structured::continuation_schema`),
//! whose keys `shape::merge_chunks` appends to the cut-off chunk's.

use crate::{ChatResponse, FinishReason, LlmError, ModelProvider};
use async_trait::async_trait;
use dialectic_core::prompt::{ChatRequest, Role};
use dialectic_core::secrets::redacted;
use dialectic_core::structured::{StructuredOutput, is_strict};
use dialectic_core::tokens::estimate_tokens;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Which wire format the endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    #[default]
    OpenAi,
    Anthropic,
}

#[derive(Clone)]
pub struct OpenAiSettings {
    pub dialect: Dialect,
    /// e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub organization: Option<String>,
    pub connect_timeout: Duration,
    /// Longest wait for the first byte of the reply.
    pub first_byte_timeout: Duration,
    /// Longest a whole call may take, streaming included.
    pub total_timeout: Duration,
    pub max_retries: u32,
    pub retry_base: Duration,
    /// How the server is asked for a reply of the request's schema.
    pub structured_output: StructuredOutput,
}

impl Default for OpenAiSettings {
    fn default() -> Self {
        Self {
            dialect: Dialect::OpenAi,
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            organization: None,
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
            total_timeout: Duration::from_secs(600),
            max_retries: 3,
            retry_base: Duration::from_millis(500),
            structured_output: StructuredOutput::default(),
        }
    }
}

impl std::fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("dialect", &self.dialect)
            .field("base_url", &self.base_url)
            .field("api_key", &redacted(self.api_key.as_deref()))
            .field("organization", &self.organization)
            .field("connect_timeout", &self.connect_timeout)
            .field("first_byte_timeout", &self.first_byte_timeout)
            .field("total_timeout", &self.total_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base", &self.retry_base)
            .field("structured_output", &self.structured_output)
            .finish()
    }
}

pub struct OpenAiProvider {
    http: reqwest::Client,
    settings: OpenAiSettings,
}

/// The request body in the endpoint's dialect, asking for the request's
/// `response_schema` (when it has one) the way `structured` says.
pub fn request_body(
    dialect: Dialect,
    structured: StructuredOutput,
    request: &ChatRequest,
) -> Value {
    match dialect {
        Dialect::OpenAi => {
            let mut body = openai_body(request);
            if let Some(format) = response_format(structured, request) {
                body["response_format"] = format;
            }
            body
        }
        Dialect::Anthropic => {
            let mut body = anthropic_body(request);
            if let Some(schema) = &request.response_schema
                && structured != StructuredOutput::None
            {
                force_reply_tool(&mut body, schema);
            }
            body
        }
    }
}

/// An OpenAI-compatible server's `response_format` for the request's schema.
fn response_format(structured: StructuredOutput, request: &ChatRequest) -> Option<Value> {
    let schema = request.response_schema.as_ref()?;
    match structured {
        StructuredOutput::JsonSchema => Some(json!({
            "type": "json_schema",
            "json_schema": {
                "name": schema_name(&request.output_type),
                "schema": schema,
                // Strict with a schema that does not meet it is refused outright.
                "strict": is_strict(schema),
            },
        })),
        StructuredOutput::JsonObjectSchema => {
            Some(json!({"type": "json_object", "schema": schema}))
        }
        StructuredOutput::JsonObject => Some(json!({"type": "json_object"})),
        StructuredOutput::None => None,
    }
}

/// The schema's name as OpenAI accepts it: 1–64 of `[A-Za-z0-9_-]`.
fn schema_name(output_type: &str) -> String {
    let name: String = output_type
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        .take(64)
        .collect();
    if name.is_empty() {
        REPLY_TOOL.to_string()
    } else {
        name
    }
}

/// The tool an Anthropic model must call; its input is the reply.
const REPLY_TOOL: &str = "reply";

/// Anthropic has no response format: the schema becomes the input of a tool
/// the model is made to call.
fn force_reply_tool(body: &mut Value, schema: &Value) {
    body["tools"] = json!([{
        "name": REPLY_TOOL,
        "description": "Reply with the document",
        "input_schema": schema,
    }]);
    body["tool_choice"] = json!({"type": "tool", "name": REPLY_TOOL});
}

/// Anthropic: the system instruction on its own, turns strictly alternating
/// (consecutive turns of one role, like a continuation's chunks, are joined).
fn anthropic_body(request: &ChatRequest) -> serde_json::Value {
    let mut turns: Vec<(&str, String)> = Vec::new();
    let mut system = request.system_instruction.clone().unwrap_or_default();
    for m in &request.messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(&m.content);
                continue;
            }
        };
        match turns.last_mut() {
            Some((last, text)) if *last == role => {
                text.push_str("\n\n");
                text.push_str(&m.content);
            }
            _ => turns.push((role, m.content.clone())),
        }
    }
    let mut body = serde_json::json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": turns
            .into_iter()
            .map(|(role, content)| serde_json::json!({"role": role, "content": content}))
            .collect::<Vec<_>>(),
        "stream": true,
    });
    if !system.is_empty() {
        body["system"] = serde_json::Value::String(system);
    }
    with_temperature(body, request)
}

/// The step's temperature, when its recipe sets one (else the provider's default).
fn with_temperature(mut body: serde_json::Value, request: &ChatRequest) -> serde_json::Value {
    if let Some(temperature) = request.temperature {
        body["temperature"] = serde_json::json!(temperature);
    }
    body
}

/// OpenAI: system instruction first, then the conversation in order.
fn openai_body(request: &ChatRequest) -> serde_json::Value {
    let mut messages = Vec::new();
    if let Some(system) = &request.system_instruction {
        messages.push(serde_json::json!({"role": "system", "content": system}));
    }
    for m in &request.messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        };
        messages.push(serde_json::json!({"role": role, "content": m.content}));
    }
    let body = serde_json::json!({
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    with_temperature(body, request)
}

pub fn finish_reason(value: Option<&str>) -> FinishReason {
    match value {
        // A forced reply tool ends the turn by calling it.
        Some("stop") | Some("end_turn") | Some("stop_sequence") | Some("tool_use") => {
            FinishReason::Stop
        }
        Some("length") | Some("max_tokens") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        // A stream that ended without saying why did not finish cleanly.
        _ => FinishReason::Error,
    }
}

/// What the reply said, whichever way it came.
#[derive(Debug, Default)]
struct Collected {
    text: String,
    finish: Option<String>,
    usage: Option<(u64, u64)>,
    /// Anthropic reports input tokens at the start and output tokens at the end.
    input: Option<u64>,
    raw_events: Vec<serde_json::Value>,
}

impl Collected {
    fn absorb(&mut self, event: serde_json::Value) {
        match event["type"].as_str() {
            // Anthropic, streamed and whole.
            Some("message_start") => {
                self.input = event["message"]["usage"]["input_tokens"].as_u64();
            }
            Some("content_block_delta") => {
                // A reply tool's input streams as JSON text.
                let delta = &event["delta"];
                if let Some(text) = delta["text"].as_str().or(delta["partial_json"].as_str()) {
                    self.text.push_str(text);
                }
            }
            Some("message_delta") => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.finish = Some(reason.to_string());
                }
                if let (Some(input), Some(output)) =
                    (self.input, event["usage"]["output_tokens"].as_u64())
                {
                    self.usage = Some((input, output));
                }
            }
            Some("message") => {
                for block in event["content"].as_array().into_iter().flatten() {
                    if let Some(text) = block["text"].as_str() {
                        self.text.push_str(text);
                    } else if block["type"] == "tool_use" {
                        self.text.push_str(&block["input"].to_string());
                    }
                }
                self.finish = event["stop_reason"].as_str().map(str::to_string);
                if let (Some(input), Some(output)) = (
                    event["usage"]["input_tokens"].as_u64(),
                    event["usage"]["output_tokens"].as_u64(),
                ) {
                    self.usage = Some((input, output));
                }
            }
            _ => {}
        }
        if let Some(choice) = event["choices"].get(0) {
            if let Some(delta) = choice["delta"]["content"].as_str() {
                self.text.push_str(delta);
            } else if let Some(whole) = choice["message"]["content"].as_str() {
                self.text.push_str(whole);
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish = Some(reason.to_string());
            }
        }
        if let (Some(input), Some(output)) = (
            event["usage"]["prompt_tokens"].as_u64(),
            event["usage"]["completion_tokens"].as_u64(),
        ) {
            self.usage = Some((input, output));
        }
        self.raw_events.push(event);
    }
}

/// Why a single attempt failed, and whether another may succeed.
enum AttemptFailure {
    Retry {
        message: String,
        after: Option<Duration>,
    },
    Fatal(LlmError),
}

/// Replaces every occurrence of `secret` with a marker.
fn redact(text: &str, secret: Option<&str>) -> String {
    match secret.filter(|s| !s.is_empty()) {
        Some(secret) => text.replace(secret, "[redacted key]"),
        None => text.to_string(),
    }
}

fn classify(
    status: reqwest::StatusCode,
    body: &str,
    retry_after: Option<Duration>,
) -> AttemptFailure {
    let detail: String = body.chars().take(300).collect();
    match status.as_u16() {
        429 if body.contains("insufficient_quota") => AttemptFailure::Fatal(LlmError::Permanent(
            format!("provider quota exhausted: {detail}"),
        )),
        429 | 408 | 409 => AttemptFailure::Retry {
            message: format!("provider throttled ({status}): {detail}"),
            after: retry_after,
        },
        401 | 403 => AttemptFailure::Fatal(LlmError::Permanent(format!(
            "provider authentication failed ({status}): {detail}"
        ))),
        400 | 413 | 422 if body.contains("context_length") || body.contains("maximum context") => {
            AttemptFailure::Fatal(LlmError::Permanent(format!("context too long: {detail}")))
        }
        400..=499 => AttemptFailure::Fatal(LlmError::Permanent(format!(
            "provider rejected the request ({status}): {detail}"
        ))),
        _ => AttemptFailure::Retry {
            message: format!("provider error ({status}): {detail}"),
            after: retry_after,
        },
    }
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<f64>()
        .ok()
        .map(|secs| Duration::from_secs_f64(secs.clamp(0.0, 300.0)))
}

impl OpenAiProvider {
    pub fn new(settings: OpenAiSettings) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.total_timeout)
            .build()
            .map_err(|e| LlmError::Permanent(format!("HTTP client: {e}")))?;
        Ok(Self { http, settings })
    }

    async fn attempt(&self, body: &serde_json::Value) -> Result<Collected, AttemptFailure> {
        let base = self.settings.base_url.trim_end_matches('/');
        let mut call = match self.settings.dialect {
            Dialect::OpenAi => {
                let mut call = self
                    .http
                    .post(format!("{base}/chat/completions"))
                    .json(body);
                if let Some(key) = &self.settings.api_key {
                    call = call.bearer_auth(key);
                }
                call
            }
            Dialect::Anthropic => {
                let mut call = self
                    .http
                    .post(format!("{base}/messages"))
                    .header("anthropic-version", "2023-06-01")
                    .json(body);
                if let Some(key) = &self.settings.api_key {
                    call = call.header("x-api-key", key);
                }
                call
            }
        };
        if let Some(org) = &self.settings.organization {
            call = call.header("OpenAI-Organization", org);
        }
        let response = tokio::time::timeout(self.settings.first_byte_timeout, call.send())
            .await
            .map_err(|_| AttemptFailure::Retry {
                message: "no reply before the first-byte timeout".into(),
                after: None,
            })?
            .map_err(|e| AttemptFailure::Retry {
                message: format!("connection: {e}"),
                after: None,
            })?;
        let status = response.status();
        if !status.is_success() {
            let after = retry_after(response.headers());
            let body = response.text().await.unwrap_or_default();
            // Some providers echo the key they were sent in their refusal;
            // the body goes into job errors and logs, the key must not.
            let body = redact(&body, self.settings.api_key.as_deref());
            return Err(classify(status, &body, after));
        }
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !streamed {
            let text = response.text().await.map_err(|e| AttemptFailure::Retry {
                message: format!("reading the reply: {e}"),
                after: None,
            })?;
            let value: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| AttemptFailure::Retry {
                    message: format!("the provider's reply is not JSON: {e}"),
                    after: None,
                })?;
            let mut collected = Collected::default();
            collected.absorb(value);
            return Ok(collected);
        }
        read_stream(response).await
    }
}

/// Collects a server-sent event stream up to its end marker.
async fn read_stream(response: reqwest::Response) -> Result<Collected, AttemptFailure> {
    let mut collected = Collected::default();
    let mut bytes = response.bytes_stream();
    let mut lines = Lines::default();
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.map_err(|e| AttemptFailure::Retry {
            message: format!("the stream broke: {e}"),
            after: None,
        })?;
        lines.push(&chunk);
        while let Some(line) = lines.next_line() {
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]"
                || data.contains("\"type\":\"message_stop\"")
                || data.contains("\"type\": \"message_stop\"")
            {
                return Ok(collected);
            }
            match serde_json::from_str(data) {
                Ok(event) => collected.absorb(event),
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable stream event"),
            }
        }
    }
    // The stream ended without [DONE]: keep what came; the finish reason says it is unfinished.
    Ok(collected)
}

/// A byte stream cut into lines, each decoded only once whole: a network
/// chunk may end inside a multi-byte character.
#[derive(Default)]
struct Lines {
    pending: Vec<u8>,
}

impl Lines {
    fn push(&mut self, chunk: &[u8]) {
        self.pending.extend_from_slice(chunk);
    }

    /// The next whole line, trimmed.
    fn next_line(&mut self) -> Option<String> {
        let end = self.pending.iter().position(|b| *b == b'\n')?;
        let line: Vec<u8> = self.pending.drain(..=end).collect();
        Some(String::from_utf8_lossy(&line).trim().to_string())
    }
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        use backon::Retryable;
        let body = request_body(
            self.settings.dialect,
            self.settings.structured_output,
            request,
        );
        let base = self.settings.retry_base;
        // retry_base, doubling up to 256 times it, each wait stretched at
        // random by up to as much again so replicas throttled together do not
        // come back together.
        let backoff = backon::ExponentialBuilder::new()
            .with_min_delay(base)
            .with_factor(2.0)
            .with_max_delay(base.saturating_mul(1 << MAX_DOUBLINGS))
            .with_max_times(self.settings.max_retries as usize)
            .with_jitter();
        // Retries so far, shared by `adjust` and `notify` (the future must be Send).
        let retries = AtomicU32::new(0);
        let outcome = (|| self.attempt(&body))
            .retry(backoff)
            .when(|failure| matches!(failure, AttemptFailure::Retry { .. }))
            .adjust(|failure, delay| {
                // None: out of retries. Retry-After is the least wait the
                // server asked for; this retry's share of jitter comes on top.
                let delay = delay?;
                let after = match failure {
                    AttemptFailure::Retry { after, .. } => *after,
                    AttemptFailure::Fatal(_) => None,
                };
                Some(match after {
                    Some(after) => {
                        let unjittered =
                            base.saturating_mul(1 << retries.load(Relaxed).min(MAX_DOUBLINGS));
                        after + delay.saturating_sub(unjittered)
                    }
                    None => delay,
                })
            })
            .notify(|failure, wait| {
                let attempt = retries.fetch_add(1, Relaxed);
                if let AttemptFailure::Retry { message, .. } = failure {
                    tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, reason = %message, "retrying model call");
                }
            })
            .await;
        let collected = match outcome {
            Ok(collected) => collected,
            Err(AttemptFailure::Fatal(e)) => return Err(e),
            Err(AttemptFailure::Retry { message, .. }) => {
                return Err(LlmError::Transient(format!(
                    "gave up after {} attempts: {message}",
                    self.settings.max_retries + 1
                )));
            }
        };
        let (input_tokens, output_tokens, usage_estimated) = match collected.usage {
            Some((i, o)) => (i, o, false),
            None => (
                request
                    .messages
                    .iter()
                    .map(|m| estimate_tokens(&m.content))
                    .sum(),
                estimate_tokens(&collected.text),
                true,
            ),
        };
        Ok(ChatResponse {
            finish_reason: finish_reason(collected.finish.as_deref()),
            input_tokens,
            output_tokens,
            usage_estimated,
            raw: serde_json::Value::Array(collected.raw_events),
            text: collected.text,
        })
    }
}

/// The back-off doubles at most this many times (256 × `retry_base`).
const MAX_DOUBLINGS: u32 = 8;

#[cfg(test)]
mod tests {
    use super::*;

    fn request(temperature: Option<f64>) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system_instruction: Some("be brief".into()),
            messages: vec![dialectic_core::prompt::Message::user("hi".to_string())],
            max_tokens: 300,
            output_type: "business_case".into(),
            output_hints: vec![],
            required_keys: vec![],
            temperature,
            ..Default::default()
        }
    }

    #[test]
    fn a_steps_temperature_reaches_both_dialects_only_when_set() {
        for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
            let body = request_body(dialect, StructuredOutput::default(), &request(Some(0.2)));
            assert_eq!(body["temperature"], serde_json::json!(0.2), "{dialect:?}");
            assert_eq!(body["max_tokens"], serde_json::json!(300));
            let body = request_body(dialect, StructuredOutput::default(), &request(None));
            assert!(body.get("temperature").is_none(), "{dialect:?}: {body}");
        }
    }

    fn with_schema(schema: Value) -> ChatRequest {
        ChatRequest {
            response_schema: Some(schema),
            ..request(None)
        }
    }

    fn open_schema() -> Value {
        json!({"type": "object", "properties": {"content": {}}, "required": ["content"]})
    }

    fn strict_schema() -> Value {
        json!({
            "type": "object",
            "properties": {"content": {"type": "string"}},
            "required": ["content"],
            "additionalProperties": false,
        })
    }

    #[test]
    fn json_schema_names_the_output_and_asks_strict_only_of_a_strict_schema() {
        for (schema, strict) in [(open_schema(), false), (strict_schema(), true)] {
            let body = request_body(
                Dialect::OpenAi,
                StructuredOutput::JsonSchema,
                &with_schema(schema.clone()),
            );
            assert_eq!(
                body["response_format"],
                json!({
                    "type": "json_schema",
                    "json_schema": {"name": "business_case", "schema": schema, "strict": strict},
                })
            );
            assert!(body.get("tools").is_none());
        }
    }

    #[test]
    fn the_other_openai_dialects_send_their_own_response_format() {
        let request = with_schema(open_schema());
        let format = |structured| request_body(Dialect::OpenAi, structured, &request);
        assert_eq!(
            format(StructuredOutput::JsonObjectSchema)["response_format"],
            json!({"type": "json_object", "schema": open_schema()})
        );
        assert_eq!(
            format(StructuredOutput::JsonObject)["response_format"],
            json!({"type": "json_object"})
        );
        let none = format(StructuredOutput::None);
        assert!(none.get("response_format").is_none(), "{none}");
    }

    #[test]
    fn anthropic_gets_the_schema_as_a_forced_reply_tool_unless_none() {
        let request = with_schema(open_schema());
        for structured in [
            StructuredOutput::JsonSchema,
            StructuredOutput::JsonObjectSchema,
            StructuredOutput::JsonObject,
        ] {
            let body = request_body(Dialect::Anthropic, structured, &request);
            assert_eq!(
                body["tools"],
                json!([{
                    "name": "reply",
                    "description": "Reply with the document",
                    "input_schema": open_schema(),
                }]),
                "{structured}"
            );
            assert_eq!(
                body["tool_choice"],
                json!({"type": "tool", "name": "reply"})
            );
            assert!(body.get("response_format").is_none());
        }
        let body = request_body(Dialect::Anthropic, StructuredOutput::None, &request);
        assert!(
            body.get("tools").is_none() && body.get("tool_choice").is_none(),
            "{body}"
        );
    }

    #[test]
    fn a_request_without_a_schema_asks_for_no_structure() {
        for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
            for structured in StructuredOutput::ALL {
                let body = request_body(dialect, structured, &request(None));
                for key in ["response_format", "tools", "tool_choice"] {
                    assert!(body.get(key).is_none(), "{dialect:?} {structured}: {body}");
                }
            }
        }
    }

    #[test]
    fn a_schema_name_keeps_what_openai_allows_and_is_never_empty() {
        assert_eq!(schema_name("business_case"), "business_case");
        assert_eq!(schema_name("Plan: §2.1 – risks"), "Plan21risks");
        assert_eq!(schema_name(&"a".repeat(80)).len(), 64);
        assert_eq!(schema_name("§ – ."), "reply");
        assert_eq!(schema_name(""), "reply");
    }
}
