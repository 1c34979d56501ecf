-- A paused session remembers the status to return to on resume.
ALTER TABLE dialectic_sessions ADD COLUMN paused_from text;
