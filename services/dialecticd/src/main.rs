//! `dialecticd`: every service in one process (or any subset), plus `migrate`.
//! Each service keeps its own gRPC port, health and queues, exactly as when it
//! runs alone, so splitting a deployment later changes nothing but addresses.

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use dialectic_config::{ConfigArgs, Settings};
use dialectic_runtime::{CancellationToken, StartFn};
use std::sync::Arc;
use std::time::Duration;

mod bootstrap;
mod models;
mod secret_hook;

const SERVICES: [(&str, StartFn); 6] = [
    ("wallet", dialectic_wallet::start),
    ("indexer", dialectic_indexer::start),
    ("planner", dialectic_planner::start),
    ("executor", dialectic_executor::start),
    ("renderer", dialectic_renderer::start),
    ("gateway", dialectic_gateway::start),
];

#[derive(Parser)]
#[command(
    version = concat!(env!("CARGO_PKG_VERSION"), " (build ", env!("DIALECTIC_COMMIT"), ")"),
    about = "Run dialectic services"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run services (all by default) until SIGTERM.
    Run {
        /// Comma-separated: all, gateway, planner, executor, renderer, indexer, wallet.
        #[arg(long, default_value = "all", value_delimiter = ',')]
        services: Vec<String>,
    },
    /// Apply database migrations (waits for Postgres) and exit.
    Migrate {
        /// Then `model sync` this models file (the chart's migrate Job).
        #[arg(long, value_name = "FILE")]
        sync_models: Option<std::path::PathBuf>,
    },
    /// Apply a bootstrap file (TOML, or JSON as the chart renders it): an
    /// administrator's key read from the variable it names, starting credits
    /// and pipeline files. Idempotent: a second run changes nothing and says so
    /// (the chart's post-install and post-upgrade Job).
    Bootstrap {
        #[arg(long, value_name = "FILE")]
        file: std::path::PathBuf,
    },
    /// Administration that talks to the database directly.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Pipeline files: one TOML file per process (docs/pipelines.md).
    #[command(subcommand)]
    Pipeline(PipelineCommand),
    /// Models sessions may use: register, list, remove (docs/models.md, "Against a
    /// real, OpenAI-compatible model").
    #[command(subcommand)]
    Model(models::ModelCommand),
    /// Service keys: each service signs its internal calls with its own
    /// Ed25519 key (`internal.key_dir`; docs/running.md, "Service identity").
    #[command(subcommand)]
    Keys(KeysCommand),
    /// The chart's secret hook: generate keys in this process and create the
    /// Secret through the in-cluster Kubernetes API when none of that name
    /// exists (an existing one is never read or changed). No key is ever on a
    /// command line.
    SecretHook(secret_hook::SecretHookArgs),
    /// Ask a running dialecticd to take no new work (SIGUSR1), then wait: the
    /// Kubernetes preStop hook, so endpoints and queue consumers are gone
    /// before SIGTERM. In-flight work goes on.
    Drain {
        /// The dialecticd process (1 in its container).
        #[arg(long, default_value_t = 1)]
        pid: i32,
        /// Seconds to wait after the request, for endpoints to update.
        #[arg(long, default_value_t = 5)]
        wait_secs: u64,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Write a new key pair per service into DIR (created if absent):
    /// `{service}.key`, mode 600, and `{service}.pub`. Refuses to overwrite
    /// keys; rotate into a new directory.
    Generate { dir: std::path::PathBuf },
}

#[derive(Subcommand)]
enum PipelineCommand {
    /// Validate a pipeline file (no database needed): prints every problem
    /// with its place in the file and exits 1, or prints a summary.
    Check { file: std::path::PathBuf },
    /// Validate a pipeline file and install it as a new pipeline (stage
    /// slugs must be new); projects then name it in CreateProject.
    Install { file: std::path::PathBuf },
    /// Print a pipeline as it runs now (stages, active recipes, templates) as a pipeline file.
    Export {
        /// The pipeline's name (`dialectic`).
        name: String,
    },
}

/// A pipeline file read and validated; every problem printed with its place.
fn read_pipeline(file: &std::path::Path) -> anyhow::Result<dialectic_core::pipeline::PipelineFile> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let pipeline =
        dialectic_core::pipeline::PipelineFile::parse(&text).and_then(|p| p.validate().map(|()| p));
    pipeline.or_else(|errors| {
        for problem in &errors.0 {
            eprintln!("{}: {problem}", file.display());
        }
        bail!("{} problem(s) in {}", errors.0.len(), file.display())
    })
}

/// `dialecticd pipeline check FILE`.
fn check_pipeline(file: &std::path::Path) -> anyhow::Result<()> {
    let p = read_pipeline(file)?;
    let steps: usize = p.stages.iter().map(|s| s.steps.len()).sum();
    println!(
        "{}: pipeline {}, {}, {}: valid",
        file.display(),
        p.name,
        counted(p.stages.len(), "stage"),
        counted(steps, "step")
    );
    Ok(())
}

async fn install_pipeline(settings: &Settings, file: &std::path::Path) -> anyhow::Result<()> {
    let pipeline = read_pipeline(file)?;
    let store = dialectic_runtime::store(settings)?;
    let installed = dialectic_store::pipelines::install(store.pool(), &pipeline).await?;
    println!("{}", installed_line(&installed));
    Ok(())
}

/// "1 stage", "5 stages".
fn counted(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

fn installed_line(p: &dialectic_store::pipelines::Installed) -> String {
    if p.created {
        format!(
            "installed pipeline {} version {}: {}, {}",
            p.name,
            p.version,
            counted(p.stages, "stage"),
            counted(p.steps, "step")
        )
    } else {
        format!(
            "pipeline {} version {} is already this file; nothing installed",
            p.name, p.version
        )
    }
}

async fn export_pipeline(settings: &Settings, name: &str) -> anyhow::Result<()> {
    let store = dialectic_runtime::store(settings)?;
    let pipeline = dialectic_store::pipelines::export(store.pool(), name).await?;
    print!("{}", pipeline.to_toml()?);
    Ok(())
}

/// Sends SIGUSR1 to `pid` and waits: the server stops consuming and reports
/// NOT_SERVING at once, and Kubernetes removes it from its Services meanwhile.
fn drain(pid: i32, wait: Duration) -> anyhow::Result<()> {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    if unsafe { libc::kill(pid, libc::SIGUSR1) } != 0 {
        bail!(
            "cannot signal process {pid}: {}",
            std::io::Error::last_os_error()
        );
    }
    std::thread::sleep(wait);
    Ok(())
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Create an API key and print it (once: only its hash is stored). Without
    /// --user or --new-user the key belongs to gateway.default_user_id.
    CreateKey {
        /// A label for the key (e.g. the machine it lives on).
        #[arg(long, default_value = "cli")]
        name: String,
        /// The user (UUID) the key acts as.
        #[arg(long, conflicts_with = "new_user")]
        user: Option<String>,
        /// Create a new user with this display name (and an empty wallet) for the key.
        #[arg(long)]
        new_user: Option<String>,
        /// With --new-user: make the new user an administrator.
        #[arg(long, requires = "new_user")]
        admin: bool,
    },
    /// Revoke an API key: calls with it are UNAUTHENTICATED from now on.
    RevokeKey {
        /// The key itself.
        key: String,
    },
    /// Credit a user's wallet (the wallet service admits credits from the
    /// gateway only; this is the operator's way in). Paused sessions resume.
    Credit {
        /// The user (UUID) whose wallet receives the tokens.
        #[arg(long)]
        user: String,
        /// Tokens to add.
        #[arg(long)]
        amount: i64,
        /// Makes a repeated command credit once (e.g. an invoice number).
        #[arg(long)]
        idempotency_key: String,
        #[arg(long, default_value = "operator credit")]
        reason: String,
    },
}

async fn admin(settings: &Settings, command: AdminCommand) -> anyhow::Result<()> {
    let store = dialectic_runtime::store(settings)?;
    let pool = store.pool();
    match command {
        AdminCommand::CreateKey {
            name,
            user,
            new_user,
            admin,
        } => {
            let user_id = match (user, new_user) {
                (_, Some(display_name)) => {
                    dialectic_store::auth::create_user(pool, &display_name, admin).await?
                }
                (Some(user), None) => dialectic_core::ids::UserId::parse(user.trim())
                    .with_context(|| format!("--user {user:?} is not a UUID"))?,
                (None, None) => {
                    dialectic_core::ids::UserId::parse(settings.gateway.default_user_id.trim())
                        .context("gateway.default_user_id is not a UUID")?
                }
            };
            let key = dialectic_core::apikey::generate();
            dialectic_store::auth::insert_key(
                pool,
                user_id,
                &name,
                &dialectic_core::apikey::hash(&key),
                &dialectic_core::apikey::shown_part(&key),
            )
            .await?;
            eprintln!(
                "API key for user {user_id} (shown once; send it as `authorization: Bearer <key>`):"
            );
            println!("{key}");
        }
        AdminCommand::Credit {
            user,
            amount,
            idempotency_key,
            reason,
        } => {
            let user_id = dialectic_core::ids::UserId::parse(user.trim())
                .with_context(|| format!("--user {user:?} is not a UUID"))?;
            let wallet =
                dialectic_store::wallets::wallet_balance(pool, None, Some(user_id)).await?;
            let entry =
                dialectic_store::ledger::credit(pool, wallet.id, amount, &idempotency_key, &reason)
                    .await?;
            println!("wallet {} balance {}", wallet.id, entry.balance_after);
        }
        AdminCommand::RevokeKey { key } => {
            let hash = dialectic_core::apikey::hash(key.trim());
            if dialectic_store::auth::revoke_key(pool, &hash).await? {
                eprintln!("revoked");
                publish_revocation(settings, &hash).await;
            } else {
                bail!("no live key matches");
            }
        }
    }
    Ok(())
}

/// Tells the gateways, through Redis, that a key is revoked: one that cannot
/// ask Postgres (an outage, a busy pool) refuses it all the same, for as
/// long as it may remember the key's owner (`gateway.last_known_secs`).
async fn publish_revocation(settings: &Settings, key_hash: &str) {
    let ttl = settings.gateway.last_known_secs.saturating_add(60);
    // runtime's connect retries until told to stop: give it 10 s.
    let give_up = CancellationToken::new();
    let timer = {
        let give_up = give_up.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            give_up.cancel();
        })
    };
    let published = match dialectic_runtime::cache(settings, &give_up).await {
        Some(cache) => cache
            .key_revoked(key_hash, ttl)
            .await
            .map_err(|e| e.to_string()),
        None => Err("Redis did not answer in 10 s".to_string()),
    };
    timer.abort();
    if let Err(e) = published {
        eprintln!(
            "warning: the revocation is not published to Redis ({e}); while Postgres is down a \
             gateway may still stream progress to this key for up to gateway.last_known_secs"
        );
    }
}

fn selected(names: &[String]) -> anyhow::Result<Vec<(&'static str, StartFn)>> {
    if names.iter().any(|n| n == "all") {
        return Ok(SERVICES.to_vec());
    }
    let mut chosen = Vec::new();
    for name in names {
        let Some(found) = SERVICES.iter().find(|(n, _)| n == name) else {
            bail!(
                "unknown service {name:?}; choose from all, {}",
                SERVICES.map(|(n, _)| n).join(", ")
            );
        };
        if !chosen.iter().any(|(n, _): &(&str, StartFn)| *n == found.0) {
            chosen.push(*found);
        }
    }
    Ok(chosen)
}

async fn migrate(settings: &Settings) -> anyhow::Result<()> {
    let store = dialectic_runtime::store(settings)?;
    let never = CancellationToken::new();
    let deadline = tokio::time::timeout(
        Duration::from_secs(60),
        dialectic_runtime::retry_with_backoff("postgres", &never, || store.ping()),
    );
    deadline
        .await
        .context("postgres did not answer within 60 s")?;
    let pipelines = store.migrate().await.context("applying migrations")?;
    tracing::info!("migrations applied");
    for p in pipelines {
        tracing::info!("{}", installed_line(&p));
    }
    Ok(())
}

async fn run(settings: Settings, names: &[String]) -> anyhow::Result<()> {
    let services = selected(names)?;
    dialectic_runtime::observe::serve_configured_metrics(&settings)
        .await
        .context("serving /metrics")?;
    let settings = Arc::new(settings);
    let shutdown = dialectic_runtime::shutdown_on_signals();
    let mut running = Vec::new();
    for (name, start) in services {
        let service = start(settings.clone(), shutdown.clone())
            .await
            .with_context(|| format!("starting {name}"))?;
        tracing::info!(service = name, addr = %service.addr, "started");
        running.push((name, service));
    }
    // Stop in reverse start order: the gateway stops taking requests first.
    shutdown.cancelled().await;
    for (name, service) in running.into_iter().rev() {
        let _ = service.done.await;
        tracing::info!(service = name, "stopped");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    dialectic_runtime::build_info::set_commit(env!("DIALECTIC_COMMIT"));
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::Drain { pid, wait_secs }) => {
            return drain(*pid, Duration::from_secs(*wait_secs));
        }
        Some(Command::Pipeline(PipelineCommand::Check { file })) => return check_pipeline(file),
        Some(Command::Keys(KeysCommand::Generate { dir })) => {
            dialectic_runtime::service_auth::generate_keys(dir)?;
            println!(
                "wrote a key pair per service to {}: give each service its own .key and every .pub",
                dir.display()
            );
            return Ok(());
        }
        Some(Command::SecretHook(_)) => {
            // Needs no settings: the hook runs before the release's config exists.
            let Some(Command::SecretHook(args)) = cli.command else {
                unreachable!("matched above")
            };
            return tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(secret_hook::run(args));
        }
        _ => {}
    }
    let settings = cli.config.load()?;
    if cli.config.dump_config {
        print!("{}", settings.dump()?);
        return Ok(());
    }
    settings.validate()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let command = cli.command.unwrap_or(Command::Run {
        services: vec!["all".into()],
    });
    // A pod running one service reports spans under that service's name.
    let trace_name = match &command {
        Command::Run { services } if services.len() == 1 && services[0] != "all" => {
            services[0].clone()
        }
        Command::Migrate { .. } => "migrate".to_string(),
        Command::Admin(_)
        | Command::Pipeline(_)
        | Command::Model(_)
        | Command::Bootstrap { .. } => "admin".to_string(),
        Command::Run { .. } | Command::Drain { .. } | Command::Keys(_) | Command::SecretHook(_) => {
            "dialecticd".to_string()
        }
    };
    runtime.block_on(async move {
        // Model commands print tables and JSON on stdout, where log lines
        // would go; they have nothing to trace.
        let _telemetry = match &command {
            Command::Model(_) => None,
            _ => Some(dialectic_runtime::init_telemetry(&trace_name, &settings)?),
        };
        match command {
            Command::Migrate { sync_models } => {
                migrate(&settings).await?;
                match sync_models {
                    Some(file) => models::sync_file(&settings, &file).await,
                    None => Ok(()),
                }
            }
            Command::Run { services } => run(settings, &services).await,
            Command::Admin(command) => admin(&settings, command).await,
            Command::Bootstrap { file } => bootstrap::run(&settings, &file).await,
            Command::Model(command) => models::run(&settings, command).await,
            Command::Pipeline(PipelineCommand::Export { name }) => {
                export_pipeline(&settings, &name).await
            }
            Command::Pipeline(PipelineCommand::Install { file }) => {
                install_pipeline(&settings, &file).await
            }
            Command::Pipeline(PipelineCommand::Check { .. })
            | Command::Drain { .. }
            | Command::Keys(_)
            | Command::SecretHook(_) => Ok(()),
        }
    })
}
