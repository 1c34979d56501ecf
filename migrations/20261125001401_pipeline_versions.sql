-- Pipelines have versions (`dialecticd pipeline install`, InstallPipeline).
-- Installing a file again makes a new version with its own stages, recipes
-- and document templates; a session keeps the version it started on, new
-- sessions take the newest. A stage slug belongs to one pipeline, but each
-- version has its own row of it: `is_current` marks the newest version's,
-- the one admin recipe edits and ListRecipes address.
ALTER TABLE dialectic_process_templates
    ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version > 0),
    -- SHA-256 of the pipeline file a version was installed from: installing
    -- the same file again answers with that version instead of a new one.
    ADD COLUMN source_digest text,
    DROP CONSTRAINT dialectic_process_templates_name_key,
    DROP CONSTRAINT dialectic_process_templates_slug_key,
    ADD CONSTRAINT dialectic_process_templates_slug_version UNIQUE (slug, version);

ALTER TABLE dialectic_stages
    ADD COLUMN process_template_id uuid,
    ADD COLUMN is_current boolean NOT NULL DEFAULT true,
    DROP CONSTRAINT dialectic_stages_slug_key;
CREATE UNIQUE INDEX dialectic_stages_current_slug ON dialectic_stages (slug) WHERE is_current;
CREATE UNIQUE INDEX dialectic_stages_version_slug ON dialectic_stages (process_template_id, slug);
UPDATE dialectic_stages s SET process_template_id = pts.process_template_id
  FROM dialectic_process_template_stages pts WHERE pts.stage_id = s.id;
-- Deferred: an install writes a version's stages before the version row.
ALTER TABLE dialectic_stages ADD CONSTRAINT dialectic_stages_process_template
    FOREIGN KEY (process_template_id) REFERENCES dialectic_process_templates (id)
    DEFERRABLE INITIALLY DEFERRED;

-- The version a session runs; NULL (rows from older builds) means its project's.
ALTER TABLE dialectic_sessions
    ADD COLUMN process_template_id uuid REFERENCES dialectic_process_templates (id);
UPDATE dialectic_sessions s SET process_template_id = p.process_template_id
  FROM dialectic_projects p WHERE p.id = s.project_id;

-- Document templates belong to a stage row (so to a version), not to a slug.
ALTER TABLE dialectic_document_templates
    ADD COLUMN stage_id uuid REFERENCES dialectic_stages (id),
    DROP CONSTRAINT dialectic_document_templates_stage_slug_document_key_key;
UPDATE dialectic_document_templates d SET stage_id = s.id
  FROM dialectic_stages s WHERE s.slug = d.stage_slug;
CREATE UNIQUE INDEX dialectic_document_templates_stage_key
    ON dialectic_document_templates (stage_id, document_key);

-- Contract: older builds find a stage, a pipeline and a template by slug alone,
-- and would mix versions (two projects from one CreateProject) once a second
-- version exists. They report NOT_SERVING on this schema instead.
UPDATE schema_compatibility SET oldest_compatible = 20261125001401;
