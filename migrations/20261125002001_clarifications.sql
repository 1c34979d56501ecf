-- Clarification loops (seed 004 `needs_clarification`): each round a reply
-- started, numbered per session. The planner re-runs the asked step (the
-- question in its prompt) and every step downstream of it in that stage;
-- the jobs it replaces are superseded. Expand only: a new table.
CREATE TABLE dialectic_clarifications (
    session_id    uuid NOT NULL REFERENCES dialectic_sessions (id) ON DELETE CASCADE,
    round         integer NOT NULL,
    iteration     integer NOT NULL,
    stage_slug    text NOT NULL,
    -- The job whose reply asked, its step, and the step asked.
    asked_by_job  uuid NOT NULL,
    asked_by_step text NOT NULL,
    step_key      text NOT NULL,
    question      text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, round)
);
