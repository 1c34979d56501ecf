//! Messages that can never succeed end in the dead-letter queue; a service
//! whose dependency is down stays ready (and live) and says so on
//! `dialectic.dependencies`; a Postgres outage mid-run leaves the gateway
//! serving what it can and every session completes once Postgres is back.

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually, health, wait_for_status};
use dialectic_proto::v1::{
    CreditWalletRequest, SessionEvent, SessionEventKind, WatchSessionRequest,
};
use dialectic_queue::{Delivery, Publisher, keys};
use dialectic_runtime::{CancellationToken, ConsumerOptions, Disposition, Handler};
use lapin::options::BasicGetOptions;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tonic_health::pb::health_check_response::ServingStatus;

/// Takes one message from the dead queue: (original routing key, dead reason header).
async fn dead_letters(env: &TestEnv) -> Vec<(String, Option<String>)> {
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let channel = connection.create_channel().await.expect("channel");
    let queue = dialectic_runtime::topology(&env.settings).dead_queue();
    let mut found = Vec::new();
    while let Ok(Some(message)) = channel
        .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
        .await
    {
        let delivery: &Delivery = &message.delivery;
        found.push((
            delivery.routing_key.to_string(),
            dialectic_queue::header(delivery, dialectic_queue::DEAD_REASON_HEADER),
        ));
    }
    let _ = connection.close(200, "done".into()).await;
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_messages_go_to_the_dead_letter_queue() {
    let mut env = TestEnv::new().await;
    env.start(&["executor", "planner"]).await;
    env.wait_serving("executor").await;
    env.wait_serving("planner").await;
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let publisher = Publisher::new(&connection, &dialectic_runtime::topology(&env.settings))
        .await
        .expect("publisher");
    publisher
        .publish(keys::JOB_EXECUTE, b"\xff\xfe not protobuf at all", None)
        .await
        .expect("publish garbage");
    let bad_command = dialectic_queue::encode(&dialectic_proto::v1::queue::Envelope {
        version: dialectic_proto::ENVELOPE_VERSION,
        body: Some(dialectic_proto::v1::queue::envelope::Body::PlannerCommand(
            dialectic_proto::v1::queue::PlannerCommand {
                command: Some(
                    dialectic_proto::v1::queue::planner_command::Command::StartStage(
                        dialectic_proto::v1::queue::StartStage {
                            session_id: "not-a-session-id".into(),
                            stage_slug: "thesis".into(),
                            iteration: 1,
                        },
                    ),
                ),
            },
        )),
    });
    publisher
        .publish(keys::PLANNER_COMMAND, &bad_command, None)
        .await
        .expect("publish bad command");
    let dead = eventually(30, "two dead letters", || async {
        // basic_get consumes; keep what was seen across polls.
        let seen = dead_letters(&env).await;
        (!seen.is_empty()).then_some(seen)
    })
    .await;
    let mut all = dead;
    if all.len() < 2 {
        all.extend(
            eventually(30, "the second dead letter", || async {
                let seen = dead_letters(&env).await;
                (!seen.is_empty()).then_some(seen)
            })
            .await,
        );
    }
    all.sort();
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0].0, keys::JOB_EXECUTE);
    assert!(
        all[0]
            .1
            .as_deref()
            .unwrap_or_default()
            .contains("undecodable"),
        "{all:?}"
    );
    assert_eq!(all[1].0, keys::PLANNER_COMMAND);
    assert!(
        all[1]
            .1
            .as_deref()
            .unwrap_or_default()
            .contains("is not a valid UUID"),
        "{all:?}"
    );
    let _ = connection.close(200, "done".into()).await;
    env.teardown().await;
}

/// A handler that fails every delivery in a way that might pass (requeue).
struct AlwaysFails(Arc<AtomicU32>);

#[async_trait::async_trait]
impl Handler for AlwaysFails {
    async fn handle(&self, _delivery: &Delivery) -> Disposition {
        self.0.fetch_add(1, Ordering::Relaxed);
        Disposition::Requeue
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_that_always_fails_ends_in_the_dead_letter_queue() {
    let env = TestEnv::new().await;
    let topology = dialectic_runtime::topology(&env.settings);
    let attempts = Arc::new(AtomicU32::new(0));
    let shutdown = CancellationToken::new();
    let consumer = tokio::spawn(dialectic_runtime::run_consumer(
        ConsumerOptions {
            grace: Duration::from_secs(1),
            requeue_delay: Duration::from_millis(10),
            ..ConsumerOptions::new(&env.settings, keys::JOB_RENDER, 1, "always-fails")
        },
        Arc::new(AlwaysFails(attempts.clone())),
        Arc::new(AtomicBool::new(false)),
        shutdown.clone(),
    ));
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let channel = connection.create_channel().await.expect("channel");
    topology.declare(&channel).await.expect("declare");
    let publisher = Publisher::new(&connection, &topology)
        .await
        .expect("publisher");
    let dispatch = dialectic_queue::encode(&dialectic_proto::v1::queue::Envelope {
        version: dialectic_proto::ENVELOPE_VERSION,
        body: Some(dialectic_proto::v1::queue::envelope::Body::JobDispatch(
            dialectic_proto::v1::queue::JobDispatch {
                job_id: uuid::Uuid::now_v7().to_string(),
            },
        )),
    });
    publisher
        .publish(keys::JOB_RENDER, &dispatch, None)
        .await
        .expect("publish");
    let dead = eventually(30, "the message in the dead queue", || async {
        let seen = dead_letters(&env).await;
        (!seen.is_empty()).then_some(seen)
    })
    .await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].0, keys::JOB_RENDER);
    let tries = attempts.load(Ordering::Relaxed);
    assert_eq!(
        tries,
        env.settings.amqp.delivery_limit + 1,
        "delivered up to the queue's delivery limit, then dead-lettered"
    );
    shutdown.cancel();
    let _ = consumer.await;
    let _ = connection.close(200, "done".into()).await;
    env.teardown().await;
}

/// A TCP relay to a dependency that the test cuts and restores: while it is
/// down nothing listens on its port and every connection through it is closed.
struct Relay {
    port: u16,
    upstream: String,
    running: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl Relay {
    /// A relay to the host and port of `url`.
    async fn to(url: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("relay port");
        let mut relay = Self {
            port: listener.local_addr().expect("relay address").port(),
            upstream: authority(url).to_string(),
            running: None,
        };
        relay.serve(listener);
        relay
    }

    /// `url` with its host and port replaced by the relay's.
    fn url(&self, url: &str) -> String {
        url.replacen(authority(url), &format!("127.0.0.1:{}", self.port), 1)
    }

    fn serve(&mut self, listener: TcpListener) {
        let stop = CancellationToken::new();
        let upstream = self.upstream.clone();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move {
                // Dropping the set when the relay goes down aborts every link,
                // closing both of its connections.
                let mut links = tokio::task::JoinSet::new();
                loop {
                    let (mut inbound, _) = tokio::select! {
                        () = stop.cancelled() => return,
                        accepted = listener.accept() => match accepted {
                            Ok(accepted) => accepted,
                            Err(_) => continue,
                        },
                    };
                    let upstream = upstream.clone();
                    links.spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                            // Either side closing (or failing) ends the link.
                            if let Err(e) = copy_bidirectional(&mut inbound, &mut outbound).await {
                                tracing::debug!(error = %e, "relay link ended");
                            }
                        }
                    });
                }
            }
        });
        self.running = Some((stop, task));
    }

    /// The dependency goes down.
    async fn down(&mut self) {
        let (stop, task) = self.running.take().expect("the relay is up");
        stop.cancel();
        task.await.expect("relay stopped");
    }

    /// The dependency comes back, on the same port.
    async fn up(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("the relay's port again");
        self.serve(listener);
    }
}

/// `host:port` of `scheme://[user@]host:port/…`.
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..end];
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

/// A running service at `addr` reports its dependencies SERVING, then
/// NOT_SERVING while the dependency behind `relay` is down, then SERVING
/// again once it is back; it stays ready and live throughout.
async fn follows(addr: SocketAddr, relay: &mut Relay, name: &str, dependency: &str) {
    let dependencies = dialectic_runtime::DEPENDENCIES_SERVICE;
    // SERVING first: a check ran (NOT_SERVING or UNKNOWN come before any).
    assert_eq!(
        wait_for_status(addr, dependencies, ServingStatus::Serving).await,
        ServingStatus::Serving,
        "{name}'s dependencies answer while {dependency} does"
    );
    relay.down().await;
    assert_eq!(
        wait_for_status(addr, dependencies, ServingStatus::NotServing).await,
        ServingStatus::NotServing,
        "{name} reports {dependency} down"
    );
    for (service, what) in [("", "ready"), (dialectic_runtime::LIVENESS_SERVICE, "live")] {
        assert_eq!(
            health(addr, service).await,
            ServingStatus::Serving,
            "{name} stays {what} while {dependency} is down"
        );
    }
    relay.up().await;
    assert_eq!(
        wait_for_status(addr, dependencies, ServingStatus::Serving).await,
        ServingStatus::Serving,
        "{name} reports {dependency} back once it answers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_service_alone_stays_ready_and_reports_a_dependency_down_then_up() {
    let mut env = TestEnv::new().await;
    let mut postgres = Relay::to(&env.settings.database.url).await;
    for name in ALL_SERVICES {
        let mut settings = env.settings.clone();
        settings.database.url = postgres.url(&env.settings.database.url);
        settings.database.connect_timeout_ms = 300;
        let addr = env.start_with(name, settings).await;
        follows(addr, &mut postgres, name, "Postgres").await;
        env.stop(name).await;
    }
    // RabbitMQ down for a service that consumes: reported, not a crash.
    let mut rabbitmq = Relay::to(&env.settings.amqp.url).await;
    let mut settings = env.settings.clone();
    settings.amqp.url = rabbitmq.url(&env.settings.amqp.url);
    let addr = env.start_with("executor", settings).await;
    follows(addr, &mut rabbitmq, "executor", "RabbitMQ").await;
    env.stop("executor").await;
    env.teardown().await;
}

/// The first event a new `WatchSession` stream sends (its snapshot), as `key`'s owner.
async fn first_event(
    env: &TestEnv,
    key: &str,
    session_id: &str,
) -> Result<SessionEvent, tonic::Status> {
    let mut events = env
        .gateway_with_key(key)
        .await
        .watch_session(WatchSessionRequest {
            session_id: session_id.to_string(),
            after_sequence: None,
        })
        .await?
        .into_inner();
    events
        .message()
        .await?
        .ok_or_else(|| tonic::Status::unavailable("the stream ended before its snapshot"))
}

/// Issue 41: a 10-second Postgres outage mid-run. The gateway stays SERVING,
/// a user's watcher reconnecting during it catches up (authenticated and
/// its ownership checked from what Postgres confirmed lately, the snapshot
/// from Redis), and every session completes once Postgres is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_outage_mid_run_leaves_the_gateway_serving_and_every_session_completes() {
    let mut env = TestEnv::new().await;
    let mut postgres = Relay::to(&env.settings.database.url).await;
    let through_relay = postgres.url(&env.settings.database.url);
    env.start_all_with(|settings| {
        settings.database.url = through_relay.clone();
        settings.database.connect_timeout_ms = 500;
        settings.executor.simulated_latency_ms = 200;
    })
    .await;
    // A user of their own (not the bootstrap key, which needs no Postgres).
    let (user, key) = env.new_user("outage").await;
    env.gateway()
        .await
        .credit_wallet(CreditWalletRequest {
            user_id: user.to_string(),
            amount: 10_000_000,
            idempotency_key: "outage-credit".into(),
            reason: String::new(),
        })
        .await
        .expect("credit the user");
    let mut client = env.gateway_with_key(&key).await;
    let mut sessions = Vec::new();
    for i in 0..2 {
        let prompt = format!("Outage {i}: a repair café for a small town.");
        let (_, session) =
            dialectic_e2e::start_project_session(&mut client, "", &prompt, &["simulated"], true)
                .await;
        sessions.push(session);
    }
    // Mid-run: a watcher has seen the session progress (so Redis holds its latest event).
    let mut watcher = client
        .watch_session(WatchSessionRequest {
            session_id: sessions[0].clone(),
            after_sequence: None,
        })
        .await
        .expect("a watcher before the outage")
        .into_inner();
    let before = loop {
        let event = watcher.message().await.expect("events").expect("an event");
        if event.event_kind() != SessionEventKind::Snapshot {
            break event;
        }
    };
    drop(watcher);

    postgres.down().await;
    let outage = tokio::time::Instant::now();
    let gateway = env.addr("gateway");
    assert_eq!(health(gateway, "").await, ServingStatus::Serving);
    // The gateway answers watchers from what it remembers only once its
    // readiness loop holds Postgres down (a busy pool is no outage).
    assert_eq!(
        wait_for_status(
            gateway,
            dialectic_runtime::DEPENDENCIES_SERVICE,
            ServingStatus::NotServing
        )
        .await,
        ServingStatus::NotServing,
        "the gateway reports Postgres down"
    );
    let during = first_event(&env, &key, &sessions[0])
        .await
        .expect("a watcher reconnecting during the outage catches up");
    assert!(!during.session_status.is_empty(), "{during:?}");
    println!(
        "before the outage: {} in {}; the snapshot during it: {}",
        before.event_kind().as_str_name(),
        before.session_status,
        during.session_status
    );
    // The outage lasts ten seconds, as a failover might.
    tokio::time::sleep_until(outage + Duration::from_secs(10)).await;
    assert_eq!(
        health(gateway, "").await,
        ServingStatus::Serving,
        "still ready at the end of it"
    );
    postgres.up().await;

    let ids: Vec<uuid::Uuid> = sessions.iter().filter_map(|s| s.parse().ok()).collect();
    eventually(180, "every session to complete", || async {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM dialectic_sessions
              WHERE id = ANY($1) AND status = 'iteration_complete_pending_review'",
        )
        .bind(&ids)
        .fetch_one(env.store.pool())
        .await
        .ok()?;
        (done == 2).then_some(())
    })
    .await;
    let failed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE status IN ('failed', 'retry_loop_failed')",
    )
    .fetch_one(env.store.pool())
    .await
    .expect("failed jobs");
    assert_eq!(failed, 0, "no job failed because of the outage");
    env.teardown().await;
}
