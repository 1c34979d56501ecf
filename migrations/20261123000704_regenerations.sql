-- Regenerating a document (RegenerateDocument): the jobs that produced it end
-- `superseded` (final; their late outcomes are discarded) and a new EXECUTE job
-- writes the document again. The regeneration row remembers which jobs it
-- replaced, so the render of the new document archives exactly the old one,
-- and it makes a retried request (same client_request_id) return the first answer.
ALTER TABLE dialectic_generation_jobs DROP CONSTRAINT dialectic_generation_jobs_status_check;
ALTER TABLE dialectic_generation_jobs ADD CONSTRAINT dialectic_generation_jobs_status_check CHECK (status IN (
    'pending', 'processing', 'waiting_for_prerequisite', 'waiting_for_children',
    'pending_next_step', 'pending_continuation', 'retrying', 'completed', 'failed',
    'retry_loop_failed', 'paused_nsf', 'superseded'));

CREATE TABLE dialectic_regenerations (
    id                  uuid PRIMARY KEY,
    session_id          uuid NOT NULL REFERENCES dialectic_sessions (id) ON DELETE CASCADE,
    user_id             uuid NOT NULL REFERENCES users (id),
    -- Optional idempotency key, unique per user like projects' and sessions'.
    client_request_id   text,
    stage_slug          text NOT NULL,
    iteration_number    integer NOT NULL,
    model_id            uuid REFERENCES ai_providers (id),
    document_key        text NOT NULL,
    -- The rendered document that was current when the regeneration was asked for.
    resource_id         uuid,
    new_job_id          uuid NOT NULL REFERENCES dialectic_generation_jobs (id) ON DELETE CASCADE,
    superseded_job_ids  uuid[] NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, client_request_id)
);
CREATE INDEX dialectic_regenerations_new_job ON dialectic_regenerations (new_job_id);
CREATE INDEX dialectic_regenerations_session ON dialectic_regenerations (session_id, created_at);
