//! One queue's consumer: reconnects with back-off, handles up to `prefetch`
//! deliveries at once, and settles each one only after its handler returns
//! (the handler commits first, so an ack always follows the commit).

use crate::{CancellationToken, retry_with_backoff, sleep_or_shutdown};
use dialectic_queue::{Delivery, Publisher, Subscription, Topology};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::task::JoinSet;

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
}

#[async_trait::async_trait]
pub trait Handler: Send + Sync + 'static {
    async fn handle(&self, delivery: &Delivery) -> Disposition;
}

pub struct ConsumerOptions {
    pub amqp_url: String,
    pub topology: Topology,
    pub routing_key: &'static str,
    pub prefetch: u16,
    pub tag: String,
    /// How long in-flight deliveries may run after shutdown is requested.
    pub grace: Duration,
    /// Pause before a requeue, so a message failing on a down dependency does not spin.
    pub requeue_delay: Duration,
}

/// Consumes until shutdown. `connected` mirrors whether the broker is reachable,
/// for readiness.
pub async fn run_consumer(
    options: ConsumerOptions,
    handler: Arc<dyn Handler>,
    connected: Arc<AtomicBool>,
    shutdown: CancellationToken,
) {
    let queue = options.topology.queue(options.routing_key);
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
                if !sleep_or_shutdown(Duration::from_secs(1), &shutdown).await {
                    break;
                }
                continue;
            }
        };
        connected.store(true, Ordering::Relaxed);
        tracing::info!(%queue, prefetch = options.prefetch, "consuming");
        let publisher = Arc::new(publisher);
        let mut in_flight = JoinSet::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                next = subscription.next() => match next {
                    Ok(delivery) => {
                        let handler = handler.clone();
                        let publisher = publisher.clone();
                        let topology = options.topology.clone();
                        let requeue_delay = options.requeue_delay;
                        in_flight.spawn(async move {
                            let disposition = handler.handle(&delivery).await;
                            settle(&delivery, disposition, &publisher, &topology, requeue_delay).await;
                        });
                    }
                    Err(e) => {
                        tracing::warn!(%queue, error = %e, "consumer lost its channel; reconnecting");
                        connected.store(false, Ordering::Relaxed);
                        break;
                    }
                },
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            }
        }
        // Stop receiving first, then let what was taken finish; anything
        // unacked when the channel closes goes back to the queue.
        let _ = subscription
            .channel
            .basic_cancel(options.tag.as_str().into(), Default::default())
            .await;
        let drained = tokio::time::timeout(options.grace, async {
            while in_flight.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(%queue, "grace period over; abandoning in-flight deliveries to redelivery");
            in_flight.abort_all();
        }
        let _ = connection.close(200, "shutting down".into()).await;
    }
    connected.store(false, Ordering::Relaxed);
}

async fn settle(
    delivery: &Delivery,
    disposition: Disposition,
    publisher: &Publisher,
    topology: &Topology,
    requeue_delay: Duration,
) {
    let result = match &disposition {
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
