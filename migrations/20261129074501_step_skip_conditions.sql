-- A pipeline file's step may say when a plan may skip it
-- (`skip_only_when = { max_documents = 1 }`); template steps keep it and a
-- clone copies it. Expand only (nullable): older builds never read it.
ALTER TABLE dialectic_recipe_template_steps ADD COLUMN skip_only_when jsonb;
ALTER TABLE dialectic_stage_recipe_steps ADD COLUMN skip_only_when jsonb;
