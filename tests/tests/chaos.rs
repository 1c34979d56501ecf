//! The quick fault run: a few sessions across six service processes while
//! each service is SIGKILLed once, each backing service restarted once,
//! Postgres and RabbitMQ SIGKILLed once, the executor frozen past its lease,
//! and the executor killed while a dependency restarts.
//! `DIALECTIC_CHAOS_DEPENDENCIES` narrows the restarts (to "" when other work
//! shares the local stack, only with `DIALECTIC_CHAOS_ALLOW_NO_DEPENDENCY_FAULTS=1`),
//! `DIALECTIC_CHAOS_HARD_KILLS` the hard kills, here and in the long run
//! (`--bin chaos`).

use dialectic_e2e::TestEnv;
use dialectic_e2e::chaos::{self, ChaosOptions, KILL_ORDER};
use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_survive_killed_services_and_restarted_dependencies() {
    let env = TestEnv::new().await;
    let log_dir = std::env::temp_dir().join(format!("dialectic-chaos-{}", env.database));
    let options = ChaosOptions::quick(log_dir.clone());
    let report = chaos::run(
        &env,
        Path::new(env!("CARGO_BIN_EXE_chaos-service")),
        &options,
    )
    .await;
    println!("chaos: {}", report.summary());
    let violations = report.violations();
    assert!(
        violations.is_empty(),
        "{violations:#?}\n{}\nservice logs: {}",
        report.summary(),
        log_dir.display()
    );
    for service in KILL_ORDER {
        assert!(
            report.kills.get(service).copied().unwrap_or(0) >= 1,
            "{service} was never killed: {:?}",
            report.kills
        );
    }
    for (i, dependency) in options.dependencies.iter().enumerate() {
        // The double fault restarts the first dependency once more per round.
        let doubled = usize::from(i == 0 && options.double_fault);
        assert_eq!(
            report.restarts.get(dependency),
            Some(&(options.rounds * (1 + doubled))),
            "{dependency}"
        );
    }
    for dependency in &options.hard_kills {
        assert_eq!(
            report.hard_kills.get(dependency),
            Some(&options.rounds),
            "{dependency} was not killed hard"
        );
    }
    if !options.dependencies.is_empty() {
        assert_eq!(report.double_faults, options.rounds, "{}", report.summary());
    }
    assert!(
        report.model_calls >= report.jobs / 2,
        "the sessions really ran: {}",
        report.summary()
    );
    env.teardown().await;
    let _ = std::fs::remove_dir_all(&log_dir);
}
