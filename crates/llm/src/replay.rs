//! Record and replay: every exchange keyed by a digest of the request as the
//! model sees it (ids excluded), so a session can be served again without the
//! provider — for deterministic tests, demos without a key, cheap re-renders.

use crate::{ChatResponse, LlmError, ModelProvider};
use async_trait::async_trait;
use dialectic_core::prompt::ChatRequest;
use std::sync::Arc;

/// Where recordings live (the executor uses S3).
#[async_trait]
pub trait ExchangeStore: Send + Sync {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String>;
    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), String>;
}

/// The recording's key: what the model was asked, without contribution ids.
pub fn exchange_key(request: &ChatRequest) -> String {
    let mut canonical = serde_json::json!({
        "model": request.model,
        "system": request.system_instruction,
        "messages": request.messages.iter().map(|m| (m.role, &m.content)).collect::<Vec<_>>(),
        "max_tokens": request.max_tokens,
        "output_type": request.output_type,
        "output_hints": request.output_hints,
        "required_keys": request.required_keys,
    });
    // Only when set, so recordings made before steps had a temperature still match.
    if let Some(temperature) = request.temperature {
        canonical["temperature"] = serde_json::json!(temperature);
    }
    let hex = dialectic_core::digest::sha256_hex(canonical.to_string().as_bytes());
    format!("recordings/{hex}.json")
}

/// Calls the inner provider and keeps what it answered.
pub struct Recording {
    pub inner: Arc<dyn ModelProvider>,
    pub store: Arc<dyn ExchangeStore>,
}

#[async_trait]
impl ModelProvider for Recording {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        // When the call ran, so a benchmark can tell the model's time from
        // the engine's in a session's wall time.
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let clock = std::time::Instant::now();
        let response = self.inner.chat(request).await?;
        let elapsed_ms = clock.elapsed().as_secs_f64() * 1000.0;
        let body = serde_json::to_vec(&serde_json::json!({
            "request": request,
            "response": response,
            "started_ms": started_ms,
            "elapsed_ms": elapsed_ms,
        }))
        .map_err(|e| LlmError::Permanent(format!("recording: {e}")))?;
        self.store
            .put(&exchange_key(request), body)
            .await
            .map_err(|e| LlmError::Transient(format!("recording: {e}")))?;
        Ok(response)
    }
}

/// Serves recorded replies; a request never recorded is a clear, permanent error.
pub struct Replay {
    pub store: Arc<dyn ExchangeStore>,
}

#[async_trait]
impl ModelProvider for Replay {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let key = exchange_key(request);
        let body = self
            .store
            .get(&key)
            .await
            .map_err(|e| LlmError::Transient(format!("replay: {e}")))?
            .ok_or_else(|| {
                LlmError::Permanent(format!("replay: nothing recorded for this request ({key})"))
            })?;
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| LlmError::Permanent(format!("replay: corrupt recording {key}: {e}")))?;
        serde_json::from_value(value["response"].clone())
            .map_err(|e| LlmError::Permanent(format!("replay: corrupt recording {key}: {e}")))
    }
}
