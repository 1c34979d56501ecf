//! `dialectic`: the command-line client of the gateway.

mod admin;
mod cli;
mod commands;
mod config;
mod exit;
mod format;
mod gateway;
mod json;
mod output;
mod progress;

use anyhow::Result;
use clap::Parser;
use cli::{Cli, Command, DocsCommand, PipelineCommand, RecipeCommand, RunArgs};
use commands::session::{Lifecycle, RunPlan};
use commands::{doc, model, pipeline, project, recipe, session, wallet};
use config::FileConfig;
use exit::{Failed, Kind};
use gateway::{Gateway, Target};
use output::Out;
use std::process::ExitCode;
use std::time::Duration;
use tonic::Status;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version are answers, not errors.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = e.print();
            return exit::exit_code(Kind::Usage);
        }
    };
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            match e.downcast_ref::<Status>() {
                Some(status) => eprintln!("error: {}", format::status(status)),
                None => eprintln!("error: {e:#}"),
            }
            exit::exit_code(exit::kind_of(&e))
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let out = Out::new(cli.output);
    // Admin commands talk to the broker, not the gateway, which may be down.
    let command = match cli.command {
        Command::Admin(args) => return admin::run(args, out).await,
        command => command,
    };
    let file = FileConfig::load(cli.config_file.as_ref())
        .map_err(|e| Failed::new(Kind::Config, format!("{e:#}")))?;
    let target = Target {
        url: cli
            .gateway
            .or(file.gateway_url)
            .unwrap_or_else(|| "http://127.0.0.1:7051".into()),
        api_key: cli.api_key.or(file.api_key),
        timeout: cli.timeout,
        patience: cli.wait_for_gateway,
    };
    let gateway = Gateway::connect(&target).await?;
    dispatch(&gateway, out, command).await
}

async fn dispatch(gateway: &Gateway, out: Out, command: Command) -> Result<()> {
    match command {
        Command::Create { name, prompt } => project::create(gateway, out, &name, &prompt).await,
        Command::Projects { limit } => project::list(gateway, out, limit).await,
        Command::DeleteProject { project } => project::delete(gateway, out, &project).await,
        Command::AddDoc { project, files } => {
            project::add_docs(gateway, out, &project, &files).await
        }
        Command::ProjectDocs { project } => project::docs(gateway, out, &project).await,
        Command::Ask {
            project,
            model,
            question,
        } => project::ask(gateway, out, &project, model, &question).await,
        Command::Export {
            project,
            out: to,
            url,
        } => project::export(gateway, out, &project, to.as_deref(), url).await,
        Command::Sessions { project } => session::list(gateway, out, &project).await,
        Command::Start {
            project,
            models,
            auto_advance,
        } => session::start(gateway, out, &project, &models, auto_advance).await,
        Command::Submit {
            session,
            stage,
            feedback,
            document,
        } => session::submit(gateway, out, &session, &stage, feedback, document).await,
        Command::Pause { session } => {
            session::change(gateway, out, &session, Lifecycle::Pause).await
        }
        Command::Resume { session } => {
            session::change(gateway, out, &session, Lifecycle::Resume).await
        }
        Command::Cancel { session } => {
            session::change(gateway, out, &session, Lifecycle::Cancel).await
        }
        Command::Revisit {
            session,
            stage,
            impact,
            reason,
        } => session::revisit(gateway, out, &session, &stage, &impact, &reason).await,
        Command::Retry {
            session,
            stage,
            model,
        } => session::retry(gateway, out, &session, stage, model).await,
        Command::Status { session } => session::status(gateway, out, &session).await,
        Command::Watch { session, until } => {
            session::watch(gateway, out, &session, until.as_deref()).await
        }
        Command::Blackboard {
            session,
            entry_type,
        } => session::blackboard(gateway, out, &session, entry_type).await,
        Command::Run(args) => run_session(gateway, out, args).await,
        Command::Docs(command) => docs(gateway, out, command).await,
        Command::Models => model::list(gateway, out).await,
        Command::Wallet { history } => wallet::show(gateway, out, history).await,
        Command::Pipeline(PipelineCommand::List) => pipeline::list(gateway, out).await,
        Command::Pipeline(PipelineCommand::Install { file }) => {
            pipeline::install(gateway, out, &file).await
        }
        Command::Recipe(command) => recipes(gateway, out, command).await,
        Command::Admin(args) => admin::run(args, out).await,
    }
}

async fn run_session(gateway: &Gateway, out: Out, args: RunArgs) -> Result<()> {
    let plan = RunPlan {
        name: &args.name,
        prompt: &args.prompt,
        models: &args.models,
        until: &args.until,
        auto_advance: !args.no_auto_advance,
        timeout: Duration::from_secs(args.timeout_secs),
        docs: &args.docs,
    };
    session::run(gateway, out, plan).await
}

async fn docs(gateway: &Gateway, out: Out, command: DocsCommand) -> Result<()> {
    match command {
        DocsCommand::List { session, stage } => {
            doc::list(gateway, out, &session, stage.as_deref()).await
        }
        DocsCommand::Show { resource } => doc::show(gateway, out, &resource).await,
        DocsCommand::Chunks { resource } => doc::chunks(gateway, out, &resource).await,
        DocsCommand::Edit { resource, file } => doc::edit(gateway, out, &resource, &file).await,
        DocsCommand::Regenerate(args) => doc::regenerate(gateway, out, args).await,
    }
}

async fn recipes(gateway: &Gateway, out: Out, command: RecipeCommand) -> Result<()> {
    match command {
        RecipeCommand::List => recipe::list(gateway, out).await,
        RecipeCommand::Show { stage } => recipe::show(gateway, out, &stage).await,
        RecipeCommand::Edit {
            stage,
            skip,
            unskip,
            edges,
        } => recipe::edit(gateway, out, &stage, &skip, &unskip, &edges).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parses(args: &[&str]) -> bool {
        let argv: Vec<&str> = std::iter::once("dialectic")
            .chain(args.iter().copied())
            .collect();
        Cli::try_parse_from(argv).is_ok()
    }

    #[test]
    fn a_project_takes_one_prompt_and_optionally_a_pipeline() {
        fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
            [&["create", "--name", "N"][..], extra].concat()
        }
        assert!(parses(&with(&["--prompt", "x"])));
        assert!(parses(&with(&["--prompt", "x", "--pipeline", "notes"])));
        assert!(parses(&with(&[
            "--prompt-file",
            "p.md",
            "--pipeline",
            "notes"
        ])));
        assert!(!parses(&with(&["--pipeline", "notes"])), "no prompt");
        assert!(!parses(&with(&["--prompt", "x", "--prompt-file", "p.md"])));
        assert!(parses(&["add-doc", "--project", "P", "a.md", "b.txt"]));
        assert!(!parses(&["add-doc", "--project", "P"]), "no file");
    }
}
