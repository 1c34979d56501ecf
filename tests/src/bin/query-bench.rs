//! Query latency through the gateway (seed 004 query pipeline): p50 and p99
//! of a miss (classify + synthesize on an executor, billed) and of a hit (the
//! answer from Redis), with the simulated model at 0 ms and 1 s per call, on
//! the real services over a three-document project.
//!
//!     cargo run --release -p dialectic-e2e --bin query-bench -- [questions per latency]

use dialectic_e2e::{TestEnv, upload_documents};
use dialectic_proto::v1::{CreateProjectRequest, QueryRequest};
use std::time::{Duration, Instant};

const DOCUMENTS: [(&str, &str); 3] = [
    (
        "base.md",
        "Base agreement.\n\n4.2 Rent is due on the first day of each month.\n\n7.1 The tenant maintains the docks as Exhibit B sets out.\n\n9.1 Either party may terminate on six months' notice.",
    ),
    (
        "amendment-1.md",
        "Amendment 1.\n\n4.2 Rent is due on the fifth day of each month.\n\n4.1 The rent is EUR 8,600.",
    ),
    (
        "amendment-2.md",
        "Amendment 2.\n\nExhibit B is deleted.\n\n3.1 The term is seven years.",
    ),
];

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn line(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what:<28} n={:<3} p50 {:>8.1} ms  p99 {:>8.1} ms",
        samples.len(),
        percentile(&samples, 0.5).as_secs_f64() * 1000.0,
        percentile(&samples, 0.99).as_secs_f64() * 1000.0,
    );
}

async fn rung(latency_ms: u64, questions: usize) {
    let mut env = TestEnv::new().await;
    env.start_all_with(|s| s.executor.simulated_latency_ms = latency_ms)
        .await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: "The lease.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id;
    upload_documents(&mut client, &project, &DOCUMENTS).await;
    let mut misses = Vec::new();
    let mut hits = Vec::new();
    for round in 0..2 {
        for i in 0..questions {
            let started = Instant::now();
            let answer = client
                .query(QueryRequest {
                    project_id: project.clone(),
                    text: format!("Question {i}: when is the rent due and who keeps the docks?"),
                    model: String::new(),
                    client_request_id: String::new(),
                })
                .await
                .expect("query")
                .into_inner();
            let took = started.elapsed();
            assert_eq!(answer.cached, round == 1);
            if round == 0 {
                misses.push(took)
            } else {
                hits.push(took)
            }
        }
    }
    line(&format!("miss, model {latency_ms} ms/call"), misses);
    line(&format!("hit,  model {latency_ms} ms/call"), hits);
    env.teardown().await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let questions: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    println!("Query through the gateway, {questions} distinct questions, each then asked again:");
    println!("(a miss makes two model calls: classify, then one synthesis; a hit makes none)");
    for latency in [0, 1_000] {
        rung(latency, questions).await;
    }
}
