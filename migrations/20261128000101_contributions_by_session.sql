-- A session's contributions: the renderer and the executor read a document's
-- chain by session and relationship (`document_relationships @> …`), and the
-- only indexes it could use were the GIN index over every session's
-- relationships and the stage index, which holds latest versions only
-- (BENCHMARKS.md, issue 45: those reads topped the summed statement time).
CREATE INDEX dialectic_contributions_session ON dialectic_contributions (session_id);
