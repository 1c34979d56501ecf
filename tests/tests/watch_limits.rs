//! Limits per tenant (issue 43), watch streams: a user holds at most
//! `gateway.max_watches_per_user` WatchSession streams at once; the next is
//! RESOURCE_EXHAUSTED `WATCH_LIMIT_REACHED` until one ends, and other users
//! are unaffected. Watchers of one session in one gateway share one Redis
//! subscription (`PUBSUB NUMSUB` of its channel is 1 with three open, 0 once
//! they are gone), and each of them still gets every event to the end.

use dialectic_cache::Cache;
use dialectic_core::session::SessionStatus;
use dialectic_e2e::{GatewayClient, TestEnv, eventually};
use dialectic_proto::v1::{
    CreateProjectRequest, PauseSessionRequest, ResumeSessionRequest, SessionEvent,
    StartSessionRequest, WatchSessionRequest,
};
use futures::StreamExt;
use std::time::Duration;
use tonic::Code;
use tonic::codec::Streaming;

const MAX_WATCHES: u32 = 3;
const PROMPT: &str = "A repair café that lends tools and teaches fixing.";

/// A project and a session of the user `client` acts as; returns the session's id.
async fn new_session(client: &mut GatewayClient, auto_advance: bool) -> String {
    let project = client
        .create_project(CreateProjectRequest {
            name: "Watched".into(),
            initial_user_prompt: PROMPT.into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    client
        .start_session(StartSessionRequest {
            project_id: project.id,
            models: vec!["simulated".into()],
            auto_advance,
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner()
        .id
}

async fn watch(
    client: &mut GatewayClient,
    session_id: &str,
) -> Result<Streaming<SessionEvent>, tonic::Status> {
    client
        .watch_session(WatchSessionRequest {
            session_id: session_id.to_string(),
            after_sequence: None,
        })
        .await
        .map(tonic::Response::into_inner)
}

/// A watch stream that is live: its catch-up snapshot has arrived.
async fn watching(client: &mut GatewayClient, session_id: &str) -> Streaming<SessionEvent> {
    let mut events = watch(client, session_id)
        .await
        .unwrap_or_else(|e| panic!("watch {session_id}: {e:?}"));
    let first = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("a snapshot in time")
        .expect("a first event")
        .expect("ok");
    assert_eq!(first.kind, "snapshot", "{first:?}");
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_user_past_the_watch_cap_is_refused_until_a_stream_ends() {
    let mut env = TestEnv::new().await;
    env.settings.gateway.max_watches_per_user = MAX_WATCHES;
    // No planner: the sessions stay pending, so no stream ends by itself.
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let sessions = [
        new_session(&mut client, false).await,
        new_session(&mut client, false).await,
    ];
    // The cap counts streams, whichever sessions they watch.
    let mut open = Vec::new();
    for n in 0..MAX_WATCHES as usize {
        open.push(watching(&mut client, &sessions[n % 2]).await);
    }
    let refused = watch(&mut client, &sessions[0])
        .await
        .expect_err("one stream past the cap");
    assert_eq!(
        dialectic_e2e::refusal(&refused),
        (
            Code::ResourceExhausted,
            "WATCH_LIMIT_REACHED".into(),
            MAX_WATCHES.to_string(),
            MAX_WATCHES.to_string()
        ),
        "{refused:?}"
    );

    // Another user's streams are counted apart.
    let (_, key) = env.new_user("neighbour").await;
    let mut neighbour = env.gateway_with_key(&key).await;
    let theirs = new_session(&mut neighbour, false).await;
    let _their_stream = watching(&mut neighbour, &theirs).await;

    // A stream the client drops frees its slot once the gateway sees it go.
    drop(open.pop());
    let reopened = eventually(30, "a slot freed by a dropped stream", || {
        let mut client = client.clone();
        let session = sessions[1].clone();
        async move {
            match watch(&mut client, &session).await {
                Ok(events) => Some(events),
                Err(status) if status.code() == Code::ResourceExhausted => None,
                Err(status) => panic!("unexpected refusal: {status:?}"),
            }
        }
    })
    .await;
    open.push(reopened);
    let refused = watch(&mut client, &sessions[1])
        .await
        .expect_err("at the cap again");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    drop(open);
    env.teardown().await;
}

/// Every event a watch stream gives after its snapshot, until it ends.
async fn rest(mut events: Streaming<SessionEvent>) -> Vec<(String, String, String, String)> {
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        let event = event.expect("no error before the stream ends");
        seen.push((
            event.kind,
            event.session_status,
            event.job_id,
            event.document_key,
        ));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watchers_of_a_session_share_one_subscription_and_all_see_it_end() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let session = new_session(&mut client, true).await;
    // Held still while the watchers join, so they all start at one point.
    client
        .pause_session(PauseSessionRequest {
            session_id: session.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("pause");
    env.wait_for_session(&session, SessionStatus::PAUSED, false)
        .await;
    // What was running when the pause landed finishes first.
    let id = uuid::Uuid::parse_str(&session).expect("uuid");
    eventually(60, "running jobs to finish", || async {
        let busy = env
            .count(
                "SELECT count(*) FROM dialectic_generation_jobs
                  WHERE session_id = $1 AND status IN ('processing', 'retrying')",
                id,
            )
            .await;
        (busy == 0).then_some(())
    })
    .await;
    let cache = Cache::connect(&env.settings.redis.url, 60)
        .await
        .expect("redis");
    assert_eq!(cache.subscribers(&session).await.expect("numsub"), 0);

    let mut watchers = Vec::new();
    for _ in 0..3 {
        // Each on its own connection, as three clients would watch.
        let mut own = env.gateway().await;
        watchers.push(watching(&mut own, &session).await);
    }
    assert_eq!(
        cache.subscribers(&session).await.expect("numsub"),
        1,
        "three watchers of one session share one subscription"
    );
    let collecting: Vec<_> = watchers
        .into_iter()
        .map(|events| tokio::spawn(rest(events)))
        .collect();
    client
        .resume_session(ResumeSessionRequest {
            session_id: session.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("resume");

    let mut seen = Vec::new();
    for watcher in collecting {
        seen.push(
            tokio::time::timeout(Duration::from_secs(240), watcher)
                .await
                .expect("the watch ended at review")
                .expect("watcher"),
        );
    }
    for (n, events) in seen.iter().enumerate() {
        let completed: Vec<&str> = events
            .iter()
            .filter(|e| e.0 == "stage_completed")
            .map(|e| e.1.as_str())
            .collect();
        assert_eq!(
            completed,
            [
                "pending_antithesis",
                "pending_synthesis",
                "pending_parenthesis",
                "pending_paralysis",
                SessionStatus::REVIEW,
            ],
            "watcher {n}: {events:?}"
        );
        assert_eq!(
            events.last().map(|e| e.1.as_str()),
            Some(SessionStatus::REVIEW),
            "watcher {n} ends at review"
        );
    }
    // One feed fans the same events out to all three: a later watcher gets
    // the earlier one's from the moment it joined (all of them, unless a
    // render finished while they were joining).
    for (n, pair) in seen.windows(2).enumerate() {
        assert!(
            pair[0].ends_with(&pair[1]),
            "watcher {} saw what watcher {n} did from its start: {:?} vs {:?}",
            n + 1,
            pair[1],
            pair[0]
        );
    }
    // The last watcher gone, the gateway unsubscribes.
    eventually(30, "the shared subscription to close", || async {
        (cache.subscribers(&session).await.ok()? == 0).then_some(())
    })
    .await;
    env.teardown().await;
}
