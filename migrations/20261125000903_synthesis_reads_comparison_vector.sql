-- Seed 000: synthesis reads the thesis and the antithesis, and the antithesis's
-- comparison_vector (its per-proposal scores, JSON, never rendered) exists for
-- synthesis. The step that plans the final deliverables now reads every
-- comparison vector, beside the consolidated syntheses. Optional, so a recipe
-- that skips the antithesis's comparison step still runs. Data only: older
-- builds read the same rule shape.
UPDATE dialectic_recipe_template_steps
   SET inputs_required = inputs_required || '[{"type": "document", "stage_slug": "antithesis", "document_key": "comparison_vector", "required": false, "multiple": true, "section_header": "--- Comparison vectors (the antithesis scores of each proposal) ---"}]'::jsonb,
       inputs_relevance = inputs_relevance || '[{"document_key": "comparison_vector", "type": "document", "relevance": 0.9}]'::jsonb
 WHERE id = '41000000-0000-0000-0000-000000000304'
   AND NOT inputs_required @> '[{"document_key": "comparison_vector"}]'::jsonb;

-- Stages whose recipe was already cloned keep their copy in step with the template.
UPDATE dialectic_stage_recipe_steps
   SET inputs_required = inputs_required || '[{"type": "document", "stage_slug": "antithesis", "document_key": "comparison_vector", "required": false, "multiple": true, "section_header": "--- Comparison vectors (the antithesis scores of each proposal) ---"}]'::jsonb,
       inputs_relevance = inputs_relevance || '[{"document_key": "comparison_vector", "type": "document", "relevance": 0.9}]'::jsonb
 WHERE template_step_id = '41000000-0000-0000-0000-000000000304'
   AND NOT inputs_required @> '[{"document_key": "comparison_vector"}]'::jsonb;
