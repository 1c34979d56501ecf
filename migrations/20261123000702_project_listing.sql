-- Deleted projects stay as rows (their ledger history refers to their sessions)
-- but disappear from every read; their stored objects are removed.
ALTER TABLE dialectic_projects ADD COLUMN deleted_at timestamptz;

-- Paged lists, newest first: a user's projects and a project's sessions.
CREATE INDEX dialectic_projects_user_created ON dialectic_projects (user_id, created_at DESC, id DESC)
    WHERE deleted_at IS NULL;
CREATE INDEX dialectic_sessions_project_created ON dialectic_sessions (project_id, created_at DESC, id DESC);
