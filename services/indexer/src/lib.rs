//! The indexer: token counting today; chunking and retrieval for context
//! management (RAG) later, which is why it already depends on Postgres and S3.

use dialectic_config::Settings;
use dialectic_proto::v1::indexer::indexer_service_server::{IndexerService, IndexerServiceServer};
use dialectic_proto::v1::indexer::{CountTokensRequest, CountTokensResponse};
use dialectic_runtime::{CancellationToken, Dependencies, Running, RuntimeError, supervise};
use dialectic_store::StoreError;
use futures::future::BoxFuture;
use std::sync::Arc;
use tonic::{Request, Response, Status};

pub const SERVICE_NAME: &str = "dialectic.v1.indexer.IndexerService";

#[derive(Debug, thiserror::Error)]
pub enum IndexerError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Blob(#[from] dialectic_blob::BlobError),
}

impl From<IndexerError> for Status {
    fn from(e: IndexerError) -> Self {
        match e {
            IndexerError::InvalidArgument(m) => Status::invalid_argument(m),
            IndexerError::Store(StoreError::NotFound(what)) => {
                Status::not_found(format!("{what} not found"))
            }
            IndexerError::Store(e) if e.is_transient() => {
                Status::unavailable(format!("database unavailable: {e}"))
            }
            IndexerError::Blob(dialectic_blob::BlobError::NotFound(key)) => {
                Status::not_found(format!("stored object {key} not found"))
            }
            other => {
                tracing::error!(error = %other, "request failed");
                Status::internal(other.to_string())
            }
        }
    }
}

/// Per-text counts and their total. Every tokenizer name is accepted: until
/// real tokenizers are wired in, all of them use the byte-length estimate.
pub fn count_tokens(_tokenizer: &str, texts: &[String]) -> (u64, Vec<u64>) {
    let per_text: Vec<u64> = texts
        .iter()
        .map(|t| dialectic_core::tokens::estimate_tokens(t))
        .collect();
    (per_text.iter().sum(), per_text)
}

#[derive(Default)]
pub struct Indexer;

#[tonic::async_trait]
impl IndexerService for Indexer {
    async fn count_tokens(
        &self,
        request: Request<CountTokensRequest>,
    ) -> Result<Response<CountTokensResponse>, Status> {
        let req = request.into_inner();
        let _span = tracing::debug_span!("count_tokens", tokenizer = %req.tokenizer, texts = req.texts.len()).entered();
        let (total, per_text) = count_tokens(&req.tokenizer, &req.texts);
        Ok(Response::new(CountTokensResponse { total, per_text }))
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
    let blob = dialectic_runtime::blob(&settings);
    let server = dialectic_runtime::start_grpc(
        SERVICE_NAME,
        &settings.indexer.listen,
        tonic::service::Routes::new(IndexerServiceServer::new(Indexer)),
        shutdown.clone(),
    )
    .await?;
    let dependencies = Dependencies {
        store: Some(store),
        blob: Some(blob),
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
    fn counts_sum_per_text_estimates() {
        let texts = vec!["abcd".to_string(), "abcde".to_string(), String::new()];
        assert_eq!(count_tokens("cl100k_base", &texts), (3, vec![1, 2, 0]));
        assert_eq!(count_tokens("", &[]), (0, vec![]));
    }

    #[test]
    fn errors_map_to_codes() {
        assert_eq!(
            Status::from(IndexerError::InvalidArgument("x".into())).code(),
            tonic::Code::InvalidArgument
        );
    }
}
