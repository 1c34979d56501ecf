//! A pause and the job outcome that completes a stage, arriving at the same
//! moment, leave a consistent session: the pause is kept, the completion is
//! recorded, and a resume continues into the next stage exactly once. Sends
//! the pause to a running planner service over its gRPC API while a second
//! planner engine (another replica, in effect) applies the outcome.
//!
//! Each round tells which order actually ran from what the planner itself
//! wrote under the session's lock: the progress events of the pause, the
//! completion and the next stage's start (each names the session state it
//! found, and its time). Some rounds force an order, so that every order the
//! race can take is seen; the others race. Whatever the order, the planner
//! is told to start the next stage exactly once (counted on the wire, not
//! through the job key that would hide a second start), the stage gets its
//! one root job, and the resume dispatches it.

use dialectic_cache::{Cache, ProgressEvent};
use dialectic_core::ids::{JobId, ModelId, ProjectId, SessionId, UserId};
use dialectic_core::job::{JobStatus, JobType};
use dialectic_core::payload::JobPayload;
use dialectic_core::progress::EventKind;
use dialectic_core::service_auth::ServiceName;
use dialectic_e2e::{QueueTap, TestEnv, eventually, outbox_drained};
use dialectic_planner::engine::Engine;
use dialectic_proto::v1::planner::SessionCommand;
use dialectic_proto::v1::planner::planner_service_client::PlannerServiceClient;
use dialectic_proto::v1::queue::envelope::Body;
use dialectic_proto::v1::queue::planner_command::Command;
use dialectic_proto::v1::queue::{JobOutcome, JobSucceeded, job_outcome};
use dialectic_runtime::service_auth::InternalChannel;
use dialectic_store::{jobs, projects, sessions};
use futures::StreamExt;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use uuid::Uuid;

const USER: UserId = UserId(Uuid::from_u128(1));
const MODEL: ModelId = ModelId(Uuid::from_u128(0x5000_0000_0000_0000_0000_0000_0000_0001));
const ROUNDS: usize = 12;

/// How a round sends the pause and the completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// The pause is answered before the outcome is applied.
    PauseFirst,
    /// The outcome is applied before the pause is sent.
    CompletionFirst,
    /// The outcome is applied and the next stage has started before the pause.
    StartThenPause,
    /// Both at once.
    Race,
}

const SENDINGS: [Sending; 4] = [
    Sending::PauseFirst,
    Sending::CompletionFirst,
    Sending::StartThenPause,
    Sending::Race,
];

/// The order the planner applied the pause, the thesis completion and the
/// antithesis start in (each under the session's row lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Interleaving {
    PauseCompletionStart,
    CompletionPauseStart,
    CompletionStartPause,
}

/// A session running thesis (auto-advance on) whose only root PLAN job is
/// processing its first attempt; returns (session, root job).
async fn running_thesis(env: &TestEnv, project: ProjectId) -> (SessionId, JobId) {
    let (user, model) = (USER, MODEL);
    let mut tx = env.store.begin().await.expect("tx");
    let (session, _) = sessions::insert_session(
        &mut tx,
        &sessions::NewSession {
            id: SessionId::new(),
            project_id: project,
            user_id: user,
            model_ids: &[model],
            description: None,
            client_request_id: None,
            auto_advance: true,
            pushback: Default::default(),
            model_roles: &Default::default(),
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

/// One job as the test compares it.
#[derive(Debug, PartialEq, Eq, sqlx::FromRow)]
struct Job {
    id: Uuid,
    stage_slug: String,
    job_type: String,
    status: String,
    job_key: String,
    attempt_count: i32,
    parent_job_id: Option<Uuid>,
    prerequisite_job_id: Option<Uuid>,
}

/// Every job of the session, whatever its stage or parent: thesis first.
async fn all_jobs(env: &TestEnv, session: SessionId) -> Vec<Job> {
    sqlx::query_as(
        "SELECT id, stage_slug, job_type, status, job_key, attempt_count, parent_job_id,
                prerequisite_job_id
           FROM dialectic_generation_jobs WHERE session_id = $1 ORDER BY stage_slug DESC",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("jobs")
}

/// A root PLAN job (no parent, no prerequisite).
fn root_job(id: Uuid, stage: &str, status: JobStatus, job_key: String, attempts: i32) -> Job {
    Job {
        id,
        stage_slug: stage.to_string(),
        job_type: JobType::Plan.as_str().to_string(),
        status: status.as_str().to_string(),
        job_key,
        attempt_count: attempts,
        parent_job_id: None,
        prerequisite_job_id: None,
    }
}

/// The session's progress events, as the planner publishes them.
struct Events {
    seen: Arc<Mutex<Vec<ProgressEvent>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Events {
    async fn watch(cache: &Cache, session: SessionId) -> Self {
        let mut stream = Box::pin(
            cache
                .subscribe(&session.to_string())
                .await
                .expect("subscribe to the session's events"),
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                while let Some(event) = stream.next().await {
                    seen.lock().expect("events").push(event);
                }
            })
        };
        Self { seen, task }
    }

    fn of(&self, kind: EventKind) -> Vec<ProgressEvent> {
        let seen = self.seen.lock().expect("events");
        seen.iter().filter(|e| e.kind == kind).cloned().collect()
    }

    /// The one event of `kind`, once it arrived.
    async fn one(&self, round: usize, kind: EventKind) -> ProgressEvent {
        eventually(30, &format!("round {round}: a {kind} event"), || async {
            self.of(kind).first().cloned()
        })
        .await;
        let all = self.of(kind);
        assert_eq!(all.len(), 1, "round {round}: one {kind} event: {all:?}");
        all[0].clone()
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the tap saw for `session`: (StartStage commands as (stage,
/// iteration), dispatches of `job`).
async fn sent(tap: &QueueTap, session: SessionId, job: Uuid) -> (Vec<(String, u32)>, usize) {
    let (mut starts, mut dispatches) = (Vec::new(), 0);
    for (_, envelope) in tap.take().await {
        match envelope.body {
            Some(Body::PlannerCommand(command)) => {
                if let Some(Command::StartStage(start)) = command.command
                    && start.session_id == session.to_string()
                {
                    starts.push((start.stage_slug, start.iteration));
                }
            }
            Some(Body::JobDispatch(dispatch)) if dispatch.job_id == job.to_string() => {
                dispatches += 1;
            }
            _ => {}
        }
    }
    (starts, dispatches)
}

/// The order the three events say the planner took the pause, the
/// completion and the start in: each names the state it found under the
/// session's lock, and each was stamped under that lock, so their times
/// agree with the states.
fn interleaving(
    round: usize,
    paused: &ProgressEvent,
    completed: &ProgressEvent,
    started: &ProgressEvent,
) -> Interleaving {
    let found = (
        paused.stage_slug.as_str(),
        completed.session_status.as_str(),
        started.session_status.as_str(),
    );
    let (order, times) = match found {
        // Paused while thesis ran: the completion and the start found it paused.
        ("thesis", "paused", "paused") => (
            Interleaving::PauseCompletionStart,
            [paused.at_ms, completed.at_ms, started.at_ms],
        ),
        // Paused at pending_antithesis, before the start planned it.
        ("antithesis", "pending_antithesis", "paused") => (
            Interleaving::CompletionPauseStart,
            [completed.at_ms, paused.at_ms, started.at_ms],
        ),
        // The start found the session not paused yet.
        ("antithesis", "pending_antithesis", "pending_antithesis") => (
            Interleaving::CompletionStartPause,
            [completed.at_ms, started.at_ms, paused.at_ms],
        ),
        other => panic!(
            "round {round}: no order of pause, completion and start leaves these states \
             (paused at stage, completion found, start found): {other:?}"
        ),
    };
    assert!(
        times.is_sorted(),
        "round {round}: {order:?}, but the events' times say otherwise: {times:?}"
    );
    order
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
    let cache = Cache::connect(&env.settings.redis.url, 60)
        .await
        .expect("redis");
    let replica_cache = Arc::new(OnceLock::new());
    assert!(replica_cache.set(cache.clone()).is_ok());
    let replica = Arc::new(Engine::new(
        env.store.clone(),
        env.blob.clone(),
        env.settings.planner.clone(),
        replica_cache,
    ));
    let tap = QueueTap::new(
        &env,
        &[
            dialectic_queue::keys::PLANNER_COMMAND,
            JobType::Plan.dispatch_routing_key(),
        ],
    )
    .await;
    let (project, _) = projects::insert_project(
        env.store.pool(),
        &projects::NewProject {
            id: ProjectId::new(),
            user_id: USER,
            name: "Race",
            slug: "race",
            prompt: "Pause me while I finish.",
            prompt_key: "",
            client_request_id: None,
            pipeline: projects::DEFAULT_PIPELINE,
        },
    )
    .await
    .expect("project");

    // The planner service connects Redis in the background: its events are
    // what tells the orders apart, so wait until it publishes them.
    let (warm_up, _) = running_thesis(&env, project.id).await;
    let warm_events = Events::watch(&cache, warm_up).await;
    eventually(30, "the planner publishing progress events", || {
        let mut planner = planner.clone();
        let published = !warm_events.of(EventKind::SessionPaused).is_empty();
        async move {
            if !published {
                command(&mut planner, true, warm_up).await;
                command(&mut planner, false, warm_up).await;
            }
            published.then_some(())
        }
    })
    .await;
    drop(warm_events);

    let mut seen = BTreeSet::new();
    for round in 0..ROUNDS {
        let sending = SENDINGS[round % SENDINGS.len()];
        let (session, root) = running_thesis(&env, project.id).await;
        let events = Events::watch(&cache, session).await;
        let antithesis_root = || async {
            all_jobs(&env, session)
                .await
                .into_iter()
                .find(|job| job.stage_slug == "antithesis")
                .map(|job| job.id)
        };
        match sending {
            Sending::PauseFirst => {
                command(&mut planner, true, session).await;
                complete(&replica, root).await;
            }
            Sending::CompletionFirst => {
                complete(&replica, root).await;
                command(&mut planner, true, session).await;
            }
            Sending::StartThenPause => {
                complete(&replica, root).await;
                eventually(30, "antithesis planned before the pause", antithesis_root).await;
                command(&mut planner, true, session).await;
            }
            Sending::Race => {
                let outcome = {
                    let replica = replica.clone();
                    tokio::spawn(async move { complete(&replica, root).await })
                };
                command(&mut planner, true, session).await;
                outcome.await.expect("outcome task");
            }
        }

        // Whichever came first: still paused, and the completion recorded.
        let (status, paused_from) = state(&env, session).await;
        assert_eq!(status, "paused", "round {round}: the pause was kept");
        assert_eq!(
            paused_from.as_deref(),
            Some("pending_antithesis"),
            "round {round}: thesis completed while paused"
        );

        // The completion's StartStage plans antithesis even while paused,
        // and that start does not end the pause.
        let planned = eventually(30, "antithesis planned", antithesis_root).await;
        let started = events.one(round, EventKind::StageStarted).await;
        assert_eq!(
            (started.stage_slug.as_str(), started.message.as_str()),
            ("antithesis", "1 root job(s) planned"),
            "round {round}"
        );
        let paused = events.one(round, EventKind::SessionPaused).await;
        assert_eq!(paused.session_status, "paused", "round {round}");
        let completed = events.one(round, EventKind::StageCompleted).await;
        assert_eq!(completed.stage_slug, "thesis", "round {round}");
        let order = interleaving(round, &paused, &completed, &started);
        match sending {
            Sending::PauseFirst => assert_eq!(order, Interleaving::PauseCompletionStart),
            Sending::CompletionFirst => assert_ne!(order, Interleaving::PauseCompletionStart),
            Sending::StartThenPause => assert_eq!(order, Interleaving::CompletionStartPause),
            Sending::Race => {}
        }
        seen.insert(order);
        assert_eq!(
            state(&env, session).await,
            ("paused".to_string(), Some("pending_antithesis".to_string())),
            "round {round} ({order:?}): planning antithesis kept the pause"
        );

        // Exactly these jobs: the completed thesis root and one antithesis
        // root, planned and never claimed.
        let expected = vec![
            root_job(
                root.as_uuid(),
                "thesis",
                JobStatus::Completed,
                format!("{session}:thesis:1:{MODEL}"),
                1,
            ),
            root_job(
                planned,
                "antithesis",
                JobStatus::Pending,
                format!("{session}:antithesis:1:{MODEL}"),
                0,
            ),
        ];
        assert_eq!(
            all_jobs(&env, session).await,
            expected,
            "round {round} ({order:?})"
        );

        // On the wire: one StartStage for the session, and its root job dispatched.
        outbox_drained(&env, "the outbox to drain before the resume").await;
        let (starts, dispatched) = sent(&tap, session, planned).await;
        assert_eq!(
            starts,
            [("antithesis".to_string(), 1)],
            "round {round} ({order:?}): the planner was told to start antithesis once"
        );
        assert!(
            dispatched >= 1,
            "round {round}: antithesis planned and dispatched"
        );

        // A resume continues where the pause left off: the waiting root job
        // is dispatched again (its dispatch while paused was refused), and
        // nothing starts the stage a second time.
        command(&mut planner, false, session).await;
        assert_eq!(
            state(&env, session).await,
            ("pending_antithesis".to_string(), None),
            "round {round}"
        );
        let resumed = events.one(round, EventKind::SessionResumed).await;
        assert_eq!(
            (resumed.session_status.as_str(), resumed.stage_slug.as_str()),
            ("pending_antithesis", "antithesis"),
            "round {round}"
        );
        outbox_drained(&env, "the resume's messages to go out").await;
        let (starts, dispatched) = sent(&tap, session, planned).await;
        assert_eq!(
            starts,
            Vec::<(String, u32)>::new(),
            "round {round} ({order:?}): the resume started antithesis again"
        );
        assert!(
            dispatched >= 1,
            "round {round} ({order:?}): the resume dispatched the waiting root job"
        );
        assert_eq!(
            all_jobs(&env, session).await,
            expected,
            "round {round} ({order:?})"
        );
        assert_eq!(events.of(EventKind::StageStarted).len(), 1, "round {round}");
    }
    eprintln!("orders seen: {seen:?}");
    assert!(
        seen.contains(&Interleaving::PauseCompletionStart)
            && seen.contains(&Interleaving::CompletionStartPause),
        "both a pause before the completion and one after the next stage's start ran: {seen:?}"
    );
    tap.close().await;
    env.teardown().await;
}
