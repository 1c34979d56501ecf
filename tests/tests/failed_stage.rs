//! A stage that cannot move says why. One model's note of the notes
//! pipeline's draft never parses (the simulated model's
//! `[[simulate:malformed-on:MODEL]]`), so it runs out of attempts and fails
//! its PLAN job: the session is `failed_draft` (SESSION_STATE_FAILED), and
//! GetSession, the watch stream (its stage_failed event and a later
//! snapshot) and the real `dialectic session status` all carry a notice that
//! names the failed step, its last error and the command that retries it.
//! `dialectic session watch` ends there with that notice instead of waiting
//! for ever. Run as the notice says, on the other model, the retry takes the
//! session out of the failed state and on to its review stage.

use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{SessionEvent, SessionEventKind, SessionState, WatchSessionRequest};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio_stream::StreamExt;

/// The notes pipeline: `draft` (a PLAN step, then one EXECUTE note), then `review`.
const NOTES: &str = include_str!("../pipelines/notes.toml");
const PROMPT: &str = "A note on balcony tomatoes. [[simulate:malformed-on:simulated-b]]";

/// `dialectic args…` against `env`'s gateway; its output, whatever its exit.
async fn dialectic(env: &TestEnv, binary: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(binary);
    command.args(args);
    dialectic_e2e::against_gateway(&mut command, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::time::timeout(
        Duration::from_secs(120),
        command
            .spawn()
            .expect("dialectic starts")
            .wait_with_output(),
    )
    .await
    .unwrap_or_else(|_| panic!("dialectic {args:?} finished in time"))
    .expect("dialectic ran")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The first event of a session's watch stream that `wanted` accepts.
async fn first_event(
    env: &TestEnv,
    session_id: &str,
    wanted: fn(&SessionEvent) -> bool,
) -> tokio::task::JoinHandle<Option<SessionEvent>> {
    let mut events = env
        .gateway()
        .await
        .watch_session(WatchSessionRequest {
            session_id: session_id.to_string(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    tokio::spawn(async move {
        while let Some(Ok(event)) = events.next().await {
            if wanted(&event) {
                return Some(event);
            }
        }
        None
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_stage_says_which_step_failed_why_and_how_to_retry_it() {
    let binary = dialectic_e2e::workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    let notes = PipelineFile::parse(NOTES).expect("notes.toml parses");
    dialectic_store::pipelines::install(env.store.pool(), &notes)
        .await
        .expect("install");
    env.start_all().await;
    let (_, session_id) = env
        .new_session_on("notes", PROMPT, &["simulated", "simulated-b"], false)
        .await;
    let failure = first_event(&env, &session_id, |e| {
        e.event_kind() == SessionEventKind::StageFailed
    })
    .await;
    env.wait_for_session(&session_id, "failed_draft", true)
        .await;

    // GetSession: a state of its own, the stage, and the notice.
    let failed = env.session(&session_id).await;
    assert_eq!(
        (failed.state(), failed.current_stage.as_str()),
        (SessionState::Failed, "draft")
    );
    let notice = failed.notice.clone();
    let retry = format!("dialectic session retry --session {session_id}");
    for part in [
        "stage draft failed: step \"Write the note\" (draft_write) failed on simulated-b",
        "malformed_json",
        &retry,
    ] {
        assert!(notice.contains(part), "{part:?} missing from {notice:?}");
    }
    assert!(
        !notice.contains("draft_plan"),
        "the PLAN job only failed because of its note: {notice}"
    );

    // The watch stream: the stage_failed event, then a new watcher's snapshot.
    let event = tokio::time::timeout(Duration::from_secs(30), failure)
        .await
        .expect("the stage_failed event in time")
        .expect("watch task")
        .expect("a stage_failed event");
    assert_eq!(
        (
            event.state(),
            event.session_status.as_str(),
            event.stage_slug.as_str()
        ),
        (SessionState::Failed, "failed_draft", "draft")
    );
    assert_eq!(event.message, notice);
    let snapshot = first_event(&env, &session_id, |_| true).await;
    let snapshot = tokio::time::timeout(Duration::from_secs(30), snapshot)
        .await
        .expect("a snapshot in time")
        .expect("watch task")
        .expect("a snapshot");
    assert_eq!(
        (snapshot.event_kind(), snapshot.state()),
        (SessionEventKind::Snapshot, SessionState::Failed)
    );
    assert_eq!(snapshot.message, notice);

    // The CLI: `session status` shows it; `session watch` ends on it.
    let status = dialectic(
        &env,
        &binary,
        &["session", "status", "--session", &session_id],
    )
    .await;
    let shown = text(&status.stdout);
    assert!(status.status.success(), "{status:?}");
    assert!(
        shown.contains("status: failed_draft\n")
            && shown.contains(&format!("notice: {notice}\n"))
            && shown.contains(" (failed)\n")
            && !shown.contains("(100%)"),
        "{shown}"
    );
    let watch = dialectic(
        &env,
        &binary,
        &["session", "watch", "--session", &session_id],
    )
    .await;
    assert!(!watch.status.success(), "the watch ends at the failure");
    let said = text(&watch.stderr);
    assert!(
        said.contains("failed_draft") && said.contains(&retry),
        "{said}"
    );

    // The retry the notice names, on the other model: out of the failed
    // state at once, then on to the review stage.
    let retried = dialectic(
        &env,
        &binary,
        &[
            "session",
            "retry",
            "--session",
            &session_id,
            "--model",
            "simulated",
        ],
    )
    .await;
    assert!(retried.status.success(), "{retried:?}");
    assert_ne!(env.session(&session_id).await.state(), SessionState::Failed);
    env.wait_for_session(&session_id, "pending_review", true)
        .await;
    let moved_on = env.session(&session_id).await;
    assert_eq!(
        (moved_on.state(), moved_on.current_stage.as_str()),
        (SessionState::Pending, "review")
    );
    assert_eq!(moved_on.notice, "", "nothing is stuck any more");
    env.teardown().await;
}
