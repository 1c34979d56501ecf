//! Streams that survive proxies (issue 60 item 4): every session event
//! carries its sequence; a watcher behind a relay that cuts its connection
//! every 1.5 s, resuming each time with `after_sequence` = the
//! last event it took in, receives every event exactly once and in order
//! (the same events, in the same order, as ListSessionEvents pages through);
//! a quiet stream (a session waiting at pending_antithesis) gets heartbeats at
//! `gateway.watch_heartbeat_secs`, carrying the last sequence; and another
//! user's session is NOT_FOUND to both calls. Behind a proxy that cuts every
//! 15 s, heartbeats arrive while a 30 s model call runs.

use dialectic_e2e::{BearerKey, GatewayClient, TestEnv};
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use dialectic_proto::v1::{JobStatus, ListSessionEventsRequest, SessionEvent, WatchSessionRequest};
use futures::StreamExt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tonic::Code;

const PROMPT: &str = "A repair café that lends tools and teaches fixing.";
/// Where the session (without auto-advance) waits once its first stage is
/// done: the watcher stops there.
const DONE: &str = "pending_antithesis";
/// How often the relay cuts every connection through it.
const CUT_EVERY: Duration = Duration::from_millis(1500);

/// A TCP relay to the gateway that cuts every connection through it on
/// demand, as a proxy dropping a stream would, and keeps accepting new ones.
struct CuttingRelay {
    port: u16,
    links: Arc<Mutex<JoinSet<()>>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl CuttingRelay {
    async fn to(upstream: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("relay port");
        let port = listener.local_addr().expect("relay address").port();
        let links: Arc<Mutex<JoinSet<()>>> = Arc::default();
        let accepting = tokio::spawn({
            let links = links.clone();
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    links
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .spawn(async move {
                            if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                                let _ = copy_bidirectional(&mut inbound, &mut outbound).await;
                            }
                        });
                }
            }
        });
        Self {
            port,
            links,
            accepting,
        }
    }

    /// Closes every connection through the relay (both of its ends).
    fn cut(&self) {
        self.links
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .abort_all();
    }

    fn client(&self, key: &str) -> GatewayClient {
        let channel =
            tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{}", self.port))
                .expect("relay address")
                .connect_lazy();
        DialecticServiceClient::with_interceptor(channel, BearerKey(key.to_string()))
    }
}

impl Drop for CuttingRelay {
    fn drop(&mut self) {
        self.accepting.abort();
        self.cut();
    }
}

/// What the resuming watcher saw.
#[derive(Debug)]
enum Seen {
    Event(Box<SessionEvent>),
    /// The stream broke (or could not open); the watcher resumes.
    Broken,
    /// The last event said the session waits at [`DONE`].
    Ended,
}

/// Watches `session_id` from its first event (`after_sequence` 0),
/// resuming after the last event taken in whenever the stream breaks;
/// reports everything on `seen`, and [`Seen::Ended`] after an event that
/// says the session waits at [`DONE`].
async fn resuming_watcher(
    mut client: GatewayClient,
    session_id: String,
    seen: mpsc::UnboundedSender<Seen>,
) {
    let mut cursor = 0;
    loop {
        let opened = client
            .watch_session(WatchSessionRequest {
                session_id: session_id.clone(),
                after_sequence: Some(cursor),
            })
            .await;
        if let Ok(stream) = opened {
            let mut stream = stream.into_inner();
            while let Some(Ok(event)) = stream.next().await {
                let done = event.session_status == DONE;
                if event.kind != "heartbeat" {
                    cursor = event.sequence;
                }
                if seen.send(Seen::Event(Box::new(event))).is_err()
                    || (done && seen.send(Seen::Ended).is_err())
                {
                    return;
                }
            }
        }
        if seen.send(Seen::Broken).is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The next thing the watcher reports, within `secs`.
async fn next(seen: &mut mpsc::UnboundedReceiver<Seen>, secs: u64, what: &str) -> Seen {
    tokio::time::timeout(Duration::from_secs(secs), seen.recv())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap_or_else(|| panic!("the watcher stopped before {what}"))
}

/// The session's whole retained history, paged through `page_size` at a time.
async fn history(
    client: &mut GatewayClient,
    session_id: &str,
    page_size: u32,
) -> Vec<SessionEvent> {
    let mut events = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_session_events(ListSessionEventsRequest {
                session_id: session_id.to_string(),
                page_size,
                page_token: page_token.clone(),
            })
            .await
            .expect("a page of the history")
            .into_inner();
        assert!(
            page.events.len() <= page_size as usize,
            "a page holds at most page_size"
        );
        events.extend(page.events);
        if page.next_page_token.is_empty() {
            return events;
        }
        page_token = page.next_page_token;
    }
}

/// What identifies an event, to compare a watcher's with the history's.
fn fields(e: &SessionEvent) -> (u64, String, String, String, String, String) {
    (
        e.sequence,
        e.kind.clone(),
        e.session_status.clone(),
        e.stage_slug.clone(),
        e.job_id.clone(),
        e.message.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watcher_behind_a_cutting_relay_resumes_with_every_event_once_and_quiet_streams_get_heartbeats()
 {
    let mut env = TestEnv::new().await;
    env.settings.gateway.watch_heartbeat_secs = 1;
    // Slow enough model calls that the run outlasts several cuts.
    env.settings.executor.simulated_latency_ms = 2500;
    env.start_all().await;
    let mut direct = env.gateway().await;
    let relay = CuttingRelay::to(env.addr("gateway")).await;
    let key = env.settings.gateway.bootstrap_key.clone();

    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let relay = Arc::new(relay);
    let (tx, mut seen) = mpsc::unbounded_channel();
    let watcher = tokio::spawn(resuming_watcher(relay.client(&key), session_id.clone(), tx));
    // Busy: the session runs its first stage while the relay cuts the stream.
    let cutter = tokio::spawn({
        let relay = relay.clone();
        async move {
            loop {
                tokio::time::sleep(CUT_EVERY).await;
                relay.cut();
            }
        }
    });
    let mut received: Vec<SessionEvent> = Vec::new();
    let mut broken = 0;
    loop {
        match next(&mut seen, 180, "the session to reach pending_antithesis").await {
            Seen::Event(e) if e.kind == "heartbeat" => {}
            Seen::Event(e) => received.push(*e),
            Seen::Broken => broken += 1,
            Seen::Ended => break,
        }
    }
    cutter.abort();
    assert!(
        broken >= 2,
        "the relay cut the stream mid-run at least twice (cut {broken} times)"
    );

    // Quiet: the session waits at pending_antithesis and publishes nothing
    // (once its last renders are done), so heartbeats come, each with the
    // last sequence the stream sent; two in a row prove the stream stayed
    // open on them alone.
    let mut beats_in_a_row = 0;
    while beats_in_a_row < 2 {
        match next(&mut seen, 10, "a heartbeat on the quiet stream").await {
            Seen::Event(e) if e.kind == "heartbeat" => {
                let last = received.last().map_or(0, |r| r.sequence);
                assert_eq!(
                    e.sequence, last,
                    "a heartbeat carries the last sequence sent"
                );
                assert_eq!(e.session_id, session_id);
                beats_in_a_row += 1;
            }
            Seen::Event(e) => {
                beats_in_a_row = 0;
                received.push(*e);
            }
            // A cut just before the cutter stopped: the watcher resumes.
            Seen::Broken | Seen::Ended => {}
        }
    }
    watcher.abort();

    // Exactly once and in order: what the watcher took in is the history,
    // from its first event, each sequence once (events published after
    // the watcher stopped, e.g. renders, may follow in the history).
    assert!(
        received.iter().all(|e| e.kind != "snapshot"),
        "every resume was covered by the history: no snapshot"
    );
    let kept = history(&mut direct, &session_id, 7).await;
    let sequences: Vec<u64> = kept.iter().map(|e| e.sequence).collect();
    let contiguous: Vec<u64> = (1..=kept.len() as u64).collect();
    assert_eq!(
        sequences, contiguous,
        "the history numbers every event from 1"
    );
    assert!(received.len() <= kept.len(), "no event was received twice");
    let got: Vec<_> = received.iter().map(fields).collect();
    let want: Vec<_> = kept[..received.len()].iter().map(fields).collect();
    assert_eq!(
        got, want,
        "the watcher got the history, once each and in order"
    );
    assert!(
        received.iter().any(|e| e.kind == "stage_completed"),
        "the run's events arrived through the cuts"
    );

    // Another user's session is NOT_FOUND, to a cursor and to the history.
    let (_, stranger_key) = env.new_user("stranger").await;
    let mut stranger = env.gateway_with_key(&stranger_key).await;
    let refused = stranger
        .list_session_events(ListSessionEventsRequest {
            session_id: session_id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("another user's history");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    let refused = stranger
        .watch_session(WatchSessionRequest {
            session_id: session_id.clone(),
            after_sequence: Some(0),
        })
        .await
        .expect_err("another user's events");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    drop(relay);
    env.teardown().await;
}

/// The proxy the issue names: it cuts every 15 s while a model call takes
/// 30 s. Heartbeats (every 5 s here) arrive while the call runs, between the
/// job's start and its end, and the watcher, resuming after each cut, takes
/// in every event once and in order up to the call's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heartbeats_cover_a_thirty_second_call_behind_a_proxy_that_cuts_every_fifteen_seconds() {
    const LONG_CUT: Duration = Duration::from_secs(15);
    let mut env = TestEnv::new().await;
    env.settings.gateway.watch_heartbeat_secs = 5;
    env.settings.executor.simulated_latency_ms = 30_000;
    env.start_all().await;
    let mut direct = env.gateway().await;
    let relay = Arc::new(CuttingRelay::to(env.addr("gateway")).await);
    let key = env.settings.gateway.bootstrap_key.clone();
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let watcher = tokio::spawn(resuming_watcher(relay.client(&key), session_id.clone(), tx));
    let cutter = tokio::spawn({
        let relay = relay.clone();
        async move {
            loop {
                tokio::time::sleep(LONG_CUT).await;
                relay.cut();
            }
        }
    });

    // Until the first job (the stage's plan, one 30 s call) has completed.
    let mut received: Vec<SessionEvent> = Vec::new();
    let (mut broken, mut beats_during_the_call, mut calling) = (0, 0, false);
    loop {
        match next(&mut seen, 120, "the first job's end").await {
            Seen::Event(e) if e.kind == "heartbeat" => {
                if calling {
                    beats_during_the_call += 1;
                }
            }
            Seen::Event(e) => {
                calling |= e.kind == "job_started";
                let completed = e.job_status() == JobStatus::Completed;
                received.push(*e);
                if completed {
                    break;
                }
            }
            Seen::Broken => broken += 1,
            Seen::Ended => panic!("the session moved on before its first job completed"),
        }
    }
    cutter.abort();
    watcher.abort();
    assert!(calling, "the call's start arrived: {received:?}");
    assert!(
        broken >= 1,
        "the relay cut the stream during the call (cut {broken} times)"
    );
    // 30 s of call with a beat every 5 s, less the time each cut takes to
    // resume: well over two, and none at all without heartbeats.
    assert!(
        beats_during_the_call >= 2,
        "heartbeats kept the stream alive during the call: {beats_during_the_call}"
    );
    let kept = history(&mut direct, &session_id, 50).await;
    assert!(received.len() <= kept.len(), "no event was received twice");
    let got: Vec<_> = received.iter().map(fields).collect();
    let want: Vec<_> = kept[..received.len()].iter().map(fields).collect();
    assert_eq!(got, want, "every event once and in order, through the cuts");
    drop(relay);
    env.teardown().await;
}
