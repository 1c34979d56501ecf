//! The outbox relay: publishes rows with publisher confirms and deletes them in
//! the same transaction that took them. A crash between the broker's confirm and
//! the commit only republishes (consumers are idempotent); nothing is ever lost.

use dialectic_queue::{Publisher, Topology};
use dialectic_runtime::{CancellationToken, retry_with_backoff, sleep_or_shutdown};
use dialectic_store::{Store, outbox};
use sqlx::postgres::PgListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub const OUTBOX_CHANNEL: &str = "dialectic_outbox";

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
    /// Fallback poll when no NOTIFY arrives (e.g. the listener connection dropped).
    pub poll: Duration,
}

pub async fn run_relay(
    store: Store,
    options: RelayOptions,
    connected: Arc<AtomicBool>,
    shutdown: CancellationToken,
) {
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
            Publisher::new(&connection, &options.topology).await
        };
        let publisher = match setup.await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "outbox relay could not open a channel");
                if !sleep_or_shutdown(Duration::from_secs(1), &shutdown).await {
                    break;
                }
                continue;
            }
        };
        connected.store(true, Ordering::Relaxed);
        let mut listener: Option<PgListener> = None;
        loop {
            if listener.is_none() {
                listener = listen(&store).await;
            }
            match drain(&store, &publisher, options.batch).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(published = n, "outbox drained"),
                Err(RelayError::Publish(e)) => {
                    tracing::warn!(error = %e, "outbox relay lost the broker; reconnecting");
                    connected.store(false, Ordering::Relaxed);
                    break;
                }
                Err(RelayError::Store(e)) => {
                    tracing::warn!(error = %e, "outbox relay cannot read the outbox");
                    listener = None;
                }
            }
            let wait = async {
                match listener.as_mut() {
                    Some(l) => {
                        if let Err(e) = l.recv().await {
                            tracing::debug!(error = %e, "outbox listener dropped");
                            return false;
                        }
                        true
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                alive = wait => if !alive { listener = None; },
                _ = tokio::time::sleep(options.poll) => {}
            }
        }
        let _ = connection.close(200, "shutting down".into()).await;
    }
    connected.store(false, Ordering::Relaxed);
}

async fn listen(store: &Store) -> Option<PgListener> {
    let mut listener = PgListener::connect_with(store.pool()).await.ok()?;
    listener.listen(OUTBOX_CHANNEL).await.ok()?;
    Some(listener)
}

/// Publishes everything in the outbox; returns how many rows went out.
async fn drain(store: &Store, publisher: &Publisher, batch: i64) -> Result<usize, RelayError> {
    let mut total = 0;
    loop {
        let mut tx = store.begin().await?;
        let rows = outbox::take_batch(&mut tx, batch).await?;
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
