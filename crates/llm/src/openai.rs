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
//!
//! The OpenAI dialect is today's Chat Completions API
//! (<https://platform.openai.com/docs/api-reference/chat/create>): the output
//! limit goes in `max_completion_tokens` (`max_tokens` is deprecated there,
//! and OpenAI's reasoning models refuse it) unless the model row asks for
//! `max_tokens`; a reasoning model gets no `temperature` or `top_p`, and its
//! row's `reasoning_effort`. A 400 that names a parameter the model does not
//! take fails for good, naming the parameter, the model and the fix.
//!
//! A provider is a stranger: every reply is read incrementally under
//! [`ReplyLimits`] (a line, the whole reply, the events kept, an error body),
//! and one over a cap fails for good as "reply too large", naming the model
//! and the cap, before it can pin a core or fill the pod's memory.

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
use std::time::{Duration, Instant};

/// Which wire format the endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    #[default]
    OpenAi,
    Anthropic,
}

/// The field an OpenAI-dialect request's output limit goes in (a model
/// row's `config.token_limit_param`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenLimitParam {
    /// Chat Completions' current field: OpenAI's reasoning models take no
    /// other.
    #[default]
    MaxCompletionTokens,
    /// The deprecated field, for a server that reads no other (the
    /// llama-cpp-python server ignores `max_completion_tokens`).
    MaxTokens,
}

impl TokenLimitParam {
    pub const ALL: [TokenLimitParam; 2] = [
        TokenLimitParam::MaxCompletionTokens,
        TokenLimitParam::MaxTokens,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            TokenLimitParam::MaxCompletionTokens => "max_completion_tokens",
            TokenLimitParam::MaxTokens => "max_tokens",
        }
    }

    /// A model row's `config.token_limit_param`: absent or null is the
    /// default; any other value is kept as the error, naming it.
    pub fn of_model_config(config: &Value) -> Result<Self, UnknownTokenLimitParam> {
        match config.get("token_limit_param") {
            None | Some(Value::Null) => Ok(Self::default()),
            Some(Value::String(name)) => Self::ALL
                .into_iter()
                .find(|p| p.as_str() == name.trim())
                .ok_or_else(|| UnknownTokenLimitParam(name.clone())),
            Some(other) => Err(UnknownTokenLimitParam(other.to_string())),
        }
    }
}

impl std::fmt::Display for TokenLimitParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown token_limit_param {0:?}: use max_completion_tokens (the default) or max_tokens")]
pub struct UnknownTokenLimitParam(pub String);

/// How much of a provider's reply the client holds before giving up on it
/// (`executor.max_reply_*`). Past any of them the call fails for good:
/// a reply that large is no document, and reading on would pin the executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyLimits {
    /// The longest line of a streamed reply, whole or still arriving.
    pub max_line_bytes: usize,
    /// The most bytes a reply's body may have, streamed or whole.
    pub max_reply_bytes: usize,
    /// The most events a streamed reply may have (each is kept for audit).
    pub max_events: usize,
    /// The most bytes of a refusal (a non-2xx status) read.
    pub max_error_body_bytes: usize,
}

impl ReplyLimits {
    pub const DEFAULT_MAX_LINE_BYTES: usize = 8 << 20;
    pub const DEFAULT_MAX_REPLY_BYTES: usize = 32 << 20;
    pub const DEFAULT_MAX_EVENTS: usize = 200_000;
    pub const DEFAULT_MAX_ERROR_BODY_BYTES: usize = 64 << 10;
}

impl Default for ReplyLimits {
    fn default() -> Self {
        Self {
            max_line_bytes: Self::DEFAULT_MAX_LINE_BYTES,
            max_reply_bytes: Self::DEFAULT_MAX_REPLY_BYTES,
            max_events: Self::DEFAULT_MAX_EVENTS,
            max_error_body_bytes: Self::DEFAULT_MAX_ERROR_BODY_BYTES,
        }
    }
}

/// Which of [`ReplyLimits`] a reply went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cap {
    Line,
    Reply,
    Events,
    ErrorBody,
}

impl Cap {
    fn of(self, limits: &ReplyLimits) -> usize {
        match self {
            Cap::Line => limits.max_line_bytes,
            Cap::Reply => limits.max_reply_bytes,
            Cap::Events => limits.max_events,
            Cap::ErrorBody => limits.max_error_body_bytes,
        }
    }

    /// The executor setting that raises it.
    fn setting(self) -> &'static str {
        match self {
            Cap::Line => "executor.max_reply_line_bytes",
            Cap::Reply => "executor.max_reply_bytes",
            Cap::Events => "executor.max_reply_events",
            Cap::ErrorBody => "executor.max_error_body_bytes",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Cap::Line => "a line of its streamed reply is longer than",
            Cap::Reply => "its reply is longer than",
            Cap::Events => "its streamed reply has more events than",
            Cap::ErrorBody => "its error reply is longer than",
        }
    }

    /// The permanent failure: naming the model, the cap and its setting.
    fn exceeded(self, model: &str, limits: &ReplyLimits) -> AttemptFailure {
        let cap = self.of(limits);
        let amount = match self {
            Cap::Events => format!("{cap} events"),
            _ => bytes_text(cap),
        };
        AttemptFailure::Fatal(LlmError::Permanent(format!(
            "reply too large: model {model:?}: {} the cap of {amount} ({}); the rest was not read",
            self.what(),
            self.setting(),
        )))
    }
}

/// `8 MiB (8388608 bytes)`, or plain bytes below a KiB or off a round size.
fn bytes_text(bytes: usize) -> String {
    let round = |unit: usize, name: &str| {
        (bytes >= unit && bytes.is_multiple_of(unit))
            .then(|| format!("{} {name} ({bytes} bytes)", bytes / unit))
    };
    round(1 << 20, "MiB")
        .or_else(|| round(1 << 10, "KiB"))
        .unwrap_or_else(|| format!("{bytes} bytes"))
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
    /// OpenAI dialect: the field the output limit goes in.
    pub token_limit_param: TokenLimitParam,
    /// OpenAI dialect: a reasoning model (the o-series, GPT-5), sent no
    /// `temperature` or `top_p`.
    pub reasoning: bool,
    /// OpenAI dialect: a reasoning model's `reasoning_effort`, as given.
    pub reasoning_effort: Option<String>,
    /// How much of a reply is read before it is refused as too large.
    pub limits: ReplyLimits,
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
            token_limit_param: TokenLimitParam::default(),
            reasoning: false,
            reasoning_effort: None,
            limits: ReplyLimits::default(),
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
            .field("token_limit_param", &self.token_limit_param)
            .field("reasoning", &self.reasoning)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("limits", &self.limits)
            .finish()
    }
}

pub struct OpenAiProvider {
    http: reqwest::Client,
    settings: OpenAiSettings,
}

/// The request body in the settings' dialect, asking for the request's
/// `response_schema` (when it has one) the way `structured_output` says.
pub fn request_body(settings: &OpenAiSettings, request: &ChatRequest) -> Value {
    let structured = settings.structured_output;
    match settings.dialect {
        Dialect::OpenAi => {
            let mut body = openai_body(settings, request);
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

/// Anthropic: the system instruction on its own, turns strictly alternating,
/// the shared prefix marked for the prompt cache.
fn anthropic_body(request: &ChatRequest) -> serde_json::Value {
    let Turns {
        system,
        turns,
        prefix_end,
    } = anthropic_turns(request);
    let messages: Vec<Value> = turns
        .into_iter()
        .enumerate()
        .map(|(i, (role, text))| {
            let content = match prefix_end {
                Some((turn, bytes)) if turn == i => cached_blocks(&text, bytes),
                _ => Value::String(text),
            };
            json!({"role": role, "content": content})
        })
        .collect();
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": true,
    });
    if !system.is_empty() {
        body["system"] = json!([cached_block(&system)]);
    }
    with_temperature(body, request)
}

/// A request as Anthropic takes it.
struct Turns {
    system: String,
    turns: Vec<(&'static str, String)>,
    /// (turn, bytes): where the request's shared prefix ends once joined.
    prefix_end: Option<(usize, usize)>,
}

/// System messages join the system instruction; consecutive turns of one
/// role (a continuation's chunks) are joined, as Anthropic wants turns
/// strictly alternating.
fn anthropic_turns(request: &ChatRequest) -> Turns {
    let mut turns: Vec<(&'static str, String)> = Vec::new();
    let mut system = request.system_instruction.clone().unwrap_or_default();
    let mut prefix_end = None;
    for (index, m) in request.messages.iter().enumerate() {
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
        let start = match turns.last_mut() {
            Some((last, text)) if *last == role => {
                text.push_str("\n\n");
                let start = text.len();
                text.push_str(&m.content);
                start
            }
            _ => {
                turns.push((role, m.content.clone()));
                0
            }
        };
        if let Some(prefix) = request.shared_prefix
            && prefix.message == index
            && prefix.bytes > 0
            && m.content.is_char_boundary(prefix.bytes)
        {
            prefix_end = Some((turns.len() - 1, start + prefix.bytes));
        }
    }
    Turns {
        system,
        turns,
        prefix_end,
    }
}

/// A text block that ends a prefix for Anthropic's prompt cache to keep:
/// the system instruction, or the inputs every job of a step shares
/// (https://platform.claude.com/docs/en/build-with-claude/prompt-caching;
/// a prefix under the model's minimum, 1,024 tokens or more, is just not
/// cached). The default 5-minute cache outlives a stage's jobs.
fn cached_block(text: &str) -> Value {
    json!({"type": "text", "text": text, "cache_control": {"type": "ephemeral"}})
}

/// A turn as content blocks: the shared prefix marked for the cache, then
/// the rest (left out when empty: Anthropic refuses empty text blocks).
fn cached_blocks(text: &str, bytes: usize) -> Value {
    let (shared, rest) = text.split_at(bytes.min(text.len()));
    let mut blocks = vec![cached_block(shared)];
    if !rest.is_empty() {
        blocks.push(json!({"type": "text", "text": rest}));
    }
    Value::Array(blocks)
}

/// The step's temperature, when its recipe sets one (else the provider's default).
fn with_temperature(mut body: serde_json::Value, request: &ChatRequest) -> serde_json::Value {
    if let Some(temperature) = request.temperature {
        body["temperature"] = serde_json::json!(temperature);
    }
    body
}

/// OpenAI: system instruction first, then the conversation in order; the
/// output limit in the row's field; a reasoning model without sampling
/// parameters (its `temperature` and `top_p` are refused) and with its
/// effort.
fn openai_body(settings: &OpenAiSettings, request: &ChatRequest) -> serde_json::Value {
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
    let mut body = serde_json::json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    body[settings.token_limit_param.as_str()] = json!(request.max_tokens);
    if !settings.reasoning {
        return with_temperature(body, request);
    }
    if let Some(effort) = settings.reasoning_effort.as_deref().map(str::trim)
        && !effort.is_empty()
    {
        body["reasoning_effort"] = json!(effort);
    }
    body
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
    /// Input tokens read from the provider's prompt cache (part of the input).
    cached: u64,
    /// Input tokens written to the provider's prompt cache (part of the input).
    cache_writes: u64,
    /// The model the provider says answered.
    model: Option<String>,
    /// When the first text of a streamed reply came, from the attempt's start.
    first_token: Option<Duration>,
    raw_events: Vec<serde_json::Value>,
}

impl Collected {
    fn absorb(&mut self, event: serde_json::Value) {
        if self.model.is_none() {
            // OpenAI names it on every chunk, Anthropic in `message_start`.
            self.model = event["model"]
                .as_str()
                .or(event["message"]["model"].as_str())
                .map(str::to_string);
        }
        match event["type"].as_str() {
            // Anthropic, streamed and whole.
            Some("message_start") => {
                let usage = &event["message"]["usage"];
                self.input = usage["input_tokens"]
                    .as_u64()
                    .map(|i| self.anthropic_input(i, usage));
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
                    self.usage = Some((self.anthropic_input(input, &event["usage"]), output));
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
            output_tokens(&event["usage"]),
        ) {
            self.usage = Some((input, output));
            self.cached = event["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0);
        }
        self.raw_events.push(event);
    }
}

impl Collected {
    /// A streamed event; the first that brings text sets the time to first token.
    fn absorb_streamed(&mut self, event: serde_json::Value, started: Instant) {
        let before = self.text.len();
        self.absorb(event);
        if self.first_token.is_none() && self.text.len() > before {
            self.first_token = Some(started.elapsed());
        }
    }

    /// Anthropic counts prompt-cache reads and writes apart from
    /// `input_tokens` (its total input is the three added up:
    /// https://platform.claude.com/docs/en/build-with-claude/prompt-caching);
    /// they are input the call sent, so they are added to it, and kept to be
    /// priced at their own rates.
    fn anthropic_input(&mut self, input_tokens: u64, usage: &Value) -> u64 {
        let count = |key: &str| usage[key].as_u64().unwrap_or(0);
        self.cached = count("cache_read_input_tokens");
        self.cache_writes = count("cache_creation_input_tokens");
        input_tokens
            .saturating_add(self.cached)
            .saturating_add(self.cache_writes)
    }
}

/// An OpenAI usage object's output tokens, reasoning included: Chat
/// Completions counts a reasoning model's hidden reasoning in
/// `completion_tokens` and breaks it out in
/// `completion_tokens_details.reasoning_tokens`; a server that reports more
/// reasoning than completion tokens counts them apart, and both are billed.
fn output_tokens(usage: &Value) -> Option<u64> {
    let completion = usage["completion_tokens"].as_u64()?;
    let reasoning = usage["completion_tokens_details"]["reasoning_tokens"]
        .as_u64()
        .unwrap_or(0);
    Some(if reasoning > completion {
        completion.saturating_add(reasoning)
    } else {
        completion
    })
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
    model: &str,
    status: reqwest::StatusCode,
    body: &str,
    retry_after: Option<Duration>,
) -> AttemptFailure {
    let detail: String = body.chars().take(300).collect();
    if matches!(status.as_u16(), 400 | 422)
        && let Some(param) = unsupported_parameter(body)
    {
        return AttemptFailure::Fatal(LlmError::Permanent(format!(
            "model {model:?} does not take the parameter {param:?}{}; the provider said ({status}): {detail}",
            parameter_fix(&param),
        )));
    }
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

/// The parameter an OpenAI-style refusal names as one the model does not
/// take. The API reference's error object
/// (<https://platform.openai.com/docs/guides/error-codes>) says so with
/// `code` `unsupported_parameter` (a field the model never takes, e.g.
/// `max_tokens` on a reasoning model) or `unsupported_value` (a value it
/// refuses, e.g. any `temperature` but the default), and names the field in
/// `param`; a server that leaves `param` out still quotes it in the message
/// ("Unsupported parameter: 'max_tokens' is not supported with this model").
fn unsupported_parameter(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error")?;
    let code = error["code"].as_str().unwrap_or_default();
    let message = error["message"].as_str().unwrap_or_default();
    let unsupported = matches!(code, "unsupported_parameter" | "unsupported_value")
        || message.starts_with("Unsupported parameter")
        || message.starts_with("Unsupported value");
    if !unsupported {
        return None;
    }
    let quoted = || message.split('\'').nth(1).map(str::to_string);
    error["param"]
        .as_str()
        .map(str::to_string)
        .or_else(quoted)
        .filter(|p| !p.is_empty() && p.len() <= 100)
}

/// What to change in the model's registration so the parameter is not sent.
fn parameter_fix(param: &str) -> &'static str {
    match param {
        "max_tokens" => {
            " (it reads max_completion_tokens: register it again without --token-limit-param max_tokens)"
        }
        "max_completion_tokens" => " (register it again with --token-limit-param max_tokens)",
        "temperature" | "top_p" => {
            " (a reasoning model takes no sampling parameters: register it again with --reasoning)"
        }
        "reasoning_effort" => " (register it again without --reasoning-effort)",
        _ => "",
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

    async fn attempt(
        &self,
        model: &str,
        body: &serde_json::Value,
    ) -> Result<Collected, AttemptFailure> {
        let started = Instant::now();
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
        let limits = &self.settings.limits;
        let status = response.status();
        if !status.is_success() {
            let after = retry_after(response.headers());
            let body = match read_capped(response, limits.max_error_body_bytes).await {
                Ok(body) => String::from_utf8_lossy(&body).into_owned(),
                Err(Unread::TooLarge) => return Err(Cap::ErrorBody.exceeded(model, limits)),
                // The refusal is what matters; its unreadable body says nothing.
                Err(Unread::Broken(_)) => String::new(),
            };
            // Some providers echo the key they were sent in their refusal;
            // the body goes into job errors and logs, the key must not.
            let body = redact(&body, self.settings.api_key.as_deref());
            return Err(classify(model, status, &body, after));
        }
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !streamed {
            let text = match read_capped(response, limits.max_reply_bytes).await {
                Ok(text) => text,
                Err(Unread::TooLarge) => return Err(Cap::Reply.exceeded(model, limits)),
                Err(Unread::Broken(e)) => {
                    return Err(AttemptFailure::Retry {
                        message: format!("reading the reply: {e}"),
                        after: None,
                    });
                }
            };
            let value: serde_json::Value =
                serde_json::from_slice(&text).map_err(|e| AttemptFailure::Retry {
                    message: format!("the provider's reply is not JSON: {e}"),
                    after: None,
                })?;
            let mut collected = Collected::default();
            collected.absorb(value);
            return Ok(collected);
        }
        read_stream(response, model, limits, started).await
    }
}

/// Why a body was not read whole.
enum Unread {
    /// It is, or says it is, longer than the cap; nothing past the cap was read.
    TooLarge,
    Broken(reqwest::Error),
}

/// A whole body, read chunk by chunk and refused as soon as it is longer
/// than `cap` bytes (or its `Content-Length` says it will be), never held
/// past the cap.
async fn read_capped(response: reqwest::Response, cap: usize) -> Result<Vec<u8>, Unread> {
    let announced = response.content_length();
    if announced.is_some_and(|n| n > cap as u64) {
        return Err(Unread::TooLarge);
    }
    let mut body = Vec::with_capacity(announced.map_or(0, |n| n as usize).min(cap));
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(Unread::Broken)?;
        if chunk.len() > cap - body.len() {
            return Err(Unread::TooLarge);
        }
        // Doubling, but never past the cap: a body just under it must not
        // hold twice its size.
        let needed = body.len() + chunk.len();
        if needed > body.capacity() {
            let target = needed.max(body.capacity().saturating_mul(2)).min(cap);
            body.reserve_exact(target - body.len());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Collects a server-sent event stream up to its end marker, holding at
/// most `limits` of it.
async fn read_stream(
    response: reqwest::Response,
    model: &str,
    limits: &ReplyLimits,
    started: Instant,
) -> Result<Collected, AttemptFailure> {
    let mut collected = Collected::default();
    let mut bytes = response.bytes_stream();
    let mut lines = Lines::new(limits.max_line_bytes);
    let mut received = 0usize;
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.map_err(|e| AttemptFailure::Retry {
            message: format!("the stream broke: {e}"),
            after: None,
        })?;
        received = received.saturating_add(chunk.len());
        if received > limits.max_reply_bytes {
            return Err(Cap::Reply.exceeded(model, limits));
        }
        lines.push(&chunk);
        while let Some(line) = lines
            .next_line()
            .map_err(|LineTooLong| Cap::Line.exceeded(model, limits))?
        {
            // Only data lines are decoded: blank lines, comments and
            // `event:` lines cost a scan and nothing more.
            let Some(data) = line.trim_ascii().strip_prefix(b"data:") else {
                continue;
            };
            let data = String::from_utf8_lossy(data);
            let data = data.trim();
            if data == "[DONE]"
                || data.contains("\"type\":\"message_stop\"")
                || data.contains("\"type\": \"message_stop\"")
            {
                return Ok(collected);
            }
            if collected.raw_events.len() >= limits.max_events {
                return Err(Cap::Events.exceeded(model, limits));
            }
            match serde_json::from_str(data) {
                Ok(event) => collected.absorb_streamed(event, started),
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable stream event"),
            }
        }
    }
    // The stream ended without [DONE]: keep what came; the finish reason says it is unfinished.
    Ok(collected)
}

/// A line longer than its cap, whole or still arriving.
struct LineTooLong;

/// A byte stream cut into lines, each decoded only once whole: a network
/// chunk may end inside a multi-byte character. Linear in the bytes pushed:
/// each byte is scanned for a newline once, however many chunks a line
/// takes, and a line's bytes are dropped once, when the next chunk comes.
struct Lines {
    buffer: Vec<u8>,
    /// Where the line being assembled starts in `buffer`.
    start: usize,
    /// `buffer[start..scanned]` is known to hold no newline.
    scanned: usize,
    /// The longest line held, whole or not.
    max_line: usize,
    /// Bytes looked at for a newline, all told.
    #[cfg(test)]
    examined: usize,
}

impl Lines {
    fn new(max_line: usize) -> Self {
        Self {
            buffer: Vec::new(),
            start: 0,
            scanned: 0,
            max_line,
            #[cfg(test)]
            examined: 0,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        // The lines already taken go; what is left is the line being
        // assembled, which is at most `max_line` bytes.
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buffer.extend_from_slice(chunk);
    }

    /// The next whole line, without its newline; an error once the line
    /// being assembled is longer than the cap.
    fn next_line(&mut self) -> Result<Option<&[u8]>, LineTooLong> {
        let found = self.buffer[self.scanned..].iter().position(|b| *b == b'\n');
        #[cfg(test)]
        {
            self.examined += found.map_or(self.buffer.len() - self.scanned, |at| at + 1);
        }
        let Some(offset) = found else {
            self.scanned = self.buffer.len();
            return if self.scanned - self.start > self.max_line {
                Err(LineTooLong)
            } else {
                Ok(None)
            };
        };
        let end = self.scanned + offset;
        if end - self.start > self.max_line {
            return Err(LineTooLong);
        }
        let start = self.start;
        self.start = end + 1;
        self.scanned = self.start;
        Ok(Some(&self.buffer[start..end]))
    }
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        use backon::Retryable;
        let body = request_body(&self.settings, request);
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
        let outcome = (|| self.attempt(&request.model, &body))
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
            // Estimated counts know nothing of a cache.
            cached_input_tokens: if usage_estimated {
                0
            } else {
                collected.cached.min(input_tokens)
            },
            cache_write_input_tokens: if usage_estimated {
                0
            } else {
                collected
                    .cache_writes
                    .min(input_tokens - collected.cached.min(input_tokens))
            },
            usage_estimated,
            time_to_first_token: collected.first_token,
            response_model: collected.model,
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

    /// Settings of `dialect` asking for structure as `structured` does.
    fn wire(dialect: Dialect, structured: StructuredOutput) -> OpenAiSettings {
        OpenAiSettings {
            dialect,
            structured_output: structured,
            ..OpenAiSettings::default()
        }
    }

    #[test]
    fn a_steps_temperature_reaches_both_dialects_only_when_set() {
        for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
            let settings = wire(dialect, StructuredOutput::default());
            let body = request_body(&settings, &request(Some(0.2)));
            assert_eq!(body["temperature"], serde_json::json!(0.2), "{dialect:?}");
            let body = request_body(&settings, &request(None));
            assert!(body.get("temperature").is_none(), "{dialect:?}: {body}");
        }
    }

    #[test]
    fn the_output_limit_goes_in_max_completion_tokens_unless_the_row_says_max_tokens() {
        let openai = |token_limit_param| OpenAiSettings {
            token_limit_param,
            ..OpenAiSettings::default()
        };
        let body = request_body(&openai(TokenLimitParam::default()), &request(None));
        assert_eq!(body["max_completion_tokens"], json!(300));
        assert!(body.get("max_tokens").is_none(), "{body}");
        let body = request_body(&openai(TokenLimitParam::MaxTokens), &request(None));
        assert_eq!(body["max_tokens"], json!(300));
        assert!(body.get("max_completion_tokens").is_none(), "{body}");
        // Anthropic's Messages API has `max_tokens` only, and requires it.
        for token_limit_param in TokenLimitParam::ALL {
            let body = request_body(
                &OpenAiSettings {
                    dialect: Dialect::Anthropic,
                    ..openai(token_limit_param)
                },
                &request(None),
            );
            assert_eq!(body["max_tokens"], json!(300));
            assert!(body.get("max_completion_tokens").is_none(), "{body}");
        }
    }

    #[test]
    fn a_reasoning_model_gets_no_sampling_parameters_and_its_effort() {
        let reasoning = |effort: Option<&str>| OpenAiSettings {
            reasoning: true,
            reasoning_effort: effort.map(str::to_string),
            ..OpenAiSettings::default()
        };
        let body = request_body(&reasoning(Some("low")), &request(Some(0.2)));
        assert!(body.get("temperature").is_none(), "{body}");
        assert!(body.get("top_p").is_none(), "{body}");
        assert_eq!(body["reasoning_effort"], "low");
        assert_eq!(body["max_completion_tokens"], json!(300));
        let body = request_body(&reasoning(None), &request(Some(0.2)));
        assert!(body.get("reasoning_effort").is_none(), "{body}");
        assert!(body.get("temperature").is_none(), "{body}");
        // Only a reasoning model is sent an effort.
        let body = request_body(
            &OpenAiSettings {
                reasoning_effort: Some("high".into()),
                ..OpenAiSettings::default()
            },
            &request(Some(0.2)),
        );
        assert!(body.get("reasoning_effort").is_none(), "{body}");
        assert_eq!(body["temperature"], json!(0.2));
    }

    #[test]
    fn a_rows_token_limit_param_is_read_and_an_unknown_one_named() {
        let of = |config: Value| TokenLimitParam::of_model_config(&config);
        assert_eq!(of(json!({})), Ok(TokenLimitParam::MaxCompletionTokens));
        assert_eq!(
            of(json!({"token_limit_param": null})),
            Ok(TokenLimitParam::MaxCompletionTokens)
        );
        assert_eq!(
            of(json!({"token_limit_param": "max_tokens"})),
            Ok(TokenLimitParam::MaxTokens)
        );
        assert_eq!(
            of(json!({"token_limit_param": "max_completion_tokens"})),
            Ok(TokenLimitParam::MaxCompletionTokens)
        );
        let unknown = of(json!({"token_limit_param": "n_predict"})).expect_err("unknown");
        assert!(unknown.to_string().contains("\"n_predict\""), "{unknown}");
        assert!(of(json!({"token_limit_param": 3})).is_err());
    }

    #[test]
    fn prompt_cache_reads_are_counted_as_cached_input() {
        // OpenAI: cached_tokens are a part of prompt_tokens.
        let mut openai = Collected::default();
        openai.absorb(json!({"choices": [], "usage": {"prompt_tokens": 2006,
            "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1920}}}));
        assert_eq!((openai.usage, openai.cached), (Some((2006, 300)), 1920));
        // Anthropic: cache reads are apart from input_tokens, so added to them.
        let mut anthropic = Collected::default();
        anthropic.absorb(json!({"type": "message_start", "message": {"usage":
            {"input_tokens": 50, "cache_read_input_tokens": 1000}}}));
        anthropic.absorb(
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 7}}),
        );
        assert_eq!((anthropic.usage, anthropic.cached), (Some((1050, 7)), 1000));
    }

    #[test]
    fn reasoning_tokens_are_output_tokens() {
        // Chat Completions counts them inside completion_tokens.
        let usage = json!({"prompt_tokens": 10, "completion_tokens": 900,
            "completion_tokens_details": {"reasoning_tokens": 768}});
        assert_eq!(output_tokens(&usage), Some(900));
        // A server that counts them apart: both are billed.
        let apart = json!({"completion_tokens": 132,
            "completion_tokens_details": {"reasoning_tokens": 768}});
        assert_eq!(output_tokens(&apart), Some(900));
        assert_eq!(output_tokens(&json!({"completion_tokens": 7})), Some(7));
        assert_eq!(output_tokens(&json!({})), None);
    }

    #[test]
    fn an_unsupported_parameter_is_named_with_the_model_and_the_fix() {
        let refusal = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
        let status = reqwest::StatusCode::BAD_REQUEST;
        let AttemptFailure::Fatal(LlmError::Permanent(message)) =
            classify("gpt-5", status, refusal, None)
        else {
            panic!("not permanent");
        };
        assert!(
            message.contains("model \"gpt-5\" does not take the parameter \"max_tokens\"")
                && message.contains("--token-limit-param"),
            "{message}"
        );
        // Without `param`, the message's quotes name it.
        let unnamed = r#"{"error":{"message":"Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.","type":"invalid_request_error"}}"#;
        assert_eq!(
            unsupported_parameter(unnamed).as_deref(),
            Some("temperature")
        );
        let AttemptFailure::Fatal(LlmError::Permanent(message)) =
            classify("o3", status, unnamed, None)
        else {
            panic!("not permanent");
        };
        assert!(
            message.contains("\"temperature\"") && message.contains("--reasoning"),
            "{message}"
        );
        // Another 400 is a plain refusal.
        assert_eq!(
            unsupported_parameter(r#"{"error":{"message":"bad"}}"#),
            None
        );
        assert_eq!(unsupported_parameter("not json"), None);
    }

    /// Feeds `chunks` to a scanner and returns its lines.
    fn scan(chunks: &[&[u8]], max_line: usize) -> Result<Vec<String>, ()> {
        let mut lines = Lines::new(max_line);
        let mut out = Vec::new();
        for chunk in chunks {
            lines.push(chunk);
            while let Some(line) = lines.next_line().map_err(|LineTooLong| ())? {
                out.push(String::from_utf8_lossy(line).trim().to_string());
            }
        }
        Ok(out)
    }

    #[test]
    fn lines_come_whole_across_chunks_and_a_long_one_is_refused() {
        assert_eq!(
            scan(&[b"data: a", b"b\n\nda", b"ta: c\r\n", b"x"], 16),
            Ok(vec!["data: ab".into(), "".into(), "data: c".into()])
        );
        // 16 bytes is the cap; 17 without a newline yet, or with one, is over.
        assert!(scan(&[b"0123456789abcdef\n"], 16).is_ok());
        assert!(scan(&[b"0123456789", b"abcdefg"], 16).is_err());
        assert!(scan(&[b"0123456789abcdefg\n"], 16).is_err());
        assert!(scan(&[b"0123\n", b"456789abcdef\n"], 12).is_ok());
    }

    #[test]
    fn a_long_line_in_small_chunks_is_scanned_once() {
        // One 4 MiB line in 4 KiB chunks: rescanning from the line's start
        // after every chunk would look at 2 GiB; scanning each byte once, 4 MiB.
        let chunk = vec![b'x'; 4096];
        let mut lines = Lines::new(8 << 20);
        for _ in 0..1024 {
            lines.push(&chunk);
            assert!(matches!(lines.next_line(), Ok(None)));
        }
        lines.push(b"\n");
        assert_eq!(
            lines.next_line().ok().flatten().map(<[u8]>::len),
            Some(4 << 20)
        );
        assert_eq!(lines.examined, (4 << 20) + 1);
        // Many lines in one chunk: each byte once too.
        let mut lines = Lines::new(8 << 20);
        lines.push(&b"data: x\n".repeat(10_000));
        let mut count = 0;
        while let Ok(Some(_)) = lines.next_line() {
            count += 1;
        }
        assert_eq!((count, lines.examined), (10_000, 80_000));
    }

    #[test]
    fn the_caps_name_their_setting_and_size() {
        assert_eq!(bytes_text(8 << 20), "8 MiB (8388608 bytes)");
        assert_eq!(bytes_text(64 << 10), "64 KiB (65536 bytes)");
        assert_eq!(bytes_text(1000), "1000 bytes");
        let AttemptFailure::Fatal(LlmError::Permanent(message)) =
            Cap::Line.exceeded("gpt-x", &ReplyLimits::default())
        else {
            panic!("not permanent");
        };
        assert!(
            message.starts_with("reply too large: model \"gpt-x\"")
                && message.contains("8 MiB")
                && message.contains("executor.max_reply_line_bytes"),
            "{message}"
        );
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
                &wire(Dialect::OpenAi, StructuredOutput::JsonSchema),
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
        let format = |structured| request_body(&wire(Dialect::OpenAi, structured), &request);
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
            let body = request_body(&wire(Dialect::Anthropic, structured), &request);
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
        let body = request_body(&wire(Dialect::Anthropic, StructuredOutput::None), &request);
        assert!(
            body.get("tools").is_none() && body.get("tool_choice").is_none(),
            "{body}"
        );
    }

    #[test]
    fn a_request_without_a_schema_asks_for_no_structure() {
        for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
            for structured in StructuredOutput::ALL {
                let body = request_body(&wire(dialect, structured), &request(None));
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
