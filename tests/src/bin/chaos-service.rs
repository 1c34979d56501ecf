//! One dialectic service per process, chosen by `DIALECTIC_CHAOS_SERVICE`, so
//! the fault harness can SIGKILL and restart each service on its own. Flags are
//! those of every service binary (`--config`, `--set`, `--dump-config`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let wanted = std::env::var("DIALECTIC_CHAOS_SERVICE").unwrap_or_default();
    match dialectic_e2e::ALL_SERVICES
        .iter()
        .copied()
        .find(|name| *name == wanted)
    {
        Some(name) => dialectic_runtime::run_main(name, dialectic_e2e::start_fn(name)),
        None => {
            eprintln!(
                "set DIALECTIC_CHAOS_SERVICE to one of {}",
                dialectic_e2e::ALL_SERVICES.join(", ")
            );
            ExitCode::from(2)
        }
    }
}
