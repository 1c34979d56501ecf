//! The outbox's fast path: a writer hands the rows it enqueued to its courier
//! right after the transaction commits; the courier publishes them (confirmed)
//! and deletes them in batches. It is best-effort by design: a parcel it drops
//! (broker down, queue full, process killed) is still an outbox row, which the
//! relay takes once it is older than the relay's `min_age`. A crash after the
//! publish but before the delete only lets the relay publish a duplicate, which
//! consumers treat as the no-op it is. So a message reaches the broker one
//! confirm after its commit instead of after a NOTIFY, a relay transaction and
//! the relay's own publish.

use crate::{CancellationToken, retry_with_backoff, sleep_or_shutdown};
use dialectic_queue::{Publisher, Topology};
use dialectic_store::Store;
use dialectic_store::outbox::{self, OutboxRow};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Parcels waiting for the broker; beyond this the relay carries the rest.
const QUEUE_DEPTH: usize = 4096;
/// Parcels published together (their confirms awaited at once).
const BATCH: usize = 256;
/// How long published rows wait to be forgotten together: deleting each
/// confirm's few rows at once cost about one transaction per job. Capped at
/// half of `give_up_after`, so a row is gone before the relay would take it.
const FORGET_LINGER: Duration = Duration::from_millis(200);

struct Parcel {
    row: OutboxRow,
    posted: Instant,
}

/// A handle to the background publisher; cloning it is cheap. The default
/// courier is off: every row waits for the relay.
#[derive(Clone, Default)]
pub struct Courier {
    parcels: Option<mpsc::Sender<Parcel>>,
}

impl Courier {
    /// The service's courier as its settings ask (`amqp.relay_after_ms`; 0 is
    /// off). Parcels are given up at half that age, so the courier and the
    /// relay rarely publish one row both.
    pub fn from_settings(
        store: &Store,
        settings: &dialectic_config::Settings,
        shutdown: &CancellationToken,
    ) -> (Self, Option<JoinHandle<()>>) {
        if settings.amqp.relay_after_ms == 0 {
            return (Self::default(), None);
        }
        let (courier, task) = Self::start(
            store.clone(),
            settings.amqp.url.clone(),
            crate::topology(settings),
            Duration::from_millis(settings.amqp.relay_after_ms / 2),
            shutdown.clone(),
        );
        (courier, Some(task))
    }

    /// Publishes to `topology` on its own connection until `shutdown`. A parcel
    /// older than `give_up_after` (set below the relay's `min_age`) is left to
    /// the relay rather than published late beside it.
    pub fn start(
        store: Store,
        amqp_url: String,
        topology: Topology,
        give_up_after: Duration,
        shutdown: CancellationToken,
    ) -> (Self, JoinHandle<()>) {
        let (sender, parcels) = mpsc::channel(QUEUE_DEPTH);
        let (delivered, sweep) = mpsc::unbounded_channel();
        let running = Running {
            amqp_url,
            topology,
            give_up_after,
            parcels,
            delivered,
        };
        let task = tokio::spawn(async move {
            let linger = FORGET_LINGER.min(give_up_after / 2);
            let sweeper = tokio::spawn(forget_delivered(store, sweep, linger));
            running.run(shutdown).await;
            // The sweeper ends once `running` (its sender) is gone.
            if let Err(e) = sweeper.await {
                tracing::warn!(error = %e, "outbox sweeper stopped abnormally");
            }
        });
        (
            Self {
                parcels: Some(sender),
            },
            task,
        )
    }

    /// Call after the transaction that enqueued `rows` committed. Never waits:
    /// what the courier cannot take now goes out through the relay.
    pub fn post(&self, rows: impl IntoIterator<Item = OutboxRow>) {
        let Some(parcels) = &self.parcels else {
            return;
        };
        let posted = Instant::now();
        for row in rows {
            if parcels.try_send(Parcel { row, posted }).is_err() {
                tracing::debug!("courier busy or stopped; the relay will publish the rest");
                return;
            }
        }
    }
}

struct Running {
    amqp_url: String,
    topology: Topology,
    give_up_after: Duration,
    parcels: mpsc::Receiver<Parcel>,
    delivered: mpsc::UnboundedSender<Vec<i64>>,
}

impl Running {
    async fn run(mut self, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            let Some(opened) = open_publisher(&self.amqp_url, &self.topology, &shutdown).await
            else {
                return;
            };
            match opened {
                Ok((connection, publisher)) => {
                    self.publish_until_lost(&publisher, &shutdown).await;
                    let _ = connection.close(200, "courier stopping".into()).await;
                }
                Err(e) => tracing::warn!(error = %e, "courier could not open a channel"),
            }
            if !sleep_or_shutdown(Duration::from_secs(1), &shutdown).await {
                return;
            }
        }
    }

    async fn publish_until_lost(&mut self, publisher: &Publisher, shutdown: &CancellationToken) {
        loop {
            let first = tokio::select! {
                _ = shutdown.cancelled() => return,
                parcel = self.parcels.recv() => match parcel {
                    Some(p) => p,
                    None => return,
                },
            };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match self.parcels.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            batch.retain(|p| p.posted.elapsed() < self.give_up_after);
            match publish_rows(publisher, batch.iter().map(|p| &p.row)).await {
                Ok(ids) => {
                    if !ids.is_empty() && self.delivered.send(ids).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "courier lost the broker; the relay publishes what it held");
                    return;
                }
            }
        }
    }
}

/// Connects (with back-off; None once `shutdown` is cancelled), declares the
/// topology and opens a channel in confirm mode: what every outbox publisher
/// (courier or relay) starts from.
pub async fn open_publisher(
    amqp_url: &str,
    topology: &Topology,
    shutdown: &CancellationToken,
) -> Option<Result<(dialectic_queue::Connection, Publisher), dialectic_queue::QueueError>> {
    let connection =
        retry_with_backoff("rabbitmq", shutdown, || dialectic_queue::connect(amqp_url)).await?;
    let setup = async {
        let channel = connection.create_channel().await?;
        topology.declare(&channel).await?;
        Publisher::new(&connection, topology).await
    };
    Some(match setup.await {
        Ok(publisher) => Ok((connection, publisher)),
        Err(e) => {
            let _ = connection.close(200, "setup failed".into()).await;
            Err(e)
        }
    })
}

/// Publishes rows with their confirms awaited together; returns the ids the
/// broker confirmed, which are now safe to forget. Err when the channel broke.
pub async fn publish_rows<'a>(
    publisher: &Publisher,
    rows: impl IntoIterator<Item = &'a OutboxRow>,
) -> Result<Vec<i64>, dialectic_queue::QueueError> {
    let publishes = rows.into_iter().map(|row| async move {
        let sent = publisher
            .publish(&row.routing_key, &row.payload, row.traceparent.as_deref())
            .await;
        (row.id, sent)
    });
    let mut confirmed = Vec::new();
    for (id, sent) in futures::future::join_all(publishes).await {
        match sent {
            Ok(()) => confirmed.push(id),
            // A refused message stays in the outbox for the relay to retry.
            Err(e) if publisher.is_usable() => {
                tracing::warn!(error = %e, id, "broker refused an outbox message")
            }
            Err(e) => return Err(e),
        }
    }
    Ok(confirmed)
}

/// Deletes published rows, batching whatever was confirmed within `linger`
/// of the first, so one statement forgets many messages.
async fn forget_delivered(
    store: Store,
    mut delivered: mpsc::UnboundedReceiver<Vec<i64>>,
    linger: Duration,
) {
    while let Some(mut ids) = delivered.recv().await {
        tokio::time::sleep(linger).await;
        while let Ok(more) = delivered.try_recv() {
            ids.extend(more);
        }
        if let Err(e) = outbox::forget(store.pool(), &ids).await {
            // The rows stay; the relay publishes them again, which is harmless.
            tracing::warn!(error = %e, count = ids.len(), "could not forget published outbox rows");
        }
    }
}
