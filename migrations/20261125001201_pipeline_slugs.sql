-- Pipelines are named by slug (pipeline files, `dialecticd pipeline export
-- dialectic`, later CreateProject's `pipeline`); the display name stays.
-- Expand only: older builds never read the column.
ALTER TABLE dialectic_process_templates ADD COLUMN slug text UNIQUE
    CHECK (slug ~ '^[a-z0-9_]+$');
UPDATE dialectic_process_templates SET slug = 'dialectic' WHERE name = 'Standard Dialectic';
