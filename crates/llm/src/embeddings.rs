//! Embedders for the indexer: the local hashed n-gram embedder (no network,
//! no weights, deterministic) and an OpenAI-compatible `/embeddings` client.

use crate::LlmError;
use async_trait::async_trait;
use dialectic_core::context::{LOCAL_DIMS, hashed_ngram_embedding};
use std::time::Duration;

pub struct Embeddings {
    pub vectors: Vec<Vec<f32>>,
    /// Tokens the provider billed; None when it does not say (the caller counts).
    pub tokens: Option<u64>,
}

#[async_trait]
pub trait Embedder: Send + Sync {
    /// Stored with every vector, so vectors of different embedders never mix.
    fn name(&self) -> &str;
    async fn embed(&self, texts: &[String]) -> Result<Embeddings, LlmError>;
}

pub struct LocalEmbedder;

#[async_trait]
impl Embedder for LocalEmbedder {
    fn name(&self) -> &str {
        "local"
    }

    async fn embed(&self, texts: &[String]) -> Result<Embeddings, LlmError> {
        Ok(Embeddings {
            vectors: texts
                .iter()
                .map(|t| hashed_ngram_embedding(t, LOCAL_DIMS))
                .collect(),
            tokens: None,
        })
    }
}

/// `POST {base_url}/embeddings` as OpenAI, vLLM, llama.cpp and Ollama serve it.
pub struct OpenAiEmbedder {
    http: reqwest::Client,
    base_url: String,
    model: String,
    api_key: Option<String>,
    name: String,
}

/// Inputs per request: providers cap the batch (OpenAI at 2048).
const BATCH: usize = 256;

impl OpenAiEmbedder {
    pub fn new(base_url: &str, model: &str, api_key: Option<String>) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| LlmError::Permanent(format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key,
            name: format!("openai:{model}"),
        })
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.name
    }

    async fn embed(&self, texts: &[String]) -> Result<Embeddings, LlmError> {
        let mut vectors = Vec::with_capacity(texts.len());
        let mut tokens = 0u64;
        for batch in texts.chunks(BATCH) {
            let mut request = self
                .http
                .post(format!("{}/embeddings", self.base_url))
                .json(&serde_json::json!({"model": self.model, "input": batch}));
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            let response = request
                .send()
                .await
                .map_err(|e| LlmError::Transient(format!("embeddings request: {e}")))?;
            let status = response.status();
            let body: serde_json::Value = response
                .json()
                .await
                .map_err(|e| LlmError::Transient(format!("embeddings reply: {e}")))?;
            if !status.is_success() {
                let message = body
                    .pointer("/error/message")
                    .and_then(|m| m.as_str())
                    .unwrap_or("no message")
                    .to_string();
                let e = format!("embeddings endpoint answered {status}: {message}");
                return Err(if status.as_u16() == 429 || status.is_server_error() {
                    LlmError::Transient(e)
                } else {
                    LlmError::Permanent(e)
                });
            }
            let mut data: Vec<(u64, Vec<f32>)> = body
                .get("data")
                .and_then(|d| d.as_array())
                .ok_or_else(|| LlmError::Permanent("embeddings reply has no data".into()))?
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let index = item
                        .get("index")
                        .and_then(|x| x.as_u64())
                        .unwrap_or(i as u64);
                    let vector = item
                        .get("embedding")
                        .and_then(|e| e.as_array())
                        .map(|a| {
                            a.iter()
                                .filter_map(|x| x.as_f64())
                                .map(|x| x as f32)
                                .collect()
                        })
                        .unwrap_or_default();
                    (index, vector)
                })
                .collect();
            if data.len() != batch.len() {
                return Err(LlmError::Permanent(format!(
                    "embeddings reply has {} vectors for {} inputs",
                    data.len(),
                    batch.len()
                )));
            }
            // Providers may answer out of order; `index` says which input each is.
            data.sort_by_key(|(i, _)| *i);
            vectors.extend(data.into_iter().map(|(_, v)| v));
            tokens += body
                .pointer("/usage/prompt_tokens")
                .or_else(|| body.pointer("/usage/total_tokens"))
                .and_then(|t| t.as_u64())
                .unwrap_or(0);
        }
        Ok(Embeddings {
            vectors,
            tokens: Some(tokens),
        })
    }
}
