-- The shared blackboard (seed 004 §1): typed findings a step publishes for
-- the steps after it. This table is the record; Redis keeps a copy per
-- session and type (`blackboard:{session}:{type}`, tracked in
-- `blackboard_keys:{session}`) that readers rebuild from here when its
-- length is not the count of rows here, so a Redis restart loses nothing. `seq`
-- numbers a session's entries of one type from 1, in publishing order.
-- Expand only: a new table.
CREATE TABLE dialectic_blackboard_entries (
    id          uuid PRIMARY KEY,
    session_id  uuid NOT NULL REFERENCES dialectic_sessions (id) ON DELETE CASCADE,
    entry_type  text NOT NULL,
    seq         integer NOT NULL,
    iteration   integer NOT NULL,
    stage_slug  text NOT NULL,
    step_key    text NOT NULL,
    -- The slug of the model whose reply published it (the seed's "agent").
    model_slug  text NOT NULL,
    job_id      uuid NOT NULL,
    data        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (session_id, entry_type, seq)
);
