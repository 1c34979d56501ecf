//! Readiness, and what the dependencies are doing, published apart.
//!
//! Readiness (`""` and the service's own name in `grpc.health.v1`, what the
//! kubelet's readiness probe and a Service's endpoints follow) means this
//! process takes traffic: started, not draining, and not facing a database
//! schema it cannot run against. A dependency that stops answering does not
//! make a pod unready: a 5-second Postgres failover would otherwise empty
//! every Service at once, reads that need no Postgres would go with them, and
//! the PodDisruptionBudgets would block node drains. The calls that need the
//! missing dependency fail on their own, with UNAVAILABLE and its reason.
//!
//! What each dependency does is published on the `dialectic.dependencies`
//! health service, as the `dialectic_dependency_up` gauge, and as a log line
//! whenever it changes.

use crate::drain_requested;
use dialectic_blob::BlobStore;
use dialectic_store::{SchemaStatus, Store};
use dialectic_telemetry::metrics;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// SERVING while every dependency of the service answers.
pub const DEPENDENCIES_SERVICE: &str = "dialectic.dependencies";

/// The health statuses one service publishes.
#[derive(Clone)]
pub struct Health {
    reporter: HealthReporter,
    service: String,
}

fn status(serving: bool) -> ServingStatus {
    if serving {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}

impl Health {
    pub(crate) fn new(reporter: HealthReporter, service: &str) -> Self {
        Self {
            reporter,
            service: service.to_string(),
        }
    }

    /// Sets the overall ("") and the named service's status.
    pub async fn set_ready(&self, ready: bool) {
        self.reporter.set_service_status("", status(ready)).await;
        self.reporter
            .set_service_status(self.service.as_str(), status(ready))
            .await;
    }

    async fn set_dependencies(&self, up: bool) {
        self.reporter
            .set_service_status(DEPENDENCIES_SERVICE, status(up))
            .await;
    }
}

/// A dependency that did not answer, or answered with what this build
/// cannot run against.
#[derive(Debug, Clone, PartialEq)]
pub struct Unmet {
    pub dependency: &'static str,
    pub reason: String,
    /// True when taking traffic would be wrong, not merely failing: a schema
    /// this build cannot use. A dependency that is down is not such a case.
    pub refuses_traffic: bool,
}

impl std::fmt::Display for Unmet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.dependency, self.reason)
    }
}

fn down(dependency: &'static str, reason: impl ToString) -> Unmet {
    Unmet {
        dependency,
        reason: reason.to_string(),
        refuses_traffic: false,
    }
}

/// Postgres answers and its schema is the one this build expects, or a newer
/// one that only expanded it (a rolling upgrade in progress).
pub async fn check_store(store: &Store) -> Result<(), Unmet> {
    let refused = |reason: String| Unmet {
        dependency: "postgres",
        reason,
        refuses_traffic: true,
    };
    match store.schema_status().await {
        Ok(SchemaStatus::UpToDate | SchemaStatus::Compatible { .. }) => Ok(()),
        Ok(SchemaStatus::Behind { database, code }) => Err(refused(format!(
            "database schema is at {database}, this build needs {code}: run `dialecticd migrate`"
        ))),
        Ok(SchemaStatus::Ahead { database, code }) => Err(refused(format!(
            "database schema {database} dropped what this build ({code}) needs (schema_compatibility); refusing to run against it"
        ))),
        Err(e) => Err(down("postgres", e)),
    }
}

/// How long Postgres has to answer a connection of the check's own: with the
/// pool's acquire timeout before it, inside the checks' 5 s.
const UNPOOLED_PING_TIMEOUT: Duration = Duration::from_millis(1500);

/// Whether Postgres answers outside the pool, within [`UNPOOLED_PING_TIMEOUT`].
async fn answers_unpooled(store: &Store) -> bool {
    matches!(
        tokio::time::timeout(UNPOOLED_PING_TIMEOUT, store.ping_unpooled()).await,
        Ok(Ok(()))
    )
}

/// What a service depends on.
#[derive(Clone, Default)]
pub struct Dependencies {
    pub store: Option<Store>,
    pub blob: Option<BlobStore>,
    /// Filled by [`crate::supervise`] once Redis answers; connecting happens in the background.
    pub cache: Option<Arc<std::sync::OnceLock<dialectic_cache::Cache>>>,
    /// One flag per broker connection (consumers, relay), set while connected.
    pub broker: Vec<Arc<AtomicBool>>,
    /// Set by each round of checks while Postgres is down: it refuses or
    /// drops connections of its own, not merely a pool whose connections are
    /// all busy. The gateway reads it before answering from what it
    /// remembers (its last-known key owners).
    pub postgres_down: Arc<AtomicBool>,
}

impl Dependencies {
    /// A new broker flag for one consumer or relay to keep up to date.
    pub fn broker_flag(&mut self) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        self.broker.push(flag.clone());
        flag
    }

    /// Every dependency this service has that does not answer, each also
    /// published as `dialectic_dependency_up`.
    pub async fn check(&self) -> Vec<Unmet> {
        let mut results = Vec::new();
        if let Some(store) = &self.store {
            let result = check_store(store).await;
            let down = match &result {
                Err(unmet) if !unmet.refuses_traffic => !answers_unpooled(store).await,
                _ => false,
            };
            self.postgres_down.store(down, Ordering::Relaxed);
            results.push(("postgres", result));
        }
        if !self.broker.is_empty() {
            let connected = self.broker.iter().all(|up| up.load(Ordering::Relaxed));
            let result = if connected {
                Ok(())
            } else {
                Err(down("rabbitmq", "not connected"))
            };
            results.push(("rabbitmq", result));
        }
        if let Some(cache) = &self.cache {
            let result = match cache.get() {
                Some(c) => c.ping().await.map_err(|e| down("redis", e)),
                None => Err(down("redis", "not connected")),
            };
            results.push(("redis", result));
        }
        if let Some(blob) = &self.blob {
            results.push(("s3", blob.check().await.map_err(|e| down("s3", e))));
        }
        for (dependency, result) in &results {
            let up = if result.is_ok() { 1.0 } else { 0.0 };
            metrics::DEPENDENCY_UP.set(&[dependency], up);
        }
        results.into_iter().filter_map(|(_, r)| r.err()).collect()
    }
}

/// What one round of checks concluded.
#[derive(Debug, Clone, PartialEq)]
struct Verdict {
    ready: bool,
    unmet: Vec<String>,
}

fn verdict(draining: bool, unmet: &[Unmet]) -> Verdict {
    Verdict {
        ready: !draining && !unmet.iter().any(|u| u.refuses_traffic),
        unmet: unmet.iter().map(ToString::to_string).collect(),
    }
}

/// Checks the dependencies every `interval` (a drain request is acted on at
/// once) until shutdown, then reports NOT_SERVING so load balancers stop
/// sending work while in-flight work drains.
pub fn spawn_readiness(
    health: Health,
    interval: Duration,
    dependencies: Dependencies,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut last: Option<Verdict> = None;
        let draining = drain_requested();
        loop {
            let unmet =
                tokio::time::timeout(interval.max(Duration::from_secs(2)), dependencies.check())
                    .await
                    .unwrap_or_else(|_| vec![down("dependencies", "the checks timed out")]);
            let now = verdict(draining.is_cancelled(), &unmet);
            if last.as_ref() != Some(&now) {
                publish(&health, &now, draining.is_cancelled()).await;
                last = Some(now);
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = draining.cancelled(), if !draining.is_cancelled() => {}
                _ = shutdown.cancelled() => {
                    health.set_ready(false).await;
                    return;
                }
            }
        }
    })
}

async fn publish(health: &Health, verdict: &Verdict, draining: bool) {
    let service = &health.service;
    match (verdict.ready, draining) {
        (true, _) => tracing::info!(%service, "ready"),
        (false, true) => tracing::warn!(%service, "not ready: draining, taking no new work"),
        (false, false) => tracing::warn!(%service, unmet = ?verdict.unmet, "not ready"),
    }
    if verdict.unmet.is_empty() {
        tracing::info!(%service, "every dependency answers");
    } else {
        tracing::warn!(%service, unmet = ?verdict.unmet, "dependencies not answering; calls that need them fail with UNAVAILABLE");
    }
    health.set_ready(verdict.ready).await;
    health.set_dependencies(verdict.unmet.is_empty()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dependency_that_is_down_leaves_the_service_ready() {
        let postgres_down = [down("postgres", "connection refused")];
        let v = verdict(false, &postgres_down);
        assert!(v.ready, "{v:?}");
        assert_eq!(v.unmet, ["postgres: connection refused"]);
        let behind = Unmet {
            refuses_traffic: true,
            ..down("postgres", "schema behind")
        };
        assert!(!verdict(false, &[behind]).ready);
        assert!(!verdict(true, &[]).ready, "draining takes no new work");
        assert!(verdict(false, &[]).ready);
    }
}
