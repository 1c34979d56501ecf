//! Model calls that outlast the broker's `consumer_timeout` run once.
//!
//! RabbitMQ closes a channel that holds an unacked delivery longer than
//! `consumer_timeout`; a worker that acked only after its model call would lose
//! its channel mid-call, and the job would be handed out again. Workers ack as
//! soon as their claim commits, and a delivery that waits for a busy slot is
//! re-published before the timeout. This test shrinks the broker's timeout to
//! one second (and its check interval to half a second) and runs calls of five.
//!
//! It changes broker-wide settings, so it lives alone in this test binary
//! (cargo runs test binaries one after another) and restores them when done.

use dialectic_e2e::{ALL_SERVICES, TestEnv};
use std::process::Command;

const PROMPT: &str = "# Calls that take longer than the broker waits for an ack\n\nEach model call of this session sleeps five seconds.";

fn rabbitmq_eval(expression: &str) -> String {
    let output = Command::new("rabbitmqctl")
        .args(["eval", expression])
        .output()
        .expect("rabbitmqctl runs (this test needs the local broker's CLI)");
    assert!(
        output.status.success(),
        "rabbitmqctl eval {expression}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Sets a `rabbit` application variable and puts the old value back on drop,
/// even when the test panics.
struct BrokerSetting {
    name: &'static str,
    previous: String,
}

impl BrokerSetting {
    fn set(name: &'static str, value: u64) -> Self {
        let previous = rabbitmq_eval(&format!("application:get_env(rabbit, {name})."));
        rabbitmq_eval(&format!("application:set_env(rabbit, {name}, {value})."));
        Self { name, previous }
    }
}

impl Drop for BrokerSetting {
    fn drop(&mut self) {
        // `{ok,1800000}` → 1800000; `undefined` → unset.
        let restore = match self
            .previous
            .strip_prefix("{ok,")
            .and_then(|v| v.strip_suffix('}'))
        {
            Some(value) => format!("application:set_env(rabbit, {}, {value}).", self.name),
            None => format!("application:unset_env(rabbit, {}).", self.name),
        };
        let _ = Command::new("rabbitmqctl")
            .args(["eval", &restore])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_model_call_longer_than_the_consumer_timeout_runs_once() {
    let _tick = BrokerSetting::set("channel_tick_interval", 500);
    let _timeout = BrokerSetting::set("consumer_timeout", 1000);
    let mut env = TestEnv::new().await;
    let mut slow = env.settings.clone();
    slow.executor.simulated_latency_ms = 5_000;
    slow.executor.simulated_record_requests = true;
    // Two slots for five calls: deliveries wait for a slot longer than the
    // broker's timeout, so they must be recycled rather than held.
    slow.executor.worker.slots = 2;
    slow.amqp.recycle_after_ms = 400;
    // Leases far longer than the calls: a second call could only come from a redelivery.
    slow.executor.worker.lease_secs = 60;
    for name in ALL_SERVICES {
        env.start_with(name, slow.clone()).await;
        env.wait_serving(name).await;
    }
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;

    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let jobs: Vec<(String, i32)> = sqlx::query_as(
        "SELECT job_type, attempt_count FROM dialectic_generation_jobs
          WHERE session_id = $1 AND job_type <> 'RENDER'",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("jobs");
    assert_eq!(jobs.len(), 5, "one plan and four documents: {jobs:?}");
    assert!(
        jobs.iter().all(|(_, attempts)| *attempts == 1),
        "every job ran in one attempt: {jobs:?}"
    );
    assert_eq!(
        dialectic_runtime::channel_losses(),
        0,
        "no consumer held a delivery past the broker's timeout"
    );
    let calls = dialectic_llm::recorded_requests().len();
    assert_eq!(calls, jobs.len(), "one model call per job, none repeated");
    let contributions: i64 =
        sqlx::query_scalar("SELECT count(*) FROM dialectic_contributions WHERE session_id = $1")
            .bind(session)
            .fetch_one(env.store.pool())
            .await
            .expect("contributions");
    assert_eq!(contributions, 5);
    env.teardown().await;
}
