//! CancelSession: running jobs finish, nothing queued starts, watchers hear
//! it and their streams end; cancelling twice or another user's session is refused.

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually};
use dialectic_proto::v1::{CancelSessionRequest, GetSessionRequest, WatchSessionRequest};
use futures::StreamExt;
use std::time::Duration;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_session_starts_nothing_new_and_ends_its_watchers() {
    let mut env = TestEnv::new().await;
    // One slow job at a time, so the cancel lands mid-stage.
    let mut slow = env.settings.clone();
    slow.executor.worker.slots = 1;
    slow.executor.simulated_latency_ms = 300;
    for name in ALL_SERVICES {
        env.start_with(name, slow.clone()).await;
        env.wait_serving(name).await;
    }
    let (_, session_id) = env
        .new_session("A seed library for a small town.", &["simulated"], false)
        .await;
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let mut client = env.gateway().await;
    let mut events = client
        .watch_session(WatchSessionRequest {
            session_id: session_id.clone(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    let written = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1 AND document_key <> 'header_context'",
        )
        .bind(session)
        .fetch_one(env.store.pool())
        .await
        .expect("count")
    };
    eventually(60, "the first document", || async {
        (written().await >= 1).then_some(())
    })
    .await;

    let (_, stranger) = env.new_user("stranger").await;
    let denied = env
        .gateway_with_key(&stranger)
        .await
        .cancel_session(CancelSessionRequest {
            session_id: session_id.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect_err("not theirs");
    assert_eq!(denied.code(), Code::NotFound);

    let cancelled = client
        .cancel_session(CancelSessionRequest {
            session_id: session_id.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("cancel")
        .into_inner();
    assert_eq!(cancelled.status, "abandoned");
    // The watcher hears it and its stream ends.
    let last = tokio::time::timeout(Duration::from_secs(10), async {
        let mut last = None;
        while let Some(Ok(event)) = events.next().await {
            last = Some(event);
        }
        last
    })
    .await
    .expect("the watch ends")
    .expect("events");
    assert_eq!(last.kind, "session_cancelled");
    assert_eq!(last.session_status, "abandoned");

    // What ran finishes; nothing queued starts afterwards.
    eventually(30, "no job running", || async {
        let running: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status = 'processing'",
        )
        .bind(session)
        .fetch_one(env.store.pool())
        .await
        .expect("count");
        (running == 0).then_some(())
    })
    .await;
    let settled = written().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(written().await, settled, "no model call after the cancel");
    assert!(
        settled < 4,
        "the cancel landed mid-stage ({settled} of 4 written)"
    );
    let shown = client
        .get_session(GetSessionRequest {
            session_id: session_id.clone(),
        })
        .await
        .expect("session")
        .into_inner();
    assert_eq!(shown.status, "abandoned");
    let again = client
        .cancel_session(CancelSessionRequest {
            session_id: session_id.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect_err("already cancelled");
    assert_eq!(again.code(), Code::FailedPrecondition);
    env.teardown().await;
}
