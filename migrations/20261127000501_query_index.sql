-- The query index (Query, issue 45): every source a project's questions are
-- answered from (an upload, a rendered document, a resolved clause, a
-- blackboard finding), cut into chunks with their character ranges in the
-- text a client fetches for it (GetDocumentContent) and their local
-- embeddings. A source is indexed at the first question that reads it and
-- again only when its row changed and its content hash with it; retrieval
-- ranks the stored chunks here, so a miss reads no object and embeds nothing
-- but the question. A source's rows go with it (the foreign keys below) or
-- at the next question once it is no longer read (archived, replaced, of an
-- older analysis).
CREATE TABLE query_sources (
    id              uuid PRIMARY KEY,
    project_id      uuid NOT NULL REFERENCES dialectic_projects (id) ON DELETE CASCADE,
    -- Exactly one of these names the row the source is; its deletion takes the index rows.
    resource_id     uuid REFERENCES dialectic_project_resources (id) ON DELETE CASCADE,
    contribution_id uuid REFERENCES dialectic_contributions (id) ON DELETE CASCADE,
    entry_id        uuid REFERENCES dialectic_blackboard_entries (id) ON DELETE CASCADE,
    -- dialectic_core::query::SourceKind's name.
    kind            text NOT NULL,
    name            text NOT NULL,
    -- The source row's updated_at (created_at for rows that never change) when indexed.
    version         timestamptz NOT NULL,
    content_hash    text NOT NULL,
    -- The sources' order in a prompt: documents, then resolved clauses, then
    -- findings, each in the order they were made.
    rank            integer NOT NULL,
    made_at         timestamptz NOT NULL,
    indexed_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (num_nonnulls(resource_id, contribution_id, entry_id) = 1)
);
CREATE INDEX query_sources_project ON query_sources (project_id);
CREATE INDEX query_sources_resource ON query_sources (resource_id) WHERE resource_id IS NOT NULL;
CREATE INDEX query_sources_contribution ON query_sources (contribution_id) WHERE contribution_id IS NOT NULL;
CREATE INDEX query_sources_entry ON query_sources (entry_id) WHERE entry_id IS NOT NULL;

CREATE TABLE query_chunks (
    source_id  uuid NOT NULL REFERENCES query_sources (id) ON DELETE CASCADE,
    chunk_no   integer NOT NULL,
    -- Characters (not bytes) of the source's text: start inclusive, end exclusive.
    start_char integer NOT NULL,
    end_char   integer NOT NULL,
    body       text NOT NULL,
    -- dialectic_core::query::embedding of body (unit length, LOCAL_DIMS values).
    embedding  real[] NOT NULL,
    PRIMARY KEY (source_id, chunk_no)
);
