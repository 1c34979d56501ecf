//! Query latency through the gateway (seed 004 query pipeline) by project
//! size: for each number of uploaded documents, the first question (which
//! indexes the project where the executor indexes lazily), then p50 and p99
//! of a miss (classify + synthesize on an executor, billed) and of a hit (the
//! answer from Redis), on the real services. With the simulated model at 0 ms
//! per call a miss is everything a question costs beyond its model calls.
//!
//!     cargo run --release -p dialectic-e2e --bin query-bench -- \
//!         [--docs 10,100,1000] [--questions 20] [--latencies 0,1000]

use dialectic_e2e::{GatewayClient, TestEnv, upload_documents};
use dialectic_proto::v1::{CreateProjectRequest, QueryRequest};
use std::time::{Duration, Instant};

const TOPICS: [&str; 12] = [
    "rent",
    "the docks",
    "insurance",
    "maintenance",
    "the loading bay",
    "parking",
    "signage",
    "utilities",
    "assignment",
    "notices",
    "repairs",
    "the deposit",
];

/// Document `i` of a project: a preamble long enough to be a chunk of its
/// own, then clauses on three topics (about 2 KB, two chunks), so every
/// project size has the same shape of text.
fn document(i: usize) -> (String, String) {
    let topic = |k: usize| TOPICS[(i * 7 + k * 5) % TOPICS.len()];
    let preamble =
        format!("Schedule {i} to the lease between the landlord and the tenant of unit {i}. ")
            .repeat(16);
    let text = format!(
        "# Schedule {i}\n\n{preamble}\n\n{i}.1 The tenant pays for {} from the first day of month {}.\n\n\
         {i}.2 The landlord keeps {} in good order and answers within {} days.\n\n\
         {i}.3 Any change to {} needs the written consent of both parties.",
        topic(0),
        i % 12 + 1,
        topic(1),
        i % 30 + 1,
        topic(2),
    );
    (format!("schedule-{i:04}.md"), text)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn line(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what:<40} n={:<3} p50 {:>8.1} ms  p99 {:>8.1} ms",
        samples.len(),
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.99)),
    );
}

async fn ask(client: &mut GatewayClient, project: &str, text: String) -> (Duration, bool) {
    let started = Instant::now();
    let answer = client
        .query(QueryRequest {
            project_id: project.to_string(),
            text,
            model: String::new(),
            client_request_id: String::new(),
        })
        .await
        .expect("query")
        .into_inner();
    (started.elapsed(), answer.cached)
}

async fn rung(documents: usize, latency_ms: u64, questions: usize) {
    let mut env = TestEnv::new().await;
    env.start_all_with(|s| s.executor.simulated_latency_ms = latency_ms)
        .await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: "The lease and its schedules.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id;
    let docs: Vec<(String, String)> = (0..documents).map(document).collect();
    let files: Vec<(&str, &str)> = docs.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    upload_documents(&mut client, &project, &files).await;
    let (first, _) = ask(
        &mut client,
        &project,
        "Who keeps the docks in good order?".into(),
    )
    .await;
    let question = |i: usize| {
        format!(
            "Question {i}: when is {} paid for and who keeps {} in good order?",
            TOPICS[i % TOPICS.len()],
            TOPICS[(i + 5) % TOPICS.len()]
        )
    };
    let mut misses = Vec::new();
    let mut hits = Vec::new();
    for round in 0..2 {
        for i in 0..questions {
            let (took, cached) = ask(&mut client, &project, question(i)).await;
            assert_eq!(cached, round == 1, "question {i}, round {round}");
            if round == 0 {
                misses.push(took)
            } else {
                hits.push(took)
            }
        }
    }
    let rung = format!("{documents} docs, model {latency_ms} ms/call");
    println!("{rung:<40} first question {:>8.1} ms", ms(first));
    line(&format!("{rung}: miss"), misses);
    line(&format!("{rung}: hit"), hits);
    env.teardown().await;
}

/// The value after `flag`, as a comma-separated list.
fn list(args: &[String], flag: &str, default: &[usize]) -> Vec<usize> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes = list(&args, "--docs", &[10, 100, 1000]);
    let questions = list(&args, "--questions", &[20])[0];
    let latencies = list(&args, "--latencies", &[0]);
    println!(
        "Query through the gateway, {questions} distinct questions, each then asked again, by project size:"
    );
    println!("(a miss makes two model calls: classify, then one synthesis; a hit makes none)");
    for latency in latencies {
        for &documents in &sizes {
            rung(documents, latency as u64, questions).await;
        }
    }
}
