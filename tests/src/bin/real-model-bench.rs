//! `real-model-bench`: the shipped pipelines on the real local model (the
//! llama.cpp server of `deploy/local-model.sh`), with structured output on
//! (`json_object_schema`) and off (`none`: the prompt alone asks for the
//! shape), and the same model calls made straight to the server for the
//! engine's overhead. Prints a table for BENCHMARKS.md ("Real model") and
//! writes every session's figures as JSON.
//!
//!     deploy/local-model.sh up && eval "$(deploy/local-model.sh env)"
//!     eval "$(deploy/stack.sh env)"
//!     cargo run --release -p dialectic-e2e --bin real-model-bench -- \
//!         --sessions 5 --pipelines essay,contract_stack --modes structured,plain
//!
//! Sessions run one after another (the server answers one call at a time);
//! the services run in this process, as `dialecticd run` does.

use dialectic_e2e::{
    GatewayClient, TestEnv, Upload, register_llama_cpp_model, start_uploaded_session,
};
use dialectic_llm::{ModelProvider, OpenAiProvider, OpenAiSettings};
use dialectic_proto::v1::{DocumentRole, GetSessionRequest};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const REVIEW: &str = "iteration_complete_pending_review";

struct Options {
    sessions: usize,
    pipelines: Vec<String>,
    modes: Vec<Mode>,
    url: String,
    model: String,
    session_timeout: Duration,
    out: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Structured,
    Plain,
}

impl Mode {
    fn parse(text: &str) -> Option<Mode> {
        match text {
            "structured" => Some(Mode::Structured),
            "plain" => Some(Mode::Plain),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Mode::Structured => "structured",
            Mode::Plain => "plain",
        }
    }
    fn dialect(self) -> dialectic_core::structured::StructuredOutput {
        match self {
            Mode::Structured => dialectic_core::structured::StructuredOutput::JsonObjectSchema,
            Mode::Plain => dialectic_core::structured::StructuredOutput::None,
        }
    }
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        sessions: 5,
        pipelines: vec!["essay".into(), "contract_stack".into()],
        modes: vec![Mode::Structured, Mode::Plain],
        url: std::env::var("DIALECTIC_LOCAL_MODEL_URL").map_err(
            |_| "DIALECTIC_LOCAL_MODEL_URL is not set: eval \"$(deploy/local-model.sh env)\"",
        )?,
        model: std::env::var("DIALECTIC_LOCAL_MODEL_NAME").unwrap_or_else(|_| "smollm2".into()),
        session_timeout: Duration::from_secs(1800),
        out: "bench/results-real-model.json".into(),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).ok_or(format!("{} needs a value", pair[0]))?;
        match pair[0].as_str() {
            "--sessions" => o.sessions = value.parse().map_err(|e| format!("--sessions: {e}"))?,
            "--pipelines" => o.pipelines = value.split(',').map(str::to_string).collect(),
            "--modes" => {
                o.modes = value
                    .split(',')
                    .map(|m| Mode::parse(m).ok_or(format!("--modes: {m}? structured or plain")))
                    .collect::<Result<_, _>>()?
            }
            "--session-timeout" => {
                o.session_timeout = Duration::from_secs(
                    value
                        .parse()
                        .map_err(|e| format!("--session-timeout: {e}"))?,
                )
            }
            "--out" => o.out = value.clone(),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(o)
}

/// The local model, registered once per structured-output mode.
async fn register(env: &TestEnv, o: &Options, mode: Mode) -> String {
    let name = format!("{}-{}", o.model, mode.name());
    register_llama_cpp_model(env, &name, &o.url, mode.dialect(), 8192).await;
    name
}

/// Creates the pipeline's sample project and starts a session on `model`.
async fn start(client: &mut GatewayClient, pipeline: &str, model: &str) -> String {
    let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/samples");
    let read = |name: &str| std::fs::read_to_string(samples.join(name)).expect("sample");
    let prompt = match pipeline {
        "contract_stack" => read("contract-stack/prompt.md"),
        "essay" => read("essay-prompt.md"),
        _ => read("dialectic-prompt.md"),
    };
    let docs = if pipeline == "contract_stack" {
        [
            "01-base-agreement.md",
            "02-amendment-1.md",
            "03-amendment-2.md",
        ]
        .map(|f| (f, read(&format!("contract-stack/{f}"))))
        .to_vec()
    } else {
        Vec::new()
    };
    let docs: Vec<Upload> = docs
        .iter()
        .map(|(f, t)| (*f, DocumentRole::Unspecified, t.as_str()))
        .collect();
    start_uploaded_session(client, pipeline, prompt, &docs, model).await
}

/// Waits until the session reaches review, or stops with a failed job and
/// nothing running, or the timeout passes; true when it reached review.
async fn finish(client: &mut GatewayClient, session_id: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(s) = client
            .get_session(GetSessionRequest {
                session_id: session_id.into(),
            })
            .await
        {
            let s = s.into_inner();
            if s.status == REVIEW {
                return true;
            }
            let failed: u32 = s.jobs.iter().map(|j| j.failed).sum();
            let running: u32 = s.jobs.iter().map(|j| j.in_flight).sum();
            if failed > 0 && running == 0 {
                return false;
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    false
}

/// Model jobs, their attempts, those that ended accepted, and the output
/// tokens of the session's accepted replies.
async fn figures(env: &TestEnv, session_id: &str) -> (i64, i64, i64, i64) {
    let session = uuid::Uuid::parse_str(session_id).expect("session id");
    let (jobs, attempts, accepted): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), COALESCE(sum(attempt_count), 0)::bigint, \
         count(*) FILTER (WHERE status = 'completed') FROM dialectic_generation_jobs \
         WHERE session_id = $1 AND job_type IN ('PLAN', 'EXECUTE')",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("job figures");
    let (tokens,): (i64,) = sqlx::query_as(
        "SELECT COALESCE(sum(tokens_used_output), 0)::bigint FROM dialectic_contributions \
         WHERE session_id = $1",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("token figures");
    (jobs, attempts, accepted, tokens)
}

/// The exchanges recorded so far (the executor runs in `record` mode).
async fn recordings(env: &TestEnv) -> BTreeSet<String> {
    env.blob
        .list("recordings/")
        .await
        .expect("recordings")
        .into_iter()
        .collect()
}

fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Milliseconds within [from, to] in which at least one of the engine's model
/// calls was in flight, from the times its recorder kept: the model's share of
/// a session's wall time (the server answers one call at a time, so calls
/// that overlap were queued at the server, not served twice).
async fn model_busy_ms(env: &TestEnv, from: f64, to: f64) -> f64 {
    let mut spans = Vec::new();
    for key in recordings(env).await {
        let Ok(body) = env.blob.get(&key).await else {
            continue;
        };
        let Ok(body) = serde_json::from_slice::<Value>(&body) else {
            continue;
        };
        let (Some(start), Some(elapsed)) =
            (body["started_ms"].as_f64(), body["elapsed_ms"].as_f64())
        else {
            continue;
        };
        if start >= from && start <= to {
            spans.push((start, start + elapsed));
        }
    }
    union_length(spans)
}

fn union_length(mut spans: Vec<(f64, f64)>) -> f64 {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut total, mut reach) = (0.0, f64::MIN);
    for (start, end) in spans {
        let start = start.max(reach);
        if end > start {
            total += end - start;
            reach = end;
        }
    }
    total
}

/// The recorded requests sent again straight to the server, one at a time:
/// (output tokens the engine's calls got, output tokens now, seconds now).
async fn direct(
    env: &TestEnv,
    o: &Options,
    mode: Mode,
    keys: &BTreeSet<String>,
) -> (u64, u64, f64) {
    let provider = OpenAiProvider::new(OpenAiSettings {
        base_url: o.url.clone(),
        structured_output: mode.dialect(),
        // As the model is registered: llama-cpp-python reads no other field.
        token_limit_param: dialectic_llm::TokenLimitParam::MaxTokens,
        ..OpenAiSettings::default()
    })
    .expect("client");
    let (mut recorded, mut tokens, mut seconds) = (0, 0, 0.0);
    for key in keys {
        let body: Value = serde_json::from_slice(&env.blob.get(key).await.expect("recording"))
            .expect("recording JSON");
        recorded += body["response"]["output_tokens"].as_u64().unwrap_or(0);
        let request = serde_json::from_value(body["request"].clone()).expect("recorded request");
        let started = Instant::now();
        if let Ok(reply) = provider.chat(&request).await {
            seconds += started.elapsed().as_secs_f64();
            tokens += reply.output_tokens;
        }
    }
    (recorded, tokens, seconds)
}

struct Block {
    pipeline: String,
    mode: Mode,
    sessions: Vec<Value>,
    engine_tokens_per_s: f64,
    direct_tokens_per_s: f64,
    /// The first session's wall time over the time the plain client took for
    /// the same requests, scaled to the tokens the engine's calls produced
    /// (sampling differs between runs, so raw times would compare different
    /// replies).
    over_plain_client: f64,
}

async fn run_block(env: &TestEnv, o: &Options, pipeline: &str, mode: Mode, model: &str) -> Block {
    let mut client = env.gateway().await;
    let mut sessions = Vec::new();
    let (mut first_keys, mut first_wall) = (BTreeSet::new(), 0.0);
    for n in 0..o.sessions {
        let before = recordings(env).await;
        let started = Instant::now();
        let from = unix_ms();
        let id = start(&mut client, pipeline, model).await;
        let completed = finish(&mut client, &id, o.session_timeout).await;
        let wall = started.elapsed().as_secs_f64();
        let model_s = model_busy_ms(env, from, unix_ms()).await / 1000.0;
        let (jobs, attempts, accepted, tokens) = figures(env, &id).await;
        eprintln!(
            "{pipeline} {} session {}: {} in {wall:.0} s ({model_s:.1} s with a model call in flight), {jobs} model jobs, {attempts} attempts, {tokens} output tokens",
            mode.name(),
            n + 1,
            if completed { "completed" } else { "stopped" }
        );
        if n == 0 {
            first_keys = recordings(env).await.difference(&before).cloned().collect();
            first_wall = wall;
        }
        sessions.push(json!({
            "session_id": id, "completed": completed, "wall_s": wall, "model_s": model_s, "model_jobs": jobs,
            "attempts": attempts, "accepted": accepted, "output_tokens": tokens,
        }));
    }
    // Every call of the first session, rejected replies included, against
    // its wall time; then the same requests straight to the server.
    let (engine_tokens, direct_tokens, direct_seconds) = direct(env, o, mode, &first_keys).await;
    Block {
        pipeline: pipeline.into(),
        mode,
        sessions,
        engine_tokens_per_s: engine_tokens as f64 / first_wall.max(0.001),
        direct_tokens_per_s: direct_tokens as f64 / direct_seconds.max(0.001),
        over_plain_client: first_wall
            / (direct_seconds * engine_tokens as f64 / (direct_tokens as f64).max(1.0)).max(0.001),
    }
}

fn sum(sessions: &[Value], key: &str) -> f64 {
    sessions.iter().filter_map(|s| s[key].as_f64()).sum()
}

fn row(b: &Block) -> String {
    let s = &b.sessions;
    let completed = s.iter().filter(|s| s["completed"] == true).count();
    let (jobs, attempts, accepted) = (sum(s, "model_jobs"), sum(s, "attempts"), sum(s, "accepted"));
    let walls: Vec<f64> = s.iter().filter_map(|s| s["wall_s"].as_f64()).collect();
    // Wall time with no model call in flight: what the engine added.
    let engine_share = 1.0 - sum(s, "model_s") / walls.iter().sum::<f64>().max(0.001);
    format!(
        "| {} | {} | {}/{} | {:.2} | {:.1}% | {:.1} | {:.1} | {:.0} s (max {:.0} s) | {:.1}% | {:.3} |",
        b.pipeline,
        b.mode.name(),
        completed,
        s.len(),
        attempts / jobs.max(1.0),
        100.0 * (attempts - accepted) / attempts.max(1.0),
        b.engine_tokens_per_s,
        b.direct_tokens_per_s,
        walls.iter().sum::<f64>() / walls.len().max(1) as f64,
        walls.iter().cloned().fold(0.0, f64::max),
        100.0 * engine_share,
        b.over_plain_client,
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("real-model-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let mut env = TestEnv::new().await;
    env.start_all_with(|s| s.executor.provider_mode = "record".into())
        .await;
    let mut blocks = Vec::new();
    for mode in &o.modes {
        let model = register(&env, &o, *mode).await;
        for pipeline in &o.pipelines {
            blocks.push(run_block(&env, &o, pipeline, *mode, &model).await);
        }
    }
    println!(
        "| pipeline | structured output | completed | attempts/job | rejected replies | engine tok/s (session wall) | server alone tok/s (same calls) | wall per session | engine share of wall | wall / plain client |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for b in &blocks {
        println!("{}", row(b));
    }
    let report: Vec<Value> = blocks
        .iter()
        .map(|b| {
            json!({"pipeline": b.pipeline, "mode": b.mode.name(), "sessions": b.sessions,
                "engine_tokens_per_s": b.engine_tokens_per_s, "direct_tokens_per_s": b.direct_tokens_per_s,
                "over_plain_client": b.over_plain_client})
        })
        .collect();
    if let Err(e) = std::fs::write(
        &o.out,
        serde_json::to_vec_pretty(&report).unwrap_or_default(),
    ) {
        eprintln!("real-model-bench: writing {}: {e}", o.out);
    }
    env.teardown().await;
    ExitCode::SUCCESS
}
