//! A pause and the job outcome that completes a stage, arriving at the same
//! moment, leave a consistent session: the pause is kept, the completion is
//! recorded, and a resume continues into the next stage exactly once. Sends
//! the pause to a running planner service over its gRPC API while a second
//! planner engine (another replica, in effect) applies the outcome.

use dialectic_core::ids::{JobId, ModelId, ProjectId, SessionId, UserId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::payload::JobPayload;
use dialectic_core::service_auth::ServiceName;
use dialectic_e2e::{TestEnv, eventually};
use dialectic_planner::engine::Engine;
use dialectic_proto::v1::planner::SessionCommand;
use dialectic_proto::v1::planner::planner_service_client::PlannerServiceClient;
use dialectic_proto::v1::queue::{JobOutcome, JobSucceeded, job_outcome};
use dialectic_runtime::service_auth::InternalChannel;
use dialectic_store::{jobs, records};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use uuid::Uuid;

const USER: UserId = UserId(Uuid::from_u128(1));
const MODEL: ModelId = ModelId(Uuid::from_u128(0x5000_0000_0000_0000_0000_0000_0000_0001));
const ROUNDS: usize = 12;

/// A session running thesis (auto-advance on) whose only root PLAN job is
/// processing its first attempt; returns (session, root job).
async fn running_thesis(env: &TestEnv, project: ProjectId) -> (SessionId, JobId) {
    let (user, model) = (USER, MODEL);
    let mut tx = env.store.begin().await.expect("tx");
    let (session, _) = records::insert_session(
        &mut tx,
        &records::NewSession {
            id: SessionId::new(),
            project_id: project,
            user_id: user,
            model_ids: &[model],
            description: None,
            client_request_id: None,
            auto_advance: true,
        },
    )
    .await
    .expect("session");
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
            status: JobStatus::Processing,
            step_id: None,
            step_key: None,
            model_id: Some(model),
            document_key: Some("header_context"),
            payload: &JobPayload::default(),
            parent_job_id: None,
            prerequisite_job_id: None,
            target_contribution_id: None,
            max_attempts: 3,
        },
    )
    .await
    .expect("root job")
    .expect("root job is new");
    // As the planner would have set them: the root job started, attempt 1 runs.
    sqlx::query("UPDATE dialectic_generation_jobs SET attempt_count = 1 WHERE id = $1")
        .bind(root)
        .execute(&mut *tx)
        .await
        .expect("attempt");
    sqlx::query("UPDATE dialectic_sessions SET status = 'running_thesis' WHERE id = $1")
        .bind(session.id)
        .execute(&mut *tx)
        .await
        .expect("running");
    tx.commit().await.expect("commit fixture");
    (session.id, root)
}

/// The last thesis job's success, redelivered on a transient error as the queue would.
async fn complete(engine: &Engine, job: JobId) {
    let outcome = JobOutcome {
        job_id: job.to_string(),
        attempt: 1,
        result: Some(job_outcome::Result::Succeeded(JobSucceeded {
            finish_reason: "stop".into(),
            ..Default::default()
        })),
    };
    for attempt in 1..=10 {
        match engine.on_outcome(&outcome, None).await {
            Ok(()) => return,
            Err(e) if e.is_transient() && attempt < 10 => {
                tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
            }
            Err(e) => panic!("outcome for {job}: {e}"),
        }
    }
}

async fn command(
    planner: &mut PlannerServiceClient<InternalChannel>,
    pause: bool,
    session: SessionId,
) {
    let request = SessionCommand {
        session_id: session.to_string(),
    };
    let result = if pause {
        planner.pause(request).await
    } else {
        planner.resume(request).await
    };
    let done = result.expect("the planner takes the command").into_inner();
    assert_eq!(done.session_id, session.to_string());
}

async fn state(env: &TestEnv, session: SessionId) -> (String, Option<String>) {
    sqlx::query_as("SELECT status, paused_from FROM dialectic_sessions WHERE id = $1")
        .bind(session)
        .fetch_one(env.store.pool())
        .await
        .expect("session state")
}

async fn antithesis_roots(env: &TestEnv, session: SessionId) -> i64 {
    env.count(
        "SELECT count(*) FROM dialectic_generation_jobs
         WHERE session_id = $1 AND stage_slug = 'antithesis' AND parent_job_id IS NULL",
        session.as_uuid(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pause_racing_a_stage_completion_loses_neither() {
    let mut env = TestEnv::new().await;
    env.start(&["planner"]).await;
    env.wait_serving("planner").await;
    let mut planner = PlannerServiceClient::new(env.internal_channel(
        &format!("http://{}", env.addr("planner")),
        ServiceName::Gateway,
    ));
    let replica = Arc::new(Engine::new(
        env.store.clone(),
        env.blob.clone(),
        env.settings.planner.clone(),
        Arc::new(OnceLock::new()),
    ));
    let (project, _) = records::insert_project(
        env.store.pool(),
        &records::NewProject {
            id: ProjectId::new(),
            user_id: USER,
            name: "Race",
            slug: "race",
            prompt: "Pause me while I finish.",
            prompt_key: "",
            client_request_id: None,
            pipeline: records::DEFAULT_PIPELINE,
        },
    )
    .await
    .expect("project");

    for round in 0..ROUNDS {
        let (session, root) = running_thesis(&env, project.id).await;
        let outcome = {
            let replica = replica.clone();
            tokio::spawn(async move { complete(&replica, root).await })
        };
        // Odd rounds give the outcome a head start, so both orders occur.
        if round % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        command(&mut planner, true, session).await;
        outcome.await.expect("outcome task");

        // Whichever came first: still paused, and the completion recorded.
        let (status, paused_from) = state(&env, session).await;
        assert_eq!(status, "paused", "round {round}: the pause was kept");
        assert_eq!(
            paused_from.as_deref(),
            Some("pending_antithesis"),
            "round {round}: thesis completed while paused"
        );
        let root_status = jobs::get(env.store.pool(), root)
            .await
            .expect("root")
            .status;
        assert_eq!(root_status, "completed", "round {round}");

        // A resume continues: antithesis starts once (auto-advance), never twice.
        command(&mut planner, false, session).await;
        eventually(30, "antithesis root jobs", || async {
            (antithesis_roots(&env, session).await == 1).then_some(())
        })
        .await;
        let (status, paused_from) = state(&env, session).await;
        assert_eq!(status, "pending_antithesis", "round {round}");
        assert_eq!(paused_from, None, "round {round}");
    }
    // Nothing is left to start a second antithesis.
    let relay_drained = || async {
        let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
            .fetch_one(env.store.pool())
            .await
            .expect("outbox");
        (pending == 0).then_some(())
    };
    eventually(30, "the outbox to drain", relay_drained).await;
    let doubled: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT session_id FROM dialectic_generation_jobs
           WHERE stage_slug = 'antithesis' AND parent_job_id IS NULL
           GROUP BY session_id HAVING count(*) > 1) d",
    )
    .fetch_one(env.store.pool())
    .await
    .expect("doubled");
    assert_eq!(doubled, 0, "no session started antithesis twice");
    env.teardown().await;
}
