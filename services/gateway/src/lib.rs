//! The gateway: the public gRPC API. It validates and authorises requests,
//! creates projects and sessions, sends the planner every command that
//! changes a session or its jobs (the planner is their only writer), reads
//! documents from S3 and streams session progress from Redis.

pub mod catalog;
mod citations;
mod contract_analysis;
pub mod convert;
pub mod documents;
mod edits;
pub mod error;
mod last_known;
mod once;
mod output;
pub mod query;
pub mod regenerate;
pub mod retry;
pub mod revisit;
mod server_info;
pub mod service;

pub use error::GatewayError;
pub use service::{AUTHORIZATION, BootstrapKey, Gateway, Internal};

use dialectic_config::Settings;
use dialectic_core::ids::UserId;
use dialectic_core::service_auth::ServiceName;
use dialectic_proto::v1::dialectic_service_server::DialecticServiceServer;
use dialectic_proto::v1::executor::executor_service_client::ExecutorServiceClient;
use dialectic_proto::v1::indexer::indexer_service_client::IndexerServiceClient;
use dialectic_proto::v1::planner::planner_service_client::PlannerServiceClient;
use dialectic_proto::v1::wallet::wallet_service_client::WalletServiceClient;
use dialectic_runtime::service_auth::internal_client;
use dialectic_runtime::tls::TlsIdentity;
use dialectic_runtime::{
    CancellationToken, Courier, Dependencies, Running, RuntimeError, supervise,
};
use futures::future::BoxFuture;
use std::sync::{Arc, OnceLock};

pub const SERVICE_NAME: &str = "dialectic.v1.DialecticService";

/// Channels to the services the gateway calls, balanced over their
/// replicas and signed as the gateway.
fn internal_clients(settings: &Settings) -> Result<Internal, RuntimeError> {
    let channel = |url: &str| internal_client(settings, url, ServiceName::Gateway);
    Ok(Internal {
        planner: PlannerServiceClient::new(channel(&settings.gateway.planner_url)?),
        wallet: WalletServiceClient::new(channel(&settings.gateway.wallet_url)?),
        indexer: IndexerServiceClient::new(channel(&settings.gateway.indexer_url)?),
        executor: ExecutorServiceClient::new(channel(&settings.gateway.executor_url)?),
    })
}

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
    // First, so a bad certificate or origin stops the start before anything runs.
    let public = dialectic_runtime::Public {
        web_origins: dialectic_runtime::web::origins(&settings.gateway.web_origins)?,
        tls: TlsIdentity::from_settings(&settings.gateway.tls_cert, &settings.gateway.tls_key)?,
        health_listen: Some(settings.gateway.health_listen.trim())
            .filter(|l| !l.is_empty())
            .map(str::to_string),
        limits: dialectic_runtime::Limits::from_config(&settings.gateway.connections),
        connect: connect_json(&settings)?,
    };
    let store = dialectic_runtime::store(&settings)?;
    let blob = dialectic_runtime::blob(&settings);
    let cache = Arc::new(OnceLock::new());
    let bootstrap = bootstrap_key(&settings);
    let work_shutdown = shutdown.child_token();
    // Set by the readiness loop while Postgres is down (not merely busy).
    let postgres_down = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (courier, courier_task) = Courier::from_settings(&store, &settings, &work_shutdown);
    let gateway = Gateway::new(
        store.clone(),
        blob.clone(),
        cache.clone(),
        internal_clients(&settings)?,
        bootstrap,
        settings.gateway.max_prompt_bytes,
        shutdown.clone(),
    )
    .with_courier(courier)
    .with_document_limits(&settings.gateway)
    .with_watch_limits(&settings.gateway)
    .with_last_known(&settings.gateway, postgres_down.clone())
    .with_server_info(&settings);
    let server = dialectic_runtime::start_grpc_web(
        SERVICE_NAME,
        &settings.gateway.listen,
        tonic::service::Routes::new(
            DialecticServiceServer::new(gateway)
                .max_decoding_message_size(settings.gateway.max_message_bytes),
        ),
        dialectic_runtime::service_auth::ServiceKey::from_settings(
            &settings,
            ServiceName::Gateway,
        )?,
        shutdown.clone(),
        public,
    )
    .await?;

    let dependencies = Dependencies {
        store: Some(store),
        blob: Some(blob),
        cache: Some(cache),
        postgres_down,
        // Read cache and progress stream: without Redis reads go to Postgres
        // and WatchSession answers UNAVAILABLE; everything else works.
        ..Default::default()
    };
    Ok(supervise(
        "gateway",
        &settings,
        server,
        dependencies,
        work_shutdown,
        courier_task.into_iter().collect(),
    ))
}

/// The unary RPCs as Connect's JSON calls (`gateway.json_api`), held to the
/// message size gRPC callers are.
fn connect_json(
    settings: &Settings,
) -> Result<Option<dialectic_runtime::connect::Procedures>, RuntimeError> {
    if !settings.gateway.json_api {
        return Ok(None);
    }
    let procedures = dialectic_runtime::connect::Procedures::new(
        dialectic_proto::FILE_DESCRIPTOR_SET,
        SERVICE_NAME,
        settings.gateway.max_message_bytes,
    )?;
    Ok(Some(procedures))
}

/// The configured bootstrap key, if any. A bad `default_user_id` only turns the
/// bootstrap key off (stored keys still work), so it is logged, not fatal.
fn bootstrap_key(settings: &Settings) -> Option<BootstrapKey> {
    let key = settings.gateway.bootstrap_key.trim();
    if key.is_empty() {
        return None;
    }
    match UserId::parse(settings.gateway.default_user_id.trim()) {
        Ok(user_id) => Some(BootstrapKey {
            key_hash: dialectic_core::apikey::hash(key),
            user_id,
        }),
        Err(e) => {
            tracing::error!(value = %settings.gateway.default_user_id, error = %e,
                "gateway.default_user_id is not a UUID; the bootstrap key is refused");
            None
        }
    }
}
