-- The W3C traceparent of the request that started a session, so later commands
-- on the session (stage responses, resume) continue the same trace: one session,
-- one trace across every service.
ALTER TABLE dialectic_sessions ADD COLUMN traceparent text;
