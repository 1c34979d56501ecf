-- Seed data: the local user, the five stages and their process template,
-- the thesis recipe with its prompts and document templates, and the simulated models.
-- Fixed ids let code and tests name these rows.

INSERT INTO users (id, display_name, is_admin)
VALUES ('00000000-0000-0000-0000-000000000001', 'local', true);

INSERT INTO system_prompts (id, name, prompt_text) VALUES
('10000000-0000-0000-0000-000000000001', 'thesis_system',
 'You are a senior product strategist writing the first proposal (the thesis) for the user''s idea. Reply with JSON only.'),
('10000000-0000-0000-0000-000000000002', 'antithesis_system',
 'You are a critical reviewer. Find weaknesses, risks and gaps in the proposals you are given. Reply with JSON only.'),
('10000000-0000-0000-0000-000000000003', 'synthesis_system',
 'You reconcile proposals and their critiques into one improved plan. Reply with JSON only.'),
('10000000-0000-0000-0000-000000000004', 'parenthesis_system',
 'You turn an agreed plan into precise, sequenced planning documents. Reply with JSON only.'),
('10000000-0000-0000-0000-000000000005', 'paralysis_system',
 'You turn planning documents into an implementation plan a team can start on tomorrow. Reply with JSON only.'),
('10000000-0000-0000-0000-000000000011', 'thesis_planner_header',
 'Plan the thesis documents for the seed prompt above. Reply with one JSON object: {"system_materials": {"stage_rationale": string, "seed_summary": string}, "context_for_documents": [{"document_key": string, "content_to_include": object}]} with one entry for each of business_case, feature_spec, technical_approach and success_metrics.'),
('10000000-0000-0000-0000-000000000012', 'thesis_turn_business_case',
 'Write the business case for the idea, following the header context above. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000013', 'thesis_turn_feature_spec',
 'Write the feature specification for the idea, following the header context above. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000014', 'thesis_turn_technical_approach',
 'Write the technical approach for the idea, following the header context above. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000015', 'thesis_turn_success_metrics',
 'Write the success metrics for the idea, following the header context above. Reply with one JSON object: {"content": "<markdown body>"}.');

INSERT INTO dialectic_stages (id, slug, display_name, description, default_system_prompt_id) VALUES
('20000000-0000-0000-0000-000000000001', 'thesis', 'Thesis', 'Initial proposals from each model', '10000000-0000-0000-0000-000000000001'),
('20000000-0000-0000-0000-000000000002', 'antithesis', 'Antithesis', 'Critiques of every proposal', '10000000-0000-0000-0000-000000000002'),
('20000000-0000-0000-0000-000000000003', 'synthesis', 'Synthesis', 'Proposals and critiques reconciled', '10000000-0000-0000-0000-000000000003'),
('20000000-0000-0000-0000-000000000004', 'parenthesis', 'Parenthesis', 'Sequenced planning documents', '10000000-0000-0000-0000-000000000004'),
('20000000-0000-0000-0000-000000000005', 'paralysis', 'Paralysis', 'Implementation plan', '10000000-0000-0000-0000-000000000005');

INSERT INTO dialectic_process_templates (id, name, description, starting_stage_id) VALUES
('30000000-0000-0000-0000-000000000001', 'Standard Dialectic',
 'thesis → antithesis → synthesis → parenthesis → paralysis', '20000000-0000-0000-0000-000000000001');

INSERT INTO dialectic_process_template_stages (process_template_id, stage_id, stage_number) VALUES
('30000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000001', 1),
('30000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000002', 2),
('30000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000003', 3),
('30000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000004', 4),
('30000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000005', 5);

INSERT INTO dialectic_stage_transitions (process_template_id, source_stage_id, target_stage_id) VALUES
('30000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000002'),
('30000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000002', '20000000-0000-0000-0000-000000000003'),
('30000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000003', '20000000-0000-0000-0000-000000000004'),
('30000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000004', '20000000-0000-0000-0000-000000000005');

-- Thesis recipe: seed_prompt → header_context → four documents in parallel.
INSERT INTO dialectic_recipe_templates (id, recipe_name, recipe_version, display_name, description) VALUES
('40000000-0000-0000-0000-000000000001', 'thesis', 1, 'Thesis', 'Header context, then four proposal documents in parallel');

INSERT INTO dialectic_recipe_template_steps
(id, template_id, step_number, parallel_group, branch_key, step_key, step_slug, step_name, job_type, prompt_type,
 prompt_template_id, output_type, granularity_strategy, inputs_required, inputs_relevance, outputs_required) VALUES
('41000000-0000-0000-0000-000000000001', '40000000-0000-0000-0000-000000000001', 1, NULL, 'header_context',
 'thesis_build_stage_header', 'build-stage-header', 'Build stage header', 'PLAN', 'Planner',
 '10000000-0000-0000-0000-000000000011', 'header_context', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 1.0}]',
 '[{"document_key": "header_context", "file_type": "header_context", "required_keys": ["context_for_documents"]}]'),
('41000000-0000-0000-0000-000000000002', '40000000-0000-0000-0000-000000000001', 2, 2, 'business_case',
 'thesis_generate_business_case', 'generate-business-case', 'Generate business case', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000012', 'business_case', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "thesis", "document_key": "header_context", "section_header": "--- Header context ---"}]',
 '[{"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}]',
 '[{"document_key": "business_case", "file_type": "markdown", "template_filename": "thesis_business_case.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000003', '40000000-0000-0000-0000-000000000001', 2, 2, 'feature_spec',
 'thesis_generate_feature_spec', 'generate-feature-spec', 'Generate feature spec', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000013', 'feature_spec', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "thesis", "document_key": "header_context", "section_header": "--- Header context ---"}]',
 '[{"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}]',
 '[{"document_key": "feature_spec", "file_type": "markdown", "template_filename": "thesis_feature_spec.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000004', '40000000-0000-0000-0000-000000000001', 2, 2, 'technical_approach',
 'thesis_generate_technical_approach', 'generate-technical-approach', 'Generate technical approach', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000014', 'technical_approach', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "thesis", "document_key": "header_context", "section_header": "--- Header context ---"}]',
 '[{"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}]',
 '[{"document_key": "technical_approach", "file_type": "markdown", "template_filename": "thesis_technical_approach.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000005', '40000000-0000-0000-0000-000000000001', 2, 2, 'success_metrics',
 'thesis_generate_success_metrics', 'generate-success-metrics', 'Generate success metrics', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000015', 'success_metrics', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "thesis", "document_key": "header_context", "section_header": "--- Header context ---"}]',
 '[{"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}]',
 '[{"document_key": "success_metrics", "file_type": "markdown", "template_filename": "thesis_success_metrics.md", "required_keys": ["content"]}]');

INSERT INTO dialectic_recipe_template_edges (template_id, from_step_id, to_step_id) VALUES
('40000000-0000-0000-0000-000000000001', '41000000-0000-0000-0000-000000000001', '41000000-0000-0000-0000-000000000002'),
('40000000-0000-0000-0000-000000000001', '41000000-0000-0000-0000-000000000001', '41000000-0000-0000-0000-000000000003'),
('40000000-0000-0000-0000-000000000001', '41000000-0000-0000-0000-000000000001', '41000000-0000-0000-0000-000000000004'),
('40000000-0000-0000-0000-000000000001', '41000000-0000-0000-0000-000000000001', '41000000-0000-0000-0000-000000000005');

INSERT INTO dialectic_stage_recipe_instances (id, stage_id, template_id, is_cloned) VALUES
('42000000-0000-0000-0000-000000000001', '20000000-0000-0000-0000-000000000001', '40000000-0000-0000-0000-000000000001', false);

UPDATE dialectic_stages
SET recipe_template_id = '40000000-0000-0000-0000-000000000001',
    active_recipe_instance_id = '42000000-0000-0000-0000-000000000001'
WHERE id = '20000000-0000-0000-0000-000000000001';

INSERT INTO dialectic_document_templates (id, stage_slug, document_key, name, content, file_name) VALUES
('43000000-0000-0000-0000-000000000001', 'thesis', 'business_case', 'Thesis business case',
 E'# {{title}}\n\n> Thesis stage proposal\n\n{{content}}\n', 'thesis_business_case.md'),
('43000000-0000-0000-0000-000000000002', 'thesis', 'feature_spec', 'Thesis feature spec',
 E'# {{title}}\n\n> Thesis stage proposal\n\n{{content}}\n', 'thesis_feature_spec.md'),
('43000000-0000-0000-0000-000000000003', 'thesis', 'technical_approach', 'Thesis technical approach',
 E'# {{title}}\n\n> Thesis stage proposal\n\n{{content}}\n', 'thesis_technical_approach.md'),
('43000000-0000-0000-0000-000000000004', 'thesis', 'success_metrics', 'Thesis success metrics',
 E'# {{title}}\n\n> Thesis stage proposal\n\n{{content}}\n', 'thesis_success_metrics.md');

UPDATE dialectic_stages
SET expected_output_template_ids = ARRAY[
    '43000000-0000-0000-0000-000000000001', '43000000-0000-0000-0000-000000000002',
    '43000000-0000-0000-0000-000000000003', '43000000-0000-0000-0000-000000000004']::uuid[]
WHERE slug = 'thesis';

INSERT INTO ai_providers (id, api_identifier, name, provider, context_window_tokens, max_output_tokens,
                          input_token_cost_rate, output_token_cost_rate, tokenizer) VALUES
('50000000-0000-0000-0000-000000000001', 'simulated', 'Simulated (default)', 'simulated', 128000, 8192, 1, 1, 'estimate'),
('50000000-0000-0000-0000-000000000002', 'simulated-b', 'Simulated B', 'simulated', 128000, 8192, 1, 1, 'estimate');

INSERT INTO token_wallets (id, user_id, balance)
VALUES ('60000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000001', 100000000);

INSERT INTO token_wallet_transactions (id, wallet_id, kind, amount, balance_after, held_after, idempotency_key, request_hash, reason)
VALUES ('61000000-0000-0000-0000-000000000001', '60000000-0000-0000-0000-000000000001', 'credit', 100000000, 100000000, 0,
        'seed-initial-credit', 'seed', 'initial credit for the local user');
