-- Abandonment of idle sessions (seed 003 "Session Expiration"): when the
-- planner warned that a session has been idle for planner.abandon_warn_secs.
-- Activity after it (the row or a job changing) cancels the warning; with
-- none for planner.abandon_after_warn_secs more, the session is abandoned,
-- its objects kept. Expand only: a nullable column.
ALTER TABLE dialectic_sessions ADD COLUMN idle_warned_at timestamptz;
