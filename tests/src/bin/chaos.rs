//! The long fault run: `cargo run --release -p dialectic-e2e --bin chaos --
//! [SESSIONS] [ROUNDS]` (default 100 sessions, 5 rounds of kills). Prints what
//! was killed and restarted and what the checks found; exits 1 on a violation.

use dialectic_e2e::TestEnv;
use dialectic_e2e::chaos::{self, ChaosOptions};
use std::process::ExitCode;
use std::time::Duration;

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let sessions = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let rounds = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let Some(service) = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("chaos-service")))
        .filter(|path| path.exists())
    else {
        eprintln!(
            "build the service binary first: cargo build --release -p dialectic-e2e --bin chaos-service"
        );
        return ExitCode::FAILURE;
    };
    let env = TestEnv::new().await;
    let log_dir = std::env::temp_dir().join(format!("dialectic-chaos-{}", env.database));
    let options = ChaosOptions {
        sessions,
        rounds,
        deadline: Duration::from_secs(3600),
        ..ChaosOptions::quick(log_dir.clone())
    };
    println!(
        "chaos: {sessions} sessions, {rounds} rounds of kills, dependencies {:?}; logs in {}",
        options.dependencies,
        log_dir.display()
    );
    let report = chaos::run(&env, &service, &options).await;
    println!("{}", report.summary());
    let violations = report.violations();
    env.teardown().await;
    if violations.is_empty() {
        println!("no violations");
        ExitCode::SUCCESS
    } else {
        for v in &violations {
            println!("VIOLATION: {v}");
        }
        ExitCode::FAILURE
    }
}
