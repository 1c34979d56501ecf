-- A pipeline file's steps may set model parameters (`config`) and an object
-- filter; the template steps an installed pipeline writes keep them, and a
-- clone copies them. Expand only (defaulted columns): older builds never
-- read them.
ALTER TABLE dialectic_recipe_template_steps
    ADD COLUMN config_override jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN object_filter   jsonb NOT NULL DEFAULT '{}'::jsonb;
