//! Readiness follows what a service cannot work without. With Redis really
//! stopped (not a wrong port), the executor, whose rate limits live there,
//! goes NOT_SERVING and is SERVING again once Redis is back; the gateway,
//! planner and indexer, for which Redis is only a cache and a progress
//! channel, stay SERVING all along and the gateway keeps answering reads.
//! Its own test binary: the outage would disturb tests running beside it.

use dialectic_e2e::chaos::stack;
use dialectic_e2e::{TestEnv, health, wait_for_status};
use dialectic_proto::v1::{CreateProjectRequest, GetProjectRequest};
use tonic_health::pb::health_check_response::ServingStatus;

/// Brings Redis back however the test ends, so no later test finds it down.
struct RedisBack;

impl Drop for RedisBack {
    fn drop(&mut self) {
        stack(&["start", "redis"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cache_outage_degrades_and_a_required_dependency_outage_is_not_ready() {
    let mut env = TestEnv::new().await;
    let services = ["planner", "executor", "gateway", "indexer"];
    env.start(&services).await;
    for name in services {
        env.wait_serving(name).await;
    }
    let mut gateway = env.gateway().await;
    let project = gateway
        .create_project(CreateProjectRequest {
            name: "Outage".into(),
            initial_user_prompt: "Read me while Redis is down.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();

    let back = RedisBack;
    stack(&["stop", "redis"]);
    let executor = env.addr("executor");
    assert_eq!(
        wait_for_status(executor, "", ServingStatus::NotServing).await,
        ServingStatus::NotServing,
        "the executor needs Redis (rate limits)"
    );
    // The executor's readiness loop has run with Redis down; the others' did too.
    for name in ["gateway", "planner", "indexer"] {
        assert_eq!(
            health(env.addr(name), "").await,
            ServingStatus::Serving,
            "{name} degrades without its cache instead of leaving the Service"
        );
    }
    let read = gateway
        .get_project(GetProjectRequest {
            project_id: project.id.clone(),
        })
        .await
        .expect("reads work without the read cache")
        .into_inner();
    assert_eq!(read.id, project.id);

    drop(back);
    assert_eq!(
        wait_for_status(executor, "", ServingStatus::Serving).await,
        ServingStatus::Serving,
        "the executor is ready again once Redis answers"
    );
    for name in ["gateway", "planner", "indexer"] {
        assert_eq!(health(env.addr(name), "").await, ServingStatus::Serving);
    }
    env.teardown().await;
}
