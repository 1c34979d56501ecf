//! Model providers. Each job makes exactly one call through `ModelProvider::chat`;
//! continuation is the planner's business, never a loop in here.

pub mod embeddings;
mod openai;
mod replay;
mod simulated;
mod simulated_contract;
mod simulated_query;

pub use replay::{ExchangeStore, Recording, Replay, exchange_key};

pub use openai::{
    Dialect, OpenAiProvider, OpenAiSettings, ReplyLimits, TokenLimitParam, UnknownTokenLimitParam,
    request_body,
};

pub use simulated::{
    CLAIMS_KEY, CLARIFY_QUESTION, DROP_KEY_ALWAYS_DIRECTIVE, DROP_KEY_DIRECTIVE, INPUTS_HEADING,
    INPUTS_KEY, INVENTED_QUOTE, LOW_CONFIDENCE_DIRECTIVE, MALFORMED_DIRECTIVE, SOURCES_HEADER,
    STRAY_FINDING_DIRECTIVE, STRAY_FINDING_TYPE, SimulatedProvider, SimulatedSettings, input_line,
    recorded_call_times, recorded_requests,
};
pub use simulated_query::{COMPOUND_DIRECTIVE, FABRICATE_DIRECTIVE, FABRICATED_QUOTE};

use async_trait::async_trait;
use dialectic_core::prompt::ChatRequest;
use dialectic_core::secrets::{self, KeyNameRefused, redacted};
use dialectic_core::structured::{StructuredOutput, UnknownDialect};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    ContentFilter,
    Error,
}

impl FinishReason {
    pub const fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub text: String,
    pub finish_reason: FinishReason,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `input_tokens` the provider read from its prompt cache
    /// (priced apart, `core::price`); 0 when it reported none. Defaulted so
    /// recordings made before it was kept still read.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// The part of `input_tokens` the provider wrote to its prompt cache
    /// (Anthropic's `cache_creation_input_tokens`, priced apart); 0 when it
    /// reported none.
    #[serde(default)]
    pub cache_write_input_tokens: u64,
    /// True when the provider reported no usage and the counts are our own.
    pub usage_estimated: bool,
    /// From the start of the attempt that answered to its first streamed
    /// text: None for a reply that came whole (or from a recording).
    #[serde(skip)]
    pub time_to_first_token: Option<std::time::Duration>,
    /// The model the provider says answered (it may name a dated snapshot
    /// of the one asked for), when it says.
    #[serde(skip)]
    pub response_model: Option<String>,
    /// The provider's reply as it came, stored beside the chunk for audit and replay.
    pub raw: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    #[error("model provider {0:?} is not available in this build")]
    UnsupportedProvider(String),
    #[error("model call failed and may succeed if retried: {0}")]
    Transient(String),
    #[error("model call failed permanently: {0}")]
    Permanent(String),
}

impl LlmError {
    pub fn retryable(&self) -> bool {
        matches!(self, LlmError::Transient(_))
    }

    /// Why the call failed, from a fixed set (a metric label, a span's
    /// `error.type`). Read from the message this crate wrote: the variants
    /// stay plain strings for their many matchers.
    pub fn reason(&self) -> ErrorReason {
        match self {
            LlmError::UnsupportedProvider(_) => ErrorReason::Config,
            LlmError::Transient(message) | LlmError::Permanent(message) => {
                ErrorReason::of_message(message)
            }
        }
    }
}

/// Why a model call failed: bounded, so it can label a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorReason {
    Timeout,
    Connection,
    RateLimited,
    QuotaExhausted,
    Auth,
    UnsupportedParameter,
    ContextLength,
    Rejected,
    ServerError,
    ReplyTooLarge,
    BadReply,
    CallLimiter,
    Config,
    Replay,
    Other,
}

/// Phrases of this crate's (and the call limiter's) error messages, first
/// match wins: the specific before the general ("gave up after 4 attempts:
/// provider throttled" is throttling).
const REASON_PHRASES: &[(&str, ErrorReason)] = &[
    (
        "does not take the parameter",
        ErrorReason::UnsupportedParameter,
    ),
    ("quota exhausted", ErrorReason::QuotaExhausted),
    ("provider throttled", ErrorReason::RateLimited),
    ("authentication failed", ErrorReason::Auth),
    ("context too long", ErrorReason::ContextLength),
    ("provider rejected the request", ErrorReason::Rejected),
    ("provider error (", ErrorReason::ServerError),
    ("reply too large", ErrorReason::ReplyTooLarge),
    ("timeout", ErrorReason::Timeout),
    ("timed out", ErrorReason::Timeout),
    ("connection:", ErrorReason::Connection),
    ("the stream broke", ErrorReason::Connection),
    ("reading the reply", ErrorReason::Connection),
    ("not JSON", ErrorReason::BadReply),
    ("call slot", ErrorReason::CallLimiter),
    ("call limiter", ErrorReason::CallLimiter),
    ("model config", ErrorReason::Config),
    ("replay:", ErrorReason::Replay),
];

impl ErrorReason {
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorReason::Timeout => "timeout",
            ErrorReason::Connection => "connection",
            ErrorReason::RateLimited => "rate_limited",
            ErrorReason::QuotaExhausted => "quota_exhausted",
            ErrorReason::Auth => "auth",
            ErrorReason::UnsupportedParameter => "unsupported_parameter",
            ErrorReason::ContextLength => "context_length",
            ErrorReason::Rejected => "rejected",
            ErrorReason::ServerError => "server_error",
            ErrorReason::ReplyTooLarge => "reply_too_large",
            ErrorReason::BadReply => "bad_reply",
            ErrorReason::CallLimiter => "call_limiter",
            ErrorReason::Config => "config",
            ErrorReason::Replay => "replay",
            ErrorReason::Other => "other",
        }
    }

    fn of_message(message: &str) -> Self {
        REASON_PHRASES
            .iter()
            .find(|(phrase, _)| message.contains(phrase))
            .map_or(ErrorReason::Other, |(_, reason)| *reason)
    }
}

#[async_trait]
pub trait ModelProvider: Send + Sync {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;
}

/// Where a real provider is and how to authenticate, from a model row.
#[derive(Clone)]
pub struct ProviderConfig {
    /// The row's `config.base_url`.
    pub base_url: Option<String>,
    /// The key, read from the environment variable the row's `secret_name` names.
    pub api_key: Option<String>,
    pub organization: Option<String>,
    /// The row's `config.structured_output`; a value no dialect has is kept
    /// as the error, which [`provider_for`] reports.
    pub structured_output: Result<StructuredOutput, UnknownDialect>,
    /// A `secret_name` the key may not be read from (one of the platform's
    /// own variables, or outside `executor.model_key_prefixes`), left
    /// unread; [`provider_for`] refuses the model.
    pub refused_secret: Option<KeyNameRefused>,
    /// The row's `config.token_limit_param` (OpenAI dialect); a value no
    /// field has is kept as the error, which [`provider_for`] reports.
    pub token_limit_param: Result<TokenLimitParam, UnknownTokenLimitParam>,
    /// The row's `config.reasoning` (OpenAI dialect): no sampling parameters.
    pub reasoning: bool,
    /// The row's `config.reasoning_effort` (OpenAI dialect, reasoning models).
    pub reasoning_effort: Option<String>,
    /// Not the row's: the executor's caps on a reply (`executor.max_reply_*`).
    pub reply_limits: ReplyLimits,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &redacted(self.api_key.as_deref()))
            .field("organization", &self.organization)
            .field("structured_output", &self.structured_output)
            .field("refused_secret", &self.refused_secret)
            .field("token_limit_param", &self.token_limit_param)
            .field("reasoning", &self.reasoning)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("reply_limits", &self.reply_limits)
            .finish()
    }
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            base_url: None,
            api_key: None,
            organization: None,
            structured_output: Ok(StructuredOutput::default()),
            refused_secret: None,
            token_limit_param: Ok(TokenLimitParam::default()),
            reasoning: false,
            reasoning_effort: None,
            reply_limits: ReplyLimits::default(),
        }
    }
}

impl ProviderConfig {
    /// Reads `config` (`base_url`, `organization`, `structured_output`,
    /// `token_limit_param`, `reasoning`, `reasoning_effort`) and the secret
    /// named by `secret_name` from the environment; the key itself is never
    /// stored. The reply limits are the defaults; the executor sets its own.
    /// A `secret_name` of the platform's own (`DIALECTIC_*` but
    /// `DIALECTIC_MODEL_KEY_*`, `AWS_*`) is not read, whoever wrote the row:
    /// the key would go to the row's base URL. Nor, when `allowed_prefixes`
    /// (`executor.model_key_prefixes`) lists any, is a name outside them.
    pub fn from_row(
        config: &serde_json::Value,
        secret_name: Option<&str>,
        allowed_prefixes: &[String],
    ) -> Self {
        Self::from_row_in(config, secret_name, allowed_prefixes, |name| {
            std::env::var(name).ok()
        })
    }

    /// [`Self::from_row`] with `env` for the process environment.
    fn from_row_in(
        config: &serde_json::Value,
        secret_name: Option<&str>,
        allowed_prefixes: &[String],
        env: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let text = |k: &str| config.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let secret_name = secret_name.filter(|n| !n.is_empty());
        let refused_secret =
            secret_name.and_then(|n| secrets::check_key_name(n, allowed_prefixes).err());
        Self {
            base_url: text("base_url"),
            api_key: secret_name
                .filter(|_| refused_secret.is_none())
                .and_then(env)
                .filter(|k| !k.is_empty()),
            organization: text("organization"),
            structured_output: StructuredOutput::of_model_config(config),
            refused_secret,
            token_limit_param: TokenLimitParam::of_model_config(config),
            reasoning: config.get("reasoning").and_then(|v| v.as_bool()) == Some(true),
            reasoning_effort: text("reasoning_effort").filter(|e| !e.trim().is_empty()),
            reply_limits: ReplyLimits::default(),
        }
    }
}

/// Picks the provider for a model row's `provider` column.
pub fn provider_for(
    kind: &str,
    simulated: &SimulatedSettings,
    config: &ProviderConfig,
) -> Result<Arc<dyn ModelProvider>, LlmError> {
    if let Some(refused) = &config.refused_secret {
        return Err(LlmError::Permanent(format!(
            "{refused} (dialecticd model add --key-env)"
        )));
    }
    let structured_output = config
        .structured_output
        .clone()
        .map_err(|e| LlmError::Permanent(format!("model config: {e}")))?;
    match kind {
        "simulated" => Ok(Arc::new(SimulatedProvider::new(simulated.clone()))),
        "openai" | "openai-compatible" => {
            let token_limit_param = config
                .token_limit_param
                .clone()
                .map_err(|e| LlmError::Permanent(format!("model config: {e}")))?;
            let mut settings = OpenAiSettings {
                api_key: config.api_key.clone(),
                organization: config.organization.clone(),
                structured_output,
                token_limit_param,
                reasoning: config.reasoning,
                reasoning_effort: config.reasoning_effort.clone(),
                limits: config.reply_limits,
                ..OpenAiSettings::default()
            };
            if let Some(url) = &config.base_url {
                settings.base_url = url.clone();
            }
            Ok(Arc::new(OpenAiProvider::new(settings)?))
        }
        "anthropic" => {
            let settings = OpenAiSettings {
                dialect: Dialect::Anthropic,
                base_url: config
                    .base_url
                    .clone()
                    .unwrap_or_else(|| "https://api.anthropic.com/v1".into()),
                api_key: config.api_key.clone(),
                structured_output,
                // Anthropic's Messages API has one output limit, `max_tokens`,
                // and no `reasoning_effort`: the OpenAI wire settings do not apply.
                limits: config.reply_limits,
                ..OpenAiSettings::default()
            };
            Ok(Arc::new(OpenAiProvider::new(settings)?))
        }
        other => Err(LlmError::UnsupportedProvider(other.to_string())),
    }
}

/// A cap on concurrent calls shared by every executor replica (e.g. Redis leases).
#[async_trait]
pub trait CallLimiter: Send + Sync {
    /// Waits for a free slot of `key` and room for a call of up to `tokens`;
    /// returns the holder token to release.
    async fn acquire(&self, key: &str, tokens: u64) -> Result<String, LlmError>;
    async fn release(&self, key: &str, holder: &str);
}

/// A provider whose calls go through a [`CallLimiter`].
pub struct Limited {
    pub inner: Arc<dyn ModelProvider>,
    pub limiter: Arc<dyn CallLimiter>,
    pub key: String,
}

#[async_trait]
impl ModelProvider for Limited {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let tokens = request
            .messages
            .iter()
            .map(|m| dialectic_core::tokens::estimate_tokens(&m.content))
            .sum::<u64>()
            + u64::from(request.max_tokens);
        let holder = self.limiter.acquire(&self.key, tokens).await?;
        let result = self.inner.chat(request).await;
        self.limiter.release(&self.key, &holder).await;
        result
    }
}

/// Seed 004: when a model's provider keeps failing (or its quota is gone), the
/// call goes to the model's fallback instead of failing the job.
pub struct WithFallback {
    pub primary: Arc<dyn ModelProvider>,
    pub fallback: Arc<dyn ModelProvider>,
    /// The fallback's api identifier, sent as the request's model.
    pub fallback_model: String,
}

#[async_trait]
impl ModelProvider for WithFallback {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        match self.primary.chat(request).await {
            Err(LlmError::Transient(reason)) => {
                tracing::warn!(%reason, fallback = %self.fallback_model, "primary model failed; using its fallback");
                self.fallback_call(request).await
            }
            Err(LlmError::Permanent(reason)) if reason.contains("quota") => {
                tracing::warn!(%reason, fallback = %self.fallback_model, "primary model out of quota; using its fallback");
                self.fallback_call(request).await
            }
            other => other,
        }
    }
}

impl WithFallback {
    async fn fallback_call(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut rerouted = request.clone();
        rerouted.model = self.fallback_model.clone();
        self.fallback.chat(&rerouted).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An environment where every variable holds a secret.
    fn every_variable_set(_: &str) -> Option<String> {
        Some("sk-live-0123456789".into())
    }

    #[test]
    fn a_row_naming_a_platform_variable_reads_no_key_and_gets_no_provider() {
        for name in [
            "DIALECTIC_INTERNAL__TOKEN_SECRET",
            "dialectic_s3__secret_key",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            let config =
                ProviderConfig::from_row_in(&json!({}), Some(name), &[], every_variable_set);
            assert_eq!(config.api_key, None, "{name} was read");
            let refused = provider_for("openai", &SimulatedSettings::default(), &config)
                .err()
                .expect("refused");
            assert!(
                matches!(&refused, LlmError::Permanent(m) if m.contains(name)),
                "{refused}"
            );
        }
        let own = ProviderConfig::from_row_in(
            &json!({}),
            Some("OPENAI_API_KEY"),
            &[],
            every_variable_set,
        );
        assert_eq!(own.api_key.as_deref(), Some("sk-live-0123456789"));
        assert!(provider_for("openai", &SimulatedSettings::default(), &own).is_ok());
    }

    /// The key a row naming `name` gets under `allowed`, and its provider's
    /// refusal if it gets none.
    fn read_under(name: &str, allowed: &[&str]) -> (Option<String>, Option<String>) {
        let allowed: Vec<String> = allowed.iter().map(|p| p.to_string()).collect();
        let config =
            ProviderConfig::from_row_in(&json!({}), Some(name), &allowed, every_variable_set);
        let refused = provider_for("openai", &SimulatedSettings::default(), &config)
            .err()
            .map(|e| e.to_string());
        (config.api_key, refused)
    }

    #[test]
    fn with_allowed_prefixes_only_names_starting_with_one_are_read() {
        let allowed = ["DIALECTIC_MODEL_KEY_", "ACME_"];
        for name in ["DIALECTIC_MODEL_KEY_OPENAI", "ACME_ANTHROPIC"] {
            assert_eq!(
                read_under(name, &allowed),
                (Some("sk-live-0123456789".into()), None),
                "{name}"
            );
        }
        // Outside the list, or in another case (the environment tells
        // names apart by case): no key, and a permanent refusal naming the
        // variable and the prefixes.
        for name in [
            "OPENAI_API_KEY",
            "dialectic_model_key_openai",
            "HOME",
            "ACME",
        ] {
            let (key, refused) = read_under(name, &allowed);
            assert_eq!(key, None, "{name} was read");
            let refused = refused.unwrap_or_else(|| panic!("{name} got a provider"));
            assert!(
                refused.contains("failed permanently")
                    && refused.contains(name)
                    && refused.contains("DIALECTIC_MODEL_KEY_, ACME_")
                    && refused.contains("executor.model_key_prefixes"),
                "{refused}"
            );
        }
        // The platform's own stay refused whatever the list says.
        let (key, refused) = read_under("DIALECTIC_S3__SECRET_KEY", &["DIALECTIC_"]);
        assert_eq!(key, None);
        assert!(refused.is_some_and(|r| r.contains("platform's own")));
    }

    #[test]
    fn without_allowed_prefixes_any_name_but_the_platforms_is_read() {
        for name in [
            "OPENAI_API_KEY",
            "DIALECTIC_MODEL_KEY_OPENAI",
            "dialectic_model_key_x",
        ] {
            assert_eq!(
                read_under(name, &[]),
                (Some("sk-live-0123456789".into()), None),
                "{name}"
            );
        }
        assert_eq!(read_under("DIALECTIC_MODEL_KEYS", &[]).0, None);
    }

    #[test]
    fn debug_shows_whether_there_is_a_key_never_the_key() {
        let config = ProviderConfig::from_row_in(
            &json!({}),
            Some("OPENAI_API_KEY"),
            &[],
            every_variable_set,
        );
        let settings = OpenAiSettings {
            api_key: config.api_key.clone(),
            ..OpenAiSettings::default()
        };
        for shown in [
            format!("{config:?}"),
            format!("{settings:?}"),
            format!("{settings:#?}"),
        ] {
            assert!(!shown.contains("sk-live"), "{shown}");
            assert!(shown.contains("<redacted>"), "{shown}");
        }
        assert!(format!("{:?}", ProviderConfig::default()).contains("api_key: \"<none>\""));
    }

    #[test]
    fn a_row_names_its_structured_output_or_gets_the_default() {
        let of = |config| ProviderConfig::from_row(&config, None, &[]).structured_output;
        assert_eq!(
            of(json!({"structured_output": "json_object_schema"})),
            Ok(StructuredOutput::JsonObjectSchema)
        );
        assert_eq!(of(json!({})), Ok(StructuredOutput::JsonSchema));
        assert_eq!(
            of(json!({"structured_output": null})),
            Ok(StructuredOutput::JsonSchema)
        );
    }

    #[test]
    fn an_unknown_structured_output_fails_the_provider_naming_it() {
        for (value, named) in [(json!("yaml"), "\"yaml\""), (json!(3), "\"3\"")] {
            let config = ProviderConfig::from_row(&json!({"structured_output": value}), None, &[]);
            for kind in ["openai", "anthropic"] {
                let error = provider_for(kind, &SimulatedSettings::default(), &config)
                    .err()
                    .expect("an unknown dialect is refused");
                assert!(
                    matches!(&error, LlmError::Permanent(m) if m.contains(named)),
                    "{kind}: {error}"
                );
            }
        }
    }
}
