-- Plan-driven skipping (seed 004 adaptive execution): the steps a PLAN reply's
-- `skip_steps` names, kept per session and iteration with the reason given.
-- The planner treats them as done for this session only; the recipe is
-- unchanged. Expand only: a new table.
CREATE TABLE dialectic_step_skips (
    session_id   uuid NOT NULL REFERENCES dialectic_sessions (id) ON DELETE CASCADE,
    iteration    integer NOT NULL,
    step_key     text NOT NULL,
    reason       text NOT NULL,
    -- The PLAN job whose reply asked for it.
    requested_by uuid NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, iteration, step_key)
);
