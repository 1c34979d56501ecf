//! One queue's consumer: reconnects with back-off and runs at most `prefetch`
//! handlers at once. A handler settles its delivery after it commits (or, for a
//! job worker, as soon as its claim commits: see [`Disposition::Settled`]).
//!
//! Why deliveries can wait here: a job worker acks on claim, so the broker may
//! push the next `prefetch` messages while every slot is busy with a long model
//! call. Such a waiting delivery is unacked, and RabbitMQ closes a channel that
//! holds one past `consumer_timeout` (30 min by default). A delivery that waited
//! `recycle_after` is therefore published again and acked: the copy goes to the
//! back of the queue with a fresh delivery count (a nack would count against
//! the delivery limit), and a duplicate dispatch is a no-op for the claim.

use crate::{CancellationToken, retry_with_backoff, sleep_or_shutdown};
use dialectic_config::Settings;
use dialectic_queue::{Delivery, Publisher, Subscription, Topology};
use dialectic_telemetry::metrics;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

static CHANNEL_LOSSES: AtomicU64 = AtomicU64::new(0);

/// How many times, in this process, a consumer's channel closed under it (the
/// broker went away, or closed the channel, e.g. for an ack held past
/// `consumer_timeout`). Each loss returns that channel's unsettled deliveries.
pub fn channel_losses() -> u64 {
    CHANNEL_LOSSES.load(Ordering::Relaxed)
}

/// What to do with a delivery once it has been handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Done (or a duplicate / stale message that needed nothing).
    Ack,
    /// Failed for a reason that may pass (a dependency is down): deliver again.
    /// The queue's delivery limit dead-letters a message that never succeeds.
    Requeue,
    /// Can never succeed (undecodable, unknown version): straight to the dead queue.
    DeadLetter(String),
    /// The handler acked the delivery itself, before its work was over.
    Settled,
}

#[async_trait::async_trait]
pub trait Handler: Send + Sync + 'static {
    async fn handle(&self, delivery: &Delivery) -> Disposition;
}

pub struct ConsumerOptions {
    pub amqp_url: String,
    pub topology: Topology,
    pub routing_key: &'static str,
    /// Handlers running at once; also the channel's prefetch.
    pub prefetch: u16,
    pub tag: String,
    /// How long in-flight deliveries may run after shutdown is requested.
    pub grace: Duration,
    /// Cancelled when the grace is over: handlers that can hand their work back
    /// (release its lease and hold) do so now, within [`HAND_BACK_WINDOW`].
    pub hand_back: CancellationToken,
    /// Pause before a requeue, so a message failing on a down dependency does not spin.
    pub requeue_delay: Duration,
    /// A delivery waiting this long for a free slot is published again and acked.
    pub recycle_after: Duration,
}

impl ConsumerOptions {
    /// Options for `routing_key` from the service's settings; `tag` names the
    /// consumer (the process id is appended, so replicas differ).
    pub fn new(settings: &Settings, routing_key: &'static str, prefetch: u16, tag: &str) -> Self {
        Self {
            amqp_url: settings.amqp.url.clone(),
            topology: crate::topology(settings),
            routing_key,
            prefetch: prefetch.max(1),
            tag: format!("{tag}-{routing_key}-{}", std::process::id()),
            grace: Duration::from_secs(settings.shutdown_grace_secs),
            hand_back: CancellationToken::new(),
            requeue_delay: Duration::from_millis(500),
            recycle_after: Duration::from_millis(settings.amqp.recycle_after_ms.max(10)),
        }
    }
}

/// How long handlers get to hand their work back once the grace is over; the
/// chart's termination grace leaves room for it.
pub const HAND_BACK_WINDOW: Duration = Duration::from_secs(10);

/// Consumes until shutdown or a drain request. `connected` mirrors whether the
/// broker is reachable, for readiness. Handlers keep running across reconnects:
/// a lost channel only returns the deliveries that were not yet settled.
pub async fn run_consumer(
    options: ConsumerOptions,
    handler: Arc<dyn Handler>,
    connected: Arc<AtomicBool>,
    shutdown: CancellationToken,
) {
    let shutdown = crate::stop_taking_work(&shutdown);
    let queue = options.topology.queue(options.routing_key);
    let slots = Arc::new(Semaphore::new(usize::from(options.prefetch.max(1))));
    let mut in_flight = JoinSet::new();
    while !shutdown.is_cancelled() {
        let Some(connection) = retry_with_backoff("rabbitmq", &shutdown, || {
            dialectic_queue::connect(&options.amqp_url)
        })
        .await
        else {
            break;
        };
        let setup = async {
            let channel = connection.create_channel().await?;
            options.topology.declare(&channel).await?;
            let publisher = Publisher::new(&connection, &options.topology).await?;
            let subscription = Subscription::open(
                &connection,
                &options.topology,
                options.routing_key,
                options.prefetch,
                &options.tag,
            )
            .await?;
            Ok::<_, dialectic_queue::QueueError>((publisher, subscription))
        };
        let (publisher, mut subscription) = match setup.await {
            Ok(parts) => parts,
            Err(e) => {
                tracing::warn!(%queue, error = %e, "consumer setup failed");
                connected.store(false, Ordering::Relaxed);
                let _ = connection.close(200, "setup failed".into()).await;
                if !sleep_or_shutdown(Duration::from_secs(1), &shutdown).await {
                    break;
                }
                continue;
            }
        };
        connected.store(true, Ordering::Relaxed);
        tracing::info!(%queue, prefetch = options.prefetch, "consuming");
        let publisher = Arc::new(publisher);
        let mut waiting: VecDeque<(Instant, Delivery)> = VecDeque::new();
        let mut recycle_tick =
            tokio::time::interval((options.recycle_after / 4).max(Duration::from_millis(50)));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                next = subscription.next() => match next {
                    Ok(delivery) => {
                        if let Some(lag) = dialectic_queue::time_in_queue(&delivery) {
                            metrics::QUEUE_LAG.observe(&[&queue], lag.as_secs_f64());
                        }
                        waiting.push_back((Instant::now(), delivery))
                    }
                    Err(e) => {
                        tracing::warn!(%queue, error = %e, "consumer lost its channel; reconnecting");
                        CHANNEL_LOSSES.fetch_add(1, Ordering::Relaxed);
                        connected.store(false, Ordering::Relaxed);
                        break;
                    }
                },
                permit = slots.clone().acquire_owned(), if !waiting.is_empty() => {
                    let (Ok(permit), Some((_, delivery))) = (permit, waiting.pop_front()) else {
                        continue;
                    };
                    let handler = handler.clone();
                    let publisher = publisher.clone();
                    let topology = options.topology.clone();
                    let requeue_delay = options.requeue_delay;
                    let queue = queue.clone();
                    in_flight.spawn(async move {
                        let disposition = handler.handle(&delivery).await;
                        let label = match &disposition {
                            Disposition::Ack => "ack",
                            Disposition::Requeue => "requeue",
                            Disposition::DeadLetter(_) => "dead_letter",
                            Disposition::Settled => "settled",
                        };
                        metrics::MESSAGES_CONSUMED.inc(&[&queue, label]);
                        settle(&delivery, disposition, &publisher, &topology, requeue_delay).await;
                        drop(permit);
                    });
                }
                _ = recycle_tick.tick(), if !waiting.is_empty() => {
                    while waiting.front().is_some_and(|(since, _)| since.elapsed() >= options.recycle_after) {
                        if let Some((_, delivery)) = waiting.pop_front() {
                            recycle(&delivery, &publisher).await;
                        }
                    }
                }
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            }
        }
        // Stop receiving; what waited for a slot goes back to the queue for
        // another replica (or this one after reconnecting).
        let _ = subscription
            .channel
            .basic_cancel(options.tag.as_str().into(), Default::default())
            .await;
        for (_, delivery) in waiting.drain(..) {
            let _ = dialectic_queue::requeue(&delivery).await;
        }
        if shutdown.is_cancelled() {
            drain(&mut in_flight, &options, &queue).await;
        }
        let _ = connection.close(200, "consumer stopping".into()).await;
    }
    drain(&mut in_flight, &options, &queue).await;
    connected.store(false, Ordering::Relaxed);
}

/// Lets running handlers finish within the grace, then asks the rest to hand
/// their work back; what still runs after that is abandoned to its lease.
async fn drain(in_flight: &mut JoinSet<()>, options: &ConsumerOptions, queue: &str) {
    if finish_within(in_flight, options.grace).await {
        return;
    }
    tracing::warn!(%queue, running = in_flight.len(), "grace period over; handing in-flight work back");
    options.hand_back.cancel();
    if !finish_within(in_flight, HAND_BACK_WINDOW).await {
        tracing::warn!(%queue, "abandoning in-flight work to its lease");
        in_flight.abort_all();
    }
}

async fn finish_within(in_flight: &mut JoinSet<()>, limit: Duration) -> bool {
    tokio::time::timeout(limit, async {
        while in_flight.join_next().await.is_some() {}
    })
    .await
    .is_ok()
}

/// Publishes a copy of a delivery that waited too long for a slot, then acks
/// the original; on failure the original stays unacked and is tried again later.
async fn recycle(delivery: &Delivery, publisher: &Publisher) {
    match dialectic_queue::requeue_at_back(publisher, delivery).await {
        Ok(()) => {
            tracing::info!(routing_key = %delivery.routing_key, "delivery waited too long for a slot; re-queued at the back")
        }
        Err(e) => tracing::warn!(error = %e, "could not recycle a waiting delivery"),
    }
}

async fn settle(
    delivery: &Delivery,
    disposition: Disposition,
    publisher: &Publisher,
    topology: &Topology,
    requeue_delay: Duration,
) {
    let result = match &disposition {
        Disposition::Settled => return,
        Disposition::Ack => dialectic_queue::ack(delivery).await,
        Disposition::Requeue => {
            tokio::time::sleep(requeue_delay).await;
            dialectic_queue::requeue(delivery).await
        }
        Disposition::DeadLetter(reason) => {
            tracing::warn!(routing_key = %delivery.routing_key, %reason, "dead-lettering message");
            dialectic_queue::dead_letter(publisher, topology, delivery, reason).await
        }
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, ?disposition, "could not settle delivery; the broker will redeliver it");
    }
}
