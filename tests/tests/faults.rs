//! Messages that can never succeed end in the dead-letter queue, and services
//! report NOT_SERVING (without crashing) while a dependency is down.

use dialectic_e2e::{ALL_SERVICES, TestEnv, base_settings, eventually, health, wait_for_status};
use dialectic_queue::{Delivery, Publisher, keys};
use dialectic_runtime::{CancellationToken, ConsumerOptions, Disposition, Handler};
use lapin::options::BasicGetOptions;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_service_alone_is_not_serving_while_a_dependency_is_down_and_serving_once_up() {
    let mut env = TestEnv::new().await;
    for name in ALL_SERVICES {
        // Postgres is "down": nothing listens on port 1.
        let mut broken = env.settings.clone();
        broken.database.url = "postgres://postgres@127.0.0.1:1/dialectic".into();
        broken.database.connect_timeout_ms = 300;
        let addr = env.start_with(name, broken).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(
            health(addr, "").await,
            ServingStatus::NotServing,
            "{name} reports NOT_SERVING while Postgres is down"
        );
        assert_eq!(
            health(addr, dialectic_runtime::LIVENESS_SERVICE).await,
            ServingStatus::Serving,
            "{name} stays live"
        );
        env.stop(name).await;

        let addr = env.start_with(name, env.settings.clone()).await;
        assert_eq!(
            wait_for_status(addr, "", ServingStatus::Serving).await,
            ServingStatus::Serving,
            "{name} is SERVING once its dependencies answer"
        );
        env.stop(name).await;
    }
    // RabbitMQ down for a service that consumes: NOT_SERVING, not a crash.
    let mut broken = base_settings();
    broken.database.url = env.settings.database.url.clone();
    broken.amqp.url = "amqp://guest:guest@127.0.0.1:1/%2f".into();
    let addr = env.start_with("executor", broken).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(health(addr, "").await, ServingStatus::NotServing);
    env.stop("executor").await;
    env.teardown().await;
}
