//! `dialectic`: the command-line client of the gateway.

mod admin;
mod cli;
mod commands;
mod config;
mod examples;
mod exit;
mod format;
mod gateway;
mod json;
mod legacy;
mod output;
mod paging;
mod progress;
mod refs;
mod shape;
mod upload_progress;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches};
use cli::{AuthCommand, Cli, Command};
use commands::{
    auth, completion, context, contract, doc, model, pipeline, project, query, recipe, session,
    version, wallet,
};
use config::{FileConfig, Location};
use exit::{Failed, Kind};
use gateway::{Gateway, Target};
use output::{Out, note};
use std::process::ExitCode;
use tonic::Status;

fn main() -> ExitCode {
    // A Tab press (`COMPLETE=<shell>`) is answered here and exits; it needs
    // no runtime of ours, and builds its own to ask the gateway.
    clap_complete::CompleteEnv::with_factory(completion::command).complete();
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(parse_and_run()),
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            exit::exit_code(Kind::Failure)
        }
    }
}

async fn parse_and_run() -> ExitCode {
    let parsed = examples::with_examples(Cli::command())
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
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
    shape::set(shape::Shape {
        fields: cli.fields.unwrap_or_default(),
        jq: cli.jq.clone(),
        no_headers: cli.no_headers,
    });
    // jq reads JSON, and what prints it (bars, previews) must know it is not a person.
    let format = if cli.jq.is_some() {
        output::Format::Json
    } else {
        cli.output
    };
    let out = Out::new(format);
    let command = match cli.command {
        Command::Deprecated(old) => {
            let (command, spelling) = old.current();
            // Only for a person: a script reading JSON may share stderr with stdout (a pty).
            if out.is_text() {
                note(&format!("deprecated spelling: use `dialectic {spelling}`"));
            }
            command
        }
        command => command,
    };
    // These talk to the broker or to nobody, not the gateway, which may be down.
    let command = match command {
        Command::Admin(args) => return admin::run(args, out).await,
        Command::Completion { shell } => return completion::print(shell),
        command => command,
    };
    let Some(location) = Location::of(cli.config_file.as_ref()) else {
        return Err(Failed::new(Kind::Config, "no HOME: name a file with --config-file").into());
    };
    let flags = context::Flags {
        gateway: cli.gateway,
        ca_cert: cli.ca_cert,
    };
    match command {
        Command::Context(c) => return context::run(c, location, flags, out),
        Command::Auth(AuthCommand::Login) => return auth::login(location, cli.context, flags, out),
        _ => {}
    }
    let file = FileConfig::load(Some(&location)).map_err(config::as_config_error)?;
    let (context, connection) = file.connection(cli.context.as_deref())?;
    let key_from = match &cli.api_key {
        Some(_) => "--api-key or DIALECTIC_API_KEY".to_string(),
        None => format!("context {context} in {}", location.path.display()),
    };
    let target = Target {
        url: flags
            .gateway
            .or(connection.gateway_url)
            .unwrap_or_else(|| "http://127.0.0.1:7051".into()),
        api_key: cli.api_key.or(connection.api_key),
        ca_cert: flags.ca_cert.or(connection.ca_cert),
        insecure: cli.insecure,
        timeout: cli.timeout,
        patience: cli.wait_for_gateway,
    };
    let connected = Gateway::connect(&target).await;
    if let Command::Version = command {
        return version::show(connected, out).await;
    }
    let gateway = connected?;
    let who = auth::Identity {
        gateway: target.url,
        key: target.api_key.unwrap_or_default(),
        key_from,
    };
    dispatch(&gateway, out, command, &who).await
}

async fn dispatch(
    gateway: &Gateway,
    out: Out,
    command: Command,
    who: &auth::Identity,
) -> Result<()> {
    match command {
        Command::Project(c) => project::dispatch(gateway, out, c).await,
        Command::Query(c) => query::dispatch(gateway, out, c).await,
        Command::Contract(c) => contract::dispatch(gateway, out, c).await,
        Command::Session(c) => session::dispatch(gateway, out, c).await,
        Command::Doc(c) => doc::dispatch(gateway, out, c).await,
        Command::Pipeline(c) => pipeline::dispatch(gateway, out, c).await,
        Command::Recipe(c) => recipe::dispatch(gateway, out, c).await,
        Command::Model(c) => model::dispatch(gateway, out, c).await,
        Command::Wallet(args) => wallet::dispatch(gateway, out, args).await,
        Command::Run(args) => session::run_args(gateway, out, args).await,
        Command::History(a) => session::history(gateway, out, &a.id(gateway).await?).await,
        Command::Admin(args) => admin::run(args, out).await,
        Command::Completion { shell } => completion::print(shell),
        Command::Auth(AuthCommand::Status) => auth::status(gateway, out, who).await,
        // run() answered them: they need no gateway, or print without one.
        Command::Auth(AuthCommand::Login) | Command::Context(_) | Command::Version => Ok(()),
        Command::Deprecated(old) => Box::pin(dispatch(gateway, out, old.current().0, who)).await,
    }
}
