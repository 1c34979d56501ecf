-- A session may move on to the next stage by itself when one completes,
-- instead of waiting for the user's stage responses.
ALTER TABLE dialectic_sessions ADD COLUMN auto_advance boolean NOT NULL DEFAULT false;

-- A new iteration starts from the user's review of the last one: the thesis
-- header context reads the feedback given on the paralysis stage (none in iteration 1).
UPDATE dialectic_recipe_template_steps
SET inputs_required = inputs_required || '[{"type": "feedback", "stage_slug": "paralysis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- Feedback on the previous iteration ---"}]'::jsonb,
    inputs_relevance = inputs_relevance || '[{"document_key": "*", "type": "feedback", "relevance": 0.6}]'::jsonb
WHERE id = '41000000-0000-0000-0000-000000000001';
