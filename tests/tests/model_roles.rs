//! A model per step (issue 56 item 5, docs/models.md "Model roles"): a
//! pipeline with two roles runs each step of a role on the model the
//! session mapped it to, in every lineage, and each step without one on
//! its lineage's model; the recorded requests prove which model each step's
//! requests went to, and with the role's parameters under the step's own.
//! StartSession refuses a role the pipeline does not declare and a model
//! that is not registered, and GetSession shows the map.
//! Alone in its test binary: it reads the simulated provider's transcript.

use dialectic_core::pipeline::PipelineFile;
use dialectic_core::prompt::ChatRequest;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{CreateProjectRequest, StartSessionRequest};
use dialectic_store::models::{self, ModelSpec, ProviderKind};
use dialectic_store::pipelines;
use std::collections::{BTreeMap, BTreeSet};

const ANALYST: &str = "roles-analyst-sim";
const WRITER: &str = "roles-writer-sim";
const LINEAGES: [&str; 2] = ["simulated", "simulated-b"];

/// plan (no role) → analyse (analyst) → write (writer) → check (no role).
const PIPELINE: &str = r##"
name = "roles"
display_name = "Roles"

[roles.analyst]
description = "Reads closely"
temperature = 0.1
max_tokens = 333
timeout_seconds = 120

[roles.writer]
temperature = 0.7

[[stages]]
slug = "role_run"
display_name = "Role run"
system_prompt = "You write short notes. Reply with JSON only."

[[stages.steps]]
key = "role_plan"
name = "Plan"
job_type = "PLAN"
prompt_type = "Planner"
prompt = 'Plan the notes. Reply with {"system_materials": {}, "context_for_documents": [{"document_key": "analysis", "content_to_include": {}}]}.'
output_type = "header_context"
granularity = "all_to_one"
inputs = [{ type = "seed_prompt", document_key = "seed_prompt" }]
outputs = [{ document_key = "header_context", file_type = "header_context", required_keys = ["context_for_documents"], key_types = { context_for_documents = "array" } }]

[[stages.steps]]
key = "role_analyse"
name = "Analyse"
job_type = "EXECUTE"
prompt_type = "Turn"
prompt = 'Analyse the seed prompt. Reply with {"content": "<markdown>"}.'
output_type = "analysis"
granularity = "all_to_one"
model_role = "analyst"
after = ["role_plan"]
inputs = [
    { type = "seed_prompt", document_key = "seed_prompt" },
    { type = "header_context", stage_slug = "role_run", document_key = "header_context" },
]
outputs = [{ document_key = "analysis", file_type = "json", required_keys = ["content"], key_types = { content = "string" } }]

[[stages.steps]]
key = "role_write"
name = "Write"
job_type = "EXECUTE"
prompt_type = "Turn"
prompt = 'Write the note. Reply with {"content": "<markdown>"}.'
output_type = "draft"
granularity = "all_to_one"
model_role = "writer"
config = { max_tokens = 2000 }
after = ["role_analyse"]
inputs = [
    { type = "seed_prompt", document_key = "seed_prompt" },
    { type = "header_context", stage_slug = "role_run", document_key = "header_context" },
]
outputs = [{ document_key = "draft", file_type = "json", required_keys = ["content"], key_types = { content = "string" } }]

[[stages.steps]]
key = "role_check"
name = "Check"
job_type = "EXECUTE"
prompt_type = "Turn"
prompt = 'Check the note. Reply with {"content": "<markdown>"}.'
output_type = "check"
granularity = "all_to_one"
after = ["role_write"]
inputs = [
    { type = "seed_prompt", document_key = "seed_prompt" },
    { type = "header_context", stage_slug = "role_run", document_key = "header_context" },
]
outputs = [{ document_key = "check", file_type = "json", required_keys = ["content"], key_types = { content = "string" } }]
"##;

fn simulated(name: &str) -> ModelSpec {
    ModelSpec {
        name: name.into(),
        display_name: None,
        provider: ProviderKind::Simulated,
        base_url: None,
        key_env: None,
        context_window: 128_000,
        max_output: 8192,
        structured_output: None,
        max_concurrency: None,
        requests_per_minute: None,
        tokens_per_minute: None,
        fallback: None,
        input_cost: None,
        output_cost: None,
        tokenizer: "estimate".into(),
        token_limit_param: None,
        reasoning: false,
        reasoning_effort: None,
        prices: None,
    }
}

fn roles(pairs: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
    pairs
        .iter()
        .map(|(r, m)| (r.to_string(), m.to_string()))
        .collect()
}

/// The models the recorded requests of `output_type` went to, with their
/// (temperature, max_tokens).
fn sent(requests: &[ChatRequest], output_type: &str) -> Vec<(String, Option<f64>, u32)> {
    let mut found: Vec<_> = requests
        .iter()
        .filter(|r| r.output_type == output_type)
        .map(|r| (r.model.clone(), r.temperature, r.max_tokens))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pipeline_with_two_roles_runs_each_step_on_its_roles_model() {
    let mut env = TestEnv::new().await;
    let file = PipelineFile::parse(PIPELINE).expect("parses");
    pipelines::install(env.store.pool(), &file)
        .await
        .expect("install");
    for name in [ANALYST, WRITER] {
        models::register(env.store.pool(), &simulated(name))
            .await
            .expect("register");
    }
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Roles".into(),
            initial_user_prompt: "A note on lending tools by the hour.".into(),
            pipeline: "roles".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    let start = |model_roles| StartSessionRequest {
        project_id: project.id.clone(),
        models: LINEAGES.iter().map(|m| m.to_string()).collect(),
        auto_advance: true,
        model_roles,
        ..Default::default()
    };

    for (model_roles, names) in [
        (roles(&[("analyst", ANALYST), ("anlyst", WRITER)]), "anlyst"),
        (roles(&[("analyst", "no-such-model")]), "no-such-model"),
    ] {
        let refused = client
            .start_session(start(model_roles))
            .await
            .expect_err("refused");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains(names), "{refused:?}");
    }
    let sessions = env
        .count(
            "SELECT count(*) FROM dialectic_sessions WHERE project_id = $1",
            project.id.parse().expect("uuid"),
        )
        .await;
    assert_eq!(sessions, 0, "a refused start leaves no session");

    let session = client
        .start_session(start(roles(&[("analyst", ANALYST), ("writer", WRITER)])))
        .await
        .expect("start")
        .into_inner();
    let expected_map: BTreeMap<String, String> = [("analyst", ANALYST), ("writer", WRITER)]
        .into_iter()
        .map(|(r, m)| (r.to_string(), m.to_string()))
        .collect();
    env.wait_for_session(&session.id, "iteration_complete_pending_review", true)
        .await;
    let shown = env.session(&session.id).await;
    assert_eq!(
        shown.model_roles.into_iter().collect::<BTreeMap<_, _>>(),
        expected_map,
        "GetSession shows the role map"
    );
    assert_eq!(shown.models, LINEAGES, "the session's own models");

    let requests = dialectic_llm::recorded_requests();
    let lineages: Vec<String> = LINEAGES.iter().map(|m| m.to_string()).collect();
    let models_of = |output_type: &str| -> Vec<String> {
        sent(&requests, output_type)
            .into_iter()
            .map(|(model, _, _)| model)
            .collect()
    };
    // No role: one request per lineage, on the lineage's model.
    assert_eq!(models_of("header_context"), lineages, "plan");
    // A role: one request per lineage, every one on the role's model, with
    // the role's parameters (the step's own standing over them).
    assert_eq!(
        sent(&requests, "analysis"),
        vec![(ANALYST.to_string(), Some(0.1), 333); 2],
        "analyse runs on the analyst's model only"
    );
    assert_eq!(
        sent(&requests, "draft"),
        vec![(WRITER.to_string(), Some(0.7), 2000); 2],
        "write runs on the writer's model only"
    );
    // After a role's step, a step without one is back on its lineage's model.
    assert_eq!(models_of("check"), lineages, "check");
    for (model, temperature, _) in sent(&requests, "check") {
        assert_eq!(temperature, None, "{model}: no role, no role parameters");
    }
    let every: BTreeSet<&str> = requests.iter().map(|r| r.model.as_str()).collect();
    assert_eq!(
        every,
        BTreeSet::from(["simulated", "simulated-b", ANALYST, WRITER]),
        "no other model was called"
    );

    // The documents stay in their lineages: one of each per lineage model.
    let lineage_of: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.document_key, m.api_identifier
           FROM dialectic_contributions c JOIN ai_providers m ON m.id = c.model_id
          WHERE c.session_id = $1 AND c.document_key = ANY($2)
          ORDER BY 1, 2",
    )
    .bind(session.id.parse::<uuid::Uuid>().expect("uuid"))
    .bind(vec!["analysis", "draft"])
    .fetch_all(env.store.pool())
    .await
    .expect("contributions");
    let mut expected_lineages = Vec::new();
    for key in ["analysis", "draft"] {
        for model in LINEAGES {
            expected_lineages.push((key.to_string(), model.to_string()));
        }
    }
    assert_eq!(lineage_of, expected_lineages);
    env.teardown().await;
}
