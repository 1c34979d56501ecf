//! Recipe editing by clone-on-write (seed 002) against a real, freshly
//! migrated Postgres database: the template layer never changes, a failed
//! edit writes nothing, and the planner honours an edited instance.

use dialectic_core::ids::{RecipeInstanceId, TemplateId};
use dialectic_core::job::JobType;
use dialectic_core::recipe::{InputRule, OutputRule};
use dialectic_e2e::{ALL_SERVICES, TestEnv};
use dialectic_proto::v1::{CreateProjectRequest, StartSessionRequest};
use dialectic_store::recipe_edit::{self, CustomStep, RecipeEditError};
use dialectic_store::recipes;
use sqlx::types::JsonValue;

const STAGE: &str = "thesis";
const HEADER: &str = "thesis_build_stage_header";
const BUSINESS_CASE: &str = "thesis_generate_business_case";
const SUCCESS_METRICS: &str = "thesis_generate_success_metrics";

fn json(text: &str) -> JsonValue {
    text.parse().expect("test JSON parses")
}

/// Every template row, serialised by Postgres itself, so "byte-identical"
/// covers every column including timestamps.
async fn template_dump(env: &TestEnv) -> String {
    sqlx::query_scalar(
        "SELECT concat_ws(' | ',
            (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.id)::text FROM dialectic_recipe_templates t),
            (SELECT jsonb_agg(to_jsonb(s) ORDER BY s.id)::text FROM dialectic_recipe_template_steps s),
            (SELECT jsonb_agg(to_jsonb(e) ORDER BY e.id)::text FROM dialectic_recipe_template_edges e))",
    )
    .fetch_one(env.store.pool())
    .await
    .expect("template dump")
}

/// (instance steps, instance edges, is_cloned, cloned_at set) of the thesis stage.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct InstanceState {
    steps: i64,
    edges: i64,
    is_cloned: bool,
    cloned_at: bool,
}

/// The current version's thesis recipe template and instance. Migrating
/// installs a changed shipped pipeline as a new version with ids of its own,
/// so the ids the early migrations seeded are not the ones sessions run.
async fn current_thesis_recipe(env: &TestEnv) -> (TemplateId, RecipeInstanceId) {
    sqlx::query_as(
        "SELECT recipe_template_id, active_recipe_instance_id FROM dialectic_stages
         WHERE slug = $1 AND is_current",
    )
    .bind(STAGE)
    .fetch_one(env.store.pool())
    .await
    .expect("current thesis recipe")
}

async fn instance_state(env: &TestEnv) -> InstanceState {
    let (steps, edges, is_cloned, cloned_at): (i64, i64, bool, bool) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM dialectic_stage_recipe_steps WHERE instance_id = i.id),
                (SELECT count(*) FROM dialectic_stage_recipe_edges WHERE instance_id = i.id),
                i.is_cloned, i.cloned_at IS NOT NULL
         FROM dialectic_stages s JOIN dialectic_stage_recipe_instances i ON i.id = s.active_recipe_instance_id
         WHERE s.slug = $1 AND s.is_current",
    )
    .bind(STAGE)
    .fetch_one(env.store.pool())
    .await
    .expect("instance state");
    InstanceState {
        steps,
        edges,
        is_cloned,
        cloned_at,
    }
}

async fn count(env: &TestEnv, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(env.store.pool())
        .await
        .expect("count query")
}

async fn stage_recipe(env: &TestEnv, stage: &str) -> dialectic_core::recipe::Recipe {
    let mut conn = env.store.pool().acquire().await.expect("connection");
    recipes::stage_recipe(&mut conn, stage)
        .await
        .expect("stage recipe")
}

fn custom_step(key: &str, after: &[&str], before: &[&str]) -> CustomStep {
    CustomStep {
        step_key: key.into(),
        step_name: "Risk register".into(),
        job_type: "EXECUTE".into(),
        prompt_type: "Turn".into(),
        output_type: "risk_register".into(),
        granularity: "all_to_one".into(),
        inputs_required: vec![InputRule {
            kind: "header_context".into(),
            stage_slug: Some(STAGE.into()),
            document_key: Some("header_context".into()),
            required: true,
            multiple: false,
            section_header: Some("--- Header context ---".into()),
            iteration: Default::default(),
            items: None,
            order_by: None,
            role: None,
        }],
        inputs_relevance: json(
            r#"[{"document_key": "header_context", "type": "header_context", "relevance": 1.0}]"#,
        ),
        outputs_required: vec![OutputRule {
            document_key: "risk_register".into(),
            file_type: Some("json".into()),
            template_filename: None,
            required_keys: vec!["content".into()],
            key_types: Default::default(),
            publishes: vec![],
            confidence_gate: None,
            schema: None,
            verify_claims: None,
            record: None,
            mean: None,
        }],
        after: after.iter().map(|k| k.to_string()).collect(),
        before: before.iter().map(|k| k.to_string()).collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloning_copies_the_template_once_and_leaves_it_untouched() {
    let env = TestEnv::new().await;
    let template_before = template_dump(&env).await;
    let (thesis_template, thesis_instance) = current_thesis_recipe(&env).await;
    let template_steps = count(
        &env,
        &format!(
            "SELECT count(*) FROM dialectic_recipe_template_steps WHERE template_id = '{thesis_template}'"
        ),
    )
    .await;
    let template_edges = count(
        &env,
        &format!(
            "SELECT count(*) FROM dialectic_recipe_template_edges WHERE template_id = '{thesis_template}'"
        ),
    )
    .await;
    assert_eq!((template_steps, template_edges), (5, 4));
    let fresh = instance_state(&env).await;
    assert_eq!(
        fresh,
        InstanceState {
            steps: 0,
            edges: 0,
            is_cloned: false,
            cloned_at: false
        }
    );
    let from_template = stage_recipe(&env, STAGE).await;

    let mut tx = env.store.begin().await.expect("tx");
    let instance = recipe_edit::clone_stage_recipe(&mut tx, STAGE)
        .await
        .expect("clone");
    tx.commit().await.expect("commit");
    assert_eq!(
        instance, thesis_instance,
        "the clone fills the current stage's own instance"
    );
    let cloned = instance_state(&env).await;
    assert_eq!(
        cloned,
        InstanceState {
            steps: template_steps,
            edges: template_edges,
            is_cloned: true,
            cloned_at: true
        }
    );

    // Every copied column matches its template step; edges map onto the copies.
    let mismatched = count(
        &env,
        "SELECT count(*) FROM dialectic_stage_recipe_steps s
         JOIN dialectic_recipe_template_steps t ON t.id = s.template_step_id
         WHERE s.step_key <> t.step_key OR s.step_slug <> t.step_slug OR s.step_name <> t.step_name
            OR s.job_type <> t.job_type OR s.prompt_type <> t.prompt_type
            OR s.prompt_template_id IS DISTINCT FROM t.prompt_template_id
            OR s.output_type <> t.output_type OR s.granularity_strategy <> t.granularity_strategy
            OR s.inputs_required <> t.inputs_required OR s.inputs_relevance <> t.inputs_relevance
            OR s.outputs_required <> t.outputs_required
            OR s.execution_order IS DISTINCT FROM t.step_number
            OR s.parallel_group IS DISTINCT FROM t.parallel_group
            OR s.branch_key IS DISTINCT FROM t.branch_key
            OR s.is_skipped OR s.config_override <> '{}' OR s.object_filter <> '{}' OR s.output_overrides <> '{}'",
    )
    .await;
    assert_eq!(mismatched, 0, "cloned steps copy every template column");
    let mapped_edges = count(
        &env,
        "SELECT count(*) FROM dialectic_stage_recipe_edges e
         JOIN dialectic_stage_recipe_steps f ON f.id = e.from_step_id
         JOIN dialectic_stage_recipe_steps t ON t.id = e.to_step_id
         JOIN dialectic_recipe_template_edges te
           ON te.from_step_id = f.template_step_id AND te.to_step_id = t.template_step_id",
    )
    .await;
    assert_eq!(mapped_edges, template_edges);

    // The planner's reader now returns the instance: same shape, new ids.
    let from_instance = stage_recipe(&env, STAGE).await;
    let shape = |r: &dialectic_core::recipe::Recipe| {
        let mut steps: Vec<(String, JobType, i32, bool)> = r
            .steps
            .iter()
            .map(|s| (s.step_key.clone(), s.job_type, s.order, s.is_skipped))
            .collect();
        steps.sort_by(|a, b| a.0.cmp(&b.0));
        let mut edges: Vec<(String, String)> = r
            .edges
            .iter()
            .map(|(a, b)| {
                (
                    r.step(*a).unwrap().step_key.clone(),
                    r.step(*b).unwrap().step_key.clone(),
                )
            })
            .collect();
        edges.sort();
        (steps, edges)
    };
    assert_eq!(shape(&from_instance), shape(&from_template));
    let template_ids: Vec<_> = from_template.steps.iter().map(|s| s.id).collect();
    assert!(
        from_instance
            .steps
            .iter()
            .all(|s| !template_ids.contains(&s.id)),
        "the reader returns the instance's own step ids"
    );

    // Idempotent: a second clone returns the same instance and copies nothing.
    let mut tx = env.store.begin().await.expect("tx");
    let again = recipe_edit::clone_stage_recipe(&mut tx, STAGE)
        .await
        .expect("second clone");
    tx.commit().await.expect("commit");
    assert_eq!(again, instance);
    assert_eq!(instance_state(&env).await, cloned);

    // Edits after the clone touch only the instance.
    recipe_edit::set_step_skipped(env.store.pool(), STAGE, SUCCESS_METRICS, true)
        .await
        .expect("skip");
    recipe_edit::override_step(
        env.store.pool(),
        STAGE,
        BUSINESS_CASE,
        &json(r#"{"temperature": 0.2}"#),
        &json(r#"{"business_case": {"file_type": "json"}}"#),
    )
    .await
    .expect("override");
    recipe_edit::set_object_filter(
        env.store.pool(),
        STAGE,
        BUSINESS_CASE,
        &json(r#"{"models": ["simulated"]}"#),
    )
    .await
    .expect("filter");
    let (config, outputs, filter): (JsonValue, JsonValue, JsonValue) = sqlx::query_as(
        "SELECT config_override, output_overrides, object_filter FROM dialectic_stage_recipe_steps
         WHERE instance_id = $1 AND step_key = $2",
    )
    .bind(instance)
    .bind(BUSINESS_CASE)
    .fetch_one(env.store.pool())
    .await
    .expect("overrides");
    assert_eq!(config, json(r#"{"temperature": 0.2}"#));
    assert_eq!(outputs, json(r#"{"business_case": {"file_type": "json"}}"#));
    assert_eq!(filter, json(r#"{"models": ["simulated"]}"#));
    let edited = stage_recipe(&env, STAGE).await;
    assert!(edited.step_by_key(SUCCESS_METRICS).unwrap().is_skipped);
    assert!(!edited.step_by_key(BUSINESS_CASE).unwrap().is_skipped);

    assert_eq!(
        template_dump(&env).await,
        template_before,
        "templates are never modified"
    );
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_edits_clone_once() {
    let env = TestEnv::new().await;
    let pool = env.store.pool();
    let filter = json(r#"{"document_keys": ["business_case"]}"#);
    let (a, b) = tokio::join!(
        recipe_edit::set_step_skipped(pool, STAGE, SUCCESS_METRICS, true),
        recipe_edit::set_object_filter(pool, STAGE, BUSINESS_CASE, &filter),
    );
    a.expect("skip");
    b.expect("filter");
    let state = instance_state(&env).await;
    assert_eq!((state.steps, state.edges, state.is_cloned), (5, 4, true));
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cyclic_edits_are_rejected_and_write_nothing() {
    let env = TestEnv::new().await;
    let pool = env.store.pool();
    let template_before = template_dump(&env).await;
    let untouched = instance_state(&env).await;

    // On a stage that was never cloned: the clone inside the failed call rolls back too.
    let err = recipe_edit::add_edge(pool, STAGE, BUSINESS_CASE, HEADER)
        .await
        .unwrap_err();
    match &err {
        RecipeEditError::Cycle { stage, path } => {
            assert_eq!(stage, STAGE);
            assert_eq!(path, &[HEADER, BUSINESS_CASE, HEADER]);
        }
        other => panic!("expected a cycle, got {other:?}"),
    }
    assert!(err.to_string().contains(BUSINESS_CASE), "{err}");
    assert_eq!(instance_state(&env).await, untouched, "nothing written");

    let cyclic = custom_step("thesis_risk_register", &[BUSINESS_CASE], &[HEADER]);
    match recipe_edit::add_custom_step(pool, STAGE, &cyclic).await {
        Err(RecipeEditError::Cycle { path, .. }) => assert_eq!(
            path,
            [HEADER, BUSINESS_CASE, "thesis_risk_register", HEADER]
        ),
        other => panic!("expected a cycle, got {other:?}"),
    }
    assert_eq!(instance_state(&env).await, untouched, "nothing written");
    match recipe_edit::add_edge(pool, STAGE, HEADER, HEADER).await {
        Err(RecipeEditError::Cycle { path, .. }) => assert_eq!(path, [HEADER, HEADER]),
        other => panic!("expected a self-loop cycle, got {other:?}"),
    }
    assert_eq!(instance_state(&env).await, untouched, "nothing written");

    // On a cloned stage: counts stay where they were.
    let ok = custom_step("thesis_risk_register", &[BUSINESS_CASE], &[SUCCESS_METRICS]);
    let new_id = recipe_edit::add_custom_step(pool, STAGE, &ok)
        .await
        .expect("acyclic custom step");
    let cloned = instance_state(&env).await;
    assert_eq!((cloned.steps, cloned.edges, cloned.is_cloned), (6, 6, true));
    let template_step: Option<uuid::Uuid> = sqlx::query_scalar(
        "SELECT template_step_id FROM dialectic_stage_recipe_steps WHERE id = $1",
    )
    .bind(new_id)
    .fetch_one(pool)
    .await
    .expect("custom step row");
    assert_eq!(template_step, None, "custom steps have no template step");
    let recipe = stage_recipe(&env, STAGE).await;
    let custom = recipe.step_by_key("thesis_risk_register").unwrap();
    assert_eq!(custom.id, new_id);
    assert_eq!(custom.inputs_required, ok.inputs_required);
    assert_eq!(custom.outputs_required, ok.outputs_required);
    assert_eq!(
        recipe
            .predecessors(recipe.step_by_key(SUCCESS_METRICS).unwrap().id)
            .count(),
        2
    );

    // success_metrics → business_case now closes business_case → risk → success_metrics.
    match recipe_edit::add_edge(pool, STAGE, SUCCESS_METRICS, BUSINESS_CASE).await {
        Err(RecipeEditError::Cycle { path, .. }) => assert_eq!(
            path,
            [
                BUSINESS_CASE,
                "thesis_risk_register",
                SUCCESS_METRICS,
                BUSINESS_CASE
            ]
        ),
        other => panic!("expected a cycle, got {other:?}"),
    }
    let cyclic = custom_step("thesis_loop", &[SUCCESS_METRICS], &["thesis_risk_register"]);
    assert!(matches!(
        recipe_edit::add_custom_step(pool, STAGE, &cyclic).await,
        Err(RecipeEditError::Cycle { .. })
    ));
    assert_eq!(instance_state(&env).await, cloned, "nothing written");

    // A duplicate key is named; an acyclic edge is accepted, and repeating it is a no-op.
    assert!(matches!(
        recipe_edit::add_custom_step(pool, STAGE, &custom_step(BUSINESS_CASE, &[HEADER], &[])).await,
        Err(RecipeEditError::DuplicateStepKey { step_key, .. }) if step_key == BUSINESS_CASE
    ));
    recipe_edit::add_edge(pool, STAGE, BUSINESS_CASE, SUCCESS_METRICS)
        .await
        .expect("acyclic edge");
    recipe_edit::add_edge(pool, STAGE, BUSINESS_CASE, SUCCESS_METRICS)
        .await
        .expect("repeated edge");
    assert_eq!(instance_state(&env).await.edges, cloned.edges + 1);

    assert_eq!(template_dump(&env).await, template_before);
    env.teardown().await;
}

/// A step key of the antithesis stage's recipe, giving the stage a minimal
/// recipe first when the migrations did not seed one.
async fn antithesis_step_key(env: &TestEnv) -> String {
    let has_recipe = count(
        env,
        "SELECT count(*) FROM dialectic_stages
         WHERE slug = 'antithesis' AND is_current AND active_recipe_instance_id IS NOT NULL",
    )
    .await;
    if has_recipe == 0 {
        let mut tx = env.store.begin().await.expect("tx");
        for sql in [
            "INSERT INTO dialectic_recipe_templates (id, recipe_name, recipe_version, display_name)
             VALUES ('40000000-0000-0000-0000-0000000000a2', 'antithesis', 99, 'Antithesis')",
            "INSERT INTO dialectic_recipe_template_steps
               (id, template_id, step_number, step_key, step_slug, step_name, job_type, prompt_type,
                output_type, granularity_strategy)
             VALUES ('41000000-0000-0000-0000-0000000000a1', '40000000-0000-0000-0000-0000000000a2', 1,
                     'antithesis_build_stage_header', 'build-stage-header', 'Build stage header', 'PLAN',
                     'Planner', 'header_context', 'all_to_one')",
            "INSERT INTO dialectic_stage_recipe_instances (id, stage_id, template_id)
             SELECT '42000000-0000-0000-0000-0000000000a2', id, '40000000-0000-0000-0000-0000000000a2'
             FROM dialectic_stages WHERE slug = 'antithesis' AND is_current",
            "UPDATE dialectic_stages
             SET recipe_template_id = '40000000-0000-0000-0000-0000000000a2',
                 active_recipe_instance_id = '42000000-0000-0000-0000-0000000000a2'
             WHERE slug = 'antithesis' AND is_current",
        ] {
            sqlx::query(sql).execute(&mut *tx).await.expect(sql);
        }
        tx.commit().await.expect("commit");
    }
    let recipe = stage_recipe(env, "antithesis").await;
    let key = recipe.steps[0].step_key.clone();
    assert!(
        stage_recipe(env, STAGE).await.step_by_key(&key).is_none(),
        "{key} belongs to antithesis only"
    );
    key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_steps_and_foreign_edges_are_rejected() {
    let env = TestEnv::new().await;
    let pool = env.store.pool();
    let foreign = antithesis_step_key(&env).await;
    let foreign = foreign.as_str();
    let untouched = instance_state(&env).await;

    let mut bad = custom_step("thesis_risk_register", &[HEADER], &[]);
    bad.job_type = "SUMMARISE".into();
    match recipe_edit::add_custom_step(pool, STAGE, &bad).await {
        Err(RecipeEditError::InvalidJobType { step_key, value }) => {
            assert_eq!(
                (step_key.as_str(), value.as_str()),
                ("thesis_risk_register", "SUMMARISE")
            )
        }
        other => panic!("expected an invalid job type, got {other:?}"),
    }
    bad.job_type = "execute".into();
    assert!(matches!(
        recipe_edit::add_custom_step(pool, STAGE, &bad).await,
        Err(RecipeEditError::InvalidJobType { .. })
    ));
    bad.job_type = " ".into();
    assert!(matches!(
        recipe_edit::add_custom_step(pool, STAGE, &bad).await,
        Err(RecipeEditError::MissingJobType { .. })
    ));
    let mut bad = custom_step("thesis_risk_register", &[HEADER], &[]);
    bad.granularity = "PerObject".into();
    assert!(matches!(
        recipe_edit::add_custom_step(pool, STAGE, &bad).await,
        Err(RecipeEditError::InvalidGranularity { .. })
    ));
    let mut bad = custom_step("thesis_risk_register", &[HEADER], &[]);
    bad.prompt_type = "Chat".into();
    assert!(matches!(
        recipe_edit::add_custom_step(pool, STAGE, &bad).await,
        Err(RecipeEditError::InvalidStep { .. })
    ));
    let bad = custom_step("risk register!", &[HEADER], &[]);
    assert!(matches!(
        recipe_edit::add_custom_step(pool, STAGE, &bad).await,
        Err(RecipeEditError::InvalidStep { .. })
    ));
    assert!(matches!(
        recipe_edit::override_step(pool, STAGE, HEADER, &json("[1]"), &json("{}")).await,
        Err(RecipeEditError::InvalidStep { .. })
    ));
    assert_eq!(instance_state(&env).await, untouched, "nothing written");

    // Edges must stay inside the stage's own recipe, in either direction.
    for (from, to) in [(HEADER, foreign), (foreign, BUSINESS_CASE)] {
        match recipe_edit::add_edge(pool, STAGE, from, to).await {
            Err(RecipeEditError::EdgeOutsideRecipe {
                stage,
                from: f,
                to: t,
            }) => {
                assert_eq!((stage.as_str(), f.as_str(), t.as_str()), (STAGE, from, to))
            }
            other => panic!("expected an edge outside the recipe, got {other:?}"),
        }
    }
    let across = custom_step("thesis_risk_register", &[foreign], &[]);
    assert!(matches!(
        recipe_edit::add_custom_step(pool, STAGE, &across).await,
        Err(RecipeEditError::EdgeOutsideRecipe { .. })
    ));
    assert!(matches!(
        recipe_edit::add_edge(pool, "antithesis", foreign, HEADER).await,
        Err(RecipeEditError::EdgeOutsideRecipe { .. })
    ));
    assert_eq!(instance_state(&env).await, untouched, "nothing written");
    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM dialectic_stage_recipe_instances WHERE is_cloned"
        )
        .await,
        0
    );

    // Unknown stages and step keys are named, and roll back their clone.
    assert!(matches!(
        recipe_edit::set_step_skipped(pool, "nonesuch", HEADER, true).await,
        Err(RecipeEditError::UnknownStage(s)) if s == "nonesuch"
    ));
    sqlx::query(
        "INSERT INTO dialectic_stages (slug, display_name) VALUES ('recipe_less', 'No recipe')",
    )
    .execute(pool)
    .await
    .expect("stage without a recipe");
    assert!(matches!(
        recipe_edit::set_step_skipped(pool, "recipe_less", HEADER, true).await,
        Err(RecipeEditError::UnknownStage(s)) if s == "recipe_less"
    ));
    match recipe_edit::set_step_skipped(pool, STAGE, "thesis_nothing", true).await {
        Err(RecipeEditError::UnknownStepKey { stage, step_key }) => {
            assert_eq!(
                (stage.as_str(), step_key.as_str()),
                (STAGE, "thesis_nothing")
            )
        }
        other => panic!("expected an unknown step key, got {other:?}"),
    }
    assert!(matches!(
        recipe_edit::set_object_filter(pool, STAGE, foreign, &json("{}")).await,
        Err(RecipeEditError::UnknownStepKey { .. })
    ));
    assert_eq!(instance_state(&env).await, untouched, "nothing written");
    env.teardown().await;
}

async fn wait_for_status(env: &TestEnv, session_id: &str, want: &str) {
    env.wait_for_session(session_id, want, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn skipped_step_is_honoured_by_the_planner_end_to_end() {
    let mut env = TestEnv::new().await;
    recipe_edit::set_step_skipped(env.store.pool(), STAGE, SUCCESS_METRICS, true)
        .await
        .expect("skip success metrics");
    env.start(&ALL_SERVICES).await;
    for name in ALL_SERVICES {
        env.wait_serving(name).await;
    }
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Tool library".into(),
            initial_user_prompt: "A lending library for power tools, run by neighbours.".into(),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: String::new(),
        })
        .await
        .expect("create project")
        .into_inner();
    let session = client
        .start_session(StartSessionRequest {
            project_id: project.id.clone(),
            models: vec!["simulated".into()],
            ..Default::default()
        })
        .await
        .expect("start session")
        .into_inner();
    wait_for_status(&env, &session.id, "pending_antithesis").await;

    let session_id = uuid::Uuid::parse_str(&session.id).expect("session id");
    let executes: Vec<String> = sqlx::query_scalar(
        "SELECT step_key FROM dialectic_generation_jobs
         WHERE session_id = $1 AND job_type = 'EXECUTE' ORDER BY step_key",
    )
    .bind(session_id)
    .fetch_all(env.store.pool())
    .await
    .expect("execute jobs");
    assert_eq!(
        executes,
        [
            BUSINESS_CASE,
            "thesis_generate_feature_spec",
            "thesis_generate_technical_approach"
        ],
        "three EXECUTE jobs, none for the skipped step"
    );
    let metrics: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1 AND document_key = 'success_metrics'",
    )
    .bind(session_id)
    .fetch_one(env.store.pool())
    .await
    .expect("contributions");
    assert_eq!(metrics, 0, "no success_metrics contribution");
    let documents: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT document_key) FROM dialectic_contributions
         WHERE session_id = $1 AND document_key IN ('business_case', 'feature_spec', 'technical_approach')",
    )
    .bind(session_id)
    .fetch_one(env.store.pool())
    .await
    .expect("contributions");
    assert_eq!(documents, 3, "the other documents were written");
    // The root job planned from the instance snapshot: its header skips success_metrics too.
    let root: dialectic_store::jobs::JobRow = {
        let id: dialectic_core::ids::JobId = sqlx::query_scalar(
            "SELECT id FROM dialectic_generation_jobs WHERE session_id = $1 AND parent_job_id IS NULL",
        )
        .bind(session_id)
        .fetch_one(env.store.pool())
        .await
        .expect("root job");
        dialectic_store::jobs::get(env.store.pool(), id)
            .await
            .expect("root row")
    };
    let payload = root.payload().expect("payload");
    assert!(
        !payload
            .planned_documents
            .contains(&"success_metrics".to_string())
    );
    let snapshot = payload.recipe.expect("recipe snapshot");
    assert!(snapshot.step_by_key(SUCCESS_METRICS).unwrap().is_skipped);
    env.teardown().await;
}
