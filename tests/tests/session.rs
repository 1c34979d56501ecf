//! Whole sessions: all five stages with two models, stage responses with
//! feedback, and a second iteration — through every service, on the real stack.

use dialectic_core::paths::{FileKind, PathContext};
use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually};
use dialectic_proto::v1::{
    CreateProjectRequest, JobStatus, SessionEventKind, SessionState, StageResponse,
    StartSessionRequest, SubmitStageResponsesRequest,
};
use std::collections::BTreeMap;

const PROMPT: &str = "A lending library for power tools, run by neighbours for neighbours.";

async fn started(env: &mut TestEnv, models: &[&str], auto_advance: bool) -> (String, String) {
    env.start_all().await;
    env.new_session(PROMPT, models, auto_advance).await
}

async fn settled(env: &TestEnv, session_id: &str, status: &str) {
    env.wait_for_session(session_id, status, true).await;
}

/// (stage, job type) → count, for one iteration.
async fn job_counts(
    env: &TestEnv,
    session_id: &str,
    iteration: i32,
) -> BTreeMap<(String, String), i64> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT stage_slug, job_type, count(*) FROM dialectic_generation_jobs
         WHERE session_id = $1 AND iteration_number = $2 GROUP BY 1, 2",
    )
    .bind(uuid::Uuid::parse_str(session_id).expect("uuid"))
    .bind(iteration)
    .fetch_all(env.store.pool())
    .await
    .expect("job counts");
    rows.into_iter().map(|(s, t, n)| ((s, t), n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_with_two_models_runs_all_five_stages() {
    let mut env = TestEnv::new().await;
    let (project_id, session_id) = started(&mut env, &["simulated", "simulated-b"], true).await;
    let mut events = env
        .gateway()
        .await
        .watch_session(dialectic_proto::v1::WatchSessionRequest {
            session_id: session_id.clone(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    let watcher = tokio::spawn(async move {
        use futures::StreamExt;
        let mut transitions = Vec::new();
        let mut untyped = Vec::new();
        // The stream ends by itself once the session waits for review.
        while let Some(Ok(event)) = events.next().await {
            // Job events carry no session status, so no state either; a job
            // status event carries the job's status.
            let stated = !event.session_status.is_empty();
            let job_status = event.event_kind() == SessionEventKind::JobStatus;
            if event.event_kind() == SessionEventKind::Unspecified
                || (stated && event.state() == SessionState::Unspecified)
                || (job_status && event.job_status() == JobStatus::Unspecified)
            {
                untyped.push(event.kind.clone());
            }
            if event.kind == "stage_completed" {
                transitions.push(event.session_status);
            }
        }
        (transitions, untyped)
    });
    // A second watcher joins midway: a catch-up snapshot first, then the rest.
    let late_client = env.gateway().await;
    let late_session = session_id.clone();
    let late = tokio::spawn(async move {
        use futures::StreamExt;
        let mut client = late_client;
        loop {
            let status = client
                .get_session(dialectic_proto::v1::GetSessionRequest {
                    session_id: late_session.clone(),
                })
                .await
                .expect("session")
                .into_inner()
                .status;
            if !status.ends_with("thesis") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let mut events = client
            .watch_session(dialectic_proto::v1::WatchSessionRequest {
                session_id: late_session,
                after_sequence: None,
            })
            .await
            .expect("late watch")
            .into_inner();
        let first = events.next().await.expect("a first event").expect("ok");
        let mut transitions = Vec::new();
        while let Some(Ok(event)) = events.next().await {
            if event.kind == "stage_completed" {
                transitions.push(event.session_status);
            }
        }
        (first, transitions)
    });
    settled(&env, &session_id, "iteration_complete_pending_review").await;
    let (transitions, untyped) = tokio::time::timeout(std::time::Duration::from_secs(10), watcher)
        .await
        .expect("the watch ended at review")
        .expect("watcher");
    assert!(
        untyped.is_empty(),
        "events without a typed kind or state: {untyped:?}"
    );
    let (snapshot, late_transitions) =
        tokio::time::timeout(std::time::Duration::from_secs(10), late)
            .await
            .expect("the late watch ended at review")
            .expect("late watcher");
    assert_eq!(snapshot.kind, "snapshot", "catch-up first: {snapshot:?}");
    assert_eq!(snapshot.event_kind(), SessionEventKind::Snapshot);
    assert!(
        !snapshot.session_status.ends_with("thesis"),
        "joined after thesis: {snapshot:?}"
    );
    assert!(
        transitions.ends_with(&late_transitions),
        "the late watcher sees the remaining transitions in order: {late_transitions:?} of {transitions:?}"
    );
    assert_eq!(
        transitions,
        [
            "pending_antithesis",
            "pending_synthesis",
            "pending_parenthesis",
            "pending_paralysis",
            "iteration_complete_pending_review"
        ],
        "every stage transition, in order"
    );

    let counts = job_counts(&env, &session_id, 1).await;
    let expected: [(&str, i64, i64, i64); 5] = [
        ("thesis", 2, 8, 8),
        ("antithesis", 2, 24, 20),
        ("synthesis", 4, 18, 6),
        ("parenthesis", 2, 6, 6),
        ("paralysis", 2, 6, 6),
    ];
    for (stage, plan, execute, render) in expected {
        let got = |t: &str| {
            counts
                .get(&(stage.to_string(), t.to_string()))
                .copied()
                .unwrap_or(0)
        };
        assert_eq!(
            (got("PLAN"), got("EXECUTE"), got("RENDER")),
            (plan, execute, render),
            "jobs of {stage}: {counts:?}"
        );
    }
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let not_completed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status <> 'completed'",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    assert_eq!(not_completed, 0);

    // Every rendered document is a resource and an S3 object under the seed 001 layout.
    let resources: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT stage_slug, document_key, storage_path, file_name FROM dialectic_project_resources
         WHERE session_id = $1 AND resource_type = 'rendered_document'",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("resources");
    assert_eq!(resources.len(), 46, "8 + 20 + 6 + 6 + 6 documents");
    let mut per_stage: BTreeMap<String, usize> = BTreeMap::new();
    for (stage, document_key, dir, file) in &resources {
        *per_stage.entry(stage.clone()).or_default() += 1;
        let key = format!("{dir}/{file}");
        let context = PathContext::deconstruct(&key).expect("a seed 001 key");
        assert_eq!(context.project_id.to_string(), project_id);
        assert_eq!(&context.stage_slug, stage);
        let FileKind::RenderedDocument { name } = context.file else {
            panic!("{key} is not a rendered document");
        };
        assert_eq!(&name.document_key, document_key);
        if stage == "antithesis" {
            assert!(file.contains("_critiquing_"), "{file}");
        }
        let body = env.blob.get_string(&key).await.expect("the S3 object");
        assert!(body.starts_with("# "), "{key}");
    }
    assert_eq!(per_stage["antithesis"], 20);
    assert_eq!(per_stage["synthesis"], 6);

    // Synthesis intermediates are saved but never rendered.
    let intermediates: Vec<(String, i64)> = sqlx::query_as(
        "SELECT document_key, count(*) FROM dialectic_contributions
         WHERE session_id = $1 AND stage_slug = 'synthesis' AND document_key IN ('synthesis_pairwise', 'synthesis_document')
         GROUP BY 1 ORDER BY 1",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("intermediates");
    assert_eq!(
        intermediates,
        vec![
            ("synthesis_document".to_string(), 4),
            ("synthesis_pairwise".to_string(), 8)
        ]
    );
    let pairwise: Vec<String> = sqlx::query_scalar(
        "SELECT file_name FROM dialectic_contributions
         WHERE session_id = $1 AND document_key = 'synthesis_pairwise' AND model_name = 'simulated' ORDER BY file_name COLLATE \"C\"",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("pairwise names");
    assert_eq!(
        pairwise,
        vec![
            "simulated_from_simulated--simulated-b_0_synthesis_pairwise_raw.json",
            "simulated_from_simulated--simulated_0_synthesis_pairwise_raw.json",
            "simulated_from_simulated-b--simulated-b_0_synthesis_pairwise_raw.json",
            "simulated_from_simulated-b--simulated_0_synthesis_pairwise_raw.json",
        ]
    );
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stage_responses_carry_feedback_and_start_the_next_stage_and_iteration() {
    let mut env = TestEnv::new().await;
    let (_, session_id) = started(&mut env, &["simulated"], false).await;
    let mut client = env.gateway().await;
    settled(&env, &session_id, "pending_antithesis").await;

    let early = client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.clone(),
            stage_slug: "antithesis".into(),
            responses: vec![],
            client_request_id: String::new(),
        })
        .await
        .expect_err("antithesis has not run yet");
    assert_eq!(early.code(), tonic::Code::FailedPrecondition);

    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            responses: vec![StageResponse {
                resource_id: String::new(),
                document_key: "business_case".into(),
                feedback: "Price the membership for students too.".into(),
            }],
            client_request_id: String::new(),
        })
        .await
        .expect("submit thesis responses");
    settled(&env, &session_id, "pending_synthesis").await;
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let (dir, file): (String, String) = sqlx::query_as(
        "SELECT storage_path, file_name FROM dialectic_feedback WHERE session_id = $1 AND stage_slug = 'thesis'",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("one feedback row");
    assert_eq!(file, "user_feedback_thesis.md");
    assert!(dir.ends_with("/iteration_1/1_thesis"), "{dir}");
    let feedback = env
        .blob
        .get_string(&format!("{dir}/{file}"))
        .await
        .expect("feedback in S3");
    assert!(feedback.contains("students"));

    for stage in ["synthesis", "parenthesis", "paralysis"] {
        let previous = match stage {
            "synthesis" => "antithesis",
            "parenthesis" => "synthesis",
            _ => "parenthesis",
        };
        client
            .submit_stage_responses(SubmitStageResponsesRequest {
                session_id: session_id.clone(),
                stage_slug: previous.into(),
                responses: vec![],
                client_request_id: String::new(),
            })
            .await
            .unwrap_or_else(|e| panic!("submit {previous}: {e}"));
        let next = if stage == "paralysis" {
            "iteration_complete_pending_review".to_string()
        } else {
            format!(
                "pending_{}",
                match stage {
                    "synthesis" => "parenthesis",
                    _ => "paralysis",
                }
            )
        };
        settled(&env, &session_id, &next).await;
    }

    // Reviewing the last stage starts iteration 2 at the first stage.
    let next = client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.clone(),
            stage_slug: "paralysis".into(),
            responses: vec![StageResponse {
                resource_id: String::new(),
                document_key: String::new(),
                feedback: "Second pass: focus on insurance.".into(),
            }],
            client_request_id: String::new(),
        })
        .await
        .expect("submit paralysis responses")
        .into_inner();
    assert_eq!(next.iteration, 2);
    assert_eq!(next.status, "pending_thesis");
    settled(&env, &session_id, "pending_antithesis").await;
    let counts = job_counts(&env, &session_id, 2).await;
    assert_eq!(counts.get(&("thesis".into(), "EXECUTE".into())), Some(&4));
    let second: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_project_resources WHERE session_id = $1 AND iteration_number = 2",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    assert_eq!(second, 4, "iteration 2 has its own thesis documents");
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_session_starts_nothing_new_and_resumes_where_it_stopped() {
    use dialectic_proto::v1::{PauseSessionRequest, ResumeSessionRequest};
    let mut env = TestEnv::new().await;
    // One slow job at a time, so a pause lands mid-stage.
    let mut slow = env.settings.clone();
    slow.executor.worker.slots = 1;
    slow.executor.simulated_latency_ms = 300;
    for name in ALL_SERVICES {
        env.start_with(name, slow.clone()).await;
        env.wait_serving(name).await;
    }
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Pausing".into(),
            initial_user_prompt: PROMPT.into(),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: String::new(),
        })
        .await
        .expect("project")
        .into_inner();
    let session = client
        .start_session(StartSessionRequest {
            project_id: project.id,
            models: vec!["simulated".into()],
            description: String::new(),
            client_request_id: String::new(),
            auto_advance: false,
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner();
    let session_id = uuid::Uuid::parse_str(&session.id).expect("uuid");
    let written = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1 AND document_key <> 'header_context'",
        )
        .bind(session_id)
        .fetch_one(env.store.pool())
        .await
        .expect("count")
    };
    eventually(60, "the first document", || async {
        (written().await >= 1).then_some(())
    })
    .await;
    let paused = client
        .pause_session(PauseSessionRequest {
            session_id: session.id.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("pause")
        .into_inner();
    assert_eq!(paused.status, "paused");
    // What was running finishes; then nothing moves.
    eventually(30, "running jobs finished", || async {
        let busy: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status = 'processing' AND job_type = 'EXECUTE'",
        )
        .bind(session_id)
        .fetch_one(env.store.pool())
        .await
        .expect("busy");
        (busy == 0).then_some(())
    })
    .await;
    let at_pause = written().await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(written().await, at_pause, "no new model call while paused");
    assert!(
        at_pause < 4,
        "the pause landed mid-stage ({at_pause} of 4 written)"
    );

    let resumed = client
        .resume_session(ResumeSessionRequest {
            session_id: session.id.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("resume")
        .into_inner();
    assert_ne!(resumed.status, "paused");
    settled(&env, &session.id, "pending_antithesis").await;
    let runs: Vec<i64> = sqlx::query_scalar(
        "SELECT count(c.id) FROM dialectic_generation_jobs j LEFT JOIN dialectic_contributions c ON c.job_id = j.id
         WHERE j.session_id = $1 AND j.job_type = 'EXECUTE' GROUP BY j.id",
    )
    .bind(session_id)
    .fetch_all(env.store.pool())
    .await
    .expect("runs");
    assert_eq!(runs, vec![1, 1, 1, 1], "every document written once");
    let again = client
        .resume_session(ResumeSessionRequest {
            session_id: session.id.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect_err("not paused");
    assert_eq!(again.code(), tonic::Code::FailedPrecondition);
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_session_pauses_itself_and_resumes_where_it_stopped() {
    use dialectic_proto::v1::{GetSessionRequest, ResumeSessionRequest, WatchSessionRequest};
    use futures::StreamExt;
    let mut env = TestEnv::new().await;
    let mut settings = env.settings.clone();
    settings.planner.idle_pause_secs = 3;
    for name in ALL_SERVICES {
        env.start_with(name, settings.clone()).await;
        env.wait_serving(name).await;
    }
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let mut client = env.gateway().await;
    // Waiting for the user's review is not activity: the session pauses.
    let mut events = client
        .watch_session(WatchSessionRequest {
            session_id: session_id.clone(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    let paused_event = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(Ok(event)) = events.next().await {
            if event.kind == "session_paused" {
                return Some(event);
            }
        }
        None
    })
    .await
    .expect("paused within a minute")
    .expect("a session_paused event");
    assert_eq!(paused_event.session_status, "paused");
    assert!(paused_event.message.contains("without activity"));
    let session = client
        .get_session(GetSessionRequest {
            session_id: session_id.clone(),
        })
        .await
        .expect("session")
        .into_inner();
    assert_eq!(session.status, "paused");
    let jobs_done: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status <> 'completed'",
    )
    .bind(uuid::Uuid::parse_str(&session_id).expect("uuid"))
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    assert_eq!(jobs_done, 0, "it paused only once thesis was over");
    let resumed = client
        .resume_session(ResumeSessionRequest {
            session_id: session_id.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("resume")
        .into_inner();
    assert_eq!(
        resumed.status, "pending_antithesis",
        "back where it stopped"
    );
    env.teardown().await;
}

/// Seed 003 "Session Expiration", for finished work: a session at review is
/// never paused or abandoned on a timer while an unfinished one beside it
/// is; CompleteSession ends it read-only and still queryable; the abandoned
/// unfinished one says so on the next read and resumes where it stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn finished_work_outlasts_the_idle_timers_and_an_abandoned_session_resumes() {
    use dialectic_proto::v1::{
        CompleteSessionRequest, ListSessionsRequest, QueryRequest, ResumeSessionRequest,
        SaveDocumentEditRequest,
    };
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let (project_id, finished) = env.new_session(PROMPT, &["simulated"], true).await;
    let (_, unfinished) = env.new_session(PROMPT, &["simulated"], false).await;
    settled(&env, &finished, "iteration_complete_pending_review").await;
    settled(&env, &unfinished, "pending_antithesis").await;
    // Both wait for the user now; the timers start with this planner.
    let mut settings = env.settings.clone();
    settings.planner.idle_pause_secs = 1;
    settings.planner.abandon_warn_secs = 2;
    settings.planner.abandon_after_warn_secs = 1;
    env.stop("gateway").await;
    env.stop("planner").await;
    env.start_with("planner", settings).await;
    env.wait_serving("planner").await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;

    // The unfinished session pauses, is warned and abandoned: the timers ran.
    let abandoned = eventually(120, "the unfinished session abandoned", || async {
        let s = env.session(&unfinished).await;
        (s.status == "abandoned").then_some(s)
    })
    .await;
    assert_eq!(abandoned.state, SessionState::Abandoned as i32);
    let resume = format!("dialectic session resume --session {unfinished}");
    assert!(
        abandoned.notice.contains(&resume),
        "the next read says how to continue: {}",
        abandoned.notice
    );
    let review = env.session(&finished).await;
    assert_eq!(
        review.status, "iteration_complete_pending_review",
        "finished work is never paused or abandoned on a timer"
    );
    let warned: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT idle_warned_at FROM dialectic_sessions WHERE id = $1")
            .bind(uuid::Uuid::parse_str(&finished).expect("uuid"))
            .fetch_one(env.store.pool())
            .await
            .expect("warned at");
    assert_eq!(warned, None, "nor warned that it would be");

    let mut client = env.gateway().await;
    let completed = client
        .complete_session(CompleteSessionRequest {
            session_id: finished.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("complete")
        .into_inner();
    assert_eq!(completed.status, "completed");
    assert_eq!(completed.state, SessionState::Completed as i32);
    let refused = client
        .complete_session(CompleteSessionRequest {
            session_id: unfinished.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect_err("only a session at review completes");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    // Read-only: no review, no edit.
    let refused = client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: finished.clone(),
            stage_slug: "synthesis".into(),
            responses: vec![],
            client_request_id: String::new(),
        })
        .await
        .expect_err("a completed session takes no responses");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    let thesis = dialectic_e2e::stage_documents(&mut client, &finished, "thesis", "business_case")
        .await
        .into_iter()
        .next()
        .expect("a thesis document");
    let refused = client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: thesis.resource_id.clone(),
            content: "An edit after the end.".into(),
            client_request_id: String::new(),
        })
        .await
        .expect_err("a completed session's documents are read-only");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("completed"),
        "{}",
        refused.message()
    );
    // Still listed and still answering questions.
    let listed = client
        .list_sessions(ListSessionsRequest {
            project_id: project_id.clone(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .sessions;
    assert!(
        listed
            .iter()
            .any(|s| s.id == finished && s.status == "completed"),
        "{listed:?}"
    );
    let answer = client
        .query(QueryRequest {
            project_id: project_id.clone(),
            text: "Who runs the lending library?".into(),
            ..Default::default()
        })
        .await
        .expect("a completed session's project answers")
        .into_inner();
    assert!(!answer.answer.is_empty());
    let stays = env.session(&finished).await;
    assert_eq!(stays.status, "completed");

    // The abandoned one comes back where it stopped.
    let resumed = client
        .resume_session(ResumeSessionRequest {
            session_id: unfinished.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("an idle-abandoned session resumes")
        .into_inner();
    assert_eq!(resumed.status, "pending_antithesis");
    env.teardown().await;
}

/// Seed 003 session expiration: a session idle for `abandon_warn_secs` is
/// warned, and idle that long again after the warning it is abandoned, with
/// its stored objects kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_session_is_warned_then_abandoned_and_keeps_its_objects() {
    use dialectic_proto::v1::{GetSessionRequest, WatchSessionRequest};
    use futures::StreamExt;
    let mut env = TestEnv::new().await;
    let mut settings = env.settings.clone();
    settings.planner.idle_pause_secs = 0;
    settings.planner.abandon_warn_secs = 3;
    settings.planner.abandon_after_warn_secs = 3;
    for name in ALL_SERVICES {
        env.start_with(name, settings.clone()).await;
        env.wait_serving(name).await;
    }
    let (project_id, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let mut client = env.gateway().await;
    let mut events = client
        .watch_session(WatchSessionRequest {
            session_id: session_id.clone(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    // The stream ends by itself once the session is abandoned.
    let seen = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        let mut seen = Vec::new();
        while let Some(Ok(event)) = events.next().await {
            if matches!(event.kind.as_str(), "idle_warning" | "session_abandoned") {
                seen.push((event.kind, event.session_status));
            }
        }
        seen
    })
    .await
    .expect("abandoned within two minutes");
    let kinds: Vec<&str> = seen.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds.last(),
        Some(&"session_abandoned"),
        "warned, then abandoned: {seen:?}"
    );
    assert!(kinds.contains(&"idle_warning"), "{seen:?}");
    let session = client
        .get_session(GetSessionRequest {
            session_id: session_id.clone(),
        })
        .await
        .expect("session")
        .into_inner();
    assert_eq!(session.status, "abandoned");
    let objects = env
        .blob
        .list(&format!("projects/{project_id}/"))
        .await
        .expect("objects");
    assert!(
        objects
            .iter()
            .any(|k| k.ends_with(".md") && k.contains("/1_thesis/")),
        "the thesis documents are kept: {objects:?}"
    );
    env.teardown().await;
}

/// A job event names no session status. The status a watcher joining while
/// Postgres is down starts from is the last one an event named (faults.rs's
/// outage once caught up to an empty status from a job event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cached_status_is_the_last_one_an_event_named() {
    use dialectic_cache::{Cache, ProgressEvent};
    use dialectic_core::progress::EventKind;
    let env = TestEnv::new().await;
    let cache = Cache::connect(&env.settings.redis.url, 60)
        .await
        .expect("redis");
    let session = uuid::Uuid::now_v7().to_string();
    let stage = ProgressEvent {
        session_status: "running_thesis".into(),
        stage_slug: "thesis".into(),
        ..ProgressEvent::new(EventKind::StageStarted, session.clone())
    };
    let job = ProgressEvent {
        stage_slug: "thesis".into(),
        job_id: uuid::Uuid::now_v7().to_string(),
        message: "attempt 1 on executor-1".into(),
        ..ProgressEvent::new(EventKind::JobStarted, session.clone())
    };
    cache.publish(&[stage, job]).await.expect("publish");
    let latest = cache.latest(&session).await.expect("latest").expect("one");
    assert_eq!(latest.message, "attempt 1 on executor-1");
    assert_eq!(
        cache
            .latest_status(&session)
            .await
            .expect("status")
            .as_deref(),
        Some("running_thesis")
    );
}
