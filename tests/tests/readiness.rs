//! Readiness does not follow a dependency outage. With Redis really stopped
//! (not a wrong port), every service reports it on `dialectic.dependencies`
//! and stays SERVING, so no Service loses its endpoints, and the gateway keeps
//! answering reads; once Redis is back, the dependencies are SERVING again.
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
async fn a_redis_outage_is_reported_and_no_service_leaves_its_endpoints() {
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
    let dependencies = dialectic_runtime::DEPENDENCIES_SERVICE;
    for name in services {
        assert_eq!(
            wait_for_status(env.addr(name), dependencies, ServingStatus::NotServing).await,
            ServingStatus::NotServing,
            "{name} reports Redis down"
        );
        assert_eq!(
            health(env.addr(name), "").await,
            ServingStatus::Serving,
            "{name} stays ready without Redis instead of leaving its Service"
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
    for name in services {
        assert_eq!(
            wait_for_status(env.addr(name), dependencies, ServingStatus::Serving).await,
            ServingStatus::Serving,
            "{name} reports Redis back"
        );
        assert_eq!(health(env.addr(name), "").await, ServingStatus::Serving);
    }
    env.teardown().await;
}
