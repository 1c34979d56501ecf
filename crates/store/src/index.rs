//! The RAG index (indexer service): documents and their chunk vectors, keyed
//! by content hash, embedder and tokenizer. Written once per key.

use crate::StoreError;
use sqlx::PgPool;

#[derive(Debug, Clone, PartialEq)]
pub struct IndexKey<'a> {
    pub content_hash: &'a str,
    pub embedder: &'a str,
    pub tokenizer: &'a str,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct IndexedChunk {
    pub chunk_no: i32,
    pub body: String,
    pub token_count: i32,
    pub embedding: Vec<f32>,
}

/// The chunks of an indexed text in order; None when it was never indexed.
pub async fn chunks(
    pool: &PgPool,
    key: &IndexKey<'_>,
) -> Result<Option<Vec<IndexedChunk>>, StoreError> {
    let known: Option<i32> = sqlx::query_scalar(
        "SELECT chunk_count FROM index_documents WHERE content_hash = $1 AND embedder = $2 AND tokenizer = $3",
    )
    .bind(key.content_hash)
    .bind(key.embedder)
    .bind(key.tokenizer)
    .fetch_optional(pool)
    .await?;
    if known.is_none() {
        return Ok(None);
    }
    let rows = sqlx::query_as::<_, IndexedChunk>(
        "SELECT chunk_no, body, token_count, embedding FROM index_chunks
         WHERE content_hash = $1 AND embedder = $2 AND tokenizer = $3 ORDER BY chunk_no",
    )
    .bind(key.content_hash)
    .bind(key.embedder)
    .bind(key.tokenizer)
    .fetch_all(pool)
    .await?;
    Ok(Some(rows))
}

/// Stores a freshly embedded text and its chunks in one transaction. False
/// when another indexer stored the same key first (its rows stay; ours are dropped).
pub async fn insert(
    pool: &PgPool,
    key: &IndexKey<'_>,
    chunks: &[IndexedChunk],
    embedding_tokens: u64,
) -> Result<bool, StoreError> {
    let mut tx = pool.begin().await?;
    let token_count: i64 = chunks.iter().map(|c| i64::from(c.token_count)).sum();
    let inserted = sqlx::query(
        "INSERT INTO index_documents (content_hash, embedder, tokenizer, chunk_count, token_count, embedding_tokens)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
    )
    .bind(key.content_hash)
    .bind(key.embedder)
    .bind(key.tokenizer)
    .bind(chunks.len() as i32)
    .bind(token_count)
    .bind(embedding_tokens as i64)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !inserted {
        return Ok(false);
    }
    // Batches of rows per statement: a 1 MB text has about a thousand chunks.
    for batch in chunks.chunks(200) {
        let mut qb = sqlx::QueryBuilder::new(
            "INSERT INTO index_chunks (content_hash, embedder, tokenizer, chunk_no, body, token_count, embedding) ",
        );
        qb.push_values(batch, |mut b, c| {
            b.push_bind(key.content_hash)
                .push_bind(key.embedder)
                .push_bind(key.tokenizer)
                .push_bind(c.chunk_no)
                .push_bind(&c.body)
                .push_bind(c.token_count)
                .push_bind(&c.embedding);
        });
        qb.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// Embedding tokens ever spent on indexing (for tests and operators).
pub async fn total_embedding_tokens(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar(
            "SELECT COALESCE(SUM(embedding_tokens), 0)::bigint FROM index_documents",
        )
        .fetch_one(pool)
        .await?,
    )
}
