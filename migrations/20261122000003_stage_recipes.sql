-- The recipes of the antithesis, synthesis, parenthesis and paralysis stages, in the
-- shape of the thesis recipe of 20261122000002_seed.sql: template, steps, edges, an
-- uncloned stage instance, one system prompt per step and a document template for
-- every markdown output. JSON conventions and fan-out are described in docs/recipes.md.
-- Fixed ids (N = stage number, K = step or document number):
--   templates 40000000-…-00000000000N   steps     41000000-…-000000000N0K
--   instances 42000000-…-00000000000N   documents 43000000-…-000000000N0K
--   prompts   10000000-…-000000000N0K (prompt K belongs to step K; documents are numbered in step order)

-- Antithesis recipe: seed_prompt + thesis → header_context → six critiques per thesis lineage in parallel.
INSERT INTO system_prompts (id, name, prompt_text) VALUES
('10000000-0000-0000-0000-000000000201', 'antithesis_planner_header',
 'Plan the antithesis critiques of the thesis proposals above, taking the user feedback into account where there is any. Reply with one JSON object: {"system_materials": {"stage_rationale": string, "input_summary": string}, "context_for_documents": [{"document_key": string, "content_to_include": object}]} with one entry for each of business_case_critique, technical_feasibility_assessment, risk_register, non_functional_requirements, dependency_map and comparison_vector.'),
('10000000-0000-0000-0000-000000000202', 'antithesis_turn_business_case_critique',
 'Critique the business case of the thesis proposal under review: market, value, costs and assumptions that do not hold. Follow the header context above; name the proposal''s author lineage and quote the claims you challenge. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000203', 'antithesis_turn_technical_feasibility_assessment',
 'Assess whether the thesis proposal under review can be built as described: architecture gaps, unproven technology, effort the proposal underestimates. Follow the header context above and rate each concern low, medium or high. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000204', 'antithesis_turn_risk_register',
 'Write a risk register for the thesis proposal under review as a markdown table with columns risk, likelihood, impact, mitigation and owner. Follow the header context above; include at least one risk each for product, technology, operations and compliance. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000205', 'antithesis_turn_non_functional_requirements',
 'List the non-functional requirements the thesis proposal under review misses or understates: performance, availability, security, privacy, accessibility, operability. Follow the header context above and give each a measurable target. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000206', 'antithesis_turn_dependency_map',
 'Map the dependencies of the thesis proposal under review: external services, teams, data sources and ordering constraints between components. Follow the header context above; end with the critical path as a numbered list. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000207', 'antithesis_turn_comparison_vector',
 'Score the thesis proposal under review on feasibility, value, risk, cost and time to market, following the header context above. Reply with one JSON object with exactly these keys: {"dimensions": [string], "scores": {"<dimension>": number from 1 (poor) to 5 (strong)}, "rationale": {"<dimension>": string}}; "dimensions" and "scores" are required and every dimension must have a score. No markdown.');

INSERT INTO dialectic_recipe_templates (id, recipe_name, recipe_version, display_name, description) VALUES
('40000000-0000-0000-0000-000000000002', 'antithesis', 1, 'Antithesis', 'Header context, then six critiques of every thesis lineage in parallel');

INSERT INTO dialectic_recipe_template_steps
(id, template_id, step_number, parallel_group, branch_key, step_key, step_slug, step_name, step_description, job_type, prompt_type,
 prompt_template_id, output_type, granularity_strategy, inputs_required, inputs_relevance, outputs_required) VALUES
('41000000-0000-0000-0000-000000000201', '40000000-0000-0000-0000-000000000002', 1, NULL, 'header_context',
 'antithesis_build_stage_header', 'build-stage-header', 'Build stage header', 'Plans the critiques every thesis lineage will receive', 'PLAN', 'Planner',
 '10000000-0000-0000-0000-000000000201', 'header_context', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "document", "stage_slug": "thesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Thesis proposals ---"}, {"type": "feedback", "stage_slug": "thesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the thesis ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "header_context", "file_type": "header_context", "required_keys": ["context_for_documents"]}]'),
('41000000-0000-0000-0000-000000000202', '40000000-0000-0000-0000-000000000002', 2, 2, 'business_case_critique',
 'antithesis_business_case_critique', 'business-case-critique', 'Critique business case', 'Critiques the business case of one thesis lineage', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000202', 'business_case_critique', 'per_source_document_by_lineage',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "antithesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "thesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Thesis proposal under review ---"}, {"type": "feedback", "stage_slug": "thesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the thesis ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "business_case_critique", "file_type": "markdown", "template_filename": "antithesis_business_case_critique.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000203', '40000000-0000-0000-0000-000000000002', 2, 2, 'technical_feasibility_assessment',
 'antithesis_technical_feasibility_assessment', 'technical-feasibility-assessment', 'Assess technical feasibility', 'Assesses whether one thesis lineage can be built as proposed', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000203', 'technical_feasibility_assessment', 'per_source_document_by_lineage',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "antithesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "thesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Thesis proposal under review ---"}, {"type": "feedback", "stage_slug": "thesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the thesis ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "technical_feasibility_assessment", "file_type": "markdown", "template_filename": "antithesis_technical_feasibility_assessment.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000204', '40000000-0000-0000-0000-000000000002', 2, 2, 'risk_register',
 'antithesis_risk_register', 'risk-register', 'Build risk register', 'Registers the risks of one thesis lineage', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000204', 'risk_register', 'per_source_document_by_lineage',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "antithesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "thesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Thesis proposal under review ---"}, {"type": "feedback", "stage_slug": "thesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the thesis ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "risk_register", "file_type": "markdown", "template_filename": "antithesis_risk_register.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000205', '40000000-0000-0000-0000-000000000002', 2, 2, 'non_functional_requirements',
 'antithesis_non_functional_requirements', 'non-functional-requirements', 'List non-functional requirements', 'Lists the non-functional requirements one thesis lineage misses', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000205', 'non_functional_requirements', 'per_source_document_by_lineage',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "antithesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "thesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Thesis proposal under review ---"}, {"type": "feedback", "stage_slug": "thesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the thesis ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "non_functional_requirements", "file_type": "markdown", "template_filename": "antithesis_non_functional_requirements.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000206', '40000000-0000-0000-0000-000000000002', 2, 2, 'dependency_map',
 'antithesis_dependency_map', 'dependency-map', 'Map dependencies', 'Maps the dependencies of one thesis lineage', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000206', 'dependency_map', 'per_source_document_by_lineage',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "antithesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "thesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Thesis proposal under review ---"}, {"type": "feedback", "stage_slug": "thesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the thesis ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "dependency_map", "file_type": "markdown", "template_filename": "antithesis_dependency_map.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000207', '40000000-0000-0000-0000-000000000002', 2, 2, 'comparison_vector',
 'antithesis_comparison_vector', 'comparison-vector', 'Score comparison vector', 'Machine-readable scores of each thesis lineage, for synthesis', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000207', 'comparison_vector', 'per_source_document_by_lineage',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "antithesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "thesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Thesis proposal under review ---"}, {"type": "feedback", "stage_slug": "thesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the thesis ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "comparison_vector", "file_type": "json", "required_keys": ["dimensions", "scores"]}]');

INSERT INTO dialectic_recipe_template_edges (template_id, from_step_id, to_step_id) VALUES
('40000000-0000-0000-0000-000000000002', '41000000-0000-0000-0000-000000000201', '41000000-0000-0000-0000-000000000202'),
('40000000-0000-0000-0000-000000000002', '41000000-0000-0000-0000-000000000201', '41000000-0000-0000-0000-000000000203'),
('40000000-0000-0000-0000-000000000002', '41000000-0000-0000-0000-000000000201', '41000000-0000-0000-0000-000000000204'),
('40000000-0000-0000-0000-000000000002', '41000000-0000-0000-0000-000000000201', '41000000-0000-0000-0000-000000000205'),
('40000000-0000-0000-0000-000000000002', '41000000-0000-0000-0000-000000000201', '41000000-0000-0000-0000-000000000206'),
('40000000-0000-0000-0000-000000000002', '41000000-0000-0000-0000-000000000201', '41000000-0000-0000-0000-000000000207');

INSERT INTO dialectic_stage_recipe_instances (id, stage_id, template_id, is_cloned) VALUES
('42000000-0000-0000-0000-000000000002', '20000000-0000-0000-0000-000000000002', '40000000-0000-0000-0000-000000000002', false);

UPDATE dialectic_stages
SET recipe_template_id = '40000000-0000-0000-0000-000000000002',
    active_recipe_instance_id = '42000000-0000-0000-0000-000000000002'
WHERE id = '20000000-0000-0000-0000-000000000002';

INSERT INTO dialectic_document_templates (id, stage_slug, document_key, name, content, file_name) VALUES
('43000000-0000-0000-0000-000000000201', 'antithesis', 'business_case_critique', 'Antithesis business case critique',
 E'# {{title}}\n\n> Antithesis stage: critique of a thesis business case\n\n{{content}}\n', 'antithesis_business_case_critique.md'),
('43000000-0000-0000-0000-000000000202', 'antithesis', 'technical_feasibility_assessment', 'Antithesis technical feasibility assessment',
 E'# {{title}}\n\n> Antithesis stage: feasibility review of a thesis proposal\n\n{{content}}\n', 'antithesis_technical_feasibility_assessment.md'),
('43000000-0000-0000-0000-000000000203', 'antithesis', 'risk_register', 'Antithesis risk register',
 E'# {{title}}\n\n> Antithesis stage: risks of a thesis proposal\n\n{{content}}\n', 'antithesis_risk_register.md'),
('43000000-0000-0000-0000-000000000204', 'antithesis', 'non_functional_requirements', 'Antithesis non-functional requirements',
 E'# {{title}}\n\n> Antithesis stage: non-functional gaps of a thesis proposal\n\n{{content}}\n', 'antithesis_non_functional_requirements.md'),
('43000000-0000-0000-0000-000000000205', 'antithesis', 'dependency_map', 'Antithesis dependency map',
 E'# {{title}}\n\n> Antithesis stage: dependencies of a thesis proposal\n\n{{content}}\n', 'antithesis_dependency_map.md');

UPDATE dialectic_stages
SET expected_output_template_ids = ARRAY[
    '43000000-0000-0000-0000-000000000201', '43000000-0000-0000-0000-000000000202',
    '43000000-0000-0000-0000-000000000203', '43000000-0000-0000-0000-000000000204',
    '43000000-0000-0000-0000-000000000205']::uuid[]
WHERE slug = 'antithesis';

-- Synthesis recipe: pairwise header → proposal × critique pairs → one plan per lineage → final header → three deliverables in parallel.
INSERT INTO system_prompts (id, name, prompt_text) VALUES
('10000000-0000-0000-0000-000000000301', 'synthesis_planner_pairwise_header',
 'Plan the pairwise synthesis of the thesis proposals and critiques above: for each proposal, what every critique of it changes. Reply with one JSON object: {"system_materials": {"stage_rationale": string, "input_summary": string}, "context_for_documents": [{"document_key": string, "content_to_include": object}]} with one entry for each of synthesis_pairwise and synthesis_document.'),
('10000000-0000-0000-0000-000000000302', 'synthesis_turn_pairwise',
 'Reconcile the proposal above with the critique of that proposal, following the header context above. Reply with one JSON object with exactly these keys: {"agreements": [string], "conflicts": [{"topic": string, "proposal": string, "critique": string}], "resolution": string}; "resolution" says how the plan changes. No markdown.'),
('10000000-0000-0000-0000-000000000303', 'synthesis_turn_reduce',
 'Merge the pairwise syntheses above, which all concern one proposal lineage, into one plan, following the header context above. Reply with one JSON object with exactly these keys: {"consolidated_plan": {"summary": string, "decisions": [string], "open_questions": [string]}}. No markdown.'),
('10000000-0000-0000-0000-000000000304', 'synthesis_planner_final_header',
 'Plan the final synthesis deliverables from the consolidated syntheses above; resolve any disagreement between them first. Reply with one JSON object: {"system_materials": {"stage_rationale": string, "input_summary": string}, "context_for_documents": [{"document_key": string, "content_to_include": object}]} with one entry for each of product_requirements, system_architecture and tech_stack.'),
('10000000-0000-0000-0000-000000000305', 'synthesis_turn_product_requirements',
 'Write the product requirements document from the consolidated syntheses above: goals, users, scope, prioritised requirements with acceptance criteria, and what is out of scope. Follow the header context above. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000306', 'synthesis_turn_system_architecture',
 'Write the system architecture from the consolidated syntheses above: components and their responsibilities, data flow, storage, integration points and the failure modes each component must handle. Follow the header context above. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000307', 'synthesis_turn_tech_stack',
 'Write the tech stack recommendation from the consolidated syntheses above: one choice per layer (languages, frameworks, storage, hosting, observability) with the reason and the alternative you rejected. Follow the header context above. Reply with one JSON object: {"content": "<markdown body>"}.');

INSERT INTO dialectic_recipe_templates (id, recipe_name, recipe_version, display_name, description) VALUES
('40000000-0000-0000-0000-000000000003', 'synthesis', 1, 'Synthesis', 'Pairwise reconciliation, reduction per lineage, then three final deliverables');

INSERT INTO dialectic_recipe_template_steps
(id, template_id, step_number, parallel_group, branch_key, step_key, step_slug, step_name, step_description, job_type, prompt_type,
 prompt_template_id, output_type, granularity_strategy, inputs_required, inputs_relevance, outputs_required) VALUES
('41000000-0000-0000-0000-000000000301', '40000000-0000-0000-0000-000000000003', 1, NULL, 'header_context_pairwise',
 'synthesis_prepare_pairwise_header', 'prepare-pairwise-header', 'Prepare pairwise header', 'Plans how each proposal will be reconciled with each critique of it', 'PLAN', 'Planner',
 '10000000-0000-0000-0000-000000000301', 'header_context_pairwise', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "document", "stage_slug": "thesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Thesis proposals ---"}, {"type": "document", "stage_slug": "antithesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Critiques ---"}, {"type": "feedback", "stage_slug": "antithesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the critiques ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "document", "relevance": 0.8}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "header_context_pairwise", "file_type": "header_context", "required_keys": ["context_for_documents"]}]'),
('41000000-0000-0000-0000-000000000302', '40000000-0000-0000-0000-000000000003', 2, NULL, 'synthesis_pairwise',
 'synthesis_pairwise', 'pairwise', 'Reconcile proposal and critique', 'One reconciliation per (proposal lineage, critic) pair', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000302', 'synthesis_pairwise', 'pairwise_by_origin',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "synthesis", "document_key": "header_context_pairwise", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "thesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Proposal ---"}, {"type": "document", "stage_slug": "antithesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Critique of that proposal ---"}, {"type": "feedback", "stage_slug": "antithesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the critiques ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context_pairwise", "type": "header_context", "relevance": 1.0}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "synthesis_pairwise", "file_type": "json", "required_keys": ["agreements", "conflicts", "resolution"]}]'),
('41000000-0000-0000-0000-000000000303', '40000000-0000-0000-0000-000000000003', 3, NULL, 'synthesis_document',
 'synthesis_reduce', 'reduce', 'Consolidate pairwise syntheses', 'One consolidated plan per proposal lineage', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000303', 'synthesis_document', 'per_source_group',
 '[{"type": "header_context", "stage_slug": "synthesis", "document_key": "header_context_pairwise", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "synthesis", "document_key": "synthesis_pairwise", "required": true, "multiple": true, "section_header": "--- Pairwise syntheses ---"}]',
 '[{"document_key": "header_context_pairwise", "type": "header_context", "relevance": 1.0}, {"document_key": "synthesis_pairwise", "type": "document", "relevance": 0.95}]',
 '[{"document_key": "synthesis_document", "file_type": "json", "required_keys": ["consolidated_plan"]}]'),
('41000000-0000-0000-0000-000000000304', '40000000-0000-0000-0000-000000000003', 4, NULL, 'header_context',
 'synthesis_final_header', 'final-header', 'Build final header', 'Plans the three synthesis deliverables from the consolidated plans', 'PLAN', 'Planner',
 '10000000-0000-0000-0000-000000000304', 'header_context', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "document", "stage_slug": "synthesis", "document_key": "synthesis_document", "required": true, "multiple": true, "section_header": "--- Consolidated syntheses ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "synthesis_document", "type": "document", "relevance": 0.95}]',
 '[{"document_key": "header_context", "file_type": "header_context", "required_keys": ["context_for_documents"]}]'),
('41000000-0000-0000-0000-000000000305', '40000000-0000-0000-0000-000000000003', 5, 5, 'product_requirements',
 'synthesis_product_requirements', 'product-requirements', 'Write product requirements', 'The product requirements deliverable, from the root model''s consolidated plans', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000305', 'product_requirements', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "synthesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "synthesis", "document_key": "synthesis_document", "required": true, "multiple": true, "section_header": "--- Consolidated syntheses ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "synthesis_document", "type": "document", "relevance": 0.95}]',
 '[{"document_key": "product_requirements", "file_type": "markdown", "template_filename": "synthesis_product_requirements.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000306', '40000000-0000-0000-0000-000000000003', 5, 5, 'system_architecture',
 'synthesis_system_architecture', 'system-architecture', 'Write system architecture', 'The system architecture deliverable, from the root model''s consolidated plans', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000306', 'system_architecture', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "synthesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "synthesis", "document_key": "synthesis_document", "required": true, "multiple": true, "section_header": "--- Consolidated syntheses ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "synthesis_document", "type": "document", "relevance": 0.95}]',
 '[{"document_key": "system_architecture", "file_type": "markdown", "template_filename": "synthesis_system_architecture.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000307', '40000000-0000-0000-0000-000000000003', 5, 5, 'tech_stack',
 'synthesis_tech_stack', 'tech-stack', 'Choose tech stack', 'The tech stack deliverable, from the root model''s consolidated plans', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000307', 'tech_stack', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "synthesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "synthesis", "document_key": "synthesis_document", "required": true, "multiple": true, "section_header": "--- Consolidated syntheses ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "synthesis_document", "type": "document", "relevance": 0.95}]',
 '[{"document_key": "tech_stack", "file_type": "markdown", "template_filename": "synthesis_tech_stack.md", "required_keys": ["content"]}]');

INSERT INTO dialectic_recipe_template_edges (template_id, from_step_id, to_step_id) VALUES
('40000000-0000-0000-0000-000000000003', '41000000-0000-0000-0000-000000000301', '41000000-0000-0000-0000-000000000302'),
('40000000-0000-0000-0000-000000000003', '41000000-0000-0000-0000-000000000302', '41000000-0000-0000-0000-000000000303'),
('40000000-0000-0000-0000-000000000003', '41000000-0000-0000-0000-000000000303', '41000000-0000-0000-0000-000000000304'),
('40000000-0000-0000-0000-000000000003', '41000000-0000-0000-0000-000000000304', '41000000-0000-0000-0000-000000000305'),
('40000000-0000-0000-0000-000000000003', '41000000-0000-0000-0000-000000000304', '41000000-0000-0000-0000-000000000306'),
('40000000-0000-0000-0000-000000000003', '41000000-0000-0000-0000-000000000304', '41000000-0000-0000-0000-000000000307');

INSERT INTO dialectic_stage_recipe_instances (id, stage_id, template_id, is_cloned) VALUES
('42000000-0000-0000-0000-000000000003', '20000000-0000-0000-0000-000000000003', '40000000-0000-0000-0000-000000000003', false);

UPDATE dialectic_stages
SET recipe_template_id = '40000000-0000-0000-0000-000000000003',
    active_recipe_instance_id = '42000000-0000-0000-0000-000000000003'
WHERE id = '20000000-0000-0000-0000-000000000003';

INSERT INTO dialectic_document_templates (id, stage_slug, document_key, name, content, file_name) VALUES
('43000000-0000-0000-0000-000000000301', 'synthesis', 'product_requirements', 'Synthesis product requirements',
 E'# {{title}}\n\n> Synthesis stage: product requirements reconciled from proposals and critiques\n\n{{content}}\n', 'synthesis_product_requirements.md'),
('43000000-0000-0000-0000-000000000302', 'synthesis', 'system_architecture', 'Synthesis system architecture',
 E'# {{title}}\n\n> Synthesis stage: architecture reconciled from proposals and critiques\n\n{{content}}\n', 'synthesis_system_architecture.md'),
('43000000-0000-0000-0000-000000000303', 'synthesis', 'tech_stack', 'Synthesis tech stack',
 E'# {{title}}\n\n> Synthesis stage: technology choices reconciled from proposals and critiques\n\n{{content}}\n', 'synthesis_tech_stack.md');

UPDATE dialectic_stages
SET expected_output_template_ids = ARRAY[
    '43000000-0000-0000-0000-000000000301', '43000000-0000-0000-0000-000000000302',
    '43000000-0000-0000-0000-000000000303']::uuid[]
WHERE slug = 'synthesis';

-- Parenthesis recipe: header_context → technical_requirements → master_plan → milestone_schema.
INSERT INTO system_prompts (id, name, prompt_text) VALUES
('10000000-0000-0000-0000-000000000401', 'parenthesis_planner_header',
 'Plan the parenthesis planning documents from the synthesis deliverables above, taking the user feedback into account where there is any. Reply with one JSON object: {"system_materials": {"stage_rationale": string, "input_summary": string}, "context_for_documents": [{"document_key": string, "content_to_include": object}]} with one entry for each of technical_requirements, master_plan and milestone_schema.'),
('10000000-0000-0000-0000-000000000402', 'parenthesis_turn_technical_requirements',
 'Write the technical requirements from the synthesis deliverables above: numbered requirements (TR-1, TR-2, ...) grouped by component, each with a verification method. Follow the header context above. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000403', 'parenthesis_turn_master_plan',
 'Write the master plan: phases in dependency order, each listing the TR numbers it satisfies, its deliverables and its exit criteria. Follow the header context and the technical requirements above. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000404', 'parenthesis_turn_milestone_schema',
 'Turn the master plan above into a milestone schema: a markdown table with columns milestone, phase, relative week, owner role, acceptance check and depends on. Follow the header context above. Reply with one JSON object: {"content": "<markdown body>"}.');

INSERT INTO dialectic_recipe_templates (id, recipe_name, recipe_version, display_name, description) VALUES
('40000000-0000-0000-0000-000000000004', 'parenthesis', 1, 'Parenthesis', 'Header context, then technical requirements, master plan and milestone schema in sequence');

INSERT INTO dialectic_recipe_template_steps
(id, template_id, step_number, parallel_group, branch_key, step_key, step_slug, step_name, step_description, job_type, prompt_type,
 prompt_template_id, output_type, granularity_strategy, inputs_required, inputs_relevance, outputs_required) VALUES
('41000000-0000-0000-0000-000000000401', '40000000-0000-0000-0000-000000000004', 1, NULL, 'header_context',
 'parenthesis_build_stage_header', 'build-stage-header', 'Build stage header', 'Plans the three sequenced planning documents', 'PLAN', 'Planner',
 '10000000-0000-0000-0000-000000000401', 'header_context', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "document", "stage_slug": "synthesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Synthesis deliverables ---"}, {"type": "feedback", "stage_slug": "synthesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the synthesis ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "header_context", "file_type": "header_context", "required_keys": ["context_for_documents"]}]'),
('41000000-0000-0000-0000-000000000402', '40000000-0000-0000-0000-000000000004', 2, NULL, 'technical_requirements',
 'parenthesis_technical_requirements', 'technical-requirements', 'Write technical requirements', 'Precise technical requirements derived from the synthesis', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000402', 'technical_requirements', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "parenthesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "synthesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Synthesis deliverables ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "*", "type": "document", "relevance": 0.95}]',
 '[{"document_key": "technical_requirements", "file_type": "markdown", "template_filename": "parenthesis_technical_requirements.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000403', '40000000-0000-0000-0000-000000000004', 3, NULL, 'master_plan',
 'parenthesis_master_plan', 'master-plan', 'Write master plan', 'Phased plan that satisfies the technical requirements', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000403', 'master_plan', 'all_to_one',
 '[{"type": "header_context", "stage_slug": "parenthesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "parenthesis", "document_key": "technical_requirements", "required": true, "multiple": false, "section_header": "--- Technical requirements ---"}, {"type": "document", "stage_slug": "synthesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Synthesis deliverables ---"}]',
 '[{"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "technical_requirements", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "document", "relevance": 0.8}]',
 '[{"document_key": "master_plan", "file_type": "markdown", "template_filename": "parenthesis_master_plan.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000404', '40000000-0000-0000-0000-000000000004', 4, NULL, 'milestone_schema',
 'parenthesis_milestone_schema', 'milestone-schema', 'Write milestone schema', 'Milestones with relative weeks, owner roles and acceptance checks', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000404', 'milestone_schema', 'all_to_one',
 '[{"type": "header_context", "stage_slug": "parenthesis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "parenthesis", "document_key": "master_plan", "required": true, "multiple": false, "section_header": "--- Master plan ---"}]',
 '[{"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "master_plan", "type": "document", "relevance": 0.95}]',
 '[{"document_key": "milestone_schema", "file_type": "markdown", "template_filename": "parenthesis_milestone_schema.md", "required_keys": ["content"]}]');

INSERT INTO dialectic_recipe_template_edges (template_id, from_step_id, to_step_id) VALUES
('40000000-0000-0000-0000-000000000004', '41000000-0000-0000-0000-000000000401', '41000000-0000-0000-0000-000000000402'),
('40000000-0000-0000-0000-000000000004', '41000000-0000-0000-0000-000000000402', '41000000-0000-0000-0000-000000000403'),
('40000000-0000-0000-0000-000000000004', '41000000-0000-0000-0000-000000000403', '41000000-0000-0000-0000-000000000404');

INSERT INTO dialectic_stage_recipe_instances (id, stage_id, template_id, is_cloned) VALUES
('42000000-0000-0000-0000-000000000004', '20000000-0000-0000-0000-000000000004', '40000000-0000-0000-0000-000000000004', false);

UPDATE dialectic_stages
SET recipe_template_id = '40000000-0000-0000-0000-000000000004',
    active_recipe_instance_id = '42000000-0000-0000-0000-000000000004'
WHERE id = '20000000-0000-0000-0000-000000000004';

INSERT INTO dialectic_document_templates (id, stage_slug, document_key, name, content, file_name) VALUES
('43000000-0000-0000-0000-000000000401', 'parenthesis', 'technical_requirements', 'Parenthesis technical requirements',
 E'# {{title}}\n\n> Parenthesis stage: numbered technical requirements\n\n{{content}}\n', 'parenthesis_technical_requirements.md'),
('43000000-0000-0000-0000-000000000402', 'parenthesis', 'master_plan', 'Parenthesis master plan',
 E'# {{title}}\n\n> Parenthesis stage: phased master plan\n\n{{content}}\n', 'parenthesis_master_plan.md'),
('43000000-0000-0000-0000-000000000403', 'parenthesis', 'milestone_schema', 'Parenthesis milestone schema',
 E'# {{title}}\n\n> Parenthesis stage: milestones and acceptance checks\n\n{{content}}\n', 'parenthesis_milestone_schema.md');

UPDATE dialectic_stages
SET expected_output_template_ids = ARRAY[
    '43000000-0000-0000-0000-000000000401', '43000000-0000-0000-0000-000000000402',
    '43000000-0000-0000-0000-000000000403']::uuid[]
WHERE slug = 'parenthesis';

-- Paralysis recipe: header_context → actionable_checklist → updated_master_plan → advisor_recommendations.
INSERT INTO system_prompts (id, name, prompt_text) VALUES
('10000000-0000-0000-0000-000000000501', 'paralysis_planner_header',
 'Plan the paralysis implementation documents from the planning documents above, taking the user feedback into account where there is any. Reply with one JSON object: {"system_materials": {"stage_rationale": string, "input_summary": string}, "context_for_documents": [{"document_key": string, "content_to_include": object}]} with one entry for each of actionable_checklist, updated_master_plan and advisor_recommendations.'),
('10000000-0000-0000-0000-000000000502', 'paralysis_turn_actionable_checklist',
 'Write an actionable checklist from the planning documents above: markdown task list items (- [ ]) grouped by milestone, each small enough for one person in one day and naming its done condition. Follow the header context above. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000503', 'paralysis_turn_updated_master_plan',
 'Revise the current master plan so it matches the actionable checklist above: move, split or drop phases as the tasks require and end with a change log of what changed and why. Follow the header context above. Reply with one JSON object: {"content": "<markdown body>"}.'),
('10000000-0000-0000-0000-000000000504', 'paralysis_turn_advisor_recommendations',
 'As an experienced advisor, review the updated master plan and actionable checklist above: the five recommendations that most improve the odds of shipping, each with the risk it addresses and the first step to take. Follow the header context above. Reply with one JSON object: {"content": "<markdown body>"}.');

INSERT INTO dialectic_recipe_templates (id, recipe_name, recipe_version, display_name, description) VALUES
('40000000-0000-0000-0000-000000000005', 'paralysis', 1, 'Paralysis', 'Header context, then actionable checklist, updated master plan and advisor recommendations in sequence');

INSERT INTO dialectic_recipe_template_steps
(id, template_id, step_number, parallel_group, branch_key, step_key, step_slug, step_name, step_description, job_type, prompt_type,
 prompt_template_id, output_type, granularity_strategy, inputs_required, inputs_relevance, outputs_required) VALUES
('41000000-0000-0000-0000-000000000501', '40000000-0000-0000-0000-000000000005', 1, NULL, 'header_context',
 'paralysis_build_stage_header', 'build-stage-header', 'Build stage header', 'Plans the three implementation documents', 'PLAN', 'Planner',
 '10000000-0000-0000-0000-000000000501', 'header_context', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "document", "stage_slug": "parenthesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Planning documents ---"}, {"type": "feedback", "stage_slug": "parenthesis", "document_key": "*", "required": false, "multiple": true, "section_header": "--- User feedback on the planning documents ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "*", "type": "document", "relevance": 0.95}, {"document_key": "*", "type": "feedback", "relevance": 0.6}]',
 '[{"document_key": "header_context", "file_type": "header_context", "required_keys": ["context_for_documents"]}]'),
('41000000-0000-0000-0000-000000000502', '40000000-0000-0000-0000-000000000005', 2, NULL, 'actionable_checklist',
 'paralysis_actionable_checklist', 'actionable-checklist', 'Write actionable checklist', 'Tasks a team can start on tomorrow', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000502', 'actionable_checklist', 'all_to_one',
 '[{"type": "seed_prompt", "document_key": "seed_prompt", "required": true, "section_header": "--- Seed prompt ---"}, {"type": "header_context", "stage_slug": "paralysis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "parenthesis", "document_key": "*", "required": true, "multiple": true, "section_header": "--- Planning documents ---"}]',
 '[{"document_key": "seed_prompt", "type": "seed_prompt", "relevance": 0.9}, {"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "*", "type": "document", "relevance": 0.95}]',
 '[{"document_key": "actionable_checklist", "file_type": "markdown", "template_filename": "paralysis_actionable_checklist.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000503', '40000000-0000-0000-0000-000000000005', 3, NULL, 'updated_master_plan',
 'paralysis_updated_master_plan', 'updated-master-plan', 'Update master plan', 'The master plan revised against the checklist', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000503', 'updated_master_plan', 'all_to_one',
 '[{"type": "header_context", "stage_slug": "paralysis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "paralysis", "document_key": "actionable_checklist", "required": true, "multiple": false, "section_header": "--- Actionable checklist ---"}, {"type": "document", "stage_slug": "parenthesis", "document_key": "master_plan", "required": true, "multiple": false, "section_header": "--- Current master plan ---"}]',
 '[{"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "actionable_checklist", "type": "document", "relevance": 0.95}, {"document_key": "master_plan", "type": "document", "relevance": 0.8}]',
 '[{"document_key": "updated_master_plan", "file_type": "markdown", "template_filename": "paralysis_updated_master_plan.md", "required_keys": ["content"]}]'),
('41000000-0000-0000-0000-000000000504', '40000000-0000-0000-0000-000000000005', 4, NULL, 'advisor_recommendations',
 'paralysis_advisor_recommendations', 'advisor-recommendations', 'Write advisor recommendations', 'Recommendations on the updated plan and checklist', 'EXECUTE', 'Turn',
 '10000000-0000-0000-0000-000000000504', 'advisor_recommendations', 'all_to_one',
 '[{"type": "header_context", "stage_slug": "paralysis", "document_key": "header_context", "required": true, "multiple": false, "section_header": "--- Header context ---"}, {"type": "document", "stage_slug": "paralysis", "document_key": "updated_master_plan", "required": true, "multiple": false, "section_header": "--- Updated master plan ---"}, {"type": "document", "stage_slug": "paralysis", "document_key": "actionable_checklist", "required": true, "multiple": false, "section_header": "--- Actionable checklist ---"}]',
 '[{"document_key": "header_context", "type": "header_context", "relevance": 1.0}, {"document_key": "updated_master_plan", "type": "document", "relevance": 0.95}, {"document_key": "actionable_checklist", "type": "document", "relevance": 0.8}]',
 '[{"document_key": "advisor_recommendations", "file_type": "markdown", "template_filename": "paralysis_advisor_recommendations.md", "required_keys": ["content"]}]');

INSERT INTO dialectic_recipe_template_edges (template_id, from_step_id, to_step_id) VALUES
('40000000-0000-0000-0000-000000000005', '41000000-0000-0000-0000-000000000501', '41000000-0000-0000-0000-000000000502'),
('40000000-0000-0000-0000-000000000005', '41000000-0000-0000-0000-000000000502', '41000000-0000-0000-0000-000000000503'),
('40000000-0000-0000-0000-000000000005', '41000000-0000-0000-0000-000000000503', '41000000-0000-0000-0000-000000000504');

INSERT INTO dialectic_stage_recipe_instances (id, stage_id, template_id, is_cloned) VALUES
('42000000-0000-0000-0000-000000000005', '20000000-0000-0000-0000-000000000005', '40000000-0000-0000-0000-000000000005', false);

UPDATE dialectic_stages
SET recipe_template_id = '40000000-0000-0000-0000-000000000005',
    active_recipe_instance_id = '42000000-0000-0000-0000-000000000005'
WHERE id = '20000000-0000-0000-0000-000000000005';

INSERT INTO dialectic_document_templates (id, stage_slug, document_key, name, content, file_name) VALUES
('43000000-0000-0000-0000-000000000501', 'paralysis', 'actionable_checklist', 'Paralysis actionable checklist',
 E'# {{title}}\n\n> Paralysis stage: tasks to start on\n\n{{content}}\n', 'paralysis_actionable_checklist.md'),
('43000000-0000-0000-0000-000000000502', 'paralysis', 'updated_master_plan', 'Paralysis updated master plan',
 E'# {{title}}\n\n> Paralysis stage: master plan revised against the checklist\n\n{{content}}\n', 'paralysis_updated_master_plan.md'),
('43000000-0000-0000-0000-000000000503', 'paralysis', 'advisor_recommendations', 'Paralysis advisor recommendations',
 E'# {{title}}\n\n> Paralysis stage: recommendations before work starts\n\n{{content}}\n', 'paralysis_advisor_recommendations.md');

UPDATE dialectic_stages
SET expected_output_template_ids = ARRAY[
    '43000000-0000-0000-0000-000000000501', '43000000-0000-0000-0000-000000000502',
    '43000000-0000-0000-0000-000000000503']::uuid[]
WHERE slug = 'paralysis';
