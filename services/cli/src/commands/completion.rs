//! Shell completion (issue 61): `completion bash|zsh|fish|elvish|powershell`
//! prints a small script that asks `dialectic` itself what to offer at each
//! press of Tab (clap_complete's dynamic completion, `COMPLETE=<shell>`), so
//! besides commands and flags it offers what only the gateway knows: project
//! and session ids (and `last`), stage slugs and model names.

use crate::cli::Cli;
use crate::config::{FileConfig, Location};
use crate::gateway::{Gateway, Target};
use anyhow::{Context, Result, anyhow};
use clap::{Arg, Command, CommandFactory};
use clap_complete::env::Shells;
use clap_complete::{ArgValueCandidates, CompletionCandidate};
use dialectic_proto::v1::{
    ListModelsRequest, ListProjectsRequest, ListRecipesRequest, ListSessionsRequest,
};
use std::time::Duration;

/// A Tab press waits this long for the gateway at most; then it offers nothing.
const PATIENCE: Duration = Duration::from_secs(3);

/// How many of the newest projects' sessions are offered.
const RECENT_PROJECTS: u32 = 10;

/// The registration script: the shell calls back into this binary.
pub fn print(shell: clap_complete::Shell) -> Result<()> {
    let name = shell.to_string();
    let shells = Shells::builtins();
    let completer = shells
        .completer(&name)
        .ok_or_else(|| anyhow!("no dynamic completion for {name}"))?;
    let bin = std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(String::from))
        .unwrap_or_else(|| "dialectic".into());
    completer
        .write_registration(
            "COMPLETE",
            "dialectic",
            "dialectic",
            &bin,
            &mut std::io::stdout(),
        )
        .context("writing the completion script")
}

/// What the gateway is asked for.
#[derive(Clone, Copy)]
enum Kind {
    Projects,
    Sessions,
    Stages,
    Models,
}

/// The command line as completion sees it: every argument that names a
/// project, session, stage or model offers the gateway's values.
pub fn command() -> Command {
    with_candidates(crate::examples::with_examples(Cli::command()))
}

fn with_candidates(mut command: Command) -> Command {
    let ids: Vec<(String, Kind)> = command
        .get_arguments()
        .filter_map(|a| kind_of(a).map(|k| (a.get_id().to_string(), k)))
        .collect();
    for (id, kind) in ids {
        command = command.mut_arg(id, |a| {
            a.add(ArgValueCandidates::new(move || candidates(kind)))
        });
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, with_candidates);
    }
    command
}

fn kind_of(arg: &Arg) -> Option<Kind> {
    match arg.get_id().as_str() {
        "project_arg" | "project" => Some(Kind::Projects),
        "session_arg" | "session" => Some(Kind::Sessions),
        "stage_arg" | "stage" => Some(Kind::Stages),
        "models" | "model" => Some(Kind::Models),
        _ => None,
    }
}

/// The values on offer, or none when the gateway cannot answer in time: a
/// Tab press must never hang or print an error into the command line.
fn candidates(kind: Kind) -> Vec<CompletionCandidate> {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    runtime
        .block_on(async { tokio::time::timeout(PATIENCE, fetch(kind)).await })
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// The gateway the other commands would use, from the environment and the
/// config file (completion sees no flags).
async fn connect() -> Result<Gateway> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let named = var("DIALECTIC_CLI_CONFIG").map(std::path::PathBuf::from);
    let location = Location::of(named.as_ref()).ok_or_else(|| anyhow!("no config file"))?;
    let file = FileConfig::load(Some(&location))?;
    let (_, connection) = file.connection(var("DIALECTIC_CONTEXT").as_deref())?;
    let target = Target {
        url: var("DIALECTIC_GATEWAY_URL")
            .or(connection.gateway_url)
            .unwrap_or_else(|| "http://127.0.0.1:7051".into()),
        api_key: var("DIALECTIC_API_KEY").or(connection.api_key),
        ca_cert: var("DIALECTIC_CA_CERT")
            .map(Into::into)
            .or(connection.ca_cert),
        insecure: false,
        timeout: PATIENCE,
        patience: Duration::ZERO,
    };
    Gateway::connect(&target).await
}

fn candidate(value: &str, help: String) -> CompletionCandidate {
    CompletionCandidate::new(value).help(Some(help.into()))
}

async fn fetch(kind: Kind) -> Result<Vec<CompletionCandidate>> {
    let gateway = connect().await?;
    match kind {
        Kind::Projects => Ok(projects(&gateway, 200)
            .await?
            .into_iter()
            .map(|(id, name)| candidate(&id, name))
            .collect()),
        Kind::Sessions => sessions(&gateway).await,
        Kind::Stages => {
            let listed = gateway
                .call(|mut c| {
                    let request = gateway.request(ListRecipesRequest::default());
                    async move { c.list_recipes(request).await }
                })
                .await?;
            Ok(listed
                .recipes
                .iter()
                .map(|r| candidate(&r.stage_slug, r.display_name.clone()))
                .collect())
        }
        Kind::Models => {
            let listed = gateway
                .call(|mut c| {
                    let request = gateway.request(ListModelsRequest::default());
                    async move { c.list_models(request).await }
                })
                .await?;
            Ok(listed
                .models
                .iter()
                .map(|m| candidate(&m.api_identifier, m.name.clone()))
                .collect())
        }
    }
}

/// The newest projects, as (id, name).
async fn projects(gateway: &Gateway, page_size: u32) -> Result<Vec<(String, String)>> {
    let listed = gateway
        .call(|mut c| {
            let request = gateway.request(ListProjectsRequest {
                page_size,
                ..Default::default()
            });
            async move { c.list_projects(request).await }
        })
        .await?;
    Ok(listed
        .projects
        .into_iter()
        .map(|p| (p.id, p.name))
        .collect())
}

/// `last`, then the sessions of the newest projects, newest first.
async fn sessions(gateway: &Gateway) -> Result<Vec<CompletionCandidate>> {
    let mut offered = vec![candidate(crate::refs::LAST, "your newest session".into())];
    for (project, name) in projects(gateway, RECENT_PROJECTS).await? {
        let listed = gateway
            .call(|mut c| {
                let request = gateway.request(ListSessionsRequest {
                    project_id: project.clone(),
                    page_size: 20,
                    ..Default::default()
                });
                async move { c.list_sessions(request).await }
            })
            .await?;
        offered.extend(
            listed
                .sessions
                .iter()
                .map(|s| candidate(&s.id, format!("{} ({name})", s.status))),
        );
    }
    Ok(offered)
}
