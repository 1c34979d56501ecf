//! Model providers. Each job makes exactly one call through `ModelProvider::chat`;
//! continuation is the planner's business, never a loop in here.

mod simulated;

pub use simulated::{MALFORMED_DIRECTIVE, SimulatedProvider, SimulatedSettings, recorded_requests};

use async_trait::async_trait;
use dialectic_core::prompt::ChatRequest;
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
    /// True when the provider reported no usage and the counts are our own.
    pub usage_estimated: bool,
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
}

#[async_trait]
pub trait ModelProvider: Send + Sync {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;
}

/// Picks the provider for a model row's `provider` column.
pub fn provider_for(
    kind: &str,
    simulated: &SimulatedSettings,
) -> Result<Arc<dyn ModelProvider>, LlmError> {
    match kind {
        "simulated" => Ok(Arc::new(SimulatedProvider::new(simulated.clone()))),
        other => Err(LlmError::UnsupportedProvider(other.to_string())),
    }
}
