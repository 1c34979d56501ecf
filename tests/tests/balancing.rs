//! Calls follow replicas (issue 41). Three wallet processes listen on
//! 127.0.0.2, .3 and .4 behind one name, `wallet.test`, which the executor
//! resolves through `internal.hosts_file` (re-read on every resolution, as a
//! headless Service's DNS answer changes when pods come and go). The run
//! starts on one replica; two more join mid-run and must each take a fair
//! share of the holds soon after; then one leaves (taken out of the name,
//! then stopped) and no job may fail.

use dialectic_e2e::{KillOnDrop, TestEnv, eventually, sample_sum, scrape_metrics};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic_health::pb::health_check_response::ServingStatus;

const NAME: &str = "wallet.test";
const HOLD: &str = "method=\"/dialectic.v1.wallet.WalletService/Hold\"";
// Enough work that the share measured below rests on 150 holds: at a third
// each, 20 % is then more than three standard deviations below the mean.
const SESSIONS: usize = 12;

/// One wallet process: its address behind the name and its /metrics port.
struct Replica {
    addr: SocketAddr,
    metrics: u16,
}

impl Replica {
    async fn holds(&self) -> f64 {
        let page = eventually(10, "a wallet's /metrics", || scrape_metrics(self.metrics)).await;
        sample_sum(&page, "dialectic_grpc_requests_total", &[HOLD])
    }
}

/// Points `NAME` at `replicas`, replacing the file at once (never half written).
fn publish(hosts: &Path, replicas: &[&Replica]) {
    let text: String = replicas
        .iter()
        .map(|r| format!("{} {NAME}\n", r.addr.ip()))
        .collect();
    let next = hosts.with_extension("next");
    std::fs::write(&next, text).expect("write hosts");
    std::fs::rename(&next, hosts).expect("replace hosts");
}

fn spawn_wallet(config: &Path, log_dir: &Path, replica: &Replica) -> std::process::Child {
    let log = std::fs::File::create(log_dir.join(format!("wallet-{}.log", replica.addr.ip())))
        .expect("log");
    dialectic_e2e::chaos::service_command(
        &PathBuf::from(env!("CARGO_BIN_EXE_chaos-service")),
        config,
        "wallet",
        "info",
    )
    .args(["--set", &format!("wallet.listen={}", replica.addr)])
    .args([
        "--set",
        &format!("telemetry.metrics_listen=127.0.0.1:{}", replica.metrics),
    ])
    .stdout(log.try_clone().expect("log"))
    .stderr(log)
    .spawn()
    .expect("start a wallet process")
}

async fn wait_serving(replica: &Replica) {
    let status = dialectic_e2e::wait_for_status(replica.addr, "", ServingStatus::Serving).await;
    assert_eq!(status, ServingStatus::Serving, "wallet at {}", replica.addr);
}

async fn holds_of(replicas: &[Replica]) -> Vec<f64> {
    let mut out = Vec::new();
    for replica in replicas {
        out.push(replica.holds().await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_spread_over_every_wallet_replica_and_leave_a_removed_one() {
    let mut env = TestEnv::new().await;
    let log_dir = std::env::temp_dir().join(format!("dialectic-balancing-{}", env.database));
    std::fs::create_dir_all(&log_dir).expect("log dir");
    let hosts = log_dir.join("hosts");
    let port = dialectic_e2e::free_ports(1)[0];
    let metrics = dialectic_e2e::free_ports(3);
    let replicas: Vec<Replica> = (0..3)
        .map(|i| Replica {
            addr: SocketAddr::from(([127, 0, 0, 2 + i as u8], port)),
            metrics: metrics[i],
        })
        .collect();
    publish(&hosts, &[&replicas[0]]);
    env.settings.internal.hosts_file = hosts.display().to_string();
    env.settings.internal.resolve_interval_ms = 500;
    env.settings.executor.wallet_url = format!("http://{NAME}:{port}");
    env.settings.gateway.wallet_url = env.settings.executor.wallet_url.clone();
    // Long enough a run that replicas can join and leave while it goes on.
    env.settings.executor.simulated_latency_ms = 150;
    let config = log_dir.join("wallet.toml");
    std::fs::write(&config, toml::to_string(&env.settings).expect("settings")).expect("config");

    let mut processes = KillOnDrop(vec![spawn_wallet(&config, &log_dir, &replicas[0])]);
    wait_serving(&replicas[0]).await;
    for name in ["planner", "executor", "renderer", "indexer", "gateway"] {
        env.start(&[name]).await;
        env.wait_serving(name).await;
    }
    let mut sessions = Vec::new();
    for i in 0..SESSIONS {
        let prompt = format!("Balancing run {i}: a tool library for a small town.");
        let (_, session) = env.new_session(&prompt, &["simulated"], true).await;
        sessions.push(session);
    }
    eventually(60, "the first replica to take holds", || async {
        (replicas[0].holds().await >= 1.0).then_some(())
    })
    .await;

    // Two replicas join: started first, then put behind the name.
    for replica in &replicas[1..] {
        processes.0.push(spawn_wallet(&config, &log_dir, replica));
    }
    for replica in &replicas[1..] {
        wait_serving(replica).await;
    }
    publish(&hosts, &replicas.iter().collect::<Vec<_>>());
    eventually(
        10,
        "both new replicas to take holds within 10 s",
        || async {
            let now = holds_of(&replicas).await;
            (now[1] >= 1.0 && now[2] >= 1.0).then_some(())
        },
    )
    .await;
    let joined = holds_of(&replicas).await;
    let shares = eventually(120, "150 holds across the three replicas", || async {
        let now = holds_of(&replicas).await;
        let taken: Vec<f64> = now.iter().zip(&joined).map(|(n, j)| n - j).collect();
        let total: f64 = taken.iter().sum();
        (total >= 150.0).then(|| taken.iter().map(|t| t / total).collect::<Vec<f64>>())
    })
    .await;
    println!("shares of the holds once all three served: {shares:?}");
    for (i, share) in shares.iter().enumerate() {
        assert!(
            *share >= 0.2,
            "replica {} took {:.0}% of the holds: {shares:?}",
            replicas[i].addr,
            share * 100.0
        );
    }

    // One leaves: out of the name first, then stopped once no call reaches it.
    publish(&hosts, &[&replicas[0], &replicas[1]]);
    let left = until_left_alone(&replicas).await;
    let mut leaving = processes.0.remove(2);
    leaving.kill().expect("stop the removed replica");
    leaving.wait().expect("reap it");

    for session in &sessions {
        env.wait_for_session(session, "iteration_complete_pending_review", true)
            .await;
    }
    let failed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs
          WHERE status IN ('failed', 'retry_loop_failed')",
    )
    .fetch_one(env.store.pool())
    .await
    .expect("failed jobs");
    assert_eq!(failed, 0, "jobs failed while a replica left");
    assert_eq!(env.held().await, 0, "tokens still held after every session");
    println!(
        "holds: {:?}; the removed replica stopped at {left}",
        holds_of(&replicas[..2]).await
    );
    drop(processes);
    env.teardown().await;
    let _ = std::fs::remove_dir_all(&log_dir);
}

/// Waits until the last replica has taken no hold while the other two took
/// ten; returns its final count.
async fn until_left_alone(replicas: &[Replica]) -> f64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut since = holds_of(replicas).await;
    loop {
        let now = holds_of(replicas).await;
        if now[2] != since[2] {
            since = now.clone();
        } else if (now[0] - since[0]) + (now[1] - since[1]) >= 10.0 {
            return now[2];
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the removed replica still took holds 30 s after it left the name: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
