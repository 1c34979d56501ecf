//! Indexer benchmark on a 1 MB document: tokens/second of counting (cl100k_base,
//! cold and from the Redis cache) and chunks/second of indexing (chunk, embed
//! locally, store in Postgres) through the real indexer service, then the
//! same document again (already indexed: no embedding tokens).
//!
//!     cargo run --release -p dialectic-e2e --bin index-bench -- [megabytes]

use dialectic_e2e::TestEnv;
use dialectic_proto::v1::indexer::indexer_service_client::IndexerServiceClient;
use dialectic_proto::v1::indexer::{IndexRequest, RetrieveRequest};
use dialectic_tokenizer::{Encoding, TokenCounter};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

const WORDS: [&str; 16] = [
    "pricing",
    "volunteer",
    "insurance",
    "ladder",
    "booking",
    "membership",
    "the",
    "and",
    "workflow",
    "inventory",
    "of",
    "risk",
    "schedule",
    "repair",
    "deposit",
    "neighbourhood",
];

/// Deterministic prose: sentences of varied words, paragraphs of varied length.
fn document(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 200);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut sentence: u32 = 0;
    while out.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w = WORDS[(x % 16) as usize];
        out.push_str(w);
        if x.is_multiple_of(11) {
            out.push_str(". ");
            sentence += 1;
            if sentence.is_multiple_of(6) {
                out.push_str("\n\n");
            }
        } else {
            out.push(' ');
        }
    }
    out
}

#[tokio::main]
async fn main() {
    let mb: f64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1.0);
    let text = document((mb * 1_000_000.0) as usize);
    println!("document: {} bytes", text.len());

    let started = Instant::now();
    let tokens = Encoding::Cl100k.count(&text).expect("count");
    let secs = started.elapsed().as_secs_f64();
    println!(
        "count (cl100k_base, cold): {tokens} tokens in {:.3} s = {:.0} tokens/s",
        secs,
        tokens as f64 / secs
    );

    let mut env = TestEnv::new().await;
    let cache = Arc::new(OnceLock::new());
    if let Ok(c) = dialectic_cache::Cache::connect(&env.settings.redis.url, 60).await {
        let _ = cache.set(c);
    }
    let counter = TokenCounter::new(cache);
    counter.count(Encoding::Cl100k, &text).await.expect("count");
    let started = Instant::now();
    let cached = counter.count(Encoding::Cl100k, &text).await.expect("count");
    let secs = started.elapsed().as_secs_f64();
    println!(
        "count (Redis cache hit): {cached} tokens in {:.4} s = {:.0} tokens/s",
        secs,
        cached as f64 / secs
    );

    env.start(&["indexer"]).await;
    env.wait_serving("indexer").await;
    let mut client = IndexerServiceClient::new(env.internal_channel(
        &env.settings.executor.indexer_url,
        dialectic_core::service_auth::ServiceName::Executor,
    ))
    .max_decoding_message_size(64 << 20)
    .max_encoding_message_size(64 << 20);
    let request = IndexRequest {
        text: text.clone(),
        embedder: "local".into(),
        tokenizer: "cl100k_base".into(),
    };
    let started = Instant::now();
    let first = client
        .index(request.clone())
        .await
        .expect("index")
        .into_inner();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "index (chunk + local embed + store): {} chunks, {} embedding tokens in {:.3} s = {:.0} chunks/s",
        first.chunks,
        first.tokens_spent,
        secs,
        f64::from(first.chunks) / secs
    );
    let started = Instant::now();
    let again = client.index(request).await.expect("index").into_inner();
    println!(
        "index again (already indexed): {} embedding tokens in {:.3} s",
        again.tokens_spent,
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let found = client
        .retrieve(RetrieveRequest {
            text,
            query: "insurance and deposit for a ladder".into(),
            budget_tokens: 2000,
            embedder: "local".into(),
            tokenizer: "cl100k_base".into(),
        })
        .await
        .expect("retrieve")
        .into_inner();
    println!(
        "retrieve 2,000 tokens from {} chunks: {} chunks, {} tokens in {:.3} s",
        found.chunks_total,
        found.chunks_used,
        found.tokens,
        started.elapsed().as_secs_f64()
    );
    env.teardown().await;
}
