//! The last-known-key fallback only in a real outage (issue 57, item 2).
//! Another account holds the gateway's pool busy (its call waits on a lock
//! while holding the pool's one connection, so Postgres itself answers):
//! then a revoked key is UNAUTHENTICATED (the revocation was published to
//! Redis) and its export sends no byte, and a live key the gateway just
//! confirmed is not served from memory either (UNAVAILABLE): a busy pool is
//! no outage, and the memory serves `WatchSession` only.

use dialectic_e2e::{TestEnv, wait_for_status};
use dialectic_proto::v1::{
    CreateProjectRequest, ExportProjectRequest, ListProjectsRequest, WatchSessionRequest,
};
use dialectic_runtime::DEPENDENCIES_SERVICE;
use dialectic_runtime::error_status::StatusExt;
use futures::StreamExt;
use sqlx::Connection;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

const PROMPT: &str = "# Tool library\n\nA lending library for power tools, run by neighbours.";

/// What `dialecticd admin revoke-key` does: the row in Postgres, then the
/// revocation published to Redis for the gateways.
async fn revoke(env: &TestEnv, key: &str) {
    let hash = dialectic_core::apikey::hash(key);
    assert!(
        dialectic_store::auth::revoke_key(env.store.pool(), &hash)
            .await
            .expect("revoke")
    );
    let cache = dialectic_cache::Cache::connect(&env.settings.redis.url, 60)
        .await
        .expect("redis");
    cache
        .key_revoked(&hash, env.settings.gateway.last_known_secs + 60)
        .await
        .expect("published");
}

/// Calls of this test's database waiting on a lock.
async fn waiting_on_locks(env: &TestEnv) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'",
    )
    .bind(&env.database)
    .fetch_one(env.store.pool())
    .await
    .expect("pg_stat_activity")
}

fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|info| info.reason)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_revoked_key_is_refused_while_another_account_holds_the_pool_busy() {
    let mut env = TestEnv::new().await;
    let mut settings = env.settings.clone();
    // One connection, and a short wait for it: a busy pool answers fast.
    settings.database.max_connections = 1;
    settings.database.connect_timeout_ms = 1000;
    env.start_with("gateway", settings).await;
    env.wait_serving("gateway").await;
    // Redis connected too: the gateway asks it about revocations.
    let up = wait_for_status(
        env.addr("gateway"),
        DEPENDENCIES_SERVICE,
        ServingStatus::Serving,
    )
    .await;
    assert_eq!(up, ServingStatus::Serving, "every dependency answers");

    let (_, alice_key) = env.new_user("alice").await;
    let (_, carol_key) = env.new_user("carol").await;
    let (_, bob_key) = env.new_user("bob").await;
    let mut alice = env.gateway_with_key(&alice_key).await;
    let mut carol = env.gateway_with_key(&carol_key).await;
    let mut bob = env.gateway_with_key(&bob_key).await;
    // Both keys used once, so the gateway remembers their owners.
    let mut projects = Vec::new();
    for client in [&mut alice, &mut carol] {
        let project = client
            .create_project(CreateProjectRequest {
                name: "Mine".into(),
                initial_user_prompt: PROMPT.into(),
                ..Default::default()
            })
            .await
            .expect("project")
            .into_inner();
        projects.push(project.id);
    }
    revoke(&env, &alice_key).await;

    // Bob's call takes the pool's one connection and waits on a lock the
    // test holds: the pool is busy, Postgres is not down.
    let mut locker = sqlx::PgConnection::connect(&env.settings.database.url)
        .await
        .expect("a connection of the test's own");
    sqlx::query("BEGIN")
        .execute(&mut locker)
        .await
        .expect("begin");
    sqlx::query("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .expect("lock");
    let bobs_call =
        tokio::spawn(async move { bob.list_projects(ListProjectsRequest::default()).await });
    let deadline = Instant::now() + Duration::from_secs(20);
    while waiting_on_locks(&env).await == 0 {
        assert!(Instant::now() < deadline, "bob's call never took the pool");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Alice's revoked key: UNAUTHENTICATED, and her export sends nothing.
    let refused = alice
        .export_project(ExportProjectRequest {
            project_id: projects[0].clone(),
        })
        .await
        .expect_err("a revoked key exports nothing");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert_eq!(reason(&refused), "API_KEY_REJECTED", "{refused:?}");
    let refused = alice
        .get_export_url(ExportProjectRequest {
            project_id: projects[0].clone(),
        })
        .await
        .expect_err("nor uploads one");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(
        env.blob
            .list(&format!("exports/{}/", projects[0]))
            .await
            .expect("list")
            .is_empty()
    );
    let refused = alice
        .watch_session(WatchSessionRequest {
            session_id: dialectic_core::ids::SessionId::new().to_string(),
            after_sequence: None,
        })
        .await
        .expect_err("nor watches");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");

    // Carol's live key, just confirmed: a busy pool is no outage, so the
    // gateway does not answer from memory; her export waits for Postgres.
    let unavailable = carol
        .export_project(ExportProjectRequest {
            project_id: projects[1].clone(),
        })
        .await;
    match unavailable {
        Err(status) => {
            assert_eq!(status.code(), Code::Unavailable, "{status:?}");
            assert_eq!(reason(&status), "DATABASE_UNAVAILABLE", "{status:?}");
        }
        Ok(stream) => {
            let first = stream.into_inner().next().await;
            panic!("authenticated from memory on a busy pool; first message: {first:?}");
        }
    }

    // The lock released, Bob's call answers and Carol exports again.
    sqlx::query("ROLLBACK")
        .execute(&mut locker)
        .await
        .expect("rollback");
    bobs_call
        .await
        .expect("joined")
        .expect("bob's call, once the pool is free");
    let mut stream = carol
        .export_project(ExportProjectRequest {
            project_id: projects[1].clone(),
        })
        .await
        .expect("carol exports")
        .into_inner();
    while let Some(chunk) = stream.next().await {
        chunk.expect("archive");
    }
    let _ = locker.close().await;
    env.teardown().await;
}
