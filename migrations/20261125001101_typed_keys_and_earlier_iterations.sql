-- Replies are held to their JSON types, and stages read the iteration before.
--
-- Every output rule that names required keys gets their JSON types
-- (`key_types`), as the step prompts already describe them: a reply with a
-- key of the wrong type is refused and retried with the reason.
--
-- Seed 000: parenthesis reads the optional earlier master plan, paralysis the
-- optional earlier checklist and plan. From iteration 2 on, their opening
-- plans and the steps that rewrite those documents read the previous
-- iteration's version (`"iteration": "previous"`; nothing to read, and no
-- error, in iteration 1).
--
-- Data only: older builds ignore both new fields (they read such a rule as
-- one of the current iteration, which matches the same optional document or
-- nothing), so no compatibility bump.
CREATE FUNCTION pg_temp.with_key_types(outputs jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT COALESCE(jsonb_agg(
        CASE WHEN jsonb_typeof(o->'required_keys') = 'array' AND NOT o ? 'key_types' AND EXISTS (
                  SELECT 1 FROM jsonb_array_elements_text(o->'required_keys') k WHERE types ? k)
             THEN o || jsonb_build_object('key_types', (
                  SELECT jsonb_object_agg(k, types->k)
                    FROM jsonb_array_elements_text(o->'required_keys') k WHERE types ? k))
             ELSE o END ORDER BY i), '[]'::jsonb)
      FROM jsonb_array_elements(outputs) WITH ORDINALITY AS e(o, i),
           (SELECT '{"content": "string", "context_for_documents": "array", "dimensions": "array",
                     "scores": "object", "agreements": "array", "conflicts": "array",
                     "resolution": "string", "consolidated_plan": "object"}'::jsonb AS types) t
$$;

UPDATE dialectic_recipe_template_steps SET outputs_required = pg_temp.with_key_types(outputs_required);
UPDATE dialectic_stage_recipe_steps SET outputs_required = pg_temp.with_key_types(outputs_required);

CREATE FUNCTION pg_temp.previous(stage text, document_key text, header text) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('type', 'document', 'stage_slug', stage, 'document_key', document_key,
                              'required', false, 'multiple', false, 'iteration', 'previous',
                              'section_header', header)
$$;

CREATE TEMP TABLE earlier_reads (template_step_id uuid, rule jsonb) ON COMMIT DROP;
INSERT INTO earlier_reads VALUES
    ('41000000-0000-0000-0000-000000000401', pg_temp.previous('parenthesis', 'master_plan', '--- Master plan of the previous iteration ---')),
    ('41000000-0000-0000-0000-000000000403', pg_temp.previous('parenthesis', 'master_plan', '--- Master plan of the previous iteration ---')),
    ('41000000-0000-0000-0000-000000000501', pg_temp.previous('paralysis', 'actionable_checklist', '--- Checklist of the previous iteration ---')),
    ('41000000-0000-0000-0000-000000000501', pg_temp.previous('paralysis', 'updated_master_plan', '--- Updated master plan of the previous iteration ---')),
    ('41000000-0000-0000-0000-000000000502', pg_temp.previous('paralysis', 'actionable_checklist', '--- Checklist of the previous iteration ---')),
    ('41000000-0000-0000-0000-000000000503', pg_temp.previous('paralysis', 'updated_master_plan', '--- Updated master plan of the previous iteration ---'));

CREATE TEMP TABLE earlier_reads_by_step ON COMMIT DROP AS
SELECT template_step_id, jsonb_agg(rule) AS rules,
       jsonb_agg(jsonb_build_object('document_key', rule->>'document_key', 'type', 'document', 'relevance', 0.7)) AS relevance
  FROM earlier_reads GROUP BY template_step_id;

UPDATE dialectic_recipe_template_steps st
   SET inputs_required = st.inputs_required || r.rules, inputs_relevance = st.inputs_relevance || r.relevance
  FROM earlier_reads_by_step r
 WHERE st.id = r.template_step_id AND NOT st.inputs_required @> '[{"iteration": "previous"}]'::jsonb;

-- Stages whose recipe was already cloned keep their copy in step with the template.
UPDATE dialectic_stage_recipe_steps st
   SET inputs_required = st.inputs_required || r.rules, inputs_relevance = st.inputs_relevance || r.relevance
  FROM earlier_reads_by_step r
 WHERE st.template_step_id = r.template_step_id AND NOT st.inputs_required @> '[{"iteration": "previous"}]'::jsonb;

-- Feedback on paralysis steers the next iteration's thesis: the thesis rule
-- reads the previous iteration's, so iteration 1 never waits on or picks up
-- feedback given after it ran.
CREATE FUNCTION pg_temp.paralysis_feedback_is_previous(rules jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_agg(CASE WHEN r->>'type' = 'feedback' AND r->>'stage_slug' = 'paralysis'
                          THEN r || '{"iteration": "previous"}'::jsonb ELSE r END ORDER BY i)
      FROM jsonb_array_elements(rules) WITH ORDINALITY AS e(r, i)
$$;

UPDATE dialectic_recipe_template_steps
   SET inputs_required = pg_temp.paralysis_feedback_is_previous(inputs_required)
 WHERE inputs_required @> '[{"type": "feedback", "stage_slug": "paralysis"}]'::jsonb;
UPDATE dialectic_stage_recipe_steps
   SET inputs_required = pg_temp.paralysis_feedback_is_previous(inputs_required)
 WHERE inputs_required @> '[{"type": "feedback", "stage_slug": "paralysis"}]'::jsonb;
