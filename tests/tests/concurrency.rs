//! Many children of one parent finishing at the same moment must wake the
//! parent exactly once: one `waiting_for_children → pending_next_step`, one job
//! for the step that waits on all of them, one dispatch for it. Drives the
//! planner engine directly against a real Postgres database.

use dialectic_core::ids::StepId;
use dialectic_core::ids::{JobId, ModelId, ProjectId, SessionId, UserId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::payload::JobPayload;
use dialectic_core::recipe::{Granularity, Recipe, RecipeStep};
use dialectic_e2e::TestEnv;
use dialectic_planner::engine::Engine;
use dialectic_proto::v1::queue::envelope::Body;
use dialectic_proto::v1::queue::{JobOutcome, JobSucceeded, job_outcome};
use dialectic_store::{jobs, projects, sessions};
use sqlx::types::JsonValue;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use uuid::Uuid;

const USER: UserId = UserId(Uuid::from_u128(1));
const MODEL: ModelId = ModelId(Uuid::from_u128(0x5000_0000_0000_0000_0000_0000_0000_0001));
const CHILDREN: usize = 16;

fn step(key: &str, job_type: JobType, order: i32) -> RecipeStep {
    RecipeStep {
        progress: None,
        skip_only_when: None,
        id: StepId::new(),
        step_key: key.to_string(),
        step_name: key.to_string(),
        job_type,
        prompt_type: if job_type == JobType::Plan {
            "Planner".into()
        } else {
            "Turn".into()
        },
        prompt_template: None,
        output_type: key.to_string(),
        granularity: Granularity::AllToOne,
        inputs_required: vec![],
        inputs_relevance: JsonValue::Array(vec![]),
        // No markdown outputs, so finishing a child queues no RENDER job.
        outputs_required: vec![],
        order,
        is_skipped: false,
        config: Default::default(),
        role: None,
        filter: Default::default(),
    }
}

/// The root PLAN step, 16 EXECUTE steps after it, and a 17th after all 16.
fn fan_in_recipe() -> Recipe {
    let root = step("root_header", JobType::Plan, 1);
    let children: Vec<RecipeStep> = (0..CHILDREN)
        .map(|i| step(&format!("child_{i:02}"), JobType::Execute, 2))
        .collect();
    let last = step("fan_in", JobType::Execute, 3);
    let mut edges: Vec<(StepId, StepId)> = children.iter().map(|c| (root.id, c.id)).collect();
    edges.extend(children.iter().map(|c| (c.id, last.id)));
    let mut steps = vec![root];
    steps.extend(children);
    steps.push(last);
    let recipe = Recipe { steps, edges };
    recipe.validate().expect("the fan-in recipe is a DAG");
    recipe
}

struct Fixture {
    root: JobId,
    children: Vec<JobId>,
    last_step: StepId,
}

async fn set_up(env: &TestEnv, recipe: &Recipe) -> Fixture {
    let pool = env.store.pool();
    let (user, model) = (USER, MODEL);
    let (project, _) = projects::insert_project(
        pool,
        &projects::NewProject {
            id: ProjectId::new(),
            user_id: user,
            name: "Fan-in",
            slug: "fan-in",
            prompt: "Many children, one parent.",
            prompt_key: "",
            client_request_id: None,
            pipeline: projects::DEFAULT_PIPELINE,
        },
    )
    .await
    .expect("project");
    let mut tx = env.store.begin().await.expect("tx");
    let (session, _) = sessions::insert_session(
        &mut tx,
        &sessions::NewSession {
            id: SessionId::new(),
            project_id: project.id,
            user_id: user,
            model_ids: &[model],
            description: None,
            client_request_id: None,
            auto_advance: false,
            pushback: Default::default(),
            model_roles: &Default::default(),
        },
    )
    .await
    .expect("session");

    let root_step = recipe.steps[0].clone();
    let root_payload = JobPayload {
        step: Some(root_step.clone()),
        model_api_identifier: "simulated".into(),
        model_slug: "simulated".into(),
        stage_number: 1,
        recipe: Some(recipe.clone()),
        ..Default::default()
    };
    let root = JobId::new();
    jobs::insert(
        &mut tx,
        &jobs::NewJob {
            id: root,
            job_key: format!("{}:thesis:1:{model}", session.id),
            session_id: session.id,
            user_id: user,
            stage_slug: "thesis",
            iteration: 1,
            job_type: JobType::Plan,
            status: JobStatus::WaitingForChildren,
            step_id: Some(root_step.id),
            step_key: Some(&root_step.step_key),
            model_id: Some(model),
            document_key: Some(&root_step.output_type),
            payload: &root_payload,
            parent_job_id: None,
            prerequisite_job_id: None,
            target_contribution_id: None,
            max_attempts: 3,
        },
    )
    .await
    .expect("root job")
    .expect("root job is new");

    let mut children = Vec::with_capacity(CHILDREN);
    for child_step in &recipe.steps[1..=CHILDREN] {
        let payload = JobPayload {
            step: Some(child_step.clone()),
            model_api_identifier: "simulated".into(),
            model_slug: "simulated".into(),
            stage_number: 1,
            ..Default::default()
        };
        let id = JobId::new();
        jobs::insert(
            &mut tx,
            &jobs::NewJob {
                id,
                job_key: format!("{root}:{}", child_step.step_key),
                session_id: session.id,
                user_id: user,
                stage_slug: "thesis",
                iteration: 1,
                job_type: JobType::Execute,
                status: JobStatus::Processing,
                step_id: Some(child_step.id),
                step_key: Some(&child_step.step_key),
                model_id: Some(model),
                document_key: Some(&child_step.output_type),
                payload: &payload,
                parent_job_id: Some(root),
                prerequisite_job_id: None,
                target_contribution_id: None,
                max_attempts: 3,
            },
        )
        .await
        .expect("child job")
        .expect("child job is new");
        children.push(id);
    }
    // As if a worker had claimed each child once.
    sqlx::query(
        "UPDATE dialectic_generation_jobs
         SET attempt_count = 1, lease_owner = 'test-worker', lease_expires_at = now() + interval '10 minutes'
         WHERE parent_job_id = $1",
    )
    .bind(root)
    .execute(&mut *tx)
    .await
    .expect("claim children");
    tx.commit().await.expect("commit fixture");

    // Test-only audit of every status change of root jobs (this database only).
    for sql in [
        "CREATE TABLE root_status_log (
             id bigserial PRIMARY KEY, job_id uuid NOT NULL, old_status text NOT NULL, new_status text NOT NULL)",
        "CREATE FUNCTION log_root_status() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             INSERT INTO root_status_log (job_id, old_status, new_status) VALUES (NEW.id, OLD.status, NEW.status);
             RETURN NULL;
         END;
         $$",
        "CREATE TRIGGER log_root_status AFTER UPDATE ON dialectic_generation_jobs
         FOR EACH ROW WHEN (NEW.parent_job_id IS NULL AND OLD.status IS DISTINCT FROM NEW.status)
         EXECUTE FUNCTION log_root_status()",
    ] {
        sqlx::query(sql).execute(pool).await.expect(sql);
    }
    Fixture {
        root,
        children,
        last_step: recipe.steps[CHILDREN + 1].id,
    }
}

/// Delivers one success outcome, redelivering on a transient error (a lost
/// serialisation race or deadlock) as the queue would.
async fn deliver(engine: &Engine, job_id: JobId) {
    let outcome = JobOutcome {
        job_id: job_id.to_string(),
        attempt: 1,
        result: Some(job_outcome::Result::Succeeded(JobSucceeded {
            contribution_id: String::new(),
            resource_id: String::new(),
            finish_reason: "stop".into(),
            continuation_needed: false,
            ..Default::default()
        })),
    };
    for attempt in 1..=10 {
        match engine.on_outcome(&outcome, None).await {
            Ok(()) => return,
            Err(e) if e.is_transient() && attempt < 10 => {
                tracing::warn!(%job_id, error = %e, "transient; redelivering");
                tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
            }
            Err(e) => panic!("outcome for {job_id}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_children_finishing_at_once_wake_the_parent_exactly_once() {
    let env = TestEnv::new().await;
    let recipe = fan_in_recipe();
    let fixture = set_up(&env, &recipe).await;
    let engine = Arc::new(Engine::new(
        env.store.clone(),
        env.blob.clone(),
        env.settings.planner.clone(),
        Arc::new(OnceLock::new()),
    ));

    let deliveries: Vec<_> = fixture
        .children
        .iter()
        .map(|id| {
            let engine = engine.clone();
            let id = *id;
            // Spawned, so the outcomes really run in parallel on the runtime's threads.
            tokio::spawn(async move { deliver(&engine, id).await })
        })
        .collect();
    for result in futures::future::join_all(deliveries).await {
        result.expect("delivery task");
    }

    let pool = env.store.pool();
    let statuses: Vec<String> =
        sqlx::query_scalar("SELECT status FROM dialectic_generation_jobs WHERE id = ANY($1)")
            .bind(&fixture.children)
            .fetch_all(pool)
            .await
            .expect("child statuses");
    assert_eq!(statuses.len(), CHILDREN);
    assert!(
        statuses.iter().all(|s| s == "completed"),
        "every child completed: {statuses:?}"
    );

    let log: Vec<(JobId, String, String)> =
        sqlx::query_as("SELECT job_id, old_status, new_status FROM root_status_log ORDER BY id")
            .fetch_all(pool)
            .await
            .expect("root status log");
    let wakes = log
        .iter()
        .filter(|(id, old, new)| {
            *id == fixture.root && old == "waiting_for_children" && new == "pending_next_step"
        })
        .count();
    assert_eq!(wakes, 1, "the parent woke exactly once: {log:?}");
    let root = jobs::get(pool, fixture.root).await.expect("root");
    assert_eq!(
        root.status, "waiting_for_children",
        "the root waits for the fan-in step: {log:?}"
    );

    let fan_in_jobs: Vec<JobId> = sqlx::query_scalar(
        "SELECT id FROM dialectic_generation_jobs WHERE parent_job_id = $1 AND recipe_step_id = $2",
    )
    .bind(fixture.root)
    .bind(fixture.last_step.0)
    .fetch_all(pool)
    .await
    .expect("fan-in jobs");
    assert_eq!(fan_in_jobs.len(), 1, "exactly one job for the 17th step");
    let fan_in = jobs::get(pool, fan_in_jobs[0]).await.expect("fan-in job");
    assert_eq!(fan_in.status, "pending");
    assert_eq!(fan_in.job_type, "EXECUTE");

    let outbox: Vec<(String, Vec<u8>)> =
        sqlx::query_as("SELECT routing_key, payload FROM outbox ORDER BY id")
            .fetch_all(pool)
            .await
            .expect("outbox");
    let mut dispatched = Vec::new();
    for (routing_key, payload) in &outbox {
        if routing_key != dialectic_queue::keys::JOB_EXECUTE {
            continue;
        }
        let envelope = dialectic_queue::decode(payload).expect("outbox payload decodes");
        match envelope.body {
            Some(Body::JobDispatch(dispatch)) => dispatched.push(dispatch.job_id),
            other => panic!("unexpected job.execute message {other:?}"),
        }
    }
    assert_eq!(
        dispatched,
        vec![fan_in_jobs[0].to_string()],
        "exactly one dispatch, for the fan-in job"
    );
    assert!(
        !outbox
            .iter()
            .any(|(key, _)| key == dialectic_queue::keys::JOB_RENDER),
        "no RENDER jobs for steps without markdown outputs"
    );

    // A duplicate delivery of any child's outcome changes nothing.
    deliver(&engine, fixture.children[0]).await;
    let wakes_after: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM root_status_log WHERE old_status = 'waiting_for_children' AND new_status = 'pending_next_step'",
    )
    .fetch_one(pool)
    .await
    .expect("log count");
    assert_eq!(wakes_after, 1);
    let fan_in_count: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE recipe_step_id = $1",
    )
    .bind(fixture.last_step.0)
    .fetch_one(pool)
    .await
    .expect("fan-in count");
    assert_eq!(fan_in_count, 1);
    env.teardown().await;
}
