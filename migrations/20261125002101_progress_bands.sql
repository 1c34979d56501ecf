-- A pipeline file's step may give its band of the stage's percent
-- (`progress = [30, 50]`); template steps keep it and a clone copies it.
-- Expand only (nullable): older builds never read it.
ALTER TABLE dialectic_recipe_template_steps ADD COLUMN progress_band smallint[];
ALTER TABLE dialectic_stage_recipe_steps ADD COLUMN progress_band smallint[];
