-- Seed 003's pushback level, chosen when a session starts; prompts read it
-- as {{ pushback }}. Expand only: an older build never reads it, and the
-- default is what every session before it ran with. (An upload's role lives
-- in dialectic_project_resources.resource_description->>'role'.)
ALTER TABLE dialectic_sessions ADD COLUMN pushback text NOT NULL DEFAULT 'full'
    CHECK (pushback IN ('full', 'light', 'minimal'));
