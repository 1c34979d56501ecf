//! The preStop hook's drain request (`dialecticd drain` sends SIGUSR1): every
//! service reports NOT_SERVING, so its Service endpoints go away, and every
//! queue consumer is cancelled, so no new job is claimed, while the process
//! stays alive (liveness SERVING) until SIGTERM finishes what runs.
//! Alone in its test binary: the signal and the drain are process-wide.

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually, health, queue_counts, wait_for_status};
use tonic_health::pb::health_check_response::ServingStatus;

async fn consumers(env: &TestEnv, routing_key: &str) -> u32 {
    let queue = dialectic_runtime::topology(&env.settings).queue(routing_key);
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let (_, consumers) = queue_counts(&connection, &queue).await;
    connection
        .close(200, "counted".into())
        .await
        .expect("close");
    consumers
}

const JOB_QUEUES: [&str; 3] = [
    dialectic_queue::keys::JOB_PLAN,
    dialectic_queue::keys::JOB_EXECUTE,
    dialectic_queue::keys::JOB_RENDER,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drain_request_stops_new_work_but_not_the_process() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    for key in JOB_QUEUES {
        assert!(
            consumers(&env, key).await > 0,
            "{key} is consumed before the drain"
        );
    }
    let shutdown = dialectic_runtime::shutdown_on_signals();

    // What the preStop hook does to the pod's process.
    // SAFETY: kill(2) on our own pid with a signal the runtime handles.
    let sent = unsafe { libc::kill(std::process::id() as i32, libc::SIGUSR1) };
    assert_eq!(sent, 0, "SIGUSR1 sent");

    for name in ALL_SERVICES {
        let status = wait_for_status(env.addr(name), "", ServingStatus::NotServing).await;
        assert_eq!(
            status,
            ServingStatus::NotServing,
            "{name} stops reporting ready"
        );
        assert_eq!(
            health(env.addr(name), dialectic_runtime::LIVENESS_SERVICE).await,
            ServingStatus::Serving,
            "{name} stays alive until SIGTERM"
        );
    }
    for key in JOB_QUEUES {
        eventually(30, &format!("{key} has no consumer"), || async {
            (consumers(&env, key).await == 0).then_some(())
        })
        .await;
    }
    assert!(
        !shutdown.is_cancelled(),
        "a drain request is not a shutdown"
    );
    env.teardown().await;
}
