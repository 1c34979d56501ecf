-- RAG index (indexer service): one row per indexed text and embedder, one row
-- per chunk with its vector. Keyed by content hash, so indexing is idempotent.
-- Vectors live in Postgres arrays next to their chunk: a retrieval reads one
-- document's chunks (tens to a few thousand), scored in the indexer, so no ANN
-- index is needed, and the document row and its chunks commit together.
CREATE TABLE index_documents (
    content_hash     text NOT NULL,
    embedder         text NOT NULL,
    tokenizer        text NOT NULL,
    chunk_count      integer NOT NULL CHECK (chunk_count >= 0),
    token_count      bigint NOT NULL CHECK (token_count >= 0),
    -- What embedding this text cost when it was first indexed.
    embedding_tokens bigint NOT NULL CHECK (embedding_tokens >= 0),
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (content_hash, embedder, tokenizer)
);

CREATE TABLE index_chunks (
    content_hash text NOT NULL,
    embedder     text NOT NULL,
    tokenizer    text NOT NULL,
    chunk_no     integer NOT NULL,
    body         text NOT NULL,
    token_count  integer NOT NULL,
    embedding    real[] NOT NULL,
    PRIMARY KEY (content_hash, embedder, tokenizer, chunk_no),
    FOREIGN KEY (content_hash, embedder, tokenizer)
        REFERENCES index_documents (content_hash, embedder, tokenizer) ON DELETE CASCADE
);

-- Provenance: which inputs were compressed for a contribution, and how.
ALTER TABLE dialectic_contributions ADD COLUMN compressed_inputs jsonb NOT NULL DEFAULT '[]'::jsonb;

-- Models registered from now on count with a real tokenizer unless they name
-- another; the simulated rows keep `estimate`, which is how they report usage.
ALTER TABLE ai_providers ALTER COLUMN tokenizer SET DEFAULT 'cl100k_base';
