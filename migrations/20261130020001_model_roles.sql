-- A model per step (docs/models.md, "Model roles"): a pipeline version keeps
-- the roles its file declares (name -> parameters), a step the role it runs
-- as (template steps keep it, a clone copies it), and a session the model
-- it mapped each role to at start (role -> model id). Expand only (defaults
-- and nullable): older builds never read them.
ALTER TABLE dialectic_process_templates ADD COLUMN model_roles jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE dialectic_recipe_template_steps ADD COLUMN model_role text;
ALTER TABLE dialectic_stage_recipe_steps ADD COLUMN model_role text;
ALTER TABLE dialectic_sessions ADD COLUMN model_roles jsonb NOT NULL DEFAULT '{}'::jsonb;
