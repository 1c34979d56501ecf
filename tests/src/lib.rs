//! Test harness: every `TestEnv` gets its own Postgres database (migrated), its
//! own S3 bucket and its own RabbitMQ exchange/queue prefix, so tests run in
//! parallel and never see what an earlier run left behind. Services run
//! in-process on ephemeral ports, exactly as `dialecticd` runs them.

pub mod chaos;
pub mod terminal;

use dialectic_blob::BlobStore;
use dialectic_config::{ConfigArgs, Settings};
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use dialectic_proto::v1::{
    CreateProjectRequest, DocumentRole, GetSessionRequest, SessionEvent, StartSessionRequest,
    WatchSessionRequest,
};
use dialectic_runtime::{CancellationToken, Running, StartFn};
use dialectic_store::Store;
use futures::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

pub const ALL_SERVICES: [&str; 6] = [
    "wallet", "indexer", "planner", "executor", "renderer", "gateway",
];

/// `count` distinct free loopback ports. Every probe listener stays open until the
/// last port is chosen: a port released before the next probe can be handed out
/// again, and two service processes would then share it (one answering the other's
/// calls with `Unimplemented`).
pub fn free_ports(count: usize) -> Vec<u16> {
    let probes: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port"))
        .collect();
    probes
        .iter()
        .map(|probe| probe.local_addr().expect("a bound probe").port())
        .collect()
}

/// Gives each service of [`ALL_SERVICES`] its own port from `ports` (in that order)
/// and points every service-to-service URL at it, as separate processes find each
/// other; returns the ports by service name.
pub fn listen_apart(settings: &mut Settings, ports: &[u16]) -> BTreeMap<&'static str, u16> {
    let ports: BTreeMap<&str, u16> = ALL_SERVICES
        .into_iter()
        .zip(ports.iter().copied())
        .collect();
    assert_eq!(ports.len(), ALL_SERVICES.len(), "one port per service");
    let listen = |name: &str| format!("127.0.0.1:{}", ports[name]);
    let url = |name: &str| format!("http://127.0.0.1:{}", ports[name]);
    settings.gateway.listen = listen("gateway");
    settings.planner.listen = listen("planner");
    settings.executor.worker.listen = listen("executor");
    settings.renderer.worker.listen = listen("renderer");
    settings.indexer.listen = listen("indexer");
    settings.wallet.listen = listen("wallet");
    settings.executor.wallet_url = url("wallet");
    settings.executor.indexer_url = url("indexer");
    settings.gateway.planner_url = url("planner");
    settings.gateway.wallet_url = url("wallet");
    ports
}

/// Sends `authorization: Bearer <key>` on every call that does not carry its own.
#[derive(Clone)]
pub struct BearerKey(pub String);

impl Interceptor for BearerKey {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if !request.metadata().contains_key("authorization") {
            let value = format!("Bearer {}", self.0)
                .parse()
                .map_err(|_| tonic::Status::internal("API key is not a valid header value"))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

/// A gateway client that authenticates with one API key.
pub type GatewayClient = DialecticServiceClient<InterceptedService<Channel, BearerKey>>;

/// `message` sent with `key` instead of the client's own.
pub fn with_key<T>(key: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {key}")
            .parse()
            .expect("key is a header value"),
    );
    request
}

pub fn start_fn(name: &str) -> StartFn {
    match name {
        "wallet" => dialectic_wallet::start,
        "indexer" => dialectic_indexer::start,
        "planner" => dialectic_planner::start,
        "executor" => dialectic_executor::start,
        "renderer" => dialectic_renderer::start,
        "gateway" => dialectic_gateway::start,
        other => panic!("unknown service {other}"),
    }
}

pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TEST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// Settings from the environment (what `deploy/stack.sh env` exports), with
/// every listener on an ephemeral port.
pub fn base_settings() -> Settings {
    let mut settings = ConfigArgs {
        config: None,
        overrides: Vec::new(),
        dump_config: false,
    }
    .load()
    .expect("configuration loads");
    for listen in [
        &mut settings.gateway.listen,
        &mut settings.planner.listen,
        &mut settings.executor.worker.listen,
        &mut settings.renderer.worker.listen,
        &mut settings.indexer.listen,
        &mut settings.wallet.listen,
    ] {
        *listen = "127.0.0.1:0".into();
    }
    // Billing is wired by `TestEnv::start` once a wallet service runs.
    settings.executor.wallet_url = String::new();
    // Compression is wired by `TestEnv::start` once an indexer service runs.
    settings.executor.indexer_url = String::new();
    settings.wallet.hold_sweep_interval_ms = 200;
    settings.planner.sweep_interval_ms = 200;
    settings.planner.retry_base_ms = 100;
    settings.planner.retry_cap_ms = 1000;
    settings.shutdown_grace_secs = 5;
    // Each test runs six services with a pool each, and tests run in parallel:
    // at the default 10 per pool two tests alone can exceed Postgres's stock
    // max_connections (100), and refused connections surface as pool timeouts
    // and retried jobs.
    settings.database.max_connections = 4;
    settings
}

fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let prefix = match base.rsplit_once('/') {
        Some((p, _)) if p.contains("//") && p.len() > p.find("//").unwrap_or(0) + 2 => p,
        _ => base,
    };
    match query {
        Some(q) => format!("{prefix}/{database}?{q}"),
        None => format!("{prefix}/{database}"),
    }
}

pub struct TestEnv {
    pub settings: Settings,
    pub store: Store,
    pub blob: BlobStore,
    pub database: String,
    admin_url: String,
    pub running: HashMap<String, (CancellationToken, Running)>,
}

impl TestEnv {
    /// A fresh, migrated database, bucket and queue prefix.
    pub async fn new() -> Self {
        init_logging();
        let mut settings = base_settings();
        let suffix = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        let database = format!("dialectic_test_{suffix}");
        let admin_url = with_database(&settings.database.url, "postgres");
        let mut admin = connect_admin(&admin_url).await;
        sqlx::query(&format!("CREATE DATABASE {database}"))
            .execute(&mut admin)
            .await
            .expect("create test database");
        settings.database.url = with_database(&settings.database.url, &database);
        settings.amqp.prefix = format!("test-{suffix}");
        settings.s3.bucket = format!("dialectic-test-{suffix}");
        // The seeded administrator's key: what `gateway()` clients send.
        settings.gateway.bootstrap_key = format!("dlk_test_{suffix}");
        let store = dialectic_runtime::store(&settings).expect("store");
        store.migrate().await.expect("migrations apply");
        let blob = dialectic_runtime::blob(&settings);
        blob.ensure_bucket().await.expect("test bucket");
        Self {
            settings,
            store,
            blob,
            database,
            admin_url,
            running: HashMap::new(),
        }
    }

    /// Starts services in order; an executor started after the wallet bills
    /// against it, a gateway started after the planner sends it commands.
    pub async fn start(&mut self, names: &[&str]) {
        for name in names {
            let addr = self.start_with(name, self.settings.clone()).await;
            if *name == "wallet" {
                self.settings.executor.wallet_url = format!("http://{addr}");
            }
            if *name == "indexer" {
                self.settings.executor.indexer_url = format!("http://{addr}");
            }
        }
    }

    /// Starts one service with `settings`; a gateway sends its commands to
    /// the planner, wallet, indexer and executor this env runs, whatever
    /// `settings` says.
    pub async fn start_with(&mut self, name: &str, mut settings: Settings) -> SocketAddr {
        if name == "gateway"
            && let Some((_, planner)) = self.running.get("planner")
        {
            settings.gateway.planner_url = format!("http://{}", planner.addr);
        }
        if name == "gateway"
            && let Some((_, wallet)) = self.running.get("wallet")
        {
            settings.gateway.wallet_url = format!("http://{}", wallet.addr);
        }
        if name == "gateway"
            && let Some((_, indexer)) = self.running.get("indexer")
        {
            settings.gateway.indexer_url = format!("http://{}", indexer.addr);
        }
        if name == "gateway"
            && let Some((_, executor)) = self.running.get("executor")
        {
            settings.gateway.executor_url = format!("http://{}", executor.addr);
        }
        let shutdown = CancellationToken::new();
        let running = start_fn(name)(Arc::new(settings), shutdown.clone())
            .await
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        let addr = running.addr;
        self.running.insert(name.to_string(), (shutdown, running));
        if name == "planner" {
            self.settings.gateway.planner_url = format!("http://{addr}");
        }
        addr
    }

    pub fn addr(&self, name: &str) -> SocketAddr {
        self.running
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not running"))
            .1
            .addr
    }

    pub async fn stop(&mut self, name: &str) {
        if let Some((shutdown, running)) = self.running.remove(name) {
            shutdown.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(20), running.done).await;
        }
    }

    /// A channel to an internal service at `url`, signed with `me`'s key as
    /// this env configures it, as that service would call it.
    pub fn internal_channel(
        &self,
        url: &str,
        me: dialectic_core::service_auth::ServiceName,
    ) -> dialectic_runtime::service_auth::InternalChannel {
        let channel = tonic::transport::Endpoint::from_shared(url.to_string())
            .expect("service url")
            .connect_lazy();
        dialectic_runtime::service_auth::internal_channel(
            channel,
            dialectic_runtime::service_auth::ServiceKey::from_settings(&self.settings, me)
                .expect("this env's service keys"),
        )
    }

    pub async fn wait_serving(&self, name: &str) {
        let status = wait_for_status(self.addr(name), "", ServingStatus::Serving).await;
        assert_eq!(status, ServingStatus::Serving, "{name} never became ready");
    }

    /// A client acting as the seeded local administrator (the bootstrap key).
    pub async fn gateway(&self) -> GatewayClient {
        self.gateway_with_key(&self.settings.gateway.bootstrap_key)
            .await
    }

    /// A client that sends `key` on every call.
    pub async fn gateway_with_key(&self, key: &str) -> GatewayClient {
        let channel =
            tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr("gateway")))
                .expect("gateway address")
                .connect()
                .await
                .expect("gateway connects");
        DialecticServiceClient::with_interceptor(channel, BearerKey(key.to_string()))
    }

    /// A new user with an empty wallet and an API key; returns (user id, key).
    pub async fn new_user(&self, name: &str) -> (uuid::Uuid, String) {
        let user = dialectic_store::auth::create_user(self.store.pool(), name, false)
            .await
            .expect("user")
            .as_uuid();
        (user, self.key_for(user).await)
    }

    /// A new API key for an existing user.
    pub async fn key_for(&self, user: uuid::Uuid) -> String {
        let key = dialectic_core::apikey::generate();
        dialectic_store::auth::insert_key(
            self.store.pool(),
            dialectic_core::ids::UserId(user),
            "test",
            &dialectic_core::apikey::hash(&key),
            &dialectic_core::apikey::shown_part(&key),
        )
        .await
        .expect("key");
        key
    }

    /// Stops every service, deletes the queues and drops the database.
    /// One number from the test's database: `sql` selects it with `$1` bound to `id`.
    pub async fn count(&self, sql: &str, id: uuid::Uuid) -> i64 {
        sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(self.store.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Tokens held across every wallet of this env's database.
    pub async fn held(&self) -> i64 {
        sqlx::query_scalar("SELECT COALESCE(sum(held), 0)::bigint FROM token_wallets")
            .fetch_one(self.store.pool())
            .await
            .expect("held")
    }

    pub async fn teardown(mut self) {
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            self.stop(&name).await;
        }
        // Bounded: a lapin future whose connection the broker already closed
        // can wait forever (a test hung in teardown with no socket open).
        let delete_queues = async {
            if let Ok(conn) = dialectic_queue::connect(&self.settings.amqp.url).await {
                if let Ok(channel) = conn.create_channel().await {
                    let _ = dialectic_runtime::topology(&self.settings)
                        .delete(&channel)
                        .await;
                }
                let _ = conn.close(200, "test done".into()).await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(15), delete_queues)
            .await
            .is_err()
        {
            tracing::warn!("deleting the test queues took over 15 s; leaving them");
        }
        // Bounded: a pool that never gets a connection back (seen once, with
        // every connection idle at the server) must not hang the suite; the
        // forced DROP below closes whatever is left.
        if tokio::time::timeout(Duration::from_secs(10), self.store.pool().close())
            .await
            .is_err()
        {
            tracing::warn!("the test pool did not close in 10 s; dropping its database anyway");
        }
        let mut admin = connect_admin(&self.admin_url).await;
        let _ = sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.database
        ))
        .execute(&mut admin)
        .await;
        if let Ok(keys) = self.blob.list("").await {
            // A benchmark rung leaves some ten thousand objects: one request
            // each, so many at a time.
            let blob = &self.blob;
            futures::stream::iter(keys)
                .for_each_concurrent(32, |key| async move {
                    let _ = blob.delete(&key).await;
                })
                .await;
        }
    }
}

async fn connect_admin(url: &str) -> sqlx::PgConnection {
    use sqlx::Connection;
    sqlx::PgConnection::connect(url)
        .await
        .expect("postgres is reachable (run deploy/stack.sh up)")
}

/// (ready messages, consumers) of a queue; a passive declare changes nothing.
pub async fn queue_counts(connection: &lapin::Connection, queue: &str) -> (u32, u32) {
    let channel = connection.create_channel().await.expect("channel");
    let declared = channel
        .queue_declare(
            queue.into(),
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await
        .expect("queue exists");
    let _ = channel.close(200, "counted".into()).await;
    (declared.message_count(), declared.consumer_count())
}

/// Waits until the service process `name` listening on loopback `port` serves;
/// panics naming it and where its logs are when it does not within 30 s.
pub async fn wait_until_serving(name: &str, port: u16, log_dir: &std::path::Path) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let status = wait_for_status(addr, "", ServingStatus::Serving).await;
    assert_eq!(
        status,
        ServingStatus::Serving,
        "{name} did not become ready; see its log in {}",
        log_dir.display()
    );
}

/// Polls `grpc.health.v1.Health/Check` for `service` until it reports `want`
/// or 30 s pass; returns the last status seen.
pub async fn wait_for_status(
    addr: SocketAddr,
    service: &str,
    want: ServingStatus,
) -> ServingStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = ServingStatus::Unknown;
    while Instant::now() < deadline {
        last = health(addr, service).await;
        if last == want {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

pub async fn health(addr: SocketAddr, service: &str) -> ServingStatus {
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(format!("http://{addr}")) else {
        return ServingStatus::Unknown;
    };
    let Ok(channel) = endpoint.connect().await else {
        return ServingStatus::Unknown;
    };
    let mut client = HealthClient::new(channel);
    match client
        .check(HealthCheckRequest {
            service: service.to_string(),
        })
        .await
    {
        Ok(r) => ServingStatus::try_from(r.into_inner().status).unwrap_or(ServingStatus::Unknown),
        Err(_) => ServingStatus::Unknown,
    }
}

/// Waits until `check` returns Some, polling every 100 ms, for at most `secs`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl TestEnv {
    /// Starts every service and waits until each reports SERVING.
    pub async fn start_all(&mut self) {
        self.start(&ALL_SERVICES).await;
        for name in ALL_SERVICES {
            self.wait_serving(name).await;
        }
    }

    /// `start_all`, with the simulated provider keeping a transcript of every
    /// request it receives ([`dialectic_llm::recorded_requests`]); its model
    /// calls are not billed.
    pub async fn start_all_recording(&mut self) {
        let mut settings = self.settings.clone();
        settings.executor.simulated_record_requests = true;
        for name in ALL_SERVICES {
            self.start_with(name, settings.clone()).await;
            self.wait_serving(name).await;
        }
    }

    /// `start_all` with settings `change` makes, the executor billing
    /// through this env's wallet and compressing through its indexer.
    pub async fn start_all_with(&mut self, change: impl Fn(&mut Settings)) {
        let mut settings = self.settings.clone();
        change(&mut settings);
        for name in ALL_SERVICES {
            let addr = self.start_with(name, settings.clone()).await;
            match name {
                "wallet" => settings.executor.wallet_url = format!("http://{addr}"),
                "indexer" => settings.executor.indexer_url = format!("http://{addr}"),
                _ => {}
            }
            self.wait_serving(name).await;
        }
    }

    /// Creates a project from `prompt` and starts a session on `models`;
    /// returns (project id, session id).
    pub async fn new_session(
        &self,
        prompt: &str,
        models: &[&str],
        auto_advance: bool,
    ) -> (String, String) {
        self.new_session_on("", prompt, models, auto_advance).await
    }

    /// `new_session` on an installed pipeline (empty: the default).
    pub async fn new_session_on(
        &self,
        pipeline: &str,
        prompt: &str,
        models: &[&str],
        auto_advance: bool,
    ) -> (String, String) {
        let mut client = self.gateway().await;
        start_project_session(&mut client, pipeline, prompt, models, auto_advance).await
    }

    /// Watches a session until its stream ends (at review or abandonment) and
    /// returns the events whose kind `wanted` accepts, in order. Call it before
    /// what should cause them.
    pub async fn watch_events(
        &self,
        session_id: &str,
        wanted: fn(&str) -> bool,
    ) -> tokio::task::JoinHandle<Vec<SessionEvent>> {
        let mut events = self
            .gateway()
            .await
            .watch_session(WatchSessionRequest {
                session_id: session_id.to_string(),
                after_sequence: None,
            })
            .await
            .expect("watch")
            .into_inner();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(Ok(event)) = events.next().await {
                if wanted(&event.kind) {
                    seen.push(event);
                }
            }
            seen
        })
    }

    /// The session as its owner (the bootstrap administrator) reads it.
    pub async fn session(&self, session_id: &str) -> dialectic_proto::v1::Session {
        self.gateway()
            .await
            .get_session(GetSessionRequest {
                session_id: session_id.to_string(),
            })
            .await
            .expect("session")
            .into_inner()
    }

    /// Waits for the session to reach `status`; with `idle`, also for every job
    /// to be over (RENDER jobs do not gate stages, so they may finish just after).
    pub async fn wait_for_session(&self, session_id: &str, status: &str, idle: bool) {
        let client = self.gateway().await;
        eventually(180, &format!("session {status}"), || {
            let mut client = client.clone();
            let session_id = session_id.to_string();
            async move {
                let s = client
                    .get_session(GetSessionRequest { session_id })
                    .await
                    .ok()?
                    .into_inner();
                let quiet = !idle || s.jobs.iter().all(|j| j.in_flight == 0);
                (s.status == status && quiet).then_some(())
            }
        })
        .await;
    }
}

/// Uploads `(file name, text)` documents to a project, in order, as a user
/// adding sources before a contract-stack session or a question.
pub async fn upload_documents(
    client: &mut GatewayClient,
    project_id: &str,
    files: &[(&str, &str)],
) {
    let files: Vec<Upload> = files
        .iter()
        .map(|(name, text)| (*name, DocumentRole::Unspecified, *text))
        .collect();
    upload_with_roles(client, project_id, &files).await;
}

/// A document to upload: its file name, its role and its text.
pub type Upload<'a> = (&'a str, DocumentRole, &'a str);

pub async fn upload_with_roles(client: &mut GatewayClient, project_id: &str, files: &[Upload<'_>]) {
    for (name, role, text) in files {
        client
            .add_project_document(dialectic_proto::v1::AddProjectDocumentRequest {
                project_id: project_id.to_string(),
                file_name: name.to_string(),
                content: text.as_bytes().to_vec(),
                role: (*role).into(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("upload {name}: {e}"));
    }
}

/// Creates a project on `pipeline` from `prompt`, uploads `files` to it and
/// starts an auto-advancing session on `model`; returns the session id.
pub async fn start_uploaded_session(
    client: &mut GatewayClient,
    pipeline: &str,
    prompt: String,
    files: &[Upload<'_>],
    model: &str,
) -> String {
    let project = client
        .create_project(CreateProjectRequest {
            name: format!("{pipeline} with {} uploads", files.len()),
            initial_user_prompt: prompt,
            pipeline: pipeline.into(),
            ..Default::default()
        })
        .await
        .expect("create project")
        .into_inner();
    upload_with_roles(client, &project.id, files).await;
    client
        .start_session(StartSessionRequest {
            project_id: project.id,
            models: vec![model.into()],
            auto_advance: true,
            ..Default::default()
        })
        .await
        .expect("start session")
        .into_inner()
        .id
}

/// Registers a model served by a llama.cpp server at `url` as
/// `dialecticd model add --provider openai-compatible` does: one call at a
/// time (the server answers one at a time), `dialect` for its replies and
/// the output limit in `max_tokens`, the field llama-cpp-python reads.
pub async fn register_llama_cpp_model(
    env: &TestEnv,
    name: &str,
    url: &str,
    dialect: dialectic_core::structured::StructuredOutput,
    context_window: u32,
) {
    let spec = dialectic_store::models::ModelSpec {
        name: name.to_string(),
        display_name: None,
        provider: dialectic_store::models::ProviderKind::OpenAiCompatible,
        base_url: Some(url.to_string()),
        key_env: None,
        context_window,
        max_output: 1024,
        structured_output: Some(dialect),
        max_concurrency: Some(1),
        requests_per_minute: None,
        tokens_per_minute: None,
        fallback: None,
        input_cost: None,
        output_cost: None,
        tokenizer: "cl100k_base".into(),
        // llama-cpp-python's server reads `max_tokens` only: it ignores
        // `max_completion_tokens` and would write until the context is full.
        token_limit_param: Some(dialectic_store::models::TokenLimitParam::MaxTokens),
        reasoning: false,
        reasoning_effort: None,
        prices: None,
    };
    dialectic_store::models::register(env.store.pool(), &spec)
        .await
        .unwrap_or_else(|e| panic!("register {name}: {e}"));
}

/// Builds a binary of this workspace (a no-op when it is fresh) into the
/// calling test's target directory and returns its path: this package cannot
/// depend on a binary crate, so Cargo gives it no `CARGO_BIN_EXE_*`.
pub fn workspace_binary(package: &str, bin: &str) -> std::path::PathBuf {
    use std::path::Path;
    // <target>/<profile>/deps/<test>-<hash>
    let exe = std::env::current_exe().expect("test executable");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let target_dir = profile_dir.parent().expect("target directory");
    let mut cargo = std::process::Command::new(env!("CARGO"));
    cargo
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name() == Some("release".as_ref()) {
        cargo.arg("--release");
    }
    let status = cargo.status().expect("cargo runs");
    assert!(status.success(), "building {package} failed: {status}");
    let binary = profile_dir.join(bin);
    assert!(binary.exists(), "{} was not built", binary.display());
    binary
}

/// A copy of every message published under some routing keys: a queue of the
/// test's own (exclusive, gone with its connection) bound to the env's
/// exchange, so a test reads what the services sent without taking anything
/// from the queues they consume.
pub struct QueueTap {
    connection: lapin::Connection,
    channel: lapin::Channel,
    queue: String,
}

impl QueueTap {
    /// Binds a new tap to `routing_keys`; it holds what is published from now on.
    pub async fn new(env: &TestEnv, routing_keys: &[&str]) -> Self {
        use lapin::options::{QueueBindOptions, QueueDeclareOptions};
        use lapin::types::FieldTable;
        let connection = dialectic_queue::connect(&env.settings.amqp.url)
            .await
            .expect("amqp");
        let channel = connection.create_channel().await.expect("channel");
        let topology = dialectic_runtime::topology(&env.settings);
        topology.declare(&channel).await.expect("topology");
        let options = QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..Default::default()
        };
        let queue = channel
            .queue_declare("".into(), options, FieldTable::default())
            .await
            .expect("tap queue")
            .name()
            .to_string();
        for key in routing_keys {
            channel
                .queue_bind(
                    queue.as_str().into(),
                    topology.exchange().into(),
                    (*key).into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await
                .unwrap_or_else(|e| panic!("bind the tap to {key}: {e}"));
        }
        Self {
            connection,
            channel,
            queue,
        }
    }

    /// Takes every message the tap holds now: (routing key, envelope), in
    /// the order they were published.
    pub async fn take(&self) -> Vec<(String, dialectic_proto::v1::queue::Envelope)> {
        let mut taken = Vec::new();
        while let Some(message) = self
            .channel
            .basic_get(
                self.queue.as_str().into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
            .expect("basic.get from the tap")
        {
            let delivery = &message.delivery;
            let envelope = dialectic_queue::decode(&delivery.data).expect("a tapped envelope");
            taken.push((delivery.routing_key.to_string(), envelope));
        }
        taken
    }

    pub async fn close(self) {
        let _ = self.channel.close(200, "tap done".into()).await;
        let _ = self.connection.close(200, "tap done".into()).await;
    }
}

/// Waits until every outbox row written so far is published (a row is
/// deleted only after the broker confirmed it, so a [`QueueTap`] holds it).
pub async fn outbox_drained(env: &TestEnv, what: &str) {
    eventually(30, what, || async {
        let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
            .fetch_one(env.store.pool())
            .await
            .expect("outbox");
        (pending == 0).then_some(())
    })
    .await;
}

/// Child processes killed (SIGKILL) and reaped when this is dropped, so a
/// failed test leaves no service running.
pub struct KillOnDrop(pub Vec<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// GET /metrics over plain HTTP/1.1.
pub async fn scrape_metrics(port: u16) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    (head.starts_with("HTTP/1.1 200") && head.contains("text/plain; version=0.0.4"))
        .then(|| body.to_string())
}

/// Sum of the samples of `series` whose labels contain every `label="value"` given.
pub fn sample_sum(text: &str, series: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name_labels, value) = l.rsplit_once(' ')?;
            let name = name_labels.split('{').next()?;
            (name == series && labels.iter().all(|want| name_labels.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// Creates a project from `prompt` on `pipeline` (empty: the default) and
/// starts a session on `models`, as `client`'s user; returns (project id,
/// session id).
pub async fn start_project_session(
    client: &mut GatewayClient,
    pipeline: &str,
    prompt: &str,
    models: &[&str],
    auto_advance: bool,
) -> (String, String) {
    let project = client
        .create_project(CreateProjectRequest {
            name: "Test project".into(),
            initial_user_prompt: prompt.into(),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: pipeline.into(),
        })
        .await
        .expect("create project")
        .into_inner();
    let session = client
        .start_session(StartSessionRequest {
            project_id: project.id.clone(),
            models: models.iter().map(|m| m.to_string()).collect(),
            description: String::new(),
            client_request_id: String::new(),
            auto_advance,
            ..Default::default()
        })
        .await
        .expect("start session")
        .into_inner();
    assert_eq!(session.auto_advance, auto_advance);
    (project.id, session.id)
}

/// A limit's refusal: its code, ErrorInfo reason, and the `limit` and
/// `current` figures from the ErrorInfo metadata.
pub fn refusal(status: &tonic::Status) -> (tonic::Code, String, String, String) {
    use dialectic_runtime::error_status::StatusExt;
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("ErrorInfo in {status:?}"));
    let meta = |key: &str| info.metadata.get(key).cloned().unwrap_or_default();
    (status.code(), info.reason, meta("limit"), meta("current"))
}

/// The recorded requests (`start_all_recording`) of one session that write
/// `output_type`, in the order they were made. The tests of one file share
/// the transcript, so a session's requests are told apart by the session
/// folder of the objects they read, or by its seed prompt (an input whose id
/// is the session's), which a step reading only the prompt and uploads reads.
pub fn session_requests(
    session_id: &str,
    output_type: &str,
) -> Vec<dialectic_core::prompt::ChatRequest> {
    let folder = format!(
        "session_{}",
        dialectic_core::ids::SessionId::parse(session_id)
            .expect("session id")
            .short()
    );
    dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.output_type == output_type)
        .filter(|r| {
            r.inputs.iter().any(|i| {
                i.id == session_id
                    || i.storage_key
                        .as_deref()
                        .is_some_and(|k| k.contains(&folder))
            })
        })
        .collect()
}

/// The iteration-1 documents of `stage` listed under `document_key`.
pub async fn stage_documents(
    client: &mut GatewayClient,
    session_id: &str,
    stage: &str,
    document_key: &str,
) -> Vec<dialectic_proto::v1::StageDocument> {
    client
        .list_stage_documents(dialectic_proto::v1::ListStageDocumentsRequest {
            session_id: session_id.to_string(),
            stage_slug: stage.into(),
            iteration: 1,
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner()
        .documents
        .into_iter()
        .filter(|d| d.document_key == document_key)
        .collect()
}

/// A document's text as `GetDocumentContent` returns it.
pub async fn document_text(client: &mut GatewayClient, resource_id: &str) -> String {
    client
        .get_document_content(dialectic_proto::v1::GetDocumentContentRequest {
            resource_id: resource_id.to_string(),
        })
        .await
        .expect("content")
        .into_inner()
        .content
}

/// Points a `dialectic` CLI command at `env`'s gateway with its bootstrap
/// key, and away from any config file or output setting of the machine.
pub fn against_gateway<'c>(
    command: &'c mut tokio::process::Command,
    env: &TestEnv,
) -> &'c mut tokio::process::Command {
    command
        .env(
            "DIALECTIC_GATEWAY_URL",
            format!("http://{}", env.addr("gateway")),
        )
        .env("DIALECTIC_API_KEY", &env.settings.gateway.bootstrap_key)
        .env(
            "XDG_CONFIG_HOME",
            std::env::temp_dir().join("dialectic-cli-test-none"),
        )
        .env_remove("DIALECTIC_OUTPUT")
        .env_remove("DIALECTIC_CLI_CONFIG")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
}
