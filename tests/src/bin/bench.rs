//! Orchestration benchmark: runs N thesis stages at once through all six
//! services (simulated model, no latency) on a fresh database, bucket and queue
//! prefix, and prints throughput and job latency next to the raw limits of the
//! same Postgres (one-row transactions) and RabbitMQ (confirmed publishes).
//!
//!     cargo run --release -p dialectic-e2e --bin bench -- [sessions] [models]

use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually};
use dialectic_proto::v1::{CreateProjectRequest, StartSessionRequest};
use std::time::Instant;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let sessions: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let models: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2)
        .clamp(1, 2);
    let mut env = TestEnv::new().await;
    env.start(&ALL_SERVICES).await;
    for name in ALL_SERVICES {
        env.wait_serving(name).await;
    }
    let model_names: Vec<String> = ["simulated", "simulated-b"][..models]
        .iter()
        .map(|m| m.to_string())
        .collect();

    let started = Instant::now();
    let mut client = env.gateway().await;
    for i in 0..sessions {
        let project = client
            .create_project(CreateProjectRequest {
                name: format!("Bench {i}"),
                initial_user_prompt: format!("Benchmark idea number {i}: a shared workshop."),
                client_request_id: String::new(),
            })
            .await
            .expect("project")
            .into_inner();
        client
            .start_session(StartSessionRequest {
                project_id: project.id,
                models: model_names.clone(),
                description: String::new(),
                client_request_id: String::new(),
                auto_advance: false,
            })
            .await
            .expect("session");
    }
    let pool = env.store.pool().clone();
    eventually(600, "every thesis stage done", || async {
        let open: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM dialectic_generation_jobs WHERE status NOT IN ('completed', 'failed', 'retry_loop_failed')",
        )
        .fetch_one(&pool)
        .await
        .ok()?;
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM dialectic_sessions WHERE status <> 'pending_antithesis'",
        )
        .fetch_one(&pool)
        .await
        .ok()?;
        (open == 0 && waiting == 0).then_some(())
    })
    .await;
    let elapsed = started.elapsed();
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM dialectic_generation_jobs")
        .fetch_one(&pool)
        .await
        .expect("jobs");
    let latencies: Vec<f64> = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM (completed_at - created_at))::float8 * 1000
         FROM dialectic_generation_jobs WHERE completed_at IS NOT NULL ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .expect("latencies");
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "dialectic orchestration: {sessions} thesis stages x {models} model(s), simulated model"
    );
    println!(
        "  {jobs} jobs in {:.2} s = {:.1} jobs/s, {:.2} stages/s",
        elapsed.as_secs_f64(),
        jobs as f64 / elapsed.as_secs_f64(),
        sessions as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  job latency (created -> completed): p50 {:.0} ms, p95 {:.0} ms, max {:.0} ms",
        pct(0.5),
        pct(0.95),
        pct(1.0)
    );

    // Raw limits of the same services, for comparison, with the services stopped.
    for name in ALL_SERVICES {
        env.stop(name).await;
    }
    let n = 2000;
    let t = Instant::now();
    for i in 0..n {
        let mut tx = pool.begin().await.expect("tx");
        sqlx::query("INSERT INTO outbox (routing_key, payload) VALUES ('bench', $1)")
            .bind(format!("{i}").into_bytes())
            .execute(&mut *tx)
            .await
            .expect("insert");
        tx.commit().await.expect("commit");
    }
    let pg = n as f64 / t.elapsed().as_secs_f64();
    sqlx::query("DELETE FROM outbox WHERE routing_key = 'bench'")
        .execute(&pool)
        .await
        .expect("cleanup");
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp");
    let publisher =
        dialectic_queue::Publisher::new(&connection, &dialectic_runtime::topology(&env.settings))
            .await
            .expect("publisher");
    let t = Instant::now();
    let bodies: Vec<Vec<u8>> = (0..n).map(|i| format!("{i}").into_bytes()).collect();
    for chunk in bodies.chunks(100) {
        let sends = chunk
            .iter()
            .map(|body| publisher.publish(dialectic_queue::keys::JOB_RENDER, body, None));
        // Nobody consumes now; teardown deletes the queue with what piled up.
        for sent in futures::future::join_all(sends).await {
            sent.expect("confirmed publish");
        }
    }
    let amqp = n as f64 / t.elapsed().as_secs_f64();
    println!("raw limits on this machine:");
    println!("  postgres: {pg:.0} one-row transactions/s (each job costs several)");
    println!(
        "  rabbitmq: {amqp:.0} confirmed publishes/s in batches of 100 (each job costs ~4 messages)"
    );
    let _ = connection.close(200, "bench done".into()).await;
    env.teardown().await;
}
