-- Seed 003's change impact: a minor revisit flags the later stages'
-- documents for review; the flag stays on each document until the user
-- edits it (its re-render clears it) or submits a stage at or after it.
ALTER TABLE dialectic_project_resources
    ADD COLUMN needs_review boolean NOT NULL DEFAULT false;
