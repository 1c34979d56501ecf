//! The indexer: token counting, and RAG for context management — split a text
//! into chunks, embed them, keep chunks and vectors in Postgres keyed by the
//! text's SHA-256 (and embedder and tokenizer), and answer "the most relevant
//! parts of this text for this query within N tokens". Indexing a text that is
//! already indexed costs nothing: that is what makes compression retries free.

use dialectic_config::Settings;
use dialectic_core::context::{chunk_text, cosine, normalise};
use dialectic_core::error::{ErrorCode, ErrorContract, Reason};
use dialectic_llm::embeddings::{Embedder, LocalEmbedder, OpenAiEmbedder};
use dialectic_proto::v1::indexer::indexer_service_server::{IndexerService, IndexerServiceServer};
use dialectic_proto::v1::indexer::{
    ConvertRequest, ConvertResponse, CountTokensRequest, CountTokensResponse, IndexRequest,
    IndexResponse, RetrieveRequest, RetrieveResponse,
};
use dialectic_runtime::error_status;
use dialectic_runtime::{CancellationToken, Dependencies, Running, RuntimeError, supervise};
use dialectic_store::index::{self, IndexKey, IndexedChunk};
use dialectic_store::{Store, StoreError};
use dialectic_tokenizer::{Encoding, TokenCounter, TokenizerError};
use futures::future::BoxFuture;
use std::sync::{Arc, OnceLock};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

pub mod conversion;

pub const SERVICE_NAME: &str = "dialectic.v1.indexer.IndexerService";

#[derive(Debug, thiserror::Error)]
pub enum IndexerError {
    #[error("unknown embedder {0:?} (local or openai)")]
    UnknownEmbedder(String),
    #[error("embedder \"openai\" needs indexer.embeddings_base_url")]
    EmbedderNotConfigured,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    #[error("embedding failed: {0}")]
    Embedding(#[from] dialectic_llm::LlmError),
    #[error("{0}")]
    Internal(String),
}

impl ErrorContract for IndexerError {
    fn code(&self) -> ErrorCode {
        match self {
            IndexerError::UnknownEmbedder(_)
            | IndexerError::EmbedderNotConfigured
            | IndexerError::Tokenizer(TokenizerError::Unknown(_)) => ErrorCode::InvalidArgument,
            IndexerError::Store(e) => e.code(),
            IndexerError::Embedding(e) if e.retryable() => ErrorCode::Unavailable,
            IndexerError::Embedding(_) => ErrorCode::FailedPrecondition,
            IndexerError::Tokenizer(_) | IndexerError::Internal(_) => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            IndexerError::UnknownEmbedder(_) => Reason::UnknownEmbedder,
            IndexerError::EmbedderNotConfigured => Reason::EmbedderNotConfigured,
            IndexerError::Store(e) => e.reason(),
            IndexerError::Tokenizer(TokenizerError::Unknown(_)) => Reason::UnknownTokenizer,
            IndexerError::Tokenizer(_) => Reason::TokenizerUnavailable,
            IndexerError::Embedding(e) if e.retryable() => Reason::EmbedderUnavailable,
            IndexerError::Embedding(_) => Reason::EmbeddingRefused,
            IndexerError::Internal(_) => Reason::Internal,
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            IndexerError::Store(e) => e.metadata(),
            _ => Vec::new(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            IndexerError::UnknownEmbedder(_) | IndexerError::EmbedderNotConfigured => {
                Some("embedder")
            }
            IndexerError::Tokenizer(TokenizerError::Unknown(_)) => Some("tokenizer"),
            _ => None,
        }
    }
}

impl From<IndexerError> for Status {
    fn from(e: IndexerError) -> Self {
        error_status::status(&e)
    }
}

/// The SHA-256 of a text, hex: its identity in the index.
pub fn content_hash(text: &str) -> String {
    dialectic_core::digest::sha256_hex(text.as_bytes())
}

/// Picks the highest-scoring chunks whose tokens fit `budget` (a chunk too big
/// for what is left is skipped, a smaller one may still fit) and returns their
/// indices in document order.
pub fn select_within_budget(scores: &[f64], tokens: &[u64], budget: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    // Best first; equal scores keep document order so results are reproducible.
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut used = 0u64;
    let mut picked = Vec::new();
    for i in order {
        if used + tokens[i] <= budget {
            used += tokens[i];
            picked.push(i);
        }
    }
    picked.sort_unstable();
    picked
}

/// What indexing one text produced.
pub struct Indexed {
    pub hash: String,
    pub chunks: Vec<IndexedChunk>,
    pub tokens_spent: u64,
    pub already: bool,
}

#[derive(Clone)]
pub struct Indexer {
    store: Store,
    counter: TokenCounter,
    chunk_tokens: u64,
    openai: Option<Arc<OpenAiEmbedder>>,
    converter: conversion::Converter,
}

impl Indexer {
    pub fn new(store: Store, settings: &Settings, counter: TokenCounter) -> Self {
        let config = &settings.indexer;
        let openai = if config.embeddings_base_url.trim().is_empty() {
            None
        } else {
            let key = std::env::var(&config.embeddings_secret_name)
                .ok()
                .filter(|k| !k.is_empty());
            match OpenAiEmbedder::new(
                config.embeddings_base_url.trim(),
                &config.embeddings_model,
                key,
            ) {
                Ok(e) => Some(Arc::new(e)),
                Err(e) => {
                    // Requests naming it then get a clear error; the local embedder still works.
                    tracing::error!(error = %e, "the openai embedder is unavailable");
                    None
                }
            }
        };
        Self {
            store,
            counter,
            chunk_tokens: u64::from(config.chunk_tokens.max(16)),
            openai,
            converter: conversion::Converter::new(
                config.conversion_slots,
                settings.gateway.max_message_bytes,
            ),
        }
    }

    fn embedder(&self, name: &str) -> Result<Arc<dyn Embedder>, IndexerError> {
        match name.trim() {
            "" | "local" => Ok(Arc::new(LocalEmbedder)),
            "openai" => self
                .openai
                .clone()
                .map(|e| e as Arc<dyn Embedder>)
                .ok_or(IndexerError::EmbedderNotConfigured),
            other => Err(IndexerError::UnknownEmbedder(other.to_string())),
        }
    }

    /// Indexes `text` unless it already is; the second time costs nothing.
    pub async fn ensure_indexed(
        &self,
        text: &str,
        embedder: &str,
        tokenizer: &str,
    ) -> Result<Indexed, IndexerError> {
        let embedder = self.embedder(embedder)?;
        let encoding = Encoding::from_name(tokenizer)?;
        let hash = content_hash(text);
        let key = IndexKey {
            content_hash: &hash,
            embedder: embedder.name(),
            tokenizer: encoding.name(),
        };
        let pool = self.store.pool();
        if let Some(chunks) = index::chunks(pool, &key).await? {
            return Ok(Indexed {
                hash,
                chunks,
                tokens_spent: 0,
                already: true,
            });
        }
        let owned = text.to_string();
        let limit = self.chunk_tokens;
        // Tokenizing a large text is CPU work: keep it off the async workers.
        let pieces = tokio::task::spawn_blocking(move || {
            let count = |s: &str| encoding.count(s).unwrap_or(s.len() as u64);
            chunk_text(&owned, limit, &count)
                .into_iter()
                .map(|c| {
                    let n = count(&c);
                    (c, n)
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| IndexerError::Internal(format!("chunking failed: {e}")))?;
        let bodies: Vec<String> = pieces.iter().map(|(c, _)| c.clone()).collect();
        let embedded = embedder.embed(&bodies).await?;
        let counted: u64 = pieces.iter().map(|(_, n)| n).sum();
        let tokens_spent = embedded.tokens.unwrap_or(counted);
        let chunks: Vec<IndexedChunk> = pieces
            .into_iter()
            .zip(embedded.vectors)
            .enumerate()
            .map(|(i, ((body, tokens), embedding))| IndexedChunk {
                chunk_no: i as i32,
                body,
                token_count: tokens as i32,
                embedding,
            })
            .collect();
        let inserted = index::insert(pool, &key, &chunks, tokens_spent).await?;
        tracing::info!(%hash, chunks = chunks.len(), tokens_spent, inserted, embedder = key.embedder, "indexed");
        Ok(Indexed {
            hash,
            chunks,
            // Another indexer stored it first and reported the spend; this one is free.
            tokens_spent: if inserted { tokens_spent } else { 0 },
            already: !inserted,
        })
    }

    pub async fn retrieve(&self, req: &RetrieveRequest) -> Result<RetrieveResponse, IndexerError> {
        let doc = self
            .ensure_indexed(&req.text, &req.embedder, &req.tokenizer)
            .await?;
        let mut spent = doc.tokens_spent;
        let query_vector = if req.query.trim().is_empty() {
            None
        } else {
            let q = self
                .ensure_indexed(&req.query, &req.embedder, &req.tokenizer)
                .await?;
            spent += q.tokens_spent;
            let dims = q.chunks.first().map_or(0, |c| c.embedding.len());
            let mut mean = vec![0f32; dims];
            for c in &q.chunks {
                for (m, x) in mean.iter_mut().zip(&c.embedding) {
                    *m += x;
                }
            }
            normalise(&mut mean);
            Some(mean)
        };
        let scores: Vec<f64> = doc
            .chunks
            .iter()
            .map(|c| {
                query_vector
                    .as_ref()
                    .map_or(0.0, |q| cosine(q, &c.embedding))
            })
            .collect();
        let tokens: Vec<u64> = doc
            .chunks
            .iter()
            .map(|c| c.token_count.max(0) as u64)
            .collect();
        let picked = select_within_budget(&scores, &tokens, req.budget_tokens);
        let text: String = picked
            .iter()
            .map(|&i| doc.chunks[i].body.as_str())
            .collect();
        let encoding = Encoding::from_name(&req.tokenizer)?;
        let counted = self.counter.count(encoding, &text).await?;
        Ok(RetrieveResponse {
            text,
            tokens: counted,
            chunks_used: picked.len() as u32,
            chunks_total: doc.chunks.len() as u32,
            tokens_spent: spent,
            content_hash: doc.hash,
        })
    }
}

#[tonic::async_trait]
impl IndexerService for Indexer {
    async fn count_tokens(
        &self,
        request: Request<CountTokensRequest>,
    ) -> Result<Response<CountTokensResponse>, Status> {
        let req = request.into_inner();
        let _span = tracing::debug_span!("count_tokens", tokenizer = %req.tokenizer, texts = req.texts.len());
        let encoding = Encoding::from_name(&req.tokenizer).map_err(IndexerError::from)?;
        let texts: Vec<&str> = req.texts.iter().map(String::as_str).collect();
        let per_text = self
            .counter
            .count_many(encoding, &texts)
            .await
            .map_err(IndexerError::from)?;
        Ok(Response::new(CountTokensResponse {
            total: per_text.iter().sum(),
            per_text,
        }))
    }

    async fn index(
        &self,
        request: Request<IndexRequest>,
    ) -> Result<Response<IndexResponse>, Status> {
        let req = request.into_inner();
        let done = self
            .ensure_indexed(&req.text, &req.embedder, &req.tokenizer)
            .await?;
        Ok(Response::new(IndexResponse {
            content_hash: done.hash,
            chunks: done.chunks.len() as u32,
            tokens_spent: done.tokens_spent,
            already_indexed: done.already,
        }))
    }

    async fn retrieve(
        &self,
        request: Request<RetrieveRequest>,
    ) -> Result<Response<RetrieveResponse>, Status> {
        let req = request.into_inner();
        Ok(Response::new(Indexer::retrieve(self, &req).await?))
    }

    type ConvertStream = ReceiverStream<Result<ConvertResponse, Status>>;

    async fn convert(
        &self,
        request: Request<ConvertRequest>,
    ) -> Result<Response<Self::ConvertStream>, Status> {
        let req = request.into_inner();
        let _span =
            tracing::info_span!("convert", file = %req.file_name, bytes = req.content.len());
        Ok(Response::new(ReceiverStream::new(
            self.converter.start(req),
        )))
    }
}

pub fn start(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> BoxFuture<'static, Result<Running, RuntimeError>> {
    Box::pin(start_indexer(settings, shutdown))
}

async fn start_indexer(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> Result<Running, RuntimeError> {
    let store = dialectic_runtime::store(&settings)?;
    // Counts are cached once Redis answers; counting itself never needs it.
    let cache_cell = Arc::new(OnceLock::new());
    let indexer = Indexer::new(
        store.clone(),
        &settings,
        TokenCounter::new(cache_cell.clone()),
    );
    let server = dialectic_runtime::start_grpc(
        SERVICE_NAME,
        &settings.indexer.listen,
        tonic::service::Routes::new(
            // An upload to convert is as large as the gateway takes, plus
            // the request's other fields.
            IndexerServiceServer::new(indexer)
                .max_decoding_message_size(settings.gateway.max_message_bytes + 64 * 1024),
        ),
        dialectic_runtime::service_auth::ServiceKey::from_settings(
            &settings,
            dialectic_core::service_auth::ServiceName::Indexer,
        )?,
        shutdown.clone(),
    )
    .await?;
    let dependencies = Dependencies {
        store: Some(store),
        cache: Some(cache_cell),
        // Token counts are cached there; counting itself is local.
        ..Default::default()
    };
    Ok(supervise(
        "indexer",
        &settings,
        server,
        dependencies,
        shutdown.child_token(),
        Vec::new(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_takes_the_best_that_fit_in_document_order() {
        let scores = [0.1, 0.9, 0.5, 0.8];
        let tokens = [10, 50, 10, 30];
        assert_eq!(select_within_budget(&scores, &tokens, 60), vec![1, 2]);
        assert_eq!(select_within_budget(&scores, &tokens, 45), vec![2, 3]);
        assert!(select_within_budget(&scores, &tokens, 5).is_empty());
    }

    #[test]
    fn hashes_are_sha256_hex() {
        assert_eq!(
            content_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn errors_map_to_codes() {
        let status = Status::from(IndexerError::UnknownEmbedder("x".into()));
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            error_status::reason(&status).as_deref(),
            Some("UNKNOWN_EMBEDDER")
        );
    }
}
