//! The gateway: the public gRPC API. It validates and authorises requests,
//! writes projects and sessions (with their planner command in the same
//! transaction, via the outbox), reads documents from S3 and streams session
//! progress from Redis.

pub mod convert;
pub mod error;
pub mod service;

pub use error::GatewayError;
pub use service::{Gateway, USER_HEADER};

use dialectic_config::Settings;
use dialectic_proto::v1::dialectic_service_server::DialecticServiceServer;
use dialectic_runtime::{CancellationToken, Running, RuntimeError, spawn_readiness};
use futures::future::BoxFuture;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use uuid::Uuid;

pub const SERVICE_NAME: &str = "dialectic.v1.DialecticService";

pub fn start(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> BoxFuture<'static, Result<Running, RuntimeError>> {
    Box::pin(start_gateway(settings, shutdown))
}

async fn start_gateway(
    settings: Arc<Settings>,
    shutdown: CancellationToken,
) -> Result<Running, RuntimeError> {
    let store = dialectic_runtime::store(&settings)?;
    let blob = dialectic_runtime::blob(&settings);
    let cache = Arc::new(OnceLock::new());
    // A bad default user only breaks calls without the header, so it is not fatal.
    let default_user = match Uuid::parse_str(settings.gateway.default_user_id.trim()) {
        Ok(id) => Some(id),
        Err(e) => {
            tracing::error!(value = %settings.gateway.default_user_id, error = %e,
                "gateway.default_user_id is not a UUID; calls must send x-dialectic-user");
            None
        }
    };
    let gateway = Gateway::new(
        store.clone(),
        blob.clone(),
        cache.clone(),
        default_user,
        settings.gateway.max_prompt_bytes,
        shutdown.clone(),
    );
    let server = dialectic_runtime::start_grpc(
        SERVICE_NAME,
        &settings.gateway.listen,
        tonic::service::Routes::new(DialecticServiceServer::new(gateway)),
        shutdown.clone(),
    )
    .await?;

    // Background tasks stop with the process, or when the server dies on its own.
    let work_shutdown = shutdown.child_token();
    // Redis is connected after binding, so the gateway answers health while it is down.
    let connect = {
        let cache = cache.clone();
        let settings = settings.clone();
        let shutdown = work_shutdown.clone();
        tokio::spawn(async move {
            if let Some(c) = dialectic_runtime::cache(&settings, &shutdown).await {
                let _ = cache.set(c);
            }
        })
    };
    let readiness = spawn_readiness(
        server.health.clone(),
        Duration::from_secs(1),
        Arc::new(move || {
            let store = store.clone();
            let blob = blob.clone();
            let cache = cache.get().cloned();
            Box::pin(async move {
                dialectic_runtime::check_store(&store).await?;
                match cache {
                    Some(c) => c.ping().await.map_err(|e| format!("redis: {e}"))?,
                    None => return Err("redis: not connected".to_string()),
                }
                blob.check().await.map_err(|e| format!("s3: {e}"))
            })
        }),
        work_shutdown.clone(),
    );
    let addr = server.addr;
    let done = tokio::spawn(async move {
        dialectic_runtime::join_server(SERVICE_NAME, server.task).await;
        work_shutdown.cancel();
        let _ = connect.await;
        let _ = readiness.await;
        tracing::info!("gateway stopped");
    });
    Ok(Running { addr, done })
}
