//! The outbox relay: the fallback behind each writer's courier. It polls for
//! rows older than `min_age` (a writer that died before publishing, a refused
//! message), publishes them with confirms and deletes them in the transaction
//! that took them. A crash between the broker's confirm and the commit only
//! republishes (consumers are idempotent); nothing is ever lost.

use dialectic_queue::{Publisher, Topology};
use dialectic_runtime::courier::open_publisher;
use dialectic_runtime::{CancellationToken, sleep_or_shutdown};
use dialectic_store::{Store, outbox};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
enum RelayError {
    #[error("store: {0}")]
    Store(#[from] dialectic_store::StoreError),
    #[error("publish: {0}")]
    Publish(#[from] dialectic_queue::QueueError),
}

pub struct RelayOptions {
    pub amqp_url: String,
    pub topology: Topology,
    pub batch: i64,
    /// Rows younger than this are their writer's to publish.
    pub min_age: Duration,
    pub poll: Duration,
}

impl RelayOptions {
    /// `amqp.relay_after_ms` is the rows' minimum age; the relay looks four
    /// times within it (and every 50 ms when writers do not publish at all).
    pub fn new(settings: &dialectic_config::Settings, topology: Topology) -> Self {
        let min_age = Duration::from_millis(settings.amqp.relay_after_ms);
        Self {
            amqp_url: settings.amqp.url.clone(),
            topology,
            batch: settings.planner.outbox_batch,
            min_age,
            poll: (min_age / 4).clamp(Duration::from_millis(50), Duration::from_millis(500)),
        }
    }
}

pub async fn run_relay(
    store: Store,
    options: RelayOptions,
    connected: Arc<AtomicBool>,
    shutdown: CancellationToken,
) {
    while !shutdown.is_cancelled() {
        let Some(opened) = open_publisher(&options.amqp_url, &options.topology, &shutdown).await
        else {
            break;
        };
        let (connection, publisher) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                tracing::warn!(error = %e, "outbox relay could not open a channel");
                if !sleep_or_shutdown(Duration::from_secs(1), &shutdown).await {
                    break;
                }
                continue;
            }
        };
        connected.store(true, Ordering::Relaxed);
        loop {
            match drain(&store, &publisher, &options).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    published = n,
                    "outbox relay published rows their writers left"
                ),
                Err(RelayError::Publish(e)) => {
                    tracing::warn!(error = %e, "outbox relay lost the broker; reconnecting");
                    connected.store(false, Ordering::Relaxed);
                    break;
                }
                Err(RelayError::Store(e)) => {
                    tracing::warn!(error = %e, "outbox relay cannot read the outbox");
                }
            }
            if !sleep_or_shutdown(options.poll, &shutdown).await {
                break;
            }
        }
        let _ = connection.close(200, "shutting down".into()).await;
    }
    connected.store(false, Ordering::Relaxed);
}

/// Publishes everything in the outbox; returns how many rows went out.
async fn drain(
    store: &Store,
    publisher: &Publisher,
    options: &RelayOptions,
) -> Result<usize, RelayError> {
    let mut total = 0;
    loop {
        let mut tx = store.begin().await?;
        let rows = outbox::take_batch(&mut tx, options.batch, options.min_age).await?;
        if rows.is_empty() {
            return Ok(total);
        }
        // Confirms are awaited together: one round trip for the batch, not one per row.
        let publishes = rows.iter().map(|row| {
            publisher.publish(&row.routing_key, &row.payload, row.traceparent.as_deref())
        });
        futures::future::try_join_all(publishes).await?;
        tx.commit()
            .await
            .map_err(dialectic_store::StoreError::from)?;
        total += rows.len();
    }
}
