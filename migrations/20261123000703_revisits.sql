-- Revisiting an earlier stage (seed 003): later stages' documents become
-- archived versions, their contributions stop being inputs, and the stages
-- re-run under a new revision (root job keys carry it, so they are new jobs).
ALTER TABLE dialectic_sessions ADD COLUMN revision integer NOT NULL DEFAULT 0;
ALTER TABLE dialectic_contributions ADD COLUMN is_archived boolean NOT NULL DEFAULT false;

-- The revision history: which stage was revisited, how big the change was, what
-- was archived and which stages were flagged for review.
CREATE TABLE dialectic_session_revisions (
    id                  uuid PRIMARY KEY,
    session_id          uuid NOT NULL REFERENCES dialectic_sessions (id) ON DELETE CASCADE,
    revision            integer NOT NULL,
    stage_slug          text NOT NULL,
    iteration_number    integer NOT NULL,
    impact              text NOT NULL CHECK (impact IN ('minor', 'moderate', 'major')),
    reason              text,
    needs_review        text[] NOT NULL DEFAULT '{}',
    downstream_archived text[] NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dialectic_session_revisions_session ON dialectic_session_revisions (session_id, created_at);
