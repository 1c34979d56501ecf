//! RetryStage: a stage whose job ran out of attempts is stuck until the user
//! runs it again. The retried job starts over with a fresh budget (here on
//! another model), what had completed is never run again, the jobs that
//! failed because of it wake when it completes, and the session moves on by
//! itself. Refusals: nothing failed (FAILED_PRECONDITION), another user's
//! session (NOT_FOUND), an unknown model (INVALID_ARGUMENT).

use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::{TestEnv, eventually};
use dialectic_proto::v1::{
    GetSessionRequest, ListStageDocumentsRequest, RetryStageRequest, RetryStageResponse,
};
use dialectic_runtime::error_status::StatusExt;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tonic::Code;
use uuid::Uuid;

/// The notes pipeline: `draft` (a PLAN step, then one EXECUTE note), then `review`.
const NOTES: &str = include_str!("../pipelines/notes.toml");
/// A working simulated model the retries move the failed jobs to.
const RESCUER: &str = "simulated-rescuer";

async fn install_notes(env: &TestEnv) {
    let file = PipelineFile::parse(NOTES).expect("notes.toml parses");
    dialectic_store::pipelines::install(env.store.pool(), &file)
        .await
        .expect("install");
}

async fn add_simulated(env: &TestEnv, name: &str) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO ai_providers (api_identifier, name, provider, context_window_tokens, max_output_tokens,
                                   input_token_cost_rate, output_token_cost_rate, tokenizer)
         VALUES ($1, $1, 'simulated', 8192, 2048, 1, 1, 'cl100k_base') RETURNING id",
    )
    .bind(name)
    .fetch_one(env.store.pool())
    .await
    .expect("model row")
}

/// An OpenAI-compatible model row served at `base_url`.
async fn add_served(env: &TestEnv, name: &str, base_url: &str) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO ai_providers (api_identifier, name, provider, context_window_tokens, max_output_tokens,
                                   input_token_cost_rate, output_token_cost_rate, tokenizer, config)
         VALUES ($1, $1, 'openai', 8192, 2048, 1, 1, 'cl100k_base', jsonb_build_object('base_url', $2::text))
         RETURNING id",
    )
    .bind(name)
    .bind(base_url)
    .fetch_one(env.store.pool())
    .await
    .expect("model row")
}

/// Requests the flaky server answered, by kind ("plan", "write", "other").
type Served = Arc<Mutex<BTreeMap<&'static str, usize>>>;

/// A model that plans notes well but never manages to write one: every
/// "Write the note" request gets JSON cut off mid-string.
async fn flaky_server() -> (String, Served) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let served: Served = Arc::default();
    let counts = served.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(answer(socket, counts.clone()));
        }
    });
    (url, served)
}

async fn answer(mut socket: TcpStream, served: Served) {
    let Some(body) = read_request(&mut socket).await else {
        return;
    };
    let (kind, content) = if body.contains("Plan the note") {
        (
            "plan",
            r#"{"system_materials": {}, "context_for_documents": [{"document_key": "note", "content_to_include": {}}]}"#,
        )
    } else if body.contains("Write the note") {
        ("write", r#"{"content": "Here is the note, it was cut"#)
    } else {
        ("other", r#"{"content": "unexpected request"}"#)
    };
    if let Ok(mut counts) = served.lock() {
        *counts.entry(kind).or_default() += 1;
    }
    let reply = serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10},
    })
    .to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    );
    let _ = socket.write_all(response.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// The body of one HTTP/1.1 request (by its Content-Length).
async fn read_request(socket: &mut TcpStream) -> Option<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while seen.len() < head_end + length {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    Some(String::from_utf8_lossy(&seen[head_end..]).into_owned())
}

/// One job of the session as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
struct Job {
    id: Uuid,
    job_type: String,
    step_key: Option<String>,
    status: String,
    attempt_count: i32,
    model_id: Option<Uuid>,
    parent_job_id: Option<Uuid>,
    lineage: Option<String>,
    /// Contributions the job wrote, by attempt.
    attempts_written: Vec<i32>,
}

async fn jobs(env: &TestEnv, session: Uuid) -> BTreeMap<Uuid, Job> {
    let rows: Vec<Job> = sqlx::query_as(
        "SELECT j.id, j.job_type, j.step_key, j.status, j.attempt_count, j.model_id, j.parent_job_id,
                j.payload->>'lineage_model_id' AS lineage,
                COALESCE((SELECT array_agg(c.attempt ORDER BY c.attempt) FROM dialectic_contributions c
                          WHERE c.job_id = j.id), '{}') AS attempts_written
           FROM dialectic_generation_jobs j WHERE j.session_id = $1",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("jobs");
    rows.into_iter().map(|j| (j.id, j)).collect()
}

/// Waits until the session's draft failed (no job in flight, one out of
/// attempts); returns the jobs then.
async fn stuck(env: &TestEnv, session_id: &str) -> BTreeMap<Uuid, Job> {
    let session = Uuid::parse_str(session_id).expect("uuid");
    env.wait_for_session(session_id, "failed_draft", true).await;
    eventually(
        120,
        "a job out of attempts and its stage failed",
        || async {
            let jobs = jobs(env, session).await;
            let failed = jobs.values().any(|j| j.status == "retry_loop_failed");
            let settled = jobs.values().all(|j| {
                matches!(
                    j.status.as_str(),
                    "completed" | "failed" | "retry_loop_failed"
                )
            });
            (failed && settled).then_some(jobs)
        },
    )
    .await
}

fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|info| info.reason)
        .unwrap_or_default()
}

async fn retry(
    env: &TestEnv,
    key: Option<&str>,
    session_id: &str,
    stage: &str,
    model: &str,
) -> Result<RetryStageResponse, tonic::Status> {
    let mut client = match key {
        Some(key) => env.gateway_with_key(key).await,
        None => env.gateway().await,
    };
    client
        .retry_stage(RetryStageRequest {
            session_id: session_id.to_string(),
            stage_slug: stage.to_string(),
            model: model.to_string(),
            client_request_id: String::new(),
        })
        .await
        .map(tonic::Response::into_inner)
}

/// A two-model draft: the simulated model's note is written, the flaky
/// model's note runs out of attempts, so its root PLAN job fails too and the
/// session is stuck at `failed_draft`. Retried as it is, the note spends a
/// whole fresh budget and fails again; retried on another model, it is
/// written there, in the flaky model's lineage, and nothing else runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_job_runs_again_on_another_model_and_the_session_goes_on() {
    let mut env = TestEnv::new().await;
    install_notes(&env).await;
    let (url, served) = flaky_server().await;
    let flaky = add_served(&env, "flaky", &url).await;
    let rescuer = add_simulated(&env, RESCUER).await;
    env.start_all_recording().await;
    let (_, session_id) = env
        .new_session_on(
            "notes",
            "A note on balcony tomatoes.",
            &["simulated", "flaky"],
            false,
        )
        .await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    let before = stuck(&env, &session_id).await;
    let max_attempts = env.settings.planner.max_attempts as i32;
    let failed: Vec<&Job> = before
        .values()
        .filter(|j| j.status == "retry_loop_failed")
        .collect();
    assert_eq!(failed.len(), 1, "{before:#?}");
    let note = failed[0].clone();
    assert_eq!(
        (note.step_key.as_deref(), note.attempt_count, note.model_id),
        (Some("draft_write"), max_attempts, Some(flaky))
    );
    let root = note.parent_job_id.expect("the note's PLAN job");
    assert_eq!(before[&root].status, "failed", "failed by its child");
    let calls_before = served.lock().expect("counts").clone();
    assert_eq!(
        calls_before,
        BTreeMap::from([("plan", 1), ("write", max_attempts as usize)])
    );
    // The notice names the note's step and model, not its PLAN job failed by it.
    let notice = env.session(&session_id).await.notice;
    assert!(
        notice.contains("step \"Write the note\" (draft_write) failed on flaky")
            && !notice.contains("draft_plan"),
        "{notice}"
    );

    // Refused, and nothing changes: another user's session, an unknown model.
    let (_, stranger) = env.new_user("stranger").await;
    let denied = retry(&env, Some(&stranger), &session_id, "", RESCUER)
        .await
        .expect_err("not theirs");
    assert_eq!(
        (denied.code(), reason(&denied).as_str()),
        (Code::NotFound, "RESOURCE_NOT_FOUND")
    );
    let unknown = retry(&env, None, &session_id, "", "no-such-model")
        .await
        .expect_err("unknown model");
    assert_eq!(
        (unknown.code(), reason(&unknown).as_str()),
        (Code::InvalidArgument, "INVALID_FIELD"),
        "{unknown:?}"
    );
    assert_eq!(jobs(&env, session).await, before, "refusals change nothing");

    // On its own model the note gets a whole fresh budget, fails again, and
    // takes its PLAN job down again: the stage is stuck as before.
    let again = retry(&env, None, &session_id, "", "")
        .await
        .expect("retry on the same model");
    assert_eq!(
        (again.retried_job_ids, again.reopened_jobs),
        (vec![note.id.to_string()], 1)
    );
    let before = stuck(&env, &session_id).await;
    let spent = &before[&note.id];
    assert_eq!(
        (spent.status.as_str(), spent.attempt_count, spent.model_id),
        ("retry_loop_failed", 2 * max_attempts, Some(flaky)),
        "a fresh budget of {max_attempts} attempts"
    );
    assert_eq!(before[&root].status, "failed");
    let calls_before = served.lock().expect("counts").clone();
    assert_eq!(
        calls_before,
        BTreeMap::from([("plan", 1), ("write", 2 * max_attempts as usize)])
    );

    let done = retry(&env, None, &session_id, "", RESCUER)
        .await
        .expect("retry");
    assert_eq!(done.stage_slug, "draft");
    assert_eq!(done.retried_job_ids, vec![note.id.to_string()]);
    assert_eq!(done.reopened_jobs, 1, "the note's PLAN job waits again");
    env.wait_for_session(&session_id, "pending_review", true)
        .await;

    let after = jobs(&env, session).await;
    let rerun = &after[&note.id];
    assert_eq!(rerun.status, "completed");
    assert_eq!(
        rerun.attempt_count,
        2 * max_attempts + 1,
        "one fresh attempt, numbered after the spent ones"
    );
    assert_eq!(rerun.model_id, Some(rescuer), "run on the model asked for");
    assert_eq!(
        rerun.lineage,
        Some(flaky.to_string()),
        "in the flaky lineage"
    );
    assert_eq!(rerun.attempts_written, vec![2 * max_attempts + 1]);
    assert_eq!(after[&root].status, "completed", "woken by its child");
    // Nothing that had completed ran again: same attempts, same contributions.
    for (id, job) in &before {
        if *id == note.id || *id == root {
            continue;
        }
        assert_eq!(after[id], *job, "{} ran again", job.job_type);
    }
    assert_eq!(
        after[&root].attempts_written, before[&root].attempts_written,
        "the flaky model's plan is kept"
    );
    // The only new jobs render the rewritten note.
    let new: Vec<&Job> = after
        .values()
        .filter(|j| !before.contains_key(&j.id))
        .collect();
    assert!(
        new.iter()
            .all(|j| j.job_type == "RENDER" && j.parent_job_id == Some(note.id)),
        "{new:#?}"
    );
    assert_eq!(
        *served.lock().expect("counts"),
        calls_before,
        "flaky was not called again"
    );
    let rescuer_calls: Vec<_> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.model == RESCUER)
        .collect();
    assert_eq!(rescuer_calls.len(), 1, "one call on the rescuing model");
    assert_eq!(rescuer_calls[0].job_id, Some(note.id.to_string()));

    // Both notes are documents of the draft, one per session model.
    let documents = env
        .gateway()
        .await
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.clone(),
            stage_slug: "draft".into(),
            iteration: 1,
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner()
        .documents;
    let mut models: Vec<&str> = documents.iter().map(|d| d.model.as_str()).collect();
    models.sort_unstable();
    assert_eq!(models, vec!["flaky", "simulated"]);

    // Nothing failed in the stage the session is at now.
    let nothing = retry(&env, None, &session_id, "", "")
        .await
        .expect_err("nothing to retry");
    assert_eq!(
        (nothing.code(), reason(&nothing).as_str()),
        (Code::FailedPrecondition, "NOTHING_TO_RETRY"),
        "{nothing:?}"
    );
    // The finished stage is not the session's to retry any more.
    let finished = retry(&env, None, &session_id, "draft", "")
        .await
        .expect_err("not the current stage");
    assert_eq!(
        (finished.code(), reason(&finished).as_str()),
        (Code::FailedPrecondition, "TRANSITION_REFUSED"),
        "{finished:?}"
    );
    env.teardown().await;
}

/// A model nobody serves: its root PLAN job runs out of attempts before
/// planning anything. Retried on a working model, the PLAN job plans the
/// stage there, the note it plans runs there too (reading the plan it
/// wrote, in the original model's lineage), and the stage completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_plan_runs_again_and_what_it_plans_runs_on_the_new_model() {
    let mut env = TestEnv::new().await;
    install_notes(&env).await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let dead = add_served(&env, "dead", &format!("http://127.0.0.1:{closed}/v1")).await;
    let rescuer = add_simulated(&env, RESCUER).await;
    env.start_all_recording().await;
    let (_, session_id) = env
        .new_session_on("notes", "A note on winter beans.", &["dead"], false)
        .await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    let before = stuck(&env, &session_id).await;
    assert_eq!(before.len(), 1, "only the root PLAN job: {before:#?}");
    let root = before.values().next().expect("root").clone();
    assert_eq!(
        (root.job_type.as_str(), root.status.as_str()),
        ("PLAN", "retry_loop_failed")
    );

    let done = retry(&env, None, &session_id, "draft", RESCUER)
        .await
        .expect("retry");
    assert_eq!(done.retried_job_ids, vec![root.id.to_string()]);
    assert_eq!(done.reopened_jobs, 0);
    env.wait_for_session(&session_id, "pending_review", true)
        .await;

    let after = jobs(&env, session).await;
    let plan = &after[&root.id];
    assert_eq!(plan.status, "completed");
    assert_eq!(plan.attempts_written, vec![root.attempt_count + 1]);
    let note = after
        .values()
        .find(|j| j.step_key.as_deref() == Some("draft_write"))
        .expect("the planned note");
    assert_eq!(note.status, "completed");
    assert_eq!(
        (note.model_id, note.lineage.clone()),
        (Some(rescuer), Some(dead.to_string())),
        "planned on the new model, in the dead model's lineage"
    );
    let session_view = env
        .gateway()
        .await
        .get_session(GetSessionRequest {
            session_id: session_id.clone(),
        })
        .await
        .expect("session")
        .into_inner();
    assert_eq!(
        session_view.models,
        vec!["dead"],
        "later stages run on the session's models"
    );
    env.teardown().await;
}
