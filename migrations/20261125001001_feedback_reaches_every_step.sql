-- Feedback on a stage steers everything the next stage writes, not only its
-- plan: every step of a recipe reads the feedback rule its first planning step
-- reads (optional, so the first iteration, with no feedback yet, runs as before;
-- thesis reads the previous iteration's paralysis feedback from iteration 2 on).
-- Data only: older builds read the same rule shape.
WITH stage_feedback AS (
    SELECT DISTINCT ON (st.template_id) st.template_id, r AS rule
      FROM dialectic_recipe_template_steps st, jsonb_array_elements(st.inputs_required) r
     WHERE st.job_type = 'PLAN' AND r->>'type' = 'feedback'
     ORDER BY st.template_id, st.step_number
)
UPDATE dialectic_recipe_template_steps st
   SET inputs_required = st.inputs_required || jsonb_build_array(f.rule || '{"required": false}'::jsonb),
       inputs_relevance = CASE
           WHEN st.inputs_relevance @> '[{"type": "feedback"}]'::jsonb THEN st.inputs_relevance
           ELSE st.inputs_relevance || '[{"document_key": "*", "type": "feedback", "relevance": 0.6}]'::jsonb
       END
  FROM stage_feedback f
 WHERE st.template_id = f.template_id
   AND NOT st.inputs_required @> '[{"type": "feedback"}]'::jsonb;

-- Cloned recipes get the same, from their own first planning step.
WITH stage_feedback AS (
    SELECT DISTINCT ON (st.instance_id) st.instance_id, r AS rule
      FROM dialectic_stage_recipe_steps st, jsonb_array_elements(st.inputs_required) r
     WHERE st.job_type = 'PLAN' AND r->>'type' = 'feedback'
     ORDER BY st.instance_id, st.execution_order NULLS LAST, st.created_at
)
UPDATE dialectic_stage_recipe_steps st
   SET inputs_required = st.inputs_required || jsonb_build_array(f.rule || '{"required": false}'::jsonb),
       inputs_relevance = CASE
           WHEN st.inputs_relevance @> '[{"type": "feedback"}]'::jsonb THEN st.inputs_relevance
           ELSE st.inputs_relevance || '[{"document_key": "*", "type": "feedback", "relevance": 0.6}]'::jsonb
       END
  FROM stage_feedback f
 WHERE st.instance_id = f.instance_id
   AND NOT st.inputs_required @> '[{"type": "feedback"}]'::jsonb;
