-- Every question asked of a project (issue 54 "query history"): what was
-- asked, by whom, on which model, how long the answer took and what it cost,
-- and the answer itself as the API returned it (a dialectic.v1.QueryResponse,
-- protobuf-encoded, so its classification, citations and caveats are kept
-- typed). Written by the gateway alone; a project's deletion removes its rows.
CREATE TABLE dialectic_query_history (
    id uuid PRIMARY KEY,
    project_id uuid NOT NULL REFERENCES dialectic_projects (id) ON DELETE CASCADE,
    user_id uuid NOT NULL,
    question text NOT NULL,
    model text NOT NULL,
    query_type text NOT NULL,
    latency_ms bigint NOT NULL CHECK (latency_ms >= 0),
    cost bigint NOT NULL,
    cached boolean NOT NULL,
    response bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dialectic_query_history_by_project
    ON dialectic_query_history (project_id, created_at DESC, id DESC);
