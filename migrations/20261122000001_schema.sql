-- dialectic schema: the tables of seeds 000/001/002 that the platform needs.
-- Statuses are text with CHECKs so a new status is a migration, not a type dance.

CREATE TABLE users (
    id          uuid PRIMARY KEY,
    display_name text NOT NULL,
    is_admin    boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE system_prompts (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL UNIQUE,
    prompt_text text NOT NULL,
    is_active   boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE dialectic_recipe_templates (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    recipe_name    text NOT NULL,
    recipe_version integer NOT NULL DEFAULT 1,
    display_name   text,
    domain_key     text,
    description    text,
    is_active      boolean NOT NULL DEFAULT true,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (recipe_name, recipe_version)
);
CREATE UNIQUE INDEX dialectic_recipe_templates_active_name
    ON dialectic_recipe_templates (recipe_name) WHERE is_active;

CREATE TABLE dialectic_recipe_template_steps (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    template_id          uuid NOT NULL REFERENCES dialectic_recipe_templates (id),
    step_number          integer NOT NULL CHECK (step_number > 0),
    parallel_group       integer,
    branch_key           text,
    step_key             text NOT NULL,
    step_slug            text NOT NULL,
    step_name            text NOT NULL,
    step_description     text,
    job_type             text NOT NULL CHECK (job_type IN ('PLAN', 'EXECUTE', 'RENDER')),
    prompt_type          text NOT NULL CHECK (prompt_type IN ('Seed', 'Planner', 'Turn', 'Continuation')),
    prompt_template_id   uuid REFERENCES system_prompts (id),
    output_type          text NOT NULL,
    granularity_strategy text NOT NULL,
    inputs_required      jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(inputs_required) = 'array'),
    inputs_relevance     jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(inputs_relevance) = 'array'),
    outputs_required     jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(outputs_required) = 'array'),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (template_id, step_key),
    UNIQUE (template_id, step_number, step_key)
);
CREATE INDEX dialectic_recipe_template_steps_order ON dialectic_recipe_template_steps (template_id, step_number);

CREATE TABLE dialectic_recipe_template_edges (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    template_id  uuid NOT NULL REFERENCES dialectic_recipe_templates (id),
    from_step_id uuid NOT NULL REFERENCES dialectic_recipe_template_steps (id),
    to_step_id   uuid NOT NULL REFERENCES dialectic_recipe_template_steps (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (from_step_id <> to_step_id),
    UNIQUE (template_id, from_step_id, to_step_id)
);
CREATE INDEX dialectic_recipe_template_edges_from ON dialectic_recipe_template_edges (template_id, from_step_id);

CREATE TABLE dialectic_stages (
    id                           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    slug                         text NOT NULL UNIQUE,
    display_name                 text NOT NULL,
    description                  text,
    default_system_prompt_id     uuid REFERENCES system_prompts (id) ON DELETE SET NULL,
    recipe_template_id           uuid REFERENCES dialectic_recipe_templates (id) ON DELETE SET NULL,
    active_recipe_instance_id    uuid,
    expected_output_template_ids uuid[] NOT NULL DEFAULT '{}'::uuid[],
    created_at                   timestamptz NOT NULL DEFAULT now(),
    updated_at                   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE dialectic_stage_recipe_instances (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    stage_id    uuid NOT NULL REFERENCES dialectic_stages (id),
    template_id uuid NOT NULL REFERENCES dialectic_recipe_templates (id),
    is_cloned   boolean NOT NULL DEFAULT false,
    cloned_at   timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (stage_id),
    UNIQUE (stage_id, id)
);
CREATE INDEX dialectic_stage_recipe_instances_mode ON dialectic_stage_recipe_instances (stage_id, is_cloned);

ALTER TABLE dialectic_stages
    ADD CONSTRAINT dialectic_stages_active_instance_fk
    FOREIGN KEY (id, active_recipe_instance_id)
    REFERENCES dialectic_stage_recipe_instances (stage_id, id)
    ON DELETE SET NULL (active_recipe_instance_id)
    DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE dialectic_stage_recipe_steps (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    instance_id          uuid NOT NULL REFERENCES dialectic_stage_recipe_instances (id),
    template_step_id     uuid REFERENCES dialectic_recipe_template_steps (id),
    step_key             text NOT NULL,
    step_slug            text NOT NULL,
    step_name            text NOT NULL,
    job_type             text NOT NULL CHECK (job_type IN ('PLAN', 'EXECUTE', 'RENDER')),
    prompt_type          text NOT NULL CHECK (prompt_type IN ('Seed', 'Planner', 'Turn', 'Continuation')),
    prompt_template_id   uuid REFERENCES system_prompts (id),
    output_type          text NOT NULL,
    granularity_strategy text NOT NULL,
    inputs_required      jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(inputs_required) = 'array'),
    inputs_relevance     jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(inputs_relevance) = 'array'),
    outputs_required     jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(outputs_required) = 'array'),
    config_override      jsonb NOT NULL DEFAULT '{}'::jsonb,
    object_filter        jsonb NOT NULL DEFAULT '{}'::jsonb,
    output_overrides     jsonb NOT NULL DEFAULT '{}'::jsonb,
    is_skipped           boolean NOT NULL DEFAULT false,
    execution_order      integer,
    parallel_group       integer,
    branch_key           text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (instance_id, step_key)
);
CREATE INDEX dialectic_stage_recipe_steps_ready ON dialectic_stage_recipe_steps (instance_id, execution_order) WHERE is_skipped = false;

CREATE TABLE dialectic_stage_recipe_edges (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    instance_id  uuid NOT NULL REFERENCES dialectic_stage_recipe_instances (id),
    from_step_id uuid NOT NULL REFERENCES dialectic_stage_recipe_steps (id),
    to_step_id   uuid NOT NULL REFERENCES dialectic_stage_recipe_steps (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (from_step_id <> to_step_id),
    UNIQUE (instance_id, from_step_id, to_step_id)
);
CREATE INDEX dialectic_stage_recipe_edges_from ON dialectic_stage_recipe_edges (instance_id, from_step_id);

CREATE TABLE dialectic_process_templates (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name              text NOT NULL UNIQUE,
    description       text,
    starting_stage_id uuid NOT NULL REFERENCES dialectic_stages (id),
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE dialectic_process_template_stages (
    process_template_id uuid NOT NULL REFERENCES dialectic_process_templates (id),
    stage_id            uuid NOT NULL REFERENCES dialectic_stages (id),
    stage_number        integer NOT NULL CHECK (stage_number > 0),
    PRIMARY KEY (process_template_id, stage_id),
    UNIQUE (process_template_id, stage_number)
);

CREATE TABLE dialectic_stage_transitions (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    process_template_id uuid NOT NULL REFERENCES dialectic_process_templates (id),
    source_stage_id     uuid NOT NULL REFERENCES dialectic_stages (id),
    target_stage_id     uuid NOT NULL REFERENCES dialectic_stages (id),
    condition_description text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    CHECK (source_stage_id <> target_stage_id),
    UNIQUE (process_template_id, source_stage_id)
);

CREATE TABLE dialectic_document_templates (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    stage_slug     text NOT NULL,
    document_key   text NOT NULL,
    name           text NOT NULL,
    -- Templates ship as seed data; storage_* name where an exported copy lives.
    content        text NOT NULL,
    storage_bucket text,
    storage_path   text,
    file_name      text,
    is_active      boolean NOT NULL DEFAULT true,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (stage_slug, document_key)
);

CREATE TABLE ai_providers (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    api_identifier         text NOT NULL UNIQUE,
    name                   text NOT NULL,
    provider               text NOT NULL,
    context_window_tokens  integer NOT NULL CHECK (context_window_tokens > 0),
    max_output_tokens      integer NOT NULL CHECK (max_output_tokens > 0),
    input_token_cost_rate  double precision NOT NULL DEFAULT 1 CHECK (input_token_cost_rate >= 0),
    output_token_cost_rate double precision NOT NULL DEFAULT 1 CHECK (output_token_cost_rate >= 0),
    tokenizer              text NOT NULL DEFAULT 'estimate',
    -- The name of the secret that holds the key, never the key itself.
    secret_name            text,
    config                 jsonb NOT NULL DEFAULT '{}'::jsonb,
    is_active              boolean NOT NULL DEFAULT true,
    created_at             timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE dialectic_projects (
    id                  uuid PRIMARY KEY,
    user_id             uuid NOT NULL REFERENCES users (id),
    project_name        text NOT NULL CHECK (length(project_name) BETWEEN 1 AND 200),
    slug                text NOT NULL,
    initial_user_prompt text NOT NULL,
    initial_prompt_storage_key text,
    process_template_id uuid NOT NULL REFERENCES dialectic_process_templates (id),
    status              text NOT NULL DEFAULT 'active',
    client_request_id   text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, client_request_id)
);
CREATE INDEX dialectic_projects_user ON dialectic_projects (user_id, created_at DESC);

CREATE TABLE dialectic_sessions (
    id                 uuid PRIMARY KEY,
    project_id         uuid NOT NULL REFERENCES dialectic_projects (id) ON DELETE CASCADE,
    user_id            uuid NOT NULL REFERENCES users (id),
    status             text NOT NULL,
    iteration_count    integer NOT NULL DEFAULT 1 CHECK (iteration_count > 0),
    current_stage_id   uuid REFERENCES dialectic_stages (id),
    selected_model_ids uuid[] NOT NULL CHECK (cardinality(selected_model_ids) > 0),
    session_description text,
    client_request_id  text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, client_request_id)
);
CREATE INDEX dialectic_sessions_project ON dialectic_sessions (project_id);

CREATE TABLE dialectic_generation_jobs (
    id                     uuid PRIMARY KEY,
    -- Natural key: a repeated command or outcome cannot create the same job twice.
    job_key                text NOT NULL UNIQUE,
    session_id             uuid NOT NULL REFERENCES dialectic_sessions (id) ON DELETE CASCADE,
    user_id                uuid NOT NULL REFERENCES users (id),
    stage_slug             text NOT NULL,
    iteration_number       integer NOT NULL DEFAULT 1,
    job_type               text NOT NULL CHECK (job_type IN ('PLAN', 'EXECUTE', 'RENDER')),
    status                 text NOT NULL DEFAULT 'pending' CHECK (status IN (
        'pending', 'processing', 'waiting_for_prerequisite', 'waiting_for_children',
        'pending_next_step', 'pending_continuation', 'retrying', 'completed', 'failed',
        'retry_loop_failed')),
    recipe_step_id         uuid,
    step_key               text,
    model_id               uuid REFERENCES ai_providers (id),
    document_key           text,
    payload                jsonb NOT NULL DEFAULT '{}'::jsonb,
    parent_job_id          uuid REFERENCES dialectic_generation_jobs (id) ON DELETE CASCADE,
    prerequisite_job_id    uuid REFERENCES dialectic_generation_jobs (id) ON DELETE CASCADE,
    target_contribution_id uuid,
    attempt_count          integer NOT NULL DEFAULT 0,
    max_retries            integer NOT NULL DEFAULT 3,
    lease_owner            text,
    lease_expires_at       timestamptz,
    next_attempt_at        timestamptz,
    error_details          jsonb,
    results                jsonb,
    created_at             timestamptz NOT NULL DEFAULT now(),
    started_at             timestamptz,
    completed_at           timestamptz,
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dialectic_jobs_stage_roots ON dialectic_generation_jobs (session_id, stage_slug, iteration_number) WHERE parent_job_id IS NULL;
CREATE INDEX dialectic_jobs_parent ON dialectic_generation_jobs (parent_job_id) WHERE parent_job_id IS NOT NULL;
CREATE INDEX dialectic_jobs_prerequisite ON dialectic_generation_jobs (prerequisite_job_id) WHERE prerequisite_job_id IS NOT NULL;
CREATE INDEX dialectic_jobs_leases ON dialectic_generation_jobs (lease_expires_at) WHERE status = 'processing';
CREATE INDEX dialectic_jobs_retries ON dialectic_generation_jobs (next_attempt_at) WHERE status = 'retrying';

CREATE TABLE dialectic_contributions (
    id                        uuid PRIMARY KEY,
    session_id                uuid NOT NULL REFERENCES dialectic_sessions (id) ON DELETE CASCADE,
    job_id                    uuid REFERENCES dialectic_generation_jobs (id) ON DELETE SET NULL,
    attempt                   integer,
    user_id                   uuid REFERENCES users (id),
    model_id                  uuid REFERENCES ai_providers (id),
    model_name                text,
    stage_slug                text NOT NULL,
    iteration_number          integer NOT NULL,
    document_key              text NOT NULL,
    contribution_type         text NOT NULL,
    storage_bucket            text NOT NULL,
    storage_path              text NOT NULL,
    file_name                 text NOT NULL,
    raw_response_storage_path text NOT NULL,
    mime_type                 text NOT NULL DEFAULT 'application/json',
    size_bytes                bigint NOT NULL DEFAULT 0,
    tokens_used_input         integer NOT NULL DEFAULT 0,
    tokens_used_output        integer NOT NULL DEFAULT 0,
    processing_time_ms        integer NOT NULL DEFAULT 0,
    finish_reason             text,
    target_contribution_id    uuid REFERENCES dialectic_contributions (id),
    document_relationships    jsonb,
    edit_version              integer NOT NULL DEFAULT 1,
    is_latest_edit            boolean NOT NULL DEFAULT true,
    original_model_contribution_id uuid REFERENCES dialectic_contributions (id),
    is_intermediate           boolean NOT NULL DEFAULT false,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    -- A contribution is idempotent by (job, attempt): a redelivered job writes nothing new.
    UNIQUE (job_id, attempt)
);
CREATE INDEX dialectic_contributions_stage ON dialectic_contributions (session_id, stage_slug, iteration_number) WHERE is_latest_edit;
CREATE INDEX dialectic_contributions_relationships ON dialectic_contributions USING gin (document_relationships jsonb_path_ops);

CREATE TABLE dialectic_project_resources (
    id                     uuid PRIMARY KEY,
    project_id             uuid NOT NULL REFERENCES dialectic_projects (id) ON DELETE CASCADE,
    user_id                uuid REFERENCES users (id),
    session_id             uuid REFERENCES dialectic_sessions (id) ON DELETE CASCADE,
    stage_slug             text,
    iteration_number       integer,
    resource_type          text NOT NULL,
    document_key           text,
    model_id               uuid REFERENCES ai_providers (id),
    file_name              text NOT NULL,
    storage_bucket         text NOT NULL,
    storage_path           text NOT NULL,
    mime_type              text NOT NULL,
    size_bytes             bigint NOT NULL DEFAULT 0,
    source_contribution_id uuid REFERENCES dialectic_contributions (id),
    resource_description   jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    UNIQUE (storage_bucket, storage_path, file_name)
);
CREATE INDEX dialectic_project_resources_stage ON dialectic_project_resources (session_id, stage_slug, iteration_number, document_key);

CREATE TABLE dialectic_feedback (
    id                   uuid PRIMARY KEY,
    project_id           uuid NOT NULL REFERENCES dialectic_projects (id) ON DELETE CASCADE,
    session_id           uuid NOT NULL REFERENCES dialectic_sessions (id) ON DELETE CASCADE,
    user_id              uuid NOT NULL REFERENCES users (id),
    stage_slug           text NOT NULL,
    iteration_number     integer NOT NULL,
    document_key         text,
    source_resource_id   uuid REFERENCES dialectic_project_resources (id) ON DELETE SET NULL,
    feedback_type        text NOT NULL,
    storage_bucket       text NOT NULL,
    storage_path         text NOT NULL,
    file_name            text NOT NULL,
    mime_type            text NOT NULL DEFAULT 'text/markdown',
    size_bytes           bigint NOT NULL DEFAULT 0,
    resource_description jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dialectic_feedback_stage ON dialectic_feedback (session_id, stage_slug, iteration_number);

-- The ledger: the database itself keeps balances from going negative.
CREATE TABLE token_wallets (
    id              uuid PRIMARY KEY,
    user_id         uuid REFERENCES users (id),
    organization_id uuid,
    balance         bigint NOT NULL DEFAULT 0 CHECK (balance >= 0),
    held            bigint NOT NULL DEFAULT 0 CHECK (held >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (held <= balance),
    CHECK (user_id IS NOT NULL OR organization_id IS NOT NULL)
);
CREATE UNIQUE INDEX token_wallets_user ON token_wallets (user_id) WHERE organization_id IS NULL;

CREATE TABLE token_wallet_transactions (
    id              uuid PRIMARY KEY,
    wallet_id       uuid NOT NULL REFERENCES token_wallets (id),
    kind            text NOT NULL CHECK (kind IN ('credit', 'hold', 'capture', 'release', 'debit', 'refund')),
    amount          bigint NOT NULL CHECK (amount >= 0),
    balance_after   bigint NOT NULL,
    held_after      bigint NOT NULL,
    idempotency_key text NOT NULL,
    request_hash    text NOT NULL,
    reason          text,
    hold_id         uuid REFERENCES token_wallet_transactions (id),
    session_id      uuid,
    job_id          uuid,
    attempt         integer,
    purpose         text,
    expires_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (wallet_id, idempotency_key)
);
CREATE INDEX token_wallet_transactions_history ON token_wallet_transactions (wallet_id, created_at DESC, id);

-- Transactional outbox: messages commit with the state change that implies them.
CREATE TABLE outbox (
    id          bigserial PRIMARY KEY,
    routing_key text NOT NULL,
    payload     bytea NOT NULL,
    -- W3C traceparent of the span that wrote the row, carried into AMQP headers.
    traceparent text,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('dialectic_outbox', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
