//! WatchSession's plumbing (issue 43). Watchers of one session in this
//! process share one Redis subscription (a feed: one pump task fanning the
//! subscription's events out through a broadcast channel), which ends once
//! its last watcher goes; and a user holds at most
//! `gateway.max_watches_per_user` watch streams at once. A stream opens with
//! a snapshot, or with the events a resuming client missed (replayed from the
//! session's history in Redis, see [`opening`]), drops live events it already
//! sent by their sequence, and sends a heartbeat whenever it has been quiet
//! for `gateway.watch_heartbeat_secs`.

use super::ends_watch;
use crate::convert;
use crate::error::GatewayError;
use dialectic_cache::{Cache, CacheError, ProgressEvent};
use dialectic_core::error::{ErrorCode, Reason};
use dialectic_core::ids::{SessionId, UserId};
use dialectic_core::progress::EventKind;
use dialectic_proto::v1::SessionEvent;
use dialectic_runtime::CancellationToken;
use dialectic_runtime::error_status::Failure;
use futures::{Stream, StreamExt};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;
use tonic::Status;

/// Events a feed keeps for its slowest watcher. A watcher further behind
/// (its client reads slower than the session publishes, past its own
/// stream's buffer too) is told so and its stream ends: see [`forward`].
const FEED_CAPACITY: usize = 256;

/// The watch streams of one gateway process: each user's count and the
/// shared feeds. Clones share them.
#[derive(Clone)]
pub(crate) struct Watches {
    /// Most streams one user may hold in this process at once; 0: no cap.
    max_per_user: u32,
    /// How long a stream may stay quiet before it gets a heartbeat.
    heartbeat: Duration,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Open watch streams by user; a user with none has no entry.
    streams: HashMap<UserId, u32>,
    feeds: HashMap<SessionId, Feed>,
    /// Tells a feed from a later one of the same session, so a watcher of
    /// a feed that already ended never counts against its successor.
    next_feed: u64,
}

struct Feed {
    id: u64,
    /// Kept to subscribe joining watchers; the pump holds the other sender.
    events: broadcast::Sender<ProgressEvent>,
    watchers: usize,
    /// Ends the pump, whose Redis subscription closes with it.
    stop: CancellationToken,
}

/// Nothing panics while the lock is held (only map updates happen under
/// it), so a poisoned lock still guards consistent counts.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Watches {
    pub(crate) fn new(max_per_user: u32) -> Self {
        Self {
            max_per_user,
            heartbeat: Duration::from_secs(20),
            state: Arc::default(),
        }
    }

    /// Sets `gateway.watch_heartbeat_secs` (0 is taken as 1).
    pub(crate) fn heartbeat_every(mut self, secs: u64) -> Self {
        self.heartbeat = Duration::from_secs(secs.max(1));
        self
    }

    pub(crate) fn heartbeat(&self) -> Duration {
        self.heartbeat
    }

    /// Counts one more stream for `user`, or refuses it at the cap with
    /// RESOURCE_EXHAUSTED `WATCH_LIMIT_REACHED`. The count falls when the
    /// permit drops, which the stream's task does as it ends.
    pub(crate) fn admit(&self, user: UserId) -> Result<WatchPermit, GatewayError> {
        let mut state = lock(&self.state);
        let held = state.streams.entry(user).or_default();
        if self.max_per_user > 0 && *held >= self.max_per_user {
            return Err(GatewayError::Exhausted {
                reason: Reason::WatchLimitReached,
                message: format!(
                    "{held} watch streams are open for you, the most one user may hold ({}); \
                     close one (or let it end) and watch again",
                    self.max_per_user
                ),
                limit: i64::from(self.max_per_user),
                current: i64::from(*held),
            });
        }
        *held += 1;
        Ok(WatchPermit {
            state: self.state.clone(),
            user,
        })
    }

    /// Live events of `session` through this process's one subscription to
    /// it: joins its feed if there is one, else awaits `subscribe` and starts
    /// the feed. Either way the events are those published after this
    /// returns, as with a subscription of one's own, so the caller reads its
    /// catch-up snapshot afterwards and misses nothing in between.
    pub(crate) async fn feed<S, E>(
        &self,
        session: SessionId,
        subscribe: impl Future<Output = Result<S, E>>,
    ) -> Result<Subscription, E>
    where
        S: Stream<Item = ProgressEvent> + Send + 'static,
    {
        if let Some(joined) = self.join(&mut lock(&self.state), session) {
            return Ok(joined);
        }
        // Subscribed outside the lock: it is a Redis round trip, and other
        // sessions' watchers must not wait for it. Two first watchers of one
        // session may both subscribe; the second to finish joins the first's
        // feed below and its own subscription closes as `stream` drops.
        let stream = subscribe.await?;
        let (subscription, events, stop, id) = {
            let mut state = lock(&self.state);
            if let Some(joined) = self.join(&mut state, session) {
                return Ok(joined);
            }
            let id = state.next_feed;
            state.next_feed += 1;
            let (events, receiver) = broadcast::channel(FEED_CAPACITY);
            let stop = CancellationToken::new();
            state.feeds.insert(
                session,
                Feed {
                    id,
                    events: events.clone(),
                    watchers: 1,
                    stop: stop.clone(),
                },
            );
            (self.subscription(session, id, receiver), events, stop, id)
        };
        tokio::spawn(pump(self.state.clone(), session, id, stream, events, stop));
        Ok(subscription)
    }

    fn join(&self, state: &mut State, session: SessionId) -> Option<Subscription> {
        let feed = state.feeds.get_mut(&session)?;
        feed.watchers += 1;
        let receiver = feed.events.subscribe();
        let id = feed.id;
        Some(self.subscription(session, id, receiver))
    }

    fn subscription(
        &self,
        session: SessionId,
        feed: u64,
        events: broadcast::Receiver<ProgressEvent>,
    ) -> Subscription {
        Subscription {
            events,
            _ticket: FeedTicket {
                state: self.state.clone(),
                session,
                feed,
            },
        }
    }

    #[cfg(test)]
    fn feeds(&self) -> usize {
        lock(&self.state).feeds.len()
    }
}

/// One counted watch stream of a user (see [`Watches::admit`]).
pub(crate) struct WatchPermit {
    state: Arc<Mutex<State>>,
    user: UserId,
}

impl Drop for WatchPermit {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        if let Some(held) = state.streams.get_mut(&self.user) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                state.streams.remove(&self.user);
            }
        }
    }
}

/// One watcher's place on a session's feed.
pub(crate) struct Subscription {
    events: broadcast::Receiver<ProgressEvent>,
    _ticket: FeedTicket,
}

/// Leaves the feed when dropped; the last watcher to leave stops it.
struct FeedTicket {
    state: Arc<Mutex<State>>,
    session: SessionId,
    feed: u64,
}

impl Drop for FeedTicket {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        let Some(feed) = state.feeds.get_mut(&self.session) else {
            return;
        };
        if feed.id != self.feed {
            return;
        }
        feed.watchers = feed.watchers.saturating_sub(1);
        if feed.watchers == 0
            && let Some(feed) = state.feeds.remove(&self.session)
        {
            feed.stop.cancel();
        }
    }
}

/// Fans one subscription's events out to a feed's watchers until the last
/// one leaves (`stop`) or Redis drops the subscription.
async fn pump<S>(
    state: Arc<Mutex<State>>,
    session: SessionId,
    id: u64,
    stream: S,
    events: broadcast::Sender<ProgressEvent>,
    stop: CancellationToken,
) where
    S: Stream<Item = ProgressEvent> + Send + 'static,
{
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            // Returning drops the stream, which closes its Redis connection:
            // that is the unsubscribe.
            _ = stop.cancelled() => return,
            next = stream.next() => match next {
                // An error only means no watcher is subscribed, the moment
                // between the last one leaving and `stop`.
                Some(event) => {
                    let _ = events.send(event);
                }
                None => break,
            },
        }
    }
    // Redis dropped the subscription. Forgetting the feed lets the next
    // watcher subscribe afresh; with its sender gone too, this one's watchers
    // see `Closed` once `events` drops and tell their clients to watch again.
    let mut state = lock(&state);
    if state.feeds.get(&session).is_some_and(|feed| feed.id == id) {
        state.feeds.remove(&session);
    }
    tracing::debug!(%session, "progress subscription ended");
}

fn feed_closed(message: impl Into<String>) -> Status {
    Failure::new(ErrorCode::Unavailable, Reason::ProgressFeedClosed, message).into()
}

/// Most history entries one read takes while an opening replays.
const REPLAY_PAGE: usize = 500;

/// What a watch stream sends before its live events: a snapshot, or the
/// events its client missed, and whether that already ends the stream.
pub(crate) struct Opening {
    events: Vec<SessionEvent>,
    /// The last sequence the opening covers: live events up to it are
    /// dropped as already sent.
    sequence: u64,
    ends: bool,
}

impl Opening {
    fn snapshot(snapshot: SessionEvent) -> Self {
        Self {
            ends: ends_watch(&snapshot.session_status),
            sequence: snapshot.sequence,
            events: vec![snapshot],
        }
    }
}

/// How a watch opens. `snapshot` (carrying the sequence read right after
/// joining the feed, before the session's row) opens a stream without a
/// cursor. With `after`, the events after it are replayed from the
/// history, up to the first that ends a watch; when they do not end it but
/// the session's status does, the snapshot follows and ends it. A cursor the
/// history no longer covers (older than its first entry, or past the last
/// sequence given) gets the snapshot marked `history_truncated`: the events
/// in between are gone, and the snapshot stands for them.
pub(crate) async fn opening(
    cache: &Cache,
    session: &str,
    after: Option<u64>,
    mut snapshot: SessionEvent,
) -> Result<Opening, CacheError> {
    let Some(after) = after else {
        return Ok(Opening::snapshot(snapshot));
    };
    let replay = replay(cache, session, after).await?;
    let covered = match replay.first() {
        Some(first) => first.sequence == after + 1,
        None => after == snapshot.sequence,
    };
    if !covered {
        snapshot.history_truncated = true;
        return Ok(Opening::snapshot(snapshot));
    }
    let mut events = Vec::with_capacity(replay.len());
    let mut sequence = after;
    for event in replay {
        let ends = ends_watch(&event.session_status);
        sequence = event.sequence;
        events.push(convert::event(event));
        if ends {
            return Ok(Opening {
                events,
                sequence,
                ends: true,
            });
        }
    }
    let ends = ends_watch(&snapshot.session_status);
    if ends {
        snapshot.sequence = snapshot.sequence.max(sequence);
        sequence = snapshot.sequence;
        events.push(snapshot);
    }
    Ok(Opening {
        events,
        sequence,
        ends,
    })
}

/// Every retained event after `after`, oldest first. Publishing goes on
/// meanwhile, so the read stops at a short page; the history's trimming
/// bounds it.
async fn replay(
    cache: &Cache,
    session: &str,
    after: u64,
) -> Result<Vec<ProgressEvent>, CacheError> {
    let mut events: Vec<ProgressEvent> = Vec::new();
    loop {
        let from = events.last().map_or(after, |e| e.sequence);
        let page = cache.history_after(session, from, REPLAY_PAGE).await?;
        let short = page.len() < REPLAY_PAGE;
        events.extend(page);
        if short || events.len() as u64 > 2 * dialectic_cache::HISTORY_LEN {
            return Ok(events);
        }
    }
}

/// A heartbeat: the session, the time and the last sequence sent, nothing else.
fn heartbeat(session_id: &str, sequence: u64) -> SessionEvent {
    convert::event(ProgressEvent {
        at_ms: chrono::Utc::now().timestamp_millis(),
        sequence,
        ..ProgressEvent::new(EventKind::Heartbeat, session_id)
    })
}

/// One watch stream: `opening`, then the session's events after it, until
/// the session waits for review or is over, the client goes, or the server
/// shuts down; a heartbeat whenever nothing was sent for `beat`. `permit`
/// and `feed` are held as long, so the user's count falls, and the feed
/// loses a watcher, as the stream ends.
pub(crate) async fn forward(
    session_id: String,
    opening: Opening,
    mut feed: Subscription,
    permit: WatchPermit,
    tx: mpsc::Sender<Result<SessionEvent, Status>>,
    shutdown: CancellationToken,
    beat: Duration,
) {
    let _permit = permit;
    for event in opening.events {
        if tx.send(Ok(event)).await.is_err() {
            return;
        }
    }
    if opening.ends {
        return;
    }
    let mut sent = opening.sequence;
    loop {
        tokio::select! {
            // Open streams must not hold up the server's graceful shutdown.
            _ = shutdown.cancelled() => break,
            _ = tx.closed() => break,
            _ = tokio::time::sleep(beat) => {
                if tx.send(Ok(heartbeat(&session_id, sent))).await.is_err() {
                    break;
                }
            }
            next = feed.events.recv() => match next {
                // Published before the opening was read: already sent, or
                // stood for by the snapshot.
                Ok(event) if event.sequence != 0 && event.sequence <= sent => {}
                Ok(event) => {
                    sent = sent.max(event.sequence);
                    let done = ends_watch(&event.session_status);
                    if tx.send(Ok(convert::event(event))).await.is_err() || done {
                        break;
                    }
                }
                // A watcher too slow for the shared feed lost events. Skipping
                // past them would show the client a session that jumped, so
                // its stream ends as one whose feed dropped always has
                // (UNAVAILABLE, PROGRESS_FEED_CLOSED): the client watches
                // again with its cursor and the history replays what it
                // missed (without one, the new snapshot carries the state).
                // The CLI already re-watches on UNAVAILABLE.
                Err(RecvError::Lagged(missed)) => {
                    let _ = tx
                        .send(Err(feed_closed(format!(
                            "this watch fell {missed} events behind the session; watch again"
                        ))))
                        .await;
                    break;
                }
                Err(RecvError::Closed) => {
                    let _ = tx
                        .send(Err(feed_closed("progress feed closed; watch again")))
                        .await;
                    break;
                }
            },
        }
    }
    tracing::debug!("watch stream ended");
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_core::progress::EventKind;
    use dialectic_core::session::SessionStatus;
    use dialectic_runtime::error_status;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use tokio_stream::wrappers::UnboundedReceiverStream;

    /// A stand-in for Redis: counts subscriptions and hands out the
    /// publishing end of each.
    #[derive(Default)]
    struct FakeRedis {
        subscribed: AtomicUsize,
        publishers: Mutex<Vec<mpsc::UnboundedSender<ProgressEvent>>>,
    }

    impl FakeRedis {
        async fn subscribe(&self) -> Result<UnboundedReceiverStream<ProgressEvent>, Infallible> {
            self.subscribed.fetch_add(1, Ordering::SeqCst);
            let (tx, rx) = mpsc::unbounded_channel();
            self.publishers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(tx);
            Ok(UnboundedReceiverStream::new(rx))
        }

        fn publisher(&self, n: usize) -> mpsc::UnboundedSender<ProgressEvent> {
            self.publishers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)[n]
                .clone()
        }
    }

    fn event(kind: EventKind, status: &str) -> ProgressEvent {
        ProgressEvent {
            session_status: status.into(),
            ..ProgressEvent::new(kind, "")
        }
    }

    async fn within<T>(what: &str, work: impl Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(5), work)
            .await
            .unwrap_or_else(|_| panic!("timed out: {what}"))
    }

    #[test]
    fn a_user_holds_at_most_the_cap_and_others_are_unaffected() {
        let watches = Watches::new(2);
        let (alice, bob) = (UserId::new(), UserId::new());
        let first = watches.admit(alice).expect("first");
        let _second = watches.admit(alice).expect("second");
        match watches.admit(alice) {
            Err(e @ GatewayError::Exhausted { .. }) => {
                let status = Status::from(e);
                assert_eq!(status.code(), tonic::Code::ResourceExhausted);
                assert_eq!(
                    error_status::reason(&status).as_deref(),
                    Some("WATCH_LIMIT_REACHED")
                );
            }
            other => panic!("a third stream was not refused: {:?}", other.err()),
        }
        let _bobs = watches.admit(bob).expect("another user's first");
        drop(first);
        let _again = watches
            .admit(alice)
            .expect("a slot freed by a closed stream");
        assert!(watches.admit(alice).is_err());
    }

    #[test]
    fn a_cap_of_zero_is_no_cap() {
        let watches = Watches::new(0);
        let user = UserId::new();
        let held: Vec<_> = (0..100).map(|_| watches.admit(user)).collect();
        assert!(held.iter().all(Result::is_ok));
    }

    #[tokio::test]
    async fn watchers_of_a_session_share_one_subscription_until_the_last_leaves() {
        let watches = Watches::new(0);
        let redis = FakeRedis::default();
        let session = SessionId::new();
        let mut feeds = Vec::new();
        for _ in 0..3 {
            feeds.push(
                watches
                    .feed(session, redis.subscribe())
                    .await
                    .expect("feed"),
            );
        }
        assert_eq!(redis.subscribed.load(Ordering::SeqCst), 1);
        let publisher = redis.publisher(0);
        publisher
            .send(event(EventKind::StageCompleted, "pending_antithesis"))
            .expect("publish");
        for feed in &mut feeds {
            let got = within("a shared event", feed.events.recv()).await;
            assert_eq!(got.expect("event").kind, EventKind::StageCompleted);
        }
        // Another session has its own subscription.
        let other = watches
            .feed(SessionId::new(), redis.subscribe())
            .await
            .expect("feed");
        assert_eq!(redis.subscribed.load(Ordering::SeqCst), 2);
        drop(other);

        feeds.truncate(1);
        assert_eq!(watches.feeds(), 1, "one watcher left keeps the feed");
        feeds.clear();
        assert_eq!(watches.feeds(), 0);
        // The pump ends and drops its subscription.
        within("the subscription to close", publisher.closed()).await;
        let _fresh = watches
            .feed(session, redis.subscribe())
            .await
            .expect("feed");
        assert_eq!(redis.subscribed.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_dropped_subscription_closes_its_watchers_and_the_next_subscribes_again() {
        let watches = Watches::new(0);
        let redis = FakeRedis::default();
        let session = SessionId::new();
        let mut feed = watches
            .feed(session, redis.subscribe())
            .await
            .expect("feed");
        drop(redis.publisher(0));
        redis
            .publishers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let closed = within("the feed to close", feed.events.recv()).await;
        assert!(matches!(closed, Err(RecvError::Closed)), "{closed:?}");
        let _next = watches
            .feed(session, redis.subscribe())
            .await
            .expect("feed");
        assert_eq!(redis.subscribed.load(Ordering::SeqCst), 2);
    }

    fn snapshot() -> SessionEvent {
        convert::event(event(EventKind::Snapshot, "running_thesis"))
    }

    /// Longer than any of these tests waits: no heartbeat comes.
    const QUIET: Duration = Duration::from_secs(3600);

    fn numbered(sequence: u64) -> ProgressEvent {
        ProgressEvent {
            sequence,
            ..event(EventKind::JobStatus, "running_thesis")
        }
    }

    #[tokio::test]
    async fn live_events_the_opening_covered_are_not_sent_again() {
        let watches = Watches::new(0);
        let redis = FakeRedis::default();
        let feed = watches
            .feed(SessionId::new(), redis.subscribe())
            .await
            .expect("feed");
        let permit = watches.admit(UserId::new()).expect("permit");
        let opening = Opening {
            events: vec![convert::event(numbered(4)), convert::event(numbered(5))],
            sequence: 5,
            ends: false,
        };
        let (tx, mut rx) = mpsc::channel(16);
        let _task = tokio::spawn(forward(
            String::new(),
            opening,
            feed,
            permit,
            tx,
            CancellationToken::new(),
            QUIET,
        ));
        for n in [4, 5, 6, 7] {
            redis.publisher(0).send(numbered(n)).expect("publish");
        }
        let mut got = Vec::new();
        while got.len() < 4 {
            let item = within("an event", rx.recv()).await.expect("open");
            got.push(item.expect("event").sequence);
        }
        assert_eq!(got, [4, 5, 6, 7]);
    }

    #[tokio::test]
    async fn a_quiet_stream_gets_heartbeats_with_the_last_sequence_sent() {
        let watches = Watches::new(0);
        let redis = FakeRedis::default();
        let feed = watches
            .feed(SessionId::new(), redis.subscribe())
            .await
            .expect("feed");
        let permit = watches.admit(UserId::new()).expect("permit");
        let (tx, mut rx) = mpsc::channel(16);
        let _task = tokio::spawn(forward(
            "s".into(),
            Opening::snapshot(SessionEvent {
                sequence: 9,
                ..snapshot()
            }),
            feed,
            permit,
            tx,
            CancellationToken::new(),
            Duration::from_millis(50),
        ));
        let first = within("the snapshot", rx.recv()).await.expect("open");
        assert_eq!(first.expect("snapshot").kind, "snapshot");
        for _ in 0..2 {
            let beat = within("a heartbeat", rx.recv()).await.expect("open");
            let beat = beat.expect("heartbeat");
            assert_eq!(
                (beat.kind.as_str(), beat.sequence, beat.session_id.as_str()),
                ("heartbeat", 9, "s")
            );
        }
    }

    #[tokio::test]
    async fn a_lagging_watcher_is_told_to_watch_again() {
        let watches = Watches::new(1);
        let redis = FakeRedis::default();
        let session = SessionId::new();
        let feed = watches
            .feed(session, redis.subscribe())
            .await
            .expect("feed");
        let permit = watches.admit(UserId::new()).expect("permit");
        let publisher = redis.publisher(0);
        for n in 0..FEED_CAPACITY + 10 {
            publisher
                .send(ProgressEvent {
                    message: n.to_string(),
                    ..event(EventKind::JobStatus, "running_thesis")
                })
                .expect("publish");
        }
        // Let the pump overrun the watcher's place before it reads anything.
        let keeper = watches
            .feed(session, redis.subscribe())
            .await
            .expect("a second watcher");
        let mut keeper = keeper;
        within("the pump to pass the watcher", async {
            while keeper
                .events
                .recv()
                .await
                .is_ok_and(|e| e.message != (FEED_CAPACITY + 9).to_string())
            {}
        })
        .await;
        let (tx, mut rx) = mpsc::channel(1024);
        let shutdown = CancellationToken::new();
        within(
            "the lagging stream to end",
            forward(
                String::new(),
                Opening::snapshot(snapshot()),
                feed,
                permit,
                tx,
                shutdown,
                QUIET,
            ),
        )
        .await;
        let mut last = None;
        while let Ok(item) = rx.try_recv() {
            last = Some(item);
        }
        let status = last.expect("items").expect_err("ends with an error");
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(
            error_status::reason(&status).as_deref(),
            Some("PROGRESS_FEED_CLOSED")
        );
    }

    #[tokio::test]
    async fn a_stream_ends_at_review_and_frees_its_slot() {
        let watches = Watches::new(1);
        let redis = FakeRedis::default();
        let user = UserId::new();
        let session = SessionId::new();
        let feed = watches
            .feed(session, redis.subscribe())
            .await
            .expect("feed");
        let permit = watches.admit(user).expect("permit");
        assert!(watches.admit(user).is_err());
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(forward(
            String::new(),
            Opening::snapshot(snapshot()),
            feed,
            permit,
            tx,
            CancellationToken::new(),
            QUIET,
        ));
        redis
            .publisher(0)
            .send(event(EventKind::StageCompleted, SessionStatus::REVIEW))
            .expect("publish");
        within("the stream to end", task).await.expect("task");
        let mut kinds = Vec::new();
        while let Ok(item) = rx.try_recv() {
            kinds.push(item.expect("event").kind);
        }
        assert_eq!(kinds, ["snapshot", "stage_completed"]);
        let _next = watches.admit(user).expect("the slot is free again");
        assert_eq!(watches.feeds(), 0);
    }
}
