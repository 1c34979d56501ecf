//! The planner, the only writer of job and session state: turns `StartStage`
//! commands into root jobs, applies job outcomes and the gateway's commands
//! (pause, resume, cancel, responses, revisit, regenerate, edits, deletion)
//! through core's state machines, relays the outbox to RabbitMQ, and sweeps
//! expired leases and due retries.

mod clarify;
mod commands;
mod confidence;
mod dead_letters;
pub mod engine;
mod error;
pub mod relay;

use dialectic_config::Settings;
use dialectic_proto::v1::planner::planner_service_server::PlannerServiceServer;
use dialectic_proto::v1::queue::envelope::Body;
use dialectic_proto::v1::queue::planner_command::Command;
use dialectic_queue::{Delivery, TRACEPARENT_HEADER, keys};
use dialectic_runtime::{
    CancellationToken, ConsumerOptions, Courier, Dependencies, Disposition, Handler, Running,
    RuntimeError, run_consumer, sleep_or_shutdown, supervise,
};
use engine::{Engine, PlannerError};
use futures::future::BoxFuture;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tracing::Instrument;

pub const SERVICE_NAME: &str = "dialectic.v1.planner.PlannerService";

struct MessageHandler {
    engine: Arc<Engine>,
}

fn disposition(result: Result<(), PlannerError>) -> Disposition {
    match result {
        Ok(()) => Disposition::Ack,
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "transient failure; message will be redelivered");
            Disposition::Requeue
        }
        Err(e) => {
            tracing::error!(error = %e, "message cannot be processed");
            Disposition::DeadLetter(e.to_string())
        }
    }
}

#[async_trait::async_trait]
impl Handler for MessageHandler {
    async fn handle(&self, delivery: &Delivery) -> Disposition {
        let envelope = match dialectic_queue::decode(&delivery.data) {
            Ok(e) => e,
            Err(e) => return Disposition::DeadLetter(e.to_string()),
        };
        let traceparent = dialectic_queue::header(delivery, TRACEPARENT_HEADER);
        match envelope.body {
            Some(Body::PlannerCommand(command)) => match command.command {
                Some(Command::StartStage(start)) => {
                    let span = tracing::info_span!("start_stage", session_id = %start.session_id, stage = %start.stage_slug, trace_id = tracing::field::Empty);
                    dialectic_telemetry::adopt_traceparent(&span, traceparent.as_deref());
                    disposition(
                        self.engine
                            .start_stage(&start, traceparent.as_deref())
                            .instrument(span)
                            .await,
                    )
                }
                Some(Command::ResumeSession(resume)) => {
                    let span = tracing::info_span!("resume_session", session_id = %resume.session_id, trace_id = tracing::field::Empty);
                    dialectic_telemetry::adopt_traceparent(&span, traceparent.as_deref());
                    disposition(
                        self.engine
                            .resume_session(&resume, traceparent.as_deref())
                            .instrument(span)
                            .await,
                    )
                }
                Some(Command::RenderEdit(render)) => {
                    let span = tracing::info_span!("render_edit", contribution_id = %render.edit_contribution_id, trace_id = tracing::field::Empty);
                    dialectic_telemetry::adopt_traceparent(&span, traceparent.as_deref());
                    disposition(
                        commands::render_edit(&self.engine, &render, traceparent.as_deref())
                            .instrument(span)
                            .await,
                    )
                }
                None => Disposition::DeadLetter("planner command without a command".into()),
            },
            Some(Body::JobOutcome(outcome)) => {
                let span = tracing::info_span!("job_outcome", job_id = %outcome.job_id, attempt = outcome.attempt, trace_id = tracing::field::Empty);
                dialectic_telemetry::adopt_traceparent(&span, traceparent.as_deref());
                disposition(
                    self.engine
                        .on_outcome(&outcome, traceparent.as_deref())
                        .instrument(span)
                        .await,
                )
            }
            Some(Body::JobDispatch(_)) | None => {
                Disposition::DeadLetter("the planner does not take job dispatches".into())
            }
        }
    }
}

/// How often the job and outbox gauges are read from Postgres.
const GAUGE_PERIOD: Duration = Duration::from_secs(5);

/// Jobs by type and status and the outbox backlog, for `/metrics`. Every
/// planner replica reads the same numbers; dashboards take their max.
async fn refresh_gauges(store: &dialectic_store::Store) {
    use dialectic_telemetry::metrics;
    match dialectic_store::stats::jobs_by_type_and_status(store.pool()).await {
        Ok(rows) => metrics::JOBS.replace_all(
            &rows
                .into_iter()
                .map(|(job_type, status, n)| (vec![job_type, status], n as f64))
                .collect::<Vec<_>>(),
        ),
        Err(e) => tracing::debug!(error = %e, "could not read job counts"),
    }
    match dialectic_store::outbox::pending_count(store.pool()).await {
        Ok(n) => metrics::OUTBOX_PENDING.set(&[], n as f64),
        Err(e) => tracing::debug!(error = %e, "could not read the outbox backlog"),
    }
}

/// Sweeps every `planner.sweep_interval_ms` and refreshes the gauges every
/// `GAUGE_PERIOD`, until shutdown.
fn spawn_sweeper(
    engine: Arc<Engine>,
    store: dialectic_store::Store,
    settings: &Settings,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let interval = Duration::from_millis(settings.planner.sweep_interval_ms.max(50));
    tokio::spawn(async move {
        let mut gauges_read: Option<std::time::Instant> = None;
        while sleep_or_shutdown(interval, &shutdown).await {
            if gauges_read.is_none_or(|at| at.elapsed() >= GAUGE_PERIOD) {
                refresh_gauges(&store).await;
                gauges_read = Some(std::time::Instant::now());
            }
            match engine.sweep().await {
                Ok(r) if r.expired_leases + r.retries_dispatched > 0 => {
                    tracing::info!(
                        expired = r.expired_leases,
                        retried = r.retries_dispatched,
                        "sweep"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "sweep failed"),
            }
        }
    })
}

pub fn start(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> BoxFuture<'static, Result<Running, RuntimeError>> {
    Box::pin(start_planner(settings, shutdown))
}

async fn start_planner(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> Result<Running, RuntimeError> {
    let store = dialectic_runtime::store(&settings)?;
    let topology = dialectic_runtime::topology(&settings);
    let cache = Arc::new(OnceLock::new());
    // Workers stop on `work_shutdown`, which follows the process shutdown only
    // after the gRPC server stops taking requests.
    let work_shutdown = shutdown.child_token();
    let mut tasks = Vec::new();
    let (courier, courier_task) = Courier::from_settings(&store, &settings, &work_shutdown);
    tasks.extend(courier_task);
    let engine = Arc::new(
        Engine::new(
            store.clone(),
            dialectic_runtime::blob(&settings),
            settings.planner.clone(),
            cache.clone(),
        )
        .with_courier(courier),
    );
    let server = dialectic_runtime::start_grpc(
        SERVICE_NAME,
        &settings.planner.listen,
        tonic::service::Routes::new(PlannerServiceServer::new(commands::Api {
            engine: engine.clone(),
        })),
        dialectic_runtime::service_auth::ServiceKey::from_settings(
            &settings,
            dialectic_core::service_auth::ServiceName::Planner,
        )?,
        shutdown.clone(),
    )
    .await?;

    let notes: Arc<dyn Handler> = Arc::new(dead_letters::DeadLetterNotes {
        store: store.clone(),
        cache: cache.clone(),
    });
    let mut dependencies = Dependencies {
        store: Some(store.clone()),
        cache: Some(cache),
        // Progress events only: they are best-effort, job state is in Postgres.
        ..Default::default()
    };
    tasks.push(tokio::spawn(relay::run_relay(
        store.clone(),
        relay::RelayOptions::new(&settings, topology.clone()),
        dependencies.broker_flag(),
        work_shutdown.clone(),
    )));
    let handler: Arc<dyn Handler> = Arc::new(MessageHandler {
        engine: engine.clone(),
    });
    for key in [keys::PLANNER_COMMAND, keys::JOB_EVENT] {
        tasks.push(tokio::spawn(run_consumer(
            ConsumerOptions::new(&settings, key, 16, "planner"),
            handler.clone(),
            dependencies.broker_flag(),
            work_shutdown.clone(),
        )));
    }
    tasks.push(tokio::spawn(run_consumer(
        ConsumerOptions::new(&settings, dialectic_queue::dead::NOTICES_KEY, 4, "planner"),
        notes,
        dependencies.broker_flag(),
        work_shutdown.clone(),
    )));
    tasks.push(spawn_sweeper(
        engine,
        store,
        &settings,
        work_shutdown.clone(),
    ));
    Ok(supervise(
        "planner",
        &settings,
        server,
        dependencies,
        work_shutdown,
        tasks,
    ))
}
