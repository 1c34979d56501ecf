-- A job whose model call the wallet cannot afford waits in paused_nsf until a
-- credit lets it resume.
ALTER TABLE dialectic_generation_jobs DROP CONSTRAINT dialectic_generation_jobs_status_check;
ALTER TABLE dialectic_generation_jobs ADD CONSTRAINT dialectic_generation_jobs_status_check CHECK (status IN (
    'pending', 'processing', 'waiting_for_prerequisite', 'waiting_for_children',
    'pending_next_step', 'pending_continuation', 'retrying', 'completed', 'failed',
    'retry_loop_failed', 'paused_nsf'));
CREATE INDEX dialectic_jobs_paused ON dialectic_generation_jobs (user_id) WHERE status = 'paused_nsf';
