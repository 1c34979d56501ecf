//! `dialectic-bench`: throughput, latency and per-job cost of the orchestration,
//! next to the raw limits of the same Postgres and RabbitMQ and a Celery peer.
//!
//! For each simulated model latency and each rung of the session ladder it
//! starts the six services as separate processes (the `chaos-service` binary,
//! one service per process, so CPU and RSS are per service) on a fresh database,
//! bucket and queue prefix, starts S thesis stages with N models each through
//! the gateway, waits until every job is over, and reads the figures from the
//! job rows, `pg_stat_database`, the outbox sequence and `/proc`.
//!
//!     cargo build --release -p dialectic-e2e --bin dialectic-bench --bin chaos-service
//!     target/release/dialectic-bench --ladder 10,100,1000 --latencies 0,1000 --models 1
//!
//! `deploy/bench.sh` runs it with the bounds and the Celery peer and prints the table.

use dialectic_e2e::{ALL_SERVICES, BearerKey, TestEnv, free_ports, listen_apart};
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use dialectic_proto::v1::{CreateProjectRequest, StartSessionRequest};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Model calls in sequence on a thesis stage: the header (PLAN), then one document.
const CRITICAL_MODEL_CALLS: f64 = 2.0;
const PROMPT: &str = "# Benchmark\n\nA shared workshop for a small town: what to build first, \
what to measure, and what to leave out.";

#[derive(Debug, Clone)]
struct Options {
    ladder: Vec<usize>,
    latencies: Vec<u64>,
    models: usize,
    slots: u16,
    render_slots: u16,
    out: PathBuf,
    bounds: bool,
    bound_seconds: u64,
    peer: Option<PathBuf>,
    python: String,
    rung_timeout: Duration,
    /// Sessions run (and left out of the figures) before each rung, at most
    /// the rung's size: a running platform's pools, connections and caches
    /// are warm; 0 measures a cold start.
    warmup: usize,
    /// Runs of each rung (each build alternating with the peer's); the figures
    /// reported are the run with the median jobs/s, every run's jobs/s beside them.
    repeat: usize,
    /// Processes of the planner and of the executor (replicas, as the chart
    /// runs them); one of every other service.
    planners: usize,
    executors: usize,
    /// ANALYZE the rung's database after the warm-up, as autovacuum has on a
    /// platform that has been running (`--no-analyze`: a fresh database's
    /// statistics, which put the seeded ledger at one row per page).
    analyze: bool,
}

fn parse_list<T: std::str::FromStr>(text: &str) -> Option<Vec<T>> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().ok())
        .collect()
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: dialectic-bench [--ladder 10,100,1000] [--latencies 0,1000] [--models 1] \
         [--slots 64] [--render-slots 4] [--out FILE.json] [--no-bounds] [--bound-seconds 10] \
         [--peer bench/peers/celery/peer.py --python PYTHON] [--rung-timeout-secs 600] \
         [--warmup 10] [--repeat 1] [--planners 1] [--executors 1] [--no-analyze]"
    );
    ExitCode::from(2)
}

fn parse_args() -> Option<Options> {
    let mut options = Options {
        ladder: vec![10, 100, 1000],
        latencies: vec![0, 1000],
        models: 1,
        slots: 64,
        render_slots: 4,
        out: PathBuf::from("dialectic-bench.json"),
        bounds: true,
        bound_seconds: 10,
        peer: None,
        python: "python3".into(),
        rung_timeout: Duration::from_secs(600),
        warmup: 10,
        repeat: 1,
        planners: 1,
        executors: 1,
        analyze: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--no-bounds" => options.bounds = false,
            "--no-analyze" => options.analyze = false,
            "--ladder" => options.ladder = parse_list(&args.next()?)?,
            "--latencies" => options.latencies = parse_list(&args.next()?)?,
            "--models" => options.models = args.next()?.parse().ok()?,
            "--slots" => options.slots = args.next()?.parse().ok()?,
            "--render-slots" => options.render_slots = args.next()?.parse().ok()?,
            "--out" => options.out = PathBuf::from(args.next()?),
            "--bound-seconds" => options.bound_seconds = args.next()?.parse().ok()?,
            "--warmup" => options.warmup = args.next()?.parse().ok()?,
            "--repeat" => options.repeat = args.next()?.parse().ok()?,
            "--planners" => options.planners = args.next()?.parse().ok()?,
            "--executors" => options.executors = args.next()?.parse().ok()?,
            "--peer" => options.peer = Some(PathBuf::from(args.next()?)),
            "--python" => options.python = args.next()?,
            "--rung-timeout-secs" => {
                options.rung_timeout = Duration::from_secs(args.next()?.parse().ok()?)
            }
            _ => return None,
        }
    }
    // A session takes at most 16 models (gateway rule).
    (options.models >= 1
        && options.models <= 16
        && options.slots >= 1
        && options.render_slots >= 1
        && options.repeat >= 1
        && options.planners >= 1
        && options.executors >= 1)
        .then_some(options)
}

#[tokio::main]
async fn main() -> ExitCode {
    let Some(options) = parse_args() else {
        return usage();
    };
    let Some(service_binary) = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("chaos-service")))
        .filter(|path| path.exists())
    else {
        eprintln!(
            "build the service binary first: cargo build --release -p dialectic-e2e --bin chaos-service"
        );
        return ExitCode::FAILURE;
    };
    let machine = machine_description();
    println!("dialectic-bench on {machine}");
    let mut rungs = Vec::new();
    for &latency in &options.latencies {
        for &sessions in &options.ladder {
            println!(
                "-- dialectic: {sessions} sessions x {} model(s), simulated latency {latency} ms",
                options.models
            );
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            for _ in 0..options.repeat {
                let rung = run_rung(&service_binary, &options, sessions, latency).await;
                print_rung(&rung);
                ours.push(rung);
                if let Some(script) = &options.peer {
                    println!("-- celery: {sessions} sessions, latency {latency} ms");
                    let peer = run_peer(&options, script, sessions, latency).await;
                    println!("   {peer}");
                    theirs.push(peer);
                }
            }
            rungs.push(json!({ "dialectic": median_run(ours), "celery": median_run(theirs) }));
        }
    }
    let bounds = if options.bounds {
        println!("-- bounds: pgbench replaying one job's transactions, raw lapin confirm/ack loop");
        let b = bounds(&options).await;
        println!("   {b}");
        b
    } else {
        Value::Null
    };
    let report = json!({
        "machine": machine,
        "options": {
            "ladder": options.ladder, "latencies_ms": options.latencies,
            "models": options.models, "slots": options.slots,
            "render_slots": options.render_slots,
            "planners": options.planners, "executors": options.executors,
            "analyze_after_warmup": options.analyze,
        },
        "rungs": rungs,
        "bounds": bounds,
    });
    print_table(&report);
    match std::fs::write(
        &options.out,
        serde_json::to_string_pretty(&report).unwrap_or_default(),
    ) {
        Ok(()) => println!("wrote {}", options.out.display()),
        Err(e) => {
            eprintln!("cannot write {}: {e}", options.out.display());
            return ExitCode::FAILURE;
        }
    }
    let failed = report["rungs"]
        .as_array()
        .map(|r| r.iter().any(|r| r["dialectic"]["error"].is_string()))
        .unwrap_or(true);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn machine_description() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!("{cores} cores, load average {}", load.join(" "))
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU seconds (user + system) of a process so far.
fn cpu_seconds(pid: u32, ticks: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces; the fields after it are fixed.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    // utime and stime are fields 14 and 15 of stat; `rest` starts at field 3.
    (field(11).unwrap_or(0.0) + field(12).unwrap_or(0.0)) / ticks
}

/// Peak resident set size (VmHWM) in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// The rung's service processes by instance name (`planner`, `planner-2`, …).
struct Services {
    children: BTreeMap<String, Child>,
}

impl Drop for Services {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One service process: its instance name, service, gRPC port and the
/// settings it overrides.
struct Instance {
    name: String,
    service: &'static str,
    port: u16,
    overrides: Vec<String>,
}

/// Every service once, plus the extra planners and executors `options` asks
/// for, each on a port of its own (same settings otherwise, pool included).
fn instances(options: &Options, ports: &BTreeMap<&'static str, u16>) -> Vec<Instance> {
    let mut all: Vec<Instance> = ALL_SERVICES
        .into_iter()
        .map(|service| Instance {
            name: service.to_string(),
            service,
            port: ports[service],
            overrides: Vec::new(),
        })
        .collect();
    let extra = [
        ("planner", options.planners, "planner.listen"),
        ("executor", options.executors, "executor.listen"),
    ];
    let count: usize = extra.iter().map(|(_, n, _)| n - 1).sum();
    let mut extra_ports = free_ports(count).into_iter();
    for (service, replicas, listen_key) in extra {
        for replica in 2..=replicas {
            let port = extra_ports.next().expect("a port per replica");
            all.push(Instance {
                name: format!("{service}-{replica}"),
                service,
                port,
                overrides: vec![format!("{listen_key}=127.0.0.1:{port}")],
            });
        }
    }
    all
}

/// Starts every instance and waits until each serves.
async fn start_services(
    binary: &Path,
    config: &Path,
    log_dir: &Path,
    instances: &[Instance],
) -> Services {
    let log_filter = std::env::var("BENCH_LOG").unwrap_or_else(|_| "warn".into());
    let mut services = Services {
        children: BTreeMap::new(),
    };
    for instance in instances {
        let name = &instance.name;
        let log = std::fs::File::create(log_dir.join(format!("{name}.log"))).expect("log");
        let mut command =
            dialectic_e2e::chaos::service_command(binary, config, instance.service, &log_filter);
        for setting in &instance.overrides {
            command.arg("--set").arg(setting);
        }
        let child = command
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        services.children.insert(name.clone(), child);
    }
    for instance in instances {
        dialectic_e2e::wait_until_serving(&instance.name, instance.port, log_dir).await;
    }
    services
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0).max(0.0) * p).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

/// One number from Postgres, retried while the shared server refuses
/// connections for a moment (other test suites use it too).
async fn scalar(pool: &sqlx::PgPool, sql: &str) -> i64 {
    let mut tries = 0;
    loop {
        match sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await {
            Ok(v) => return v,
            Err(e) if tries >= 60 => panic!("{sql}: {e}"),
            Err(_) => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// The jobs of the sessions a rung measures (bind the rung's start as $1).
const MEASURED: &str =
    "session_id IN (SELECT id FROM dialectic_sessions WHERE created_at >= $1::timestamptz)";

/// Outbox messages written so far (every message passes through the outbox).
const MESSAGES_SENT: &str =
    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM outbox_id_seq";

async fn count_since(pool: &sqlx::PgPool, sql: &str, since: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sql)
        .bind(since)
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

type Client = DialecticServiceClient<
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, BearerKey>,
>;

/// Creates `count` projects and starts a session on each; the first error.
async fn start_sessions(
    client: &Client,
    models: &[String],
    label: &str,
    count: usize,
) -> Option<String> {
    let starts = futures::stream::iter(0..count)
        .map(|i| {
            let mut client = client.clone();
            let models = models.to_vec();
            async move {
                let project = client
                    .create_project(CreateProjectRequest {
                        name: format!("{label} {i}"),
                        initial_user_prompt: PROMPT.into(),
                        client_request_id: String::new(),
                        prompt_file: None,
                        pipeline: String::new(),
                    })
                    .await?
                    .into_inner();
                client
                    .start_session(StartSessionRequest {
                        project_id: project.id,
                        models,
                        description: String::new(),
                        client_request_id: String::new(),
                        auto_advance: false,
                        ..Default::default()
                    })
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<Result<(), tonic::Status>>>()
        .await;
    starts
        .into_iter()
        .find_map(|r| r.err().map(|e| e.to_string()))
}

/// Polls until the `sessions` created since `since` finished their stage and
/// no job is open; an error when a job failed or the deadline passed. Adds
/// each poll (a transaction of the bench's own) to `polls`.
async fn wait_for_sessions(
    pool: &sqlx::PgPool,
    since: &str,
    sessions: usize,
    deadline: Instant,
    polls: &mut i64,
) -> Option<String> {
    loop {
        let (done, open, failed): (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM dialectic_sessions
                      WHERE status = 'pending_antithesis' AND created_at >= $1::timestamptz),
                    (SELECT count(*) FROM dialectic_generation_jobs
                      WHERE status NOT IN ('completed', 'failed', 'retry_loop_failed', 'superseded')),
                    (SELECT count(*) FROM dialectic_generation_jobs
                      WHERE status IN ('failed', 'retry_loop_failed'))",
        )
        .bind(since)
        .fetch_one(pool)
        .await
        .unwrap_or((0, 1, 0));
        *polls += 1;
        if failed > 0 {
            return Some(format!("{failed} jobs failed"));
        } else if done as usize == sessions && open == 0 {
            return None;
        } else if Instant::now() > deadline {
            return Some(format!(
                "timed out: {done} of {sessions} sessions done, {open} jobs open"
            ));
        }
        // Each poll counts every job row: often enough to end a small rung
        // promptly, rarely enough not to weigh on a large one (the rung's end
        // is its last job's completion, not the poll that saw it).
        let every = if sessions > 100 { 1000 } else { 250 };
        tokio::time::sleep(Duration::from_millis(every)).await;
    }
}

/// The cluster's WAL insert position: nothing else writes while a rung runs,
/// so the distance it moves is the rung's WAL.
async fn wal_position(pool: &sqlx::PgPool) -> String {
    sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
        .fetch_one(pool)
        .await
        .unwrap_or_default()
}

async fn wal_since(pool: &sqlx::PgPool, before: &str) -> i64 {
    sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::int8")
        .bind(before)
        .fetch_one(pool)
        .await
        .unwrap_or(0)
}

/// ANALYZE on a connection of its own, closed after: a backend reports its
/// transactions when it ends, so the per-table ones land before the rung's
/// baseline instead of up to ten seconds into it (an idle pool connection's).
async fn analyze(database_url: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(database_url)
        .await
        .expect("connect to analyze");
    sqlx::query("ANALYZE")
        .execute(&mut conn)
        .await
        .expect("analyze the rung's database");
    conn.close().await.expect("close the analyzing connection");
}

async fn xact_commits(pool: &sqlx::PgPool, database: &str) -> i64 {
    sqlx::query_scalar::<_, i64>("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
        .bind(database)
        .fetch_one(pool)
        .await
        .unwrap_or(0)
}

/// One rung: S sessions at one latency, on fresh services and storage.
/// The run with the median jobs/s (the upper one of an even count), with
/// every run's jobs/s as `jobs_per_s_runs`; Null when nothing ran.
fn median_run(mut runs: Vec<Value>) -> Value {
    let jobs_per_s = |run: &Value| run["jobs_per_s"].as_f64().unwrap_or(0.0);
    let all: Vec<f64> = runs.iter().map(jobs_per_s).collect();
    runs.sort_by(|a, b| jobs_per_s(a).total_cmp(&jobs_per_s(b)));
    if runs.is_empty() {
        return Value::Null;
    }
    let mut median = runs.swap_remove(runs.len() / 2);
    if let Some(fields) = median.as_object_mut() {
        fields.insert("jobs_per_s_runs".into(), json!(all));
    }
    median
}

async fn run_rung(binary: &Path, options: &Options, sessions: usize, latency_ms: u64) -> Value {
    let env = TestEnv::new().await;
    let pool = env.store.pool().clone();
    let log_dir = std::env::temp_dir().join(format!("dialectic-bench-{}", env.database));
    std::fs::create_dir_all(&log_dir).expect("log dir");
    // Models beyond the two seeded simulated ones are copies of the first.
    let mut models: Vec<String> = vec!["simulated".into(), "simulated-b".into()];
    for k in 3..=options.models {
        let name = format!("simulated-{k}");
        sqlx::query(
            "INSERT INTO ai_providers (api_identifier, name, provider, context_window_tokens,
                 max_output_tokens, input_token_cost_rate, output_token_cost_rate, tokenizer)
             SELECT $1, $1, provider, context_window_tokens, max_output_tokens,
                    input_token_cost_rate, output_token_cost_rate, tokenizer
             FROM ai_providers WHERE api_identifier = 'simulated'",
        )
        .bind(&name)
        .execute(&pool)
        .await
        .expect("extra simulated model");
        models.push(name);
    }
    models.truncate(options.models);

    let mut settings = env.settings.clone();
    let ports = listen_apart(&mut settings, &free_ports(ALL_SERVICES.len()));
    settings.executor.simulated_latency_ms = latency_ms;
    settings.executor.worker.slots = options.slots;
    // The pool stays at its default whatever the slots: a render holds one
    // connection at a time, so renders beyond the pool wait for it rather than
    // starve it, and six services' pools must fit Postgres's max_connections.
    settings.renderer.worker.slots = options.render_slots;
    // Production sweep period, not the tests' fast one.
    settings.planner.sweep_interval_ms = 1000;
    settings.wallet.hold_sweep_interval_ms = 5000;
    // BENCH_SPANS=1 BENCH_LOG=info: every span's busy/idle time in the
    // services' logs (the attempt's stages, the planner's unit and commit).
    settings.telemetry.span_timings = std::env::var_os("BENCH_SPANS").is_some();
    let config = log_dir.join("bench.toml");
    std::fs::write(
        &config,
        toml::to_string(&settings).expect("settings serialise"),
    )
    .expect("write config");

    let services = start_services(binary, &config, &log_dir, &instances(options, &ports)).await;
    let gateway = format!("http://127.0.0.1:{}", ports["gateway"]);
    let channel = tonic::transport::Endpoint::from_shared(gateway)
        .expect("gateway address")
        .connect()
        .await
        .expect("gateway connects");
    // The seeded local administrator's key: every call is authenticated.
    let client = DialecticServiceClient::with_interceptor(
        channel,
        BearerKey(settings.gateway.bootstrap_key.clone()),
    );
    let warm = options.warmup.min(sessions);
    let mut error = None;
    if warm > 0 {
        let deadline = Instant::now() + options.rung_timeout;
        error = start_sessions(&client, &models, "Warm-up", warm).await;
        if error.is_none() {
            error = wait_for_sessions(&pool, "-infinity", warm, deadline, &mut 0).await;
        }
    }
    if options.analyze && error.is_none() {
        analyze(&env.settings.database.url).await;
    }
    // The figures count only what starts from here.
    let since: String = sqlx::query_scalar("SELECT clock_timestamp()::text")
        .fetch_one(&pool)
        .await
        .expect("database clock");
    let messages_before = scalar(&pool, MESSAGES_SENT).await;
    let ticks = clock_ticks();
    let cpu_before: BTreeMap<&str, f64> = services
        .children
        .iter()
        .map(|(n, c)| (n.as_str(), cpu_seconds(c.id(), ticks)))
        .collect();
    // Let idle services' statistics reach pg_stat_database before the baseline.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let xacts_before = xact_commits(&pool, &env.database).await;
    let wal_before = wal_position(&pool).await;
    // This function's own transactions in the measured span: the baselines,
    // the polls and the end read.
    let mut own_xacts = 2i64;

    let started = Instant::now();
    if error.is_none() {
        error = start_sessions(&client, &models, "Bench", sessions).await;
    }
    let submitted = started.elapsed();
    if error.is_none() {
        let deadline = started + options.rung_timeout;
        error = wait_for_sessions(&pool, &since, sessions, deadline, &mut own_xacts).await;
    }
    // The last job's completion, not the poll that saw it, ends the run.
    let span_ms: f64 = sqlx::query_scalar(&format!(
        "SELECT COALESCE(EXTRACT(EPOCH FROM (max(completed_at) - min(created_at)))::float8 * 1000, 0)
         FROM dialectic_generation_jobs WHERE {MEASURED}"
    ))
    .bind(&since)
    .fetch_one(&pool)
    .await
    .unwrap_or(0.0);
    own_xacts += 1;
    let elapsed_s = submitted.as_secs_f64().max(span_ms / 1000.0);
    let mut per_service = serde_json::Map::new();
    let mut service_cpu = 0.0;
    for (name, child) in &services.children {
        let cpu =
            cpu_seconds(child.id(), ticks) - cpu_before.get(name.as_str()).copied().unwrap_or(0.0);
        service_cpu += cpu;
        per_service.insert(
            name.to_string(),
            json!({ "cpu_s": round(cpu, 2), "peak_rss_mib": round(peak_rss_mib(child.id()), 1) }),
        );
    }
    // Other backends flush their statistics within a second of going idle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let xacts = xact_commits(&pool, &env.database).await - xacts_before - own_xacts;
    let wal_bytes = wal_since(&pool, &wal_before).await;

    let jobs = count_since(
        &pool,
        &format!("SELECT count(*) FROM dialectic_generation_jobs WHERE {MEASURED}"),
        &since,
    )
    .await;
    let model_jobs = count_since(
        &pool,
        &format!(
            "SELECT count(*) FROM dialectic_generation_jobs WHERE {MEASURED} AND job_type <> 'RENDER'"
        ),
        &since,
    )
    .await;
    let messages = scalar(&pool, MESSAGES_SENT).await - messages_before;
    let dispatch: Vec<f64> = sqlx::query_scalar(&format!(
        "SELECT EXTRACT(EPOCH FROM (started_at - created_at))::float8 * 1000
         FROM dialectic_generation_jobs WHERE {MEASURED} AND started_at IS NOT NULL ORDER BY 1"
    ))
    .bind(&since)
    .fetch_all(&pool)
    .await
    .unwrap_or_default();
    let session_ms: Vec<f64> = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM (max(j.completed_at) - s.created_at))::float8 * 1000
         FROM dialectic_sessions s JOIN dialectic_generation_jobs j ON j.session_id = s.id
         WHERE s.created_at >= $1::timestamptz
         GROUP BY s.id ORDER BY 1",
    )
    .bind(&since)
    .fetch_all(&pool)
    .await
    .unwrap_or_default();
    if std::env::var_os("BENCH_TIMELINE").is_some() && sessions == 1 {
        print_timeline(&pool, &since).await;
    }
    let critical_ms = CRITICAL_MODEL_CALLS * latency_ms as f64;
    let efficiency = |ms: f64| if ms > 0.0 { critical_ms / ms } else { 0.0 };
    let jobs_f = jobs.max(1) as f64;
    let result = json!({
        "sessions": sessions,
        "models": options.models,
        "latency_ms": latency_ms,
        "slots": options.slots,
        "render_slots": options.render_slots,
        "warmup_sessions": warm,
        "error": error,
        "elapsed_s": round(elapsed_s, 2),
        "jobs": jobs,
        "model_jobs": model_jobs,
        "jobs_per_s": round(jobs as f64 / elapsed_s, 1),
        "sessions_per_s": round(sessions as f64 / elapsed_s, 2),
        "dispatch_ms": {
            "p50": round(percentile(&dispatch, 0.5), 1),
            "p95": round(percentile(&dispatch, 0.95), 1),
            "p99": round(percentile(&dispatch, 0.99), 1),
        },
        "session_ms": {
            "p50": round(percentile(&session_ms, 0.5), 0),
            "p95": round(percentile(&session_ms, 0.95), 0),
            "max": round(percentile(&session_ms, 1.0), 0),
        },
        "critical_path_model_ms": critical_ms,
        // Model time along the critical path over the session's wall time:
        // 1.0 means orchestration added nothing.
        "critical_path_efficiency": {
            "p50": round(efficiency(percentile(&session_ms, 0.5)), 3),
            "worst": round(efficiency(percentile(&session_ms, 1.0)), 3),
        },
        "pg_xacts_per_job": round(xacts as f64 / jobs_f, 2),
        "pg_wal_kib_per_job": round(wal_bytes as f64 / 1024.0 / jobs_f, 2),
        "amqp_messages_per_job": round(messages as f64 / jobs_f, 2),
        "service_cpu_ms_per_job": round(service_cpu * 1000.0 / jobs_f, 2),
        "services": per_service,
        "logs": log_dir.display().to_string(),
    });
    drop(services);
    env.teardown().await;
    // BENCH_SPANS keeps the logs: they are the profile.
    if result["error"].is_null() && std::env::var_os("BENCH_SPANS").is_none() {
        let _ = std::fs::remove_dir_all(&log_dir);
    }
    result
}

/// A lone session's jobs on one time line (ms from the session's creation):
/// created (ready, dispatched), claimed, completed. Set BENCH_TIMELINE=1.
async fn print_timeline(pool: &sqlx::PgPool, since: &str) {
    let rows: Vec<(String, String, f64, f64, f64)> = sqlx::query_as(
        "SELECT j.job_type, COALESCE(j.document_key, ''),
                EXTRACT(EPOCH FROM (j.created_at - s.created_at))::float8 * 1000,
                EXTRACT(EPOCH FROM (j.started_at - s.created_at))::float8 * 1000,
                EXTRACT(EPOCH FROM (j.completed_at - s.created_at))::float8 * 1000
         FROM dialectic_generation_jobs j JOIN dialectic_sessions s ON s.id = j.session_id
         WHERE s.created_at >= $1::timestamptz
         ORDER BY j.created_at",
    )
    .bind(since)
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    println!("   timeline (ms from session created): type document created claimed completed");
    for (job_type, document, created, started, completed) in rows {
        println!("   {job_type:8} {document:24} {created:8.1} {started:8.1} {completed:8.1}");
    }
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

fn print_rung(r: &Value) {
    if let Some(e) = r["error"].as_str() {
        println!("   ERROR: {e} (logs in {})", r["logs"]);
    }
    println!(
        "   {} jobs in {} s: {} jobs/s, {} sessions/s; dispatch p50/p95/p99 {}/{}/{} ms; \
         session p50 {} ms, critical-path efficiency p50 {}; {} pg xacts/job, {} KiB WAL/job, \
         {} AMQP msgs/job, {} service CPU ms/job",
        r["jobs"],
        r["elapsed_s"],
        r["jobs_per_s"],
        r["sessions_per_s"],
        r["dispatch_ms"]["p50"],
        r["dispatch_ms"]["p95"],
        r["dispatch_ms"]["p99"],
        r["session_ms"]["p50"],
        r["critical_path_efficiency"]["p50"],
        r["pg_xacts_per_job"],
        r["pg_wal_kib_per_job"],
        r["amqp_messages_per_job"],
        r["service_cpu_ms_per_job"],
    );
    if let Some(services) = r["services"].as_object() {
        let parts: Vec<String> = services
            .iter()
            .map(|(n, s)| format!("{n} {}s/{}MiB", s["cpu_s"], s["peak_rss_mib"]))
            .collect();
        println!("   CPU s / peak RSS: {}", parts.join(", "));
    }
}

/// Runs the Celery peer for one rung; its last stdout line is a JSON object.
async fn run_peer(options: &Options, script: &Path, sessions: usize, latency_ms: u64) -> Value {
    let settings = dialectic_e2e::base_settings();
    let output = tokio::process::Command::new(&options.python)
        .arg(script)
        .args(["--sessions", &sessions.to_string()])
        .args(["--latency-ms", &latency_ms.to_string()])
        .args(["--models", &options.models.to_string()])
        .args(["--concurrency", &options.slots.to_string()])
        .args(["--timeout", &options.rung_timeout.as_secs().to_string()])
        .args(["--warmup", &options.warmup.min(sessions).to_string()])
        .env("PEER_DATABASE_URL", &settings.database.url)
        .env("PEER_AMQP_URL", &settings.amqp.url)
        .env("PEER_S3_ENDPOINT", &settings.s3.endpoint)
        .env("PEER_S3_REGION", &settings.s3.region)
        .env("PEER_S3_ACCESS_KEY", &settings.s3.access_key)
        .env("PEER_S3_SECRET_KEY", &settings.s3.secret_key)
        .stderr(Stdio::inherit())
        .output()
        .await;
    match output {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .unwrap_or_else(
                || json!({ "error": format!("peer exited {} without a result", out.status) }),
            ),
        Err(e) => json!({ "error": format!("cannot run {}: {e}", options.python) }),
    }
}

/// The machine's own limits: pgbench replaying the transactions one job
/// makes, and a raw publish-with-confirm → consume-with-ack loop.
async fn bounds(options: &Options) -> Value {
    let settings = dialectic_e2e::base_settings();
    json!({
        "pgbench": pgbench_bound(&settings.database.url, options.bound_seconds).await,
        "rabbitmq": amqp_bound(&settings.amqp.url, options.bound_seconds).await,
    })
}

/// One job's life in Postgres as the services write it (the statements of
/// crates/store, on tables of the same shape and indexes): the parent's
/// outcome creates the job and its outbox row, the relay takes the row, a
/// worker claims the job with a compare-and-set and a lease, renews it, saves
/// its contribution and outcome (with an outbox row), the relay takes that,
/// and the planner applies the outcome to the job and wakes its parent.
const PGBENCH_SCHEMA: &str = "
CREATE TABLE jobs (id bigserial PRIMARY KEY, job_key text NOT NULL UNIQUE, parent_id bigint,
  status text NOT NULL, payload jsonb NOT NULL DEFAULT '{}', attempt_count int NOT NULL DEFAULT 0,
  lease_owner text, lease_expires_at timestamptz, results jsonb, created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz, completed_at timestamptz, updated_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE status = 'processing';
CREATE INDEX jobs_parent ON jobs (parent_id) WHERE parent_id IS NOT NULL;
CREATE TABLE contributions (id uuid PRIMARY KEY, job_id bigint UNIQUE, storage_path text NOT NULL,
  size_bytes bigint NOT NULL, metadata jsonb NOT NULL DEFAULT '{}', created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE outbox (id bigserial PRIMARY KEY, routing_key text NOT NULL, payload bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE parents (id uuid PRIMARY KEY, children_done int NOT NULL DEFAULT 0);
INSERT INTO parents SELECT gen_random_uuid() FROM generate_series(1, 64);
";

const PGBENCH_SCRIPT: &str = "
\\set p random(1, 64)
BEGIN;
INSERT INTO jobs (job_key, status, payload) VALUES (md5(random()::text), 'pending', '{\"step\":\"generate\"}') RETURNING id \\gset job_
INSERT INTO outbox (routing_key, payload) VALUES ('job.execute', convert_to(:job_id::text, 'UTF8'));
COMMIT;
BEGIN;
SELECT id, routing_key, payload FROM outbox ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED;
DELETE FROM outbox WHERE id IN (SELECT id FROM outbox ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED);
COMMIT;
UPDATE jobs SET status = 'processing', attempt_count = attempt_count + 1, lease_owner = 'w', lease_expires_at = now() + interval '30 s', started_at = COALESCE(started_at, now()), updated_at = now() WHERE id = :job_id AND status = 'pending' RETURNING payload;
UPDATE jobs SET lease_expires_at = now() + interval '30 s' WHERE id = :job_id AND lease_owner = 'w';
BEGIN;
INSERT INTO contributions (id, job_id, storage_path, size_bytes) VALUES (gen_random_uuid(), :job_id, 'p/' || :job_id::text, 2048);
UPDATE jobs SET status = 'completed', results = '{\"ok\":true}', completed_at = now(), lease_owner = NULL, updated_at = now() WHERE id = :job_id AND lease_owner = 'w';
INSERT INTO outbox (routing_key, payload) VALUES ('job.event', convert_to(:job_id::text, 'UTF8'));
COMMIT;
BEGIN;
SELECT id, routing_key, payload FROM outbox ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED;
DELETE FROM outbox WHERE id IN (SELECT id FROM outbox ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED);
COMMIT;
BEGIN;
SELECT status FROM jobs WHERE id = :job_id FOR UPDATE;
UPDATE parents SET children_done = children_done + 1 WHERE id = (SELECT id FROM parents OFFSET :p - 1 LIMIT 1);
COMMIT;
";

async fn pgbench_bound(database_url: &str, seconds: u64) -> Value {
    let suffix = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
    let database = format!("dialectic_pgbench_{suffix}");
    let (base, _) = database_url.split_once('?').unwrap_or((database_url, ""));
    let Some((server, _)) = base.rsplit_once('/') else {
        return json!({ "error": "database URL has no database name" });
    };
    let admin_url = format!("{server}/postgres");
    let url = format!("{server}/{database}");
    let created = async {
        use sqlx::Connection;
        let mut admin = sqlx::PgConnection::connect(&admin_url).await?;
        sqlx::query(&format!("CREATE DATABASE {database}"))
            .execute(&mut admin)
            .await?;
        let mut conn = sqlx::PgConnection::connect(&url).await?;
        sqlx::raw_sql(PGBENCH_SCHEMA).execute(&mut conn).await?;
        Ok::<_, sqlx::Error>(())
    }
    .await;
    if let Err(e) = created {
        return json!({ "error": e.to_string() });
    }
    let script = std::env::temp_dir().join(format!("{database}.sql"));
    let result = match std::fs::write(&script, PGBENCH_SCRIPT) {
        Err(e) => json!({ "error": e.to_string() }),
        Ok(()) => {
            // Eight clients on two threads: about as many connections as the
            // services keep busy at once.
            let out = tokio::process::Command::new("pgbench")
                .args(["-n", "-c", "8", "-j", "2", "-T", &seconds.to_string(), "-f"])
                .arg(&script)
                .arg(&url)
                .output()
                .await;
            match out {
                Err(e) => json!({ "error": format!("pgbench: {e}") }),
                Ok(out) => {
                    let text = String::from_utf8_lossy(&out.stdout);
                    let tps = text
                        .lines()
                        .find(|l| l.starts_with("tps = "))
                        .and_then(|l| l.split_whitespace().nth(2))
                        .and_then(|v| v.parse::<f64>().ok());
                    match tps {
                        Some(tps) => json!({
                            "jobs_per_s": round(tps, 1),
                            "xacts_per_job": 7,
                            "clients": 8,
                            "seconds": seconds,
                        }),
                        None => json!({
                            "error": format!("pgbench: {}", String::from_utf8_lossy(&out.stderr))
                        }),
                    }
                }
            }
        }
    };
    let _ = std::fs::remove_file(&script);
    if let Ok(mut admin) = {
        use sqlx::Connection;
        sqlx::PgConnection::connect(&admin_url).await
    } {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            .execute(&mut admin)
            .await;
    }
    result
}

/// Publish with confirms (a window of 100 unconfirmed) into a quorum queue of
/// the same topology the services use, while a consumer acks each delivery.
async fn amqp_bound(url: &str, seconds: u64) -> Value {
    let suffix = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
    let topology = dialectic_queue::Topology::new(format!("bench-raw-{suffix}"), 5);
    let run = async {
        let connection = dialectic_queue::connect(url).await?;
        let setup = connection.create_channel().await?;
        topology.declare(&setup).await?;
        let publisher = dialectic_queue::Publisher::new(&connection, &topology).await?;
        let consumer_channel = connection.create_channel().await?;
        consumer_channel
            .basic_qos(200, lapin::options::BasicQosOptions::default())
            .await?;
        let mut consumer = consumer_channel
            .basic_consume(
                topology
                    .queue(dialectic_queue::keys::JOB_RENDER)
                    .as_str()
                    .into(),
                "bench".into(),
                lapin::options::BasicConsumeOptions::default(),
                lapin::types::FieldTable::default(),
            )
            .await?;
        let consumed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = consumed.clone();
        let consuming = tokio::spawn(async move {
            while let Some(Ok(delivery)) = consumer.next().await {
                if delivery
                    .ack(lapin::options::BasicAckOptions::default())
                    .await
                    .is_err()
                {
                    break;
                }
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let body = vec![b'x'; 200];
        let started = Instant::now();
        let mut published = 0u64;
        while started.elapsed() < Duration::from_secs(seconds) {
            let sends =
                (0..100).map(|_| publisher.publish(dialectic_queue::keys::JOB_RENDER, &body, None));
            for sent in futures::future::join_all(sends).await {
                sent?;
                published += 1;
            }
        }
        // Wait for the consumer to ack what was published.
        let drain = Instant::now();
        while consumed.load(std::sync::atomic::Ordering::Relaxed) < published
            && drain.elapsed() < Duration::from_secs(30)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let acked = consumed.load(std::sync::atomic::Ordering::Relaxed);
        consuming.abort();
        topology.delete(&setup).await?;
        let _ = connection.close(200, "bench done".into()).await;
        Ok::<_, dialectic_queue::QueueError>(json!({
            "messages_per_s": round(acked as f64 / elapsed, 0),
            "published": published,
            "acked": acked,
            "seconds": round(elapsed, 2),
        }))
    };
    run.await
        .unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

fn fmt(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn print_table(report: &Value) {
    let pg = report["bounds"]["pgbench"]["jobs_per_s"].as_f64();
    let amqp = report["bounds"]["rabbitmq"]["messages_per_s"].as_f64();
    println!();
    println!(
        "| latency | sessions | jobs | dialectic jobs/s | sessions/s | celery jobs/s | celery sessions/s | dialectic/celery (sessions/s) | dispatch p50/p95/p99 ms | critical-path eff. p50 | pg xacts/job | AMQP msgs/job | CPU ms/job | of pgbench bound | of RabbitMQ bound |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for rung in report["rungs"].as_array().into_iter().flatten() {
        let d = &rung["dialectic"];
        let c = &rung["celery"];
        let ratio = match (d["sessions_per_s"].as_f64(), c["sessions_per_s"].as_f64()) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "-".into(),
        };
        let jobs_per_s = d["jobs_per_s"].as_f64().unwrap_or(0.0);
        let of_pg = pg
            .filter(|b| *b > 0.0)
            .map(|b| format!("{:.1}%", 100.0 * jobs_per_s / b))
            .unwrap_or_else(|| "-".into());
        // The broker bound in jobs/s: raw messages/s over the messages one job sends.
        let of_amqp = match (amqp, d["amqp_messages_per_job"].as_f64()) {
            (Some(m), Some(per)) if m > 0.0 && per > 0.0 => {
                format!("{:.1}%", 100.0 * jobs_per_s / (m / per))
            }
            _ => "-".into(),
        };
        println!(
            "| {} ms | {} | {} | {} | {} | {} | {} | {} | {}/{}/{} | {} | {} | {} | {} | {} | {} |",
            fmt(&d["latency_ms"]),
            fmt(&d["sessions"]),
            fmt(&d["jobs"]),
            fmt(&d["jobs_per_s"]),
            fmt(&d["sessions_per_s"]),
            fmt(&c["jobs_per_s"]),
            fmt(&c["sessions_per_s"]),
            ratio,
            fmt(&d["dispatch_ms"]["p50"]),
            fmt(&d["dispatch_ms"]["p95"]),
            fmt(&d["dispatch_ms"]["p99"]),
            fmt(&d["critical_path_efficiency"]["p50"]),
            fmt(&d["pg_xacts_per_job"]),
            fmt(&d["amqp_messages_per_job"]),
            fmt(&d["service_cpu_ms_per_job"]),
            of_pg,
            of_amqp,
        );
    }
    println!();
    println!(
        "bounds: pgbench {} jobs/s (one job's transactions per script run); RabbitMQ {} confirmed+acked messages/s",
        pg.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
        amqp.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_run_is_reported_with_every_runs_figure() {
        let runs = vec![
            json!({ "jobs_per_s": 3.0, "run": "a" }),
            json!({ "jobs_per_s": 1.0, "run": "b" }),
            json!({ "jobs_per_s": 2.0, "run": "c" }),
        ];
        let median = median_run(runs);
        assert_eq!(median["run"], "c");
        assert_eq!(median["jobs_per_s_runs"], json!([3.0, 1.0, 2.0]));
        assert_eq!(median_run(Vec::new()), Value::Null);
    }
}
