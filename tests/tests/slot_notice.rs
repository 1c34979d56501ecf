//! A session whose jobs wait for a model's call slot says so. The simulated
//! model's row caps its calls at one in flight (`config.max_concurrency`)
//! and every call takes a while, so of the thesis stage's four EXECUTE jobs
//! one calls and the others wait: GetSession's notice and a watch's
//! snapshot name the model, its cap and how many jobs wait. Once the stage
//! is done nothing waits, and the notice is gone.

use dialectic_core::session::{SlotWait, slot_notice};
use dialectic_e2e::{TestEnv, eventually};
use dialectic_proto::v1::{SessionEventKind, WatchSessionRequest};
use tokio_stream::StreamExt;

const PROMPT: &str = "# Slots\n\nA plan whose documents queue for one model.";
const MODEL: &str = "simulated";

/// The notice of `jobs` jobs waiting for the capped model.
fn waiting(jobs: usize) -> String {
    slot_notice(&[SlotWait {
        model: MODEL.into(),
        max_concurrency: 1,
        jobs,
    }])
}

/// Whether `notice` is the slot notice of one to three waiting jobs: four
/// EXECUTE jobs share one slot, so the count falls as they take turns.
fn is_slot_wait(notice: &str) -> bool {
    (1..=3).any(|jobs| notice == waiting(jobs))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_waiting_for_a_models_call_slot_say_so_until_they_run() {
    let mut env = TestEnv::new().await;
    sqlx::query(
        "UPDATE ai_providers SET config = config || '{\"max_concurrency\": 1}'
          WHERE api_identifier = $1",
    )
    .bind(MODEL)
    .execute(env.store.pool())
    .await
    .expect("cap the model");
    env.start_all_with(|s| s.executor.simulated_latency_ms = 3000)
        .await;
    let (_, session_id) = env.new_session(PROMPT, &[MODEL], false).await;

    let notice = eventually(60, "a notice of jobs waiting for a slot", || async {
        let notice = env.session(&session_id).await.notice;
        notice.contains("call slot").then_some(notice)
    })
    .await;
    assert!(is_slot_wait(&notice), "{notice}");
    // A watcher joining now is told the same in its snapshot.
    let mut events = env
        .gateway()
        .await
        .watch_session(WatchSessionRequest {
            session_id: session_id.clone(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    let snapshot = events
        .next()
        .await
        .expect("a first event")
        .expect("the snapshot");
    assert_eq!(snapshot.event_kind, SessionEventKind::Snapshot as i32);
    assert!(
        is_slot_wait(&snapshot.message),
        "snapshot: {}",
        snapshot.message
    );
    drop(events);

    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let done = env.session(&session_id).await;
    assert_eq!(done.notice, "", "nothing waits once the stage is done");
    env.teardown().await;
}
