//! The fault harness: M sessions run across six separately started service
//! processes while, at random moments, one service at a time is SIGKILLed and
//! started again; Postgres, RabbitMQ, Redis and the S3 server are each
//! restarted; Postgres and RabbitMQ are SIGKILLed and recover from their logs;
//! the executor is frozen (SIGSTOP) past its lease and thawed; and a service
//! is killed while a dependency restarts. Afterwards it checks what must hold whatever was killed:
//! every session finished; no job has more than one contribution and every
//! finished document was rendered; no job made more model calls than it had
//! attempts (each call holds its cost first, under a key per attempt); the
//! wallet's balance is the initial credit minus the captures, exactly; the
//! queues and the outbox are empty and nothing is dead-lettered.

use crate::TestEnv;
use dialectic_config::Settings;
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use dialectic_proto::v1::{CreateProjectRequest, StartSessionRequest};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The order services are killed in (each at least once per round).
pub const KILL_ORDER: [&str; 6] = [
    "executor", "planner", "renderer", "gateway", "wallet", "indexer",
];
pub const DEPENDENCIES: [&str; 4] = ["redis", "rabbitmq", "postgres", "s3"];
/// Dependencies that can be SIGKILLed (`deploy/stack.sh kill`).
pub const HARD_KILLABLE: [&str; 2] = ["postgres", "rabbitmq"];

const PROMPT: &str = "# Chaos\n\nA plan that must survive its workers being killed: \
what to build first, what to measure, and what to leave out.";
/// The seeded local user's wallet holds this much before any session.
const INITIAL_CREDIT: i64 = 100_000_000;

#[derive(Debug, Clone)]
pub struct ChaosOptions {
    pub sessions: usize,
    pub models: Vec<String>,
    /// Simulated model latency: long enough that kills land mid-call.
    pub latency_ms: u64,
    /// Pause between one fault and the next, chosen at random in this range.
    pub fault_gap_ms: (u64, u64),
    /// How long a killed service stays down.
    pub down_ms: u64,
    /// Dependencies to restart, once each per round, between service kills.
    pub dependencies: Vec<String>,
    /// Dependencies to SIGKILL and start again, once each per round.
    pub hard_kills: Vec<String>,
    /// Freeze the executor past its lease once per round (SIGSTOP, SIGCONT).
    pub freeze: bool,
    /// Once per round, kill the executor while the first dependency restarts.
    pub double_fault: bool,
    /// Rounds of service kills (each round kills all six, in [`KILL_ORDER`]).
    pub rounds: usize,
    pub seed: u64,
    /// Every session must finish within this.
    pub deadline: Duration,
    /// Where each process's log goes (kept for a failed run).
    pub log_dir: PathBuf,
}

impl ChaosOptions {
    /// A few sessions, every service killed once, every dependency restarted once.
    pub fn quick(log_dir: PathBuf) -> Self {
        Self {
            sessions: 4,
            models: vec!["simulated".into()],
            latency_ms: 500,
            fault_gap_ms: (1_000, 2_500),
            down_ms: 500,
            dependencies: dependencies_from_env(),
            hard_kills: hard_kills_from_env(),
            freeze: true,
            double_fault: true,
            rounds: 1,
            seed: 7,
            deadline: Duration::from_secs(300),
            log_dir,
        }
    }
}

/// One service in its own process (`chaos-service`), configured only by the
/// TOML file: the caller's DIALECTIC_* and OTEL_* variables (the shared local
/// stack) would otherwise override it. The caller adds output and spawns.
pub fn service_command(binary: &Path, config: &Path, service: &str, log_filter: &str) -> Command {
    let mut command = Command::new(binary);
    for (key, _) in std::env::vars() {
        if key.starts_with("DIALECTIC_") || key.starts_with("OTEL_") {
            command.env_remove(key);
        }
    }
    command
        .env("DIALECTIC_CHAOS_SERVICE", service)
        .env("RUST_LOG", log_filter)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null());
    command
}

fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect()
}

/// Set to 1 to let `DIALECTIC_CHAOS_DEPENDENCIES` name no dependency.
const ALLOW_NO_DEPENDENCY_FAULTS: &str = "DIALECTIC_CHAOS_ALLOW_NO_DEPENDENCY_FAULTS";

/// Every dependency, unless `DIALECTIC_CHAOS_DEPENDENCIES` narrows the list
/// (e.g. to "" when other work shares the local stack).
fn dependencies_from_env() -> Vec<String> {
    let narrowed = std::env::var("DIALECTIC_CHAOS_DEPENDENCIES").ok();
    let allow_none = std::env::var(ALLOW_NO_DEPENDENCY_FAULTS).is_ok_and(|v| v == "1");
    chosen_dependencies(narrowed.as_deref(), allow_none)
        .unwrap_or_else(|refusal| panic!("{refusal}"))
}

/// The dependencies to restart: every one, or those `narrowed` names. An
/// emptied list only when `allow_none`: a run without dependency faults
/// passes whatever the code does when one goes away, so it must be asked for.
fn chosen_dependencies(narrowed: Option<&str>, allow_none: bool) -> Result<Vec<String>, String> {
    let Some(names) = narrowed else {
        return Ok(DEPENDENCIES.iter().map(|d| d.to_string()).collect());
    };
    let chosen = list(names);
    if chosen.is_empty() && !allow_none {
        return Err(format!(
            "DIALECTIC_CHAOS_DEPENDENCIES names no dependency: the run would fault none of \
             them; set {ALLOW_NO_DEPENDENCY_FAULTS}=1 to run it so anyway"
        ));
    }
    Ok(chosen)
}

/// `DIALECTIC_CHAOS_HARD_KILLS`, else the restartable dependencies that can be
/// killed hard (none when other work shares the local stack).
fn hard_kills_from_env() -> Vec<String> {
    match std::env::var("DIALECTIC_CHAOS_HARD_KILLS") {
        Ok(names) => list(&names),
        Err(_) => dependencies_from_env()
            .into_iter()
            .filter(|d| HARD_KILLABLE.contains(&d.as_str()))
            .collect(),
    }
}

#[derive(Debug, Default)]
pub struct ChaosReport {
    pub kills: BTreeMap<String, usize>,
    pub restarts: BTreeMap<String, usize>,
    pub hard_kills: BTreeMap<String, usize>,
    pub double_faults: usize,
    /// Jobs a frozen executor was running when it was stopped.
    pub frozen_jobs: Vec<uuid::Uuid>,
    /// Of those, jobs not taken over by a later attempt once the lease ran out.
    pub frozen_jobs_not_retried: i64,
    pub sessions: usize,
    pub sessions_completed: usize,
    pub jobs: i64,
    pub attempts: i64,
    pub retried_jobs: i64,
    /// Jobs the planner took back from a worker whose lease ran out.
    pub lease_expiries: i64,
    /// Holds taken for model calls (one per call the executor began).
    pub model_calls: i64,
    /// Calls that returned a reply, counted by the simulated provider itself.
    pub provider_calls: i64,
    /// From the provider's log: how many jobs made each number of calls.
    pub calls_per_job: BTreeMap<i64, i64>,
    /// Jobs charged for more model calls than the provider answered for them.
    pub jobs_charged_beyond_calls: i64,
    /// Model calls charged (captures of `model_call` holds, and late debits
    /// of calls that replied after their hold was released as abandoned).
    pub charged_calls: i64,
    pub duplicate_contributions: i64,
    pub unrendered_documents: i64,
    pub jobs_with_more_calls_than_attempts: i64,
    pub double_captures: i64,
    pub wallet_balance: i64,
    pub wallet_expected: i64,
    /// Still reserved once every session finished: holds no attempt released.
    pub held: i64,
    /// Jobs that ended failed: (stage, error details).
    pub failed_jobs: Vec<(String, String)>,
    pub stuck_messages: BTreeMap<String, u32>,
    pub outbox_rows: i64,
    pub dead_letters: u32,
    pub elapsed: Duration,
    freezes_expected: bool,
}

impl ChaosReport {
    /// Every invariant the harness checks; empty when the run was clean.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.sessions_completed != self.sessions {
            out.push(format!(
                "{} of {} sessions finished",
                self.sessions_completed, self.sessions
            ));
        }
        // The run proves recovery only if a kill landed on a job mid-attempt.
        if self.retried_jobs == 0 || self.lease_expiries == 0 {
            out.push(format!(
                "no kill landed on a running job ({} jobs retried, {} lease expiries)",
                self.retried_jobs, self.lease_expiries
            ));
        }
        if self.freezes_expected && self.frozen_jobs.is_empty() {
            out.push("no freeze landed on a running job".to_string());
        }
        if self.frozen_jobs_not_retried != 0 {
            out.push(format!(
                "{} jobs of a frozen executor were not taken over after its lease ran out",
                self.frozen_jobs_not_retried
            ));
        }
        if self.duplicate_contributions != 0 {
            out.push(format!(
                "{} jobs have more than one contribution",
                self.duplicate_contributions
            ));
        }
        if self.unrendered_documents != 0 {
            out.push(format!(
                "{} documents have no rendered resource",
                self.unrendered_documents
            ));
        }
        if self.jobs_with_more_calls_than_attempts != 0 {
            out.push(format!(
                "{} jobs called their model more often than they were attempted",
                self.jobs_with_more_calls_than_attempts
            ));
        }
        if self.jobs_charged_beyond_calls != 0 {
            out.push(format!(
                "{} jobs were charged for more calls than the provider answered for them",
                self.jobs_charged_beyond_calls
            ));
        }
        if self.charged_calls > self.provider_calls {
            out.push(format!(
                "{} model calls charged but the provider answered only {}",
                self.charged_calls, self.provider_calls
            ));
        }
        // A call answered just before its executor was SIGKILLed, in the
        // instant before its cost was recorded, is the one call that can go
        // uncharged; any more means a path that loses charges.
        let uncharged = self.provider_calls - self.charged_calls;
        let executor_kills = self.kills.get("executor").copied().unwrap_or(0) as i64;
        if uncharged > executor_kills {
            out.push(format!(
                "{uncharged} answered model calls were never charged (at most {executor_kills} may be lost to executor kills)"
            ));
        }
        if self.double_captures != 0 {
            out.push(format!(
                "{} attempts were charged more than once",
                self.double_captures
            ));
        }
        if self.wallet_balance != self.wallet_expected {
            out.push(format!(
                "wallet balance {} != initial credit minus captures {}",
                self.wallet_balance, self.wallet_expected
            ));
        }
        if self.held != 0 {
            out.push(format!(
                "{} tokens still held after every session finished",
                self.held
            ));
        }
        for (stage, error) in &self.failed_jobs {
            out.push(format!("a {stage} job failed: {error}"));
        }
        for (queue, count) in &self.stuck_messages {
            out.push(format!("{count} messages stuck in {queue}"));
        }
        if self.outbox_rows != 0 {
            out.push(format!("{} outbox rows never relayed", self.outbox_rows));
        }
        if self.dead_letters != 0 {
            out.push(format!("{} dead letters", self.dead_letters));
        }
        out
    }

    pub fn summary(&self) -> String {
        let kills: usize = self.kills.values().sum();
        let restarts: usize = self.restarts.values().sum();
        format!(
            "{} sessions, {} completed in {:.1} s; {kills} kills {:?}; {restarts} dependency restarts {:?}; \
             hard kills {:?}; {} double faults; {} jobs frozen past their lease ({} not taken over); \
             {} jobs, {} attempts ({} jobs retried, {} lease expiries), {} model calls ({} answered by the provider, {} charged; calls per job {{calls: jobs}} {:?}); duplicates {}, unrendered {}, \
             over-called jobs {}, over-charged jobs {}, double charges {}; wallet {} (expected {}), held {}; outbox {}, dead letters {}, stuck {:?}",
            self.sessions,
            self.sessions_completed,
            self.elapsed.as_secs_f64(),
            self.kills,
            self.restarts,
            self.hard_kills,
            self.double_faults,
            self.frozen_jobs.len(),
            self.frozen_jobs_not_retried,
            self.jobs,
            self.attempts,
            self.retried_jobs,
            self.lease_expiries,
            self.model_calls,
            self.provider_calls,
            self.charged_calls,
            self.calls_per_job,
            self.duplicate_contributions,
            self.unrendered_documents,
            self.jobs_with_more_calls_than_attempts,
            self.jobs_charged_beyond_calls,
            self.double_captures,
            self.wallet_balance,
            self.wallet_expected,
            self.held,
            self.outbox_rows,
            self.dead_letters,
            self.stuck_messages,
        )
    }
}

/// xorshift64*: a seeded, dependency-free source of "random" fault timing.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn between(&mut self, (low, high): (u64, u64)) -> u64 {
        low + self.next() % (high.saturating_sub(low).max(1))
    }
}

/// The six service processes, each restartable on the same port and config.
struct Processes {
    binary: PathBuf,
    config: PathBuf,
    log_dir: PathBuf,
    children: BTreeMap<&'static str, Child>,
}

impl Processes {
    fn start(&mut self, name: &'static str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_dir.join(format!("{name}.log")))
            .expect("service log");
        let log_filter = std::env::var("CHAOS_LOG").unwrap_or_else(|_| "info".into());
        let child = service_command(&self.binary, &self.config, name, &log_filter)
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} from {}: {e}", self.binary.display()));
        self.children.insert(name, child);
    }

    fn kill(&mut self, name: &'static str) {
        if let Some(mut child) = self.children.remove(name) {
            let _ = child.kill(); // SIGKILL: no drain, no goodbye
            let _ = child.wait();
        }
    }

    fn signal(&mut self, name: &'static str, signal: libc::c_int) {
        if let Some(child) = self.children.get(name) {
            // SAFETY: kill(2) on a child process this harness started.
            let sent = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
            assert_eq!(sent, 0, "signal {signal} to {name}");
        }
    }

    fn stop_all(&mut self) {
        let names: Vec<&'static str> = self.children.keys().copied().collect();
        for name in names {
            self.kill(name);
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn stack_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/stack.sh")
}

/// Runs the local stack script, e.g. `stack(&["restart", "redis"])`.
pub fn stack(args: &[&str]) {
    let output = Command::new("bash")
        .arg(stack_script())
        .args(args)
        .output()
        .expect("deploy/stack.sh runs");
    assert!(
        output.status.success(),
        "deploy/stack.sh {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs the whole experiment; panics only on harness failures (a service
/// binary that cannot start, a dependency that cannot be restarted). What the
/// system got wrong is in the report's `violations()`.
pub async fn run(env: &TestEnv, binary: &Path, options: &ChaosOptions) -> ChaosReport {
    let started = Instant::now();
    std::fs::create_dir_all(&options.log_dir).expect("log dir");
    let mut settings: Settings = env.settings.clone();
    let ports = crate::listen_apart(&mut settings, &crate::free_ports(KILL_ORDER.len()));
    settings.executor.simulated_latency_ms = options.latency_ms;
    let call_log = options.log_dir.join("provider-calls.log");
    // A file left by an earlier run in the same directory would count its calls too.
    if let Err(e) = std::fs::remove_file(&call_log)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        panic!("cannot clear {}: {e}", call_log.display());
    }
    settings.executor.simulated_call_log = call_log.display().to_string();
    // A killed worker's job comes back after its lease; keep that short, and
    // allow enough attempts that repeated kills never exhaust a job.
    settings.executor.worker.lease_secs = 3;
    settings.renderer.worker.lease_secs = 3;
    settings.planner.max_attempts = 50;
    settings.shutdown_grace_secs = 2;
    let config = options.log_dir.join("chaos.toml");
    std::fs::write(
        &config,
        toml::to_string(&settings).expect("settings serialise"),
    )
    .expect("write config");

    let mut processes = Processes {
        binary: binary.to_path_buf(),
        config,
        log_dir: options.log_dir.clone(),
        children: BTreeMap::new(),
    };
    for name in KILL_ORDER {
        processes.start(name);
    }
    for name in KILL_ORDER {
        crate::wait_until_serving(name, ports[name], &options.log_dir).await;
    }

    let gateway = format!("http://127.0.0.1:{}", ports["gateway"]);
    let mut session_ids = Vec::new();
    for i in 0..options.sessions {
        session_ids.push(
            start_session(
                &gateway,
                &env.settings.gateway.bootstrap_key,
                i,
                &options.models,
            )
            .await,
        );
    }

    let mut report = ChaosReport {
        sessions: options.sessions,
        freezes_expected: options.freeze,
        ..Default::default()
    };
    let mut rng = Rng(options.seed.max(1));
    for fault in schedule(options) {
        tokio::time::sleep(Duration::from_millis(rng.between(options.fault_gap_ms))).await;
        inject(env, &mut processes, options, &settings, fault, &mut report).await;
    }

    let deadline = started + options.deadline;
    report.sessions_completed = wait_for_sessions(env, &session_ids, deadline).await;
    wait_until_idle(env, deadline).await;
    let calls = ProviderCalls::read(&call_log);
    check(env, &mut report, &calls).await;
    // Stopped consumers hand back what they held unacknowledged: only then do
    // the queues show every message no one finished.
    processes.stop_all();
    count_unfinished_messages(env, &mut report).await;
    report.elapsed = started.elapsed();
    report
}

/// The calls the simulated provider answered, per job, read from its own log
/// (`{job id or -} {output type}` per line): the model's side of the wire,
/// independent of what the executor or the wallet recorded.
#[derive(Debug, Default)]
pub struct ProviderCalls {
    pub by_job: BTreeMap<String, i64>,
    pub total: i64,
}

impl ProviderCalls {
    fn read(path: &Path) -> Self {
        match std::fs::read_to_string(path) {
            Ok(log) => Self::parse(&log),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::default(),
            Err(e) => panic!(
                "cannot read the provider's call log {}: {e}",
                path.display()
            ),
        }
    }

    fn parse(log: &str) -> Self {
        let mut calls = Self::default();
        for line in log.lines() {
            let job = line.split_whitespace().next().unwrap_or("-");
            *calls.by_job.entry(job.to_string()).or_default() += 1;
            calls.total += 1;
        }
        calls
    }

    /// How many jobs made each number of calls: {calls: jobs}.
    fn histogram(&self) -> BTreeMap<i64, i64> {
        let mut out = BTreeMap::new();
        for (job, calls) in &self.by_job {
            if job != "-" {
                *out.entry(*calls).or_default() += 1;
            }
        }
        out
    }
}

/// Jobs the provider answered more often than they were attempted, and jobs
/// charged for more calls than the provider answered for them.
fn compare_per_job(
    calls: &ProviderCalls,
    attempts: &BTreeMap<String, i64>,
    charged: &BTreeMap<String, i64>,
) -> (i64, i64) {
    let of = |map: &BTreeMap<String, i64>, job: &str| map.get(job).copied().unwrap_or(0);
    let over_called = calls
        .by_job
        .iter()
        .filter(|(job, n)| job.as_str() != "-" && **n > of(attempts, job))
        .count();
    let over_charged = charged
        .iter()
        .filter(|(job, n)| **n > of(&calls.by_job, job))
        .count();
    (over_called as i64, over_charged as i64)
}

/// One fault of a run.
#[derive(Debug, Clone)]
enum Fault {
    /// SIGKILL a service and start it again.
    Kill(&'static str),
    /// Restart a dependency gracefully.
    Restart(String),
    /// SIGKILL a dependency and start it again.
    HardKill(String),
    /// SIGSTOP the executor mid-attempt past its lease, then SIGCONT.
    Freeze,
    /// Kill the executor while a dependency restarts.
    Double(String),
}

/// Each round: a freeze, every service killed once with the dependency
/// restarts and hard kills spread between the kills, and a double fault.
fn schedule(options: &ChaosOptions) -> Vec<Fault> {
    let mut faults = Vec::new();
    for _ in 0..options.rounds {
        let mut round: Vec<Fault> = KILL_ORDER.iter().map(|s| Fault::Kill(s)).collect();
        let dependency_faults: Vec<Fault> =
            (options.dependencies.iter().cloned().map(Fault::Restart))
                .chain(options.hard_kills.iter().cloned().map(Fault::HardKill))
                .collect();
        let slots = dependency_faults.len() + 1;
        for (i, fault) in dependency_faults.into_iter().enumerate() {
            let at = (i + 1) * round.len() / slots;
            round.insert(at.min(round.len()), fault);
        }
        if options.freeze {
            round.insert(0, Fault::Freeze);
        }
        if let (true, Some(dependency)) = (options.double_fault, options.dependencies.first()) {
            round.push(Fault::Double(dependency.clone()));
        }
        faults.extend(round);
    }
    faults
}

async fn inject(
    env: &TestEnv,
    processes: &mut Processes,
    options: &ChaosOptions,
    settings: &Settings,
    fault: Fault,
    report: &mut ChaosReport,
) {
    tracing::warn!(?fault, "chaos");
    match fault {
        Fault::Kill(name) => {
            kill_and_restart(env, processes, name, options.down_ms).await;
            *report.kills.entry(name.to_string()).or_default() += 1;
        }
        Fault::Restart(dependency) => {
            run_stack(&["restart", &dependency]).await;
            *report.restarts.entry(dependency).or_default() += 1;
        }
        Fault::HardKill(dependency) => {
            run_stack(&["kill", &dependency]).await;
            *report.hard_kills.entry(dependency).or_default() += 1;
        }
        Fault::Freeze => {
            wait_for_running_attempt(env, &["PLAN", "EXECUTE"]).await;
            processes.signal("executor", libc::SIGSTOP);
            // What was frozen mid-attempt: still leased once a commit the
            // process sent just before it stopped has landed.
            let settle = Duration::from_millis(500);
            tokio::time::sleep(settle).await;
            let frozen = leased_jobs(env, &["PLAN", "EXECUTE"]).await;
            let lease = Duration::from_secs(settings.executor.worker.lease_secs);
            tokio::time::sleep(lease * 2 + Duration::from_secs(2) - settle).await;
            processes.signal("executor", libc::SIGCONT);
            report.frozen_jobs.extend(frozen);
        }
        Fault::Double(dependency) => {
            let restart = tokio::spawn(async move {
                run_stack(&["restart", &dependency]).await;
                dependency
            });
            kill_and_restart(env, processes, "executor", options.down_ms).await;
            let dependency = restart.await.expect("restart task");
            *report.kills.entry("executor".into()).or_default() += 1;
            *report.restarts.entry(dependency).or_default() += 1;
            report.double_faults += 1;
        }
    }
}

async fn kill_and_restart(
    env: &TestEnv,
    processes: &mut Processes,
    name: &'static str,
    down_ms: u64,
) {
    if let Some(job_types) = worker_job_types(name) {
        wait_for_running_attempt(env, job_types).await;
    }
    processes.kill(name);
    tokio::time::sleep(Duration::from_millis(down_ms)).await;
    processes.start(name);
}

async fn run_stack(args: &[&str]) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        stack(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .expect("stack task");
}

/// Jobs of these types a worker holds the lease of now.
async fn leased_jobs(env: &TestEnv, job_types: &[&str]) -> Vec<uuid::Uuid> {
    sqlx::query_scalar(
        "SELECT id FROM dialectic_generation_jobs
          WHERE status = 'processing' AND lease_owner IS NOT NULL AND job_type = ANY($1)",
    )
    .bind(job_types)
    .fetch_all(env.store.pool())
    .await
    .unwrap_or_default()
}

/// Creates a project and starts an auto-advancing session, retrying while
/// the gateway or its dependencies come up.
async fn start_session(gateway: &str, key: &str, index: usize, models: &[String]) -> uuid::Uuid {
    let request_id = format!("chaos-{index}-{}", uuid::Uuid::new_v4());
    crate::eventually(60, "the gateway to start a session", || async {
        let channel = tonic::transport::Endpoint::from_shared(gateway.to_string())
            .ok()?
            .connect()
            .await
            .ok()?;
        let mut client =
            DialecticServiceClient::with_interceptor(channel, crate::BearerKey(key.to_string()));
        let project = client
            .create_project(CreateProjectRequest {
                name: format!("Chaos {index}"),
                initial_user_prompt: PROMPT.into(),
                client_request_id: format!("{request_id}-project"),
                prompt_file: None,
                pipeline: String::new(),
            })
            .await
            .ok()?
            .into_inner();
        let session = client
            .start_session(StartSessionRequest {
                project_id: project.id,
                models: models.to_vec(),
                description: String::new(),
                client_request_id: format!("{request_id}-session"),
                auto_advance: true,
                ..Default::default()
            })
            .await
            .ok()?
            .into_inner();
        uuid::Uuid::parse_str(&session.id).ok()
    })
    .await
}

/// The job types a worker service runs, whose attempts a kill should interrupt.
fn worker_job_types(service: &str) -> Option<&'static [&'static str]> {
    match service {
        "executor" => Some(&["PLAN", "EXECUTE"]),
        "renderer" => Some(&["RENDER"]),
        _ => None,
    }
}

/// Waits (up to 30 s) until a worker holds the lease of a job of these types,
/// so the kill that follows lands mid-attempt and its job must come back
/// through lease expiry.
async fn wait_for_running_attempt(env: &TestEnv, job_types: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let running: Option<i64> = sqlx::query_scalar(
            "SELECT count(*) FROM dialectic_generation_jobs
              WHERE status = 'processing' AND lease_owner IS NOT NULL AND job_type = ANY($1)",
        )
        .bind(job_types)
        .fetch_one(env.store.pool())
        .await
        .ok();
        if running.unwrap_or(0) > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::warn!(?job_types, "chaos: no running attempt to interrupt");
}

/// How many sessions reached review before `deadline`, or before a job
/// failed for good (its session can then never finish). Reads Postgres, which
/// may itself be restarting: errors just mean "ask again".
async fn wait_for_sessions(env: &TestEnv, ids: &[uuid::Uuid], deadline: Instant) -> usize {
    loop {
        let state: Option<(i64, i64)> = sqlx::query_as(
            "SELECT (SELECT count(*) FROM dialectic_sessions
                      WHERE id = ANY($1) AND status = 'iteration_complete_pending_review'),
                    (SELECT count(*) FROM dialectic_generation_jobs
                      WHERE status IN ('failed', 'retry_loop_failed'))",
        )
        .bind(ids)
        .fetch_one(env.store.pool())
        .await
        .ok();
        let (done, failed) = state.unwrap_or((0, 0));
        let done = done as usize;
        if done == ids.len() || failed > 0 || Instant::now() > deadline {
            return done;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until no job is outstanding, the outbox is empty (RENDER jobs may
/// finish after their stage) and no tokens are held (a killed attempt's hold
/// is released once its job moves on, well before the hold's expiry).
async fn wait_until_idle(env: &TestEnv, deadline: Instant) {
    let deadline = deadline.min(Instant::now() + Duration::from_secs(60));
    loop {
        let busy: Option<(i64, i64, i64)> = sqlx::query_as(
            "SELECT (SELECT count(*) FROM dialectic_generation_jobs
                      WHERE status NOT IN ('completed', 'failed', 'retry_loop_failed', 'superseded')),
                    (SELECT count(*) FROM outbox),
                    (SELECT coalesce(sum(held), 0)::bigint FROM token_wallets)",
        )
        .fetch_one(env.store.pool())
        .await
        .ok();
        if busy == Some((0, 0, 0)) || Instant::now() > deadline {
            // Give the consumers a moment to ack what the relay sent last.
            tokio::time::sleep(Duration::from_secs(2)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn check(env: &TestEnv, report: &mut ChaosReport, calls: &ProviderCalls) {
    let pool = env.store.pool();
    let scalar = |sql: &'static str| async move {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    report.jobs = scalar("SELECT count(*) FROM dialectic_generation_jobs").await;
    report.attempts =
        scalar("SELECT coalesce(sum(attempt_count), 0)::bigint FROM dialectic_generation_jobs")
            .await;
    report.retried_jobs =
        scalar("SELECT count(*) FROM dialectic_generation_jobs WHERE attempt_count > 1").await;
    report.lease_expiries = scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE error_details->>'code' = 'lease_expired'",
    )
    .await;
    report.model_calls = scalar(
        "SELECT count(*) FROM token_wallet_transactions WHERE kind = 'hold' AND purpose = 'model_call'",
    )
    .await;
    report.charged_calls = scalar(
        "SELECT count(*) FROM token_wallet_transactions WHERE kind IN ('capture', 'debit') AND purpose = 'model_call'",
    )
    .await;
    report.frozen_jobs_not_retried = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE id = ANY($1) AND attempt_count < 2",
    )
    .bind(&report.frozen_jobs)
    .fetch_one(pool)
    .await
    .expect("frozen jobs");
    report.duplicate_contributions = scalar(
        "SELECT count(*) FROM (SELECT job_id FROM dialectic_contributions
          WHERE job_id IS NOT NULL GROUP BY job_id HAVING count(*) > 1) d",
    )
    .await;
    // Every document a model wrote (no continuations here: one chunk each) is
    // the source of exactly the resource its RENDER job wrote.
    report.unrendered_documents = scalar(
        "SELECT count(*) FROM dialectic_contributions c
          WHERE NOT c.is_intermediate AND c.job_id IS NOT NULL
            AND c.document_key <> 'header_context'
            AND NOT EXISTS (SELECT 1 FROM dialectic_project_resources p
                             WHERE p.source_contribution_id = c.id)",
    )
    .await;
    let per_job = |sql: &'static str| async move {
        sqlx::query_as::<_, (String, i64)>(sql)
            .fetch_all(pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_iter()
            .collect::<BTreeMap<_, _>>()
    };
    let attempts =
        per_job("SELECT id::text, attempt_count::bigint FROM dialectic_generation_jobs").await;
    let charged = per_job(
        "SELECT job_id::text, count(*) FROM token_wallet_transactions
          WHERE kind IN ('capture', 'debit') AND purpose = 'model_call' AND job_id IS NOT NULL
          GROUP BY job_id",
    )
    .await;
    report.provider_calls = calls.total;
    report.calls_per_job = calls.histogram();
    (
        report.jobs_with_more_calls_than_attempts,
        report.jobs_charged_beyond_calls,
    ) = compare_per_job(calls, &attempts, &charged);
    report.double_captures = scalar(
        "SELECT count(*) FROM (SELECT job_id, attempt FROM token_wallet_transactions
          WHERE kind IN ('capture', 'debit') GROUP BY job_id, attempt HAVING count(*) > 1) d",
    )
    .await;
    report.wallet_balance = scalar(
        "SELECT balance FROM token_wallets
          WHERE user_id = '00000000-0000-0000-0000-000000000001'",
    )
    .await;
    let captured = scalar(
        "SELECT coalesce(sum(amount), 0)::bigint FROM token_wallet_transactions WHERE kind IN ('capture', 'debit')",
    )
    .await;
    report.wallet_expected = INITIAL_CREDIT - captured;
    report.held = scalar("SELECT coalesce(sum(held), 0)::bigint FROM token_wallets").await;
    report.outbox_rows = scalar("SELECT count(*) FROM outbox").await;
    report.failed_jobs = sqlx::query_as(
        "SELECT stage_slug, coalesce(error_details::text, '') FROM dialectic_generation_jobs
          WHERE status IN ('failed', 'retry_loop_failed')",
    )
    .fetch_all(pool)
    .await
    .expect("failed jobs");
}

/// Messages left in the queues once every service process has stopped:
/// ready ones, and those a consumer held unacknowledged, which the broker
/// requeues when the consumer's connection closes (waited for here).
async fn count_unfinished_messages(env: &TestEnv, report: &mut ChaosReport) {
    let topology = dialectic_runtime::topology(&env.settings);
    let connection = dialectic_queue::connect(&env.settings.amqp.url)
        .await
        .expect("amqp after the run");
    for key in dialectic_queue::keys::ALL {
        let queue = topology.queue(key);
        let count = depth_without_consumers(&connection, &queue).await;
        if count > 0 {
            report.stuck_messages.insert(queue, count);
        }
    }
    report.dead_letters = depth_without_consumers(&connection, &topology.dead_queue()).await;
    let _ = connection.close(200, "checked".into()).await;
}

/// A queue's messages once no consumer is attached (so none is held unacked).
async fn depth_without_consumers(connection: &lapin::Connection, queue: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ready, consumers) = crate::queue_counts(connection, queue).await;
        assert!(
            consumers == 0 || Instant::now() < deadline,
            "{queue} still has {consumers} consumers 30 s after every service stopped"
        );
        if consumers == 0 {
            return ready;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_fault_list_must_be_asked_for() {
        assert_eq!(
            chosen_dependencies(None, false).expect("all").len(),
            DEPENDENCIES.len()
        );
        assert_eq!(
            chosen_dependencies(Some("redis, s3"), false),
            Ok(vec!["redis".to_string(), "s3".to_string()])
        );
        let refused = chosen_dependencies(Some(""), false).expect_err("refused");
        assert!(refused.contains(ALLOW_NO_DEPENDENCY_FAULTS), "{refused}");
        assert_eq!(chosen_dependencies(Some(" , "), true), Ok(Vec::new()));
    }

    fn counts(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn calls_per_job_come_from_the_provider_log() {
        let calls = ProviderCalls::parse("a thesis\nb thesis\na thesis\n- query\n");
        assert_eq!(calls.total, 4);
        assert_eq!(calls.by_job, counts(&[("-", 1), ("a", 2), ("b", 1)]));
        assert_eq!(calls.histogram(), BTreeMap::from([(1, 1), (2, 1)]));
        // a: two calls in two attempts; b: one in one; both charged once each.
        let attempts = counts(&[("a", 2), ("b", 1)]);
        let charged = counts(&[("a", 1), ("b", 1)]);
        assert_eq!(compare_per_job(&calls, &attempts, &charged), (0, 0));
        // a called twice in one attempt; b charged twice for one answered call;
        // c charged with no call at all.
        let attempts = counts(&[("a", 1), ("b", 1)]);
        let charged = counts(&[("a", 1), ("b", 2), ("c", 1)]);
        assert_eq!(compare_per_job(&calls, &attempts, &charged), (1, 2));
    }
}
