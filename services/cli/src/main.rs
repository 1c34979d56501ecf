//! `dialectic`: the command-line client of the gateway.

mod admin;
mod exit;
mod format;
mod gateway;
mod json;
mod progress;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser, Subcommand};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, CancelSessionRequest, CreateProjectRequest, DeleteProjectRequest,
    EditStageRecipeRequest, ExportProjectRequest, GetBlackboardRequest, GetDocumentContentRequest,
    GetStageRecipeRequest, GetWalletRequest, InstallPipelineRequest, ListModelsRequest,
    ListPipelinesRequest, ListProjectDocumentsRequest, ListProjectsRequest, ListRecipesRequest,
    ListSessionsRequest, PauseSessionRequest, Pipeline, ProjectDocument, PromptFile, QueryRequest,
    RecipeEdge, RegenerateDocumentRequest, ResumeSessionRequest, RetryStageRequest,
    RevisitStageRequest, SaveDocumentEditRequest, StageResponse, SubmitStageResponsesRequest,
};
use exit::{Failed, Kind};
use gateway::{Gateway, Target};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;
use tonic::Status;

#[derive(Parser)]
#[command(
    name = "dialectic",
    version,
    about = "Drive dialectic sessions through the gateway"
)]
struct Cli {
    /// Gateway URL [default: config file's gateway_url, else http://127.0.0.1:7051].
    #[arg(long, env = "DIALECTIC_GATEWAY_URL", global = true)]
    gateway: Option<String>,
    /// API key, sent as `authorization: Bearer <key>` (`dialecticd admin create-key`
    /// makes one) [default: config file's api_key].
    #[arg(long, env = "DIALECTIC_API_KEY", global = true, hide_env_values = true)]
    api_key: Option<String>,
    /// TOML file with `gateway_url` and `api_key` [default: ~/.config/dialectic/cli.toml].
    #[arg(long, env = "DIALECTIC_CLI_CONFIG", global = true)]
    config_file: Option<PathBuf>,
    /// `json` prints one JSON document per answer (one line per watched event).
    #[arg(long, value_enum, default_value_t = Output::Text, env = "DIALECTIC_OUTPUT", global = true)]
    output: Output,
    /// How long any one call may take (e.g. 500ms, 30s, 2m); a stream such as
    /// `watch` only until it starts.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, env = "DIALECTIC_TIMEOUT", global = true)]
    timeout: Duration,
    /// Keep trying this long while the gateway is unreachable or answers
    /// UNAVAILABLE (e.g. 30s while it starts) [default: fail at once].
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, global = true)]
    wait_for_gateway: Duration,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Text,
    Json,
}

/// The CLI's config file: flags and environment win over it.
#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    gateway_url: Option<String>,
    api_key: Option<String>,
}

impl FileConfig {
    /// The named file (which must exist), else the default path if it exists.
    fn load(path: Option<&PathBuf>) -> Result<Self> {
        let (path, required) = match path {
            Some(p) => (p.clone(), true),
            None => match std::env::var_os("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            {
                Some(dir) => (dir.join("dialectic").join("cli.toml"), false),
                None => return Ok(Self::default()),
            },
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .with_context(|| format!("config file {} is not valid", path.display())),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(anyhow!(e).context(format!("cannot read {}", path.display()))),
        }
    }
}

/// What a project is created from: its prompt (text or file, exactly one)
/// and the pipeline it runs.
#[derive(Args)]
struct PromptSource {
    #[command(flatten)]
    text: PromptText,
    /// The pipeline the project runs (`dialectic pipeline list`); default: dialectic.
    #[arg(long)]
    pipeline: Option<String>,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct PromptText {
    /// The initial prompt text.
    #[arg(long)]
    prompt: Option<String>,
    /// Read the initial prompt from a file.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
}

impl PromptSource {
    /// The request's prompt: text as given, or the file uploaded as it is
    /// (the gateway checks it is text and names the project after it).
    fn request(&self, name: &str) -> Result<CreateProjectRequest> {
        let mut request = CreateProjectRequest {
            name: name.to_string(),
            client_request_id: client_request_id(),
            pipeline: self.pipeline.clone().unwrap_or_default(),
            ..Default::default()
        };
        match (&self.text.prompt, &self.text.prompt_file) {
            (Some(text), _) => request.initial_user_prompt = text.clone(),
            (None, Some(path)) => {
                request.prompt_file = Some(PromptFile {
                    file_name: path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    content: std::fs::read(path)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                })
            }
            (None, None) => bail!("give --prompt or --prompt-file"),
        }
        Ok(request)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Create a project; prints its id.
    Create {
        #[arg(long)]
        name: String,
        #[command(flatten)]
        prompt: PromptSource,
    },
    /// Start a session on a project; prints its id and status.
    Start {
        #[arg(long)]
        project: String,
        /// Model api identifier or id (repeatable); default: the gateway's default model.
        #[arg(long = "model")]
        models: Vec<String>,
        /// Start each next stage as soon as one completes, without stage responses.
        #[arg(long)]
        auto_advance: bool,
    },
    /// Review a completed stage: store feedback and start the next stage
    /// (or, after the last stage, the next iteration).
    #[command(alias = "feedback")]
    Submit {
        #[arg(long)]
        session: String,
        /// The stage that completed.
        #[arg(long)]
        stage: String,
        /// Feedback on the stage (or on --document).
        #[arg(long)]
        feedback: Option<String>,
        /// Document key the feedback is about.
        #[arg(long)]
        document: Option<String>,
    },
    /// Revisit an earlier stage after changing it (seed 003 change impact):
    /// minor flags later stages; moderate archives their documents as .v{N};
    /// major archives them and re-runs from the stage after it at once.
    Revisit {
        #[arg(long)]
        session: String,
        #[arg(long)]
        stage: String,
        #[arg(long, value_parser = ["minor", "moderate", "major"])]
        impact: String,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Run a stage's failed jobs again (fresh attempts; what completed is
    /// kept), optionally on another model; the session then goes on by itself.
    Retry {
        #[arg(long)]
        session: String,
        /// The stage to retry [default: the session's current stage].
        #[arg(long)]
        stage: Option<String>,
        /// Run the retried jobs on this model (api identifier or id) instead.
        #[arg(long)]
        model: Option<String>,
    },
    /// List the models a session may use.
    Models,
    /// Pause a session: running jobs finish, nothing new starts.
    Pause {
        #[arg(long)]
        session: String,
    },
    /// Resume a paused session where it stopped.
    Resume {
        #[arg(long)]
        session: String,
    },
    /// Cancel a session for good: running jobs finish, nothing new starts.
    Cancel {
        #[arg(long)]
        session: String,
    },
    /// Print your wallet: balance, held, available, and recent transactions.
    Wallet {
        #[arg(long, default_value_t = 10)]
        history: u32,
    },
    /// Print a session's status and job counts.
    Status {
        #[arg(long)]
        session: String,
    },
    /// Show a session's progress until it needs the user (or reaches --until):
    /// a bar per stage on a terminal, else one line per event.
    Watch {
        #[arg(long)]
        session: String,
        /// Stop when the session reaches this status (one its pipeline has).
        #[arg(long, value_parser = format::until_status)]
        until: Option<String>,
    },
    /// A session's rendered documents: list, show one, or save an edit.
    #[command(subcommand)]
    Docs(DocsCommand),
    /// Upload documents to a project (UTF-8 text or markdown), in order;
    /// steps read them through `project_document` input rules.
    AddDoc {
        #[arg(long)]
        project: String,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// A project's uploaded documents, in upload order.
    ProjectDocs {
        #[arg(long)]
        project: String,
    },
    /// Ask a project a question: an answer whose citations quote its
    /// documents, with caveats and a confidence (cached answers cost nothing).
    Ask {
        #[arg(long)]
        project: String,
        /// The model that answers; default: the executor's query_model.
        #[arg(long)]
        model: Option<String>,
        #[arg(required = true)]
        question: Vec<String>,
    },
    /// A session's blackboard: the findings its steps published, by type.
    Blackboard {
        #[arg(long)]
        session: String,
        /// Only entries of this type.
        #[arg(long = "type")]
        entry_type: Option<String>,
    },
    /// Your projects, newest first.
    Projects {
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Delete a project and its stored objects.
    DeleteProject {
        #[arg(long)]
        project: String,
    },
    /// A project's sessions, newest first.
    Sessions {
        #[arg(long)]
        project: String,
    },
    /// Export a project as a zip in the seed folder structure.
    Export {
        #[arg(long)]
        project: String,
        /// Where to write the zip [default: ./{project_slug}.zip].
        #[arg(long, conflicts_with = "url")]
        out: Option<PathBuf>,
        /// Print a presigned S3 URL of the zip instead of downloading it.
        #[arg(long)]
        url: bool,
    },
    /// Pipelines: list the installed versions, or install a pipeline file.
    #[command(subcommand)]
    Pipeline(PipelineCommand),
    /// Stage recipes: list them, or show one stage's DAG.
    #[command(subcommand)]
    Recipe(RecipeCommand),
    /// Create a project, start a session, watch it to --until, then list its documents.
    Run(RunArgs),
    /// Operator commands against the broker (e.g. `admin dlq list|show|replay`).
    Admin(admin::AdminArgs),
}

#[derive(Args)]
struct RegenerateArgs {
    #[arg(long)]
    session: String,
    #[arg(long)]
    stage: String,
    /// The model that wrote it (api identifier or id).
    #[arg(long)]
    model: String,
    /// The document key (e.g. business_case).
    #[arg(long)]
    document: String,
    /// Which document, when the model wrote several under that key.
    #[arg(long)]
    resource: Option<String>,
    /// Idempotency key: repeating the command with it starts nothing new
    /// (default: a fresh one per invocation).
    #[arg(long)]
    request_id: Option<String>,
}

#[derive(Args)]
struct RunArgs {
    #[arg(long)]
    name: String,
    #[command(flatten)]
    prompt: PromptSource,
    #[arg(long = "model")]
    models: Vec<String>,
    /// Stop when the session reaches this status (one its pipeline has).
    #[arg(long, default_value = dialectic_core::session::SessionStatus::REVIEW, value_parser = format::until_status)]
    until: String,
    /// Wait at each stage for `dialectic submit` instead of advancing by itself.
    #[arg(long)]
    no_auto_advance: bool,
    #[arg(long, default_value_t = 300)]
    timeout_secs: u64,
    /// Upload this file to the project before the session starts (repeat
    /// for several, in order; e.g. a base agreement, then its amendments).
    #[arg(long = "doc")]
    docs: Vec<PathBuf>,
}

#[derive(Subcommand)]
enum DocsCommand {
    /// List a session's rendered documents with their first lines.
    List {
        #[arg(long)]
        session: String,
        #[arg(long)]
        stage: Option<String>,
    },
    /// Print one rendered document.
    Show {
        #[arg(long)]
        resource: String,
    },
    /// The raw model chunks (and edits) a document was merged from.
    Chunks {
        #[arg(long)]
        resource: String,
    },
    /// Write one document of the stage the session just finished again; the
    /// jobs that wrote it are superseded and the old version is archived.
    Regenerate(RegenerateArgs),
    /// Save your edited version of a document (later stages read it).
    Edit {
        #[arg(long)]
        resource: String,
        /// The whole edited body (markdown).
        #[arg(long)]
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum PipelineCommand {
    /// Every installed pipeline version; `*` marks the one new sessions run.
    List,
    /// Administrators: install a pipeline file (docs/pipelines.md) as its
    /// pipeline's next version.
    Install { file: PathBuf },
}

#[derive(Subcommand)]
enum RecipeCommand {
    /// Every stage and its recipe.
    List,
    /// One stage's steps in execution order, with what each waits for.
    Show {
        #[arg(long)]
        stage: String,
    },
    /// Administrators: change a stage's recipe (cloned from its template on the first change).
    Edit {
        #[arg(long)]
        stage: String,
        /// A step_key to skip (repeatable).
        #[arg(long)]
        skip: Vec<String>,
        /// A step_key to run again (repeatable).
        #[arg(long)]
        unskip: Vec<String>,
        /// `FROM:TO` step keys: TO also waits for FROM (repeatable).
        #[arg(long = "edge")]
        edges: Vec<String>,
    },
}

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
    // Admin commands talk to the broker, not the gateway, which may be down.
    let command = match cli.command {
        Command::Admin(args) => return admin::run(args).await,
        command => command,
    };
    let file = FileConfig::load(cli.config_file.as_ref())
        .map_err(|e| Failed::new(Kind::Config, format!("{e:#}")))?;
    let url = cli
        .gateway
        .or(file.gateway_url)
        .unwrap_or_else(|| "http://127.0.0.1:7051".into());
    let target = Target {
        url,
        api_key: cli.api_key.or(file.api_key),
        timeout: cli.timeout,
        patience: cli.wait_for_gateway,
    };
    let json = cli.output == Output::Json;
    let gateway = Gateway::connect(&target, json).await?;
    match command {
        Command::Create { name, prompt } => create(&gateway, json, name, prompt).await,
        Command::Start {
            project,
            models,
            auto_advance,
        } => start(&gateway, json, project, models, auto_advance).await,
        Command::Submit {
            session,
            stage,
            feedback,
            document,
        } => submit(&gateway, json, session, stage, feedback, document).await,
        Command::Pause { session } => change_session(&gateway, session, Lifecycle::Pause).await,
        Command::Resume { session } => change_session(&gateway, session, Lifecycle::Resume).await,
        Command::Revisit {
            session,
            stage,
            impact,
            reason,
        } => revisit(&gateway, json, session, stage, impact, reason).await,
        Command::Cancel { session } => change_session(&gateway, session, Lifecycle::Cancel).await,
        Command::Retry {
            session,
            stage,
            model,
        } => retry(&gateway, json, session, stage, model).await,
        Command::Docs(DocsCommand::Chunks { resource }) => {
            doc_chunks(&gateway, json, resource).await
        }
        Command::Models => models(&gateway, json).await,
        Command::Wallet { history } => wallet(&gateway, json, history).await,
        Command::Status { session } => status(&gateway, json, session).await,
        Command::Watch { session, until } => watch(&gateway, json, session, until).await,
        Command::Docs(DocsCommand::List { session, stage }) => {
            doc_list(&gateway, json, session, stage).await
        }
        Command::Docs(DocsCommand::Show { resource }) => doc_show(&gateway, json, resource).await,
        Command::Docs(DocsCommand::Regenerate(args)) => doc_regenerate(&gateway, json, args).await,
        Command::Docs(DocsCommand::Edit { resource, file }) => {
            doc_edit(&gateway, json, resource, file).await
        }
        Command::Projects { limit } => projects(&gateway, json, limit).await,
        Command::AddDoc { project, files } => add_docs(&gateway, json, &project, &files).await,
        Command::ProjectDocs { project } => project_docs(&gateway, json, &project).await,
        Command::Blackboard {
            session,
            entry_type,
        } => blackboard(&gateway, json, &session, entry_type.unwrap_or_default()).await,
        Command::Ask {
            project,
            model,
            question,
        } => {
            ask(
                &gateway,
                json,
                &project,
                model.unwrap_or_default(),
                question.join(" "),
            )
            .await
        }
        Command::DeleteProject { project } => delete_project(&gateway, json, project).await,
        Command::Sessions { project } => sessions(&gateway, json, project).await,
        Command::Export { project, out, url } => export(&gateway, json, project, out, url).await,
        Command::Pipeline(PipelineCommand::List) => pipeline_list(&gateway, json).await,
        Command::Pipeline(PipelineCommand::Install { file }) => {
            pipeline_install(&gateway, json, &file).await
        }
        Command::Recipe(RecipeCommand::List) => recipe_list(&gateway, json).await,
        Command::Recipe(RecipeCommand::Edit {
            stage,
            skip,
            unskip,
            edges,
        }) => recipe_edit(&gateway, json, stage, skip, unskip, edges).await,
        Command::Recipe(RecipeCommand::Show { stage }) => recipe_show(&gateway, json, stage).await,
        Command::Run(args) => run_session(&gateway, json, args).await,
        Command::Admin(args) => admin::run(args).await,
    }
}

async fn create(gateway: &Gateway, json: bool, name: String, prompt: PromptSource) -> Result<()> {
    let project = gateway.create_project(prompt.request(&name)?).await?;
    if json {
        print_json(&json::project(&project));
    } else {
        println!("{}", project.id);
    }

    Ok(())
}

async fn start(
    gateway: &Gateway,
    json: bool,
    project: String,
    models: Vec<String>,
    auto_advance: bool,
) -> Result<()> {
    let session = gateway
        .start_session(&project, &models, auto_advance)
        .await?;
    if json {
        print_json(&json::session(&session));
    } else {
        println!("{} {}", session.id, session.status);
    }

    Ok(())
}

async fn submit(
    gateway: &Gateway,
    _json: bool,
    session: String,
    stage: String,
    feedback: Option<String>,
    document: Option<String>,
) -> Result<()> {
    let responses = feedback
        .map(|text| {
            vec![StageResponse {
                resource_id: String::new(),
                document_key: document.unwrap_or_default(),
                feedback: text,
            }]
        })
        .unwrap_or_default();
    let s = gateway
        .call(|mut c| {
            let request = gateway.request(SubmitStageResponsesRequest {
                session_id: session.clone(),
                stage_slug: stage.clone(),
                responses: responses.clone(),
            });
            async move { c.submit_stage_responses(request).await }
        })
        .await?;
    gateway.print_session_line(&s);

    Ok(())
}

/// Pause, resume or cancel: the same call shape, a different RPC.
#[derive(Clone, Copy)]
enum Lifecycle {
    Pause,
    Resume,
    Cancel,
}

async fn change_session(gateway: &Gateway, session: String, change: Lifecycle) -> Result<()> {
    let s = gateway
        .call(|mut c| {
            let session_id = session.clone();
            async move {
                match change {
                    Lifecycle::Pause => {
                        let request = gateway.request(PauseSessionRequest { session_id });
                        c.pause_session(request).await
                    }
                    Lifecycle::Resume => {
                        let request = gateway.request(ResumeSessionRequest { session_id });
                        c.resume_session(request).await
                    }
                    Lifecycle::Cancel => {
                        let request = gateway.request(CancelSessionRequest { session_id });
                        c.cancel_session(request).await
                    }
                }
            }
        })
        .await?;
    gateway.print_session_line(&s);
    Ok(())
}

async fn revisit(
    gateway: &Gateway,
    json: bool,
    session: String,
    stage: String,
    impact: String,
    reason: String,
) -> Result<()> {
    let done = gateway
        .call(|mut c| {
            let request = gateway.request(RevisitStageRequest {
                session_id: session.clone(),
                stage_slug: stage.clone(),
                impact: impact.clone(),
                reason: reason.clone(),
                impact_level: 0,
            });
            async move { c.revisit_stage(request).await }
        })
        .await?;
    if json {
        print_json(&json::revisit(&done));
    } else {
        if let Some(s) = &done.session {
            println!("{} {} (revision {})", s.id, s.status, done.revision);
        }
        for stage in &done.needs_review {
            println!("needs review: {stage}");
        }
        for key in &done.archived {
            println!("archived: {key}");
        }
    }

    Ok(())
}

async fn retry(
    gateway: &Gateway,
    json: bool,
    session: String,
    stage: Option<String>,
    model: Option<String>,
) -> Result<()> {
    let done = gateway
        .call(|mut c| {
            let request = gateway.request(RetryStageRequest {
                session_id: session.clone(),
                stage_slug: stage.clone().unwrap_or_default(),
                model: model.clone().unwrap_or_default(),
            });
            async move { c.retry_stage(request).await }
        })
        .await?;
    if json {
        print_json(&json::retry(&done));
        return Ok(());
    }
    if let Some(s) = &done.session {
        gateway.print_session_line(s);
    }
    let on = model.map_or(String::new(), |m| format!(" on {m}"));
    println!(
        "stage {}: {} failed job(s) run again{on}; {} job(s) wait for them",
        done.stage_slug,
        done.retried_job_ids.len(),
        done.reopened_jobs
    );
    for job in &done.retried_job_ids {
        println!("retried: {job}");
    }

    Ok(())
}

async fn doc_chunks(gateway: &Gateway, json: bool, resource: String) -> Result<()> {
    let found = gateway
        .call(|mut c| {
            let request = gateway.request(GetDocumentContentRequest {
                resource_id: resource.clone(),
            });
            async move { c.get_document_chunks(request).await }
        })
        .await?;
    if json {
        print_json(&found.chunks.iter().map(json::chunk).collect());
    } else {
        for c in &found.chunks {
            println!(
                "{} {} (edit version {}, finish {})",
                c.contribution_type, c.storage_key, c.edit_version, c.finish_reason
            );
            for line in format::head(&c.raw, 4) {
                println!("    {line}");
            }
        }
    }

    Ok(())
}

async fn models(gateway: &Gateway, json: bool) -> Result<()> {
    let models = gateway
        .call(|mut c| {
            let request = gateway.request(ListModelsRequest {});
            async move { c.list_models(request).await }
        })
        .await?;
    if json {
        print_json(&models.models.iter().map(json::model).collect());
        return Ok(());
    }
    print!("{}", format::models(&models.models));

    Ok(())
}

async fn wallet(gateway: &Gateway, json: bool, history: u32) -> Result<()> {
    let wallet = gateway
        .call(|mut c| {
            let request = gateway.request(GetWalletRequest { history });
            async move { c.get_wallet(request).await }
        })
        .await?;
    if json {
        print_json(&json::wallet(&wallet));
    } else {
        print!("{}", format::wallet(&wallet));
    }

    Ok(())
}

async fn status(gateway: &Gateway, json: bool, session: String) -> Result<()> {
    let s = gateway.session(&session).await?;
    if json {
        print_json(&json::session(&s));
    } else {
        print!("{}", format::session(&s));
    }

    Ok(())
}

async fn watch(
    gateway: &Gateway,
    json: bool,
    session: String,
    until: Option<String>,
) -> Result<()> {
    if let Some(until) = &until {
        let watched = gateway.session(&session).await?;
        if let Some(stages) = gateway.session_stages(&watched).await? {
            format::check_until(until, &stages).map_err(|e| Failed::new(Kind::Usage, e))?;
        }
    }
    let mut view = progress::View::new(json, &session);
    gateway
        .watch(&session, until.as_deref(), None, &mut view)
        .await?;
    view.finish();

    Ok(())
}

async fn doc_list(
    gateway: &Gateway,
    json: bool,
    session: String,
    stage: Option<String>,
) -> Result<()> {
    let documents = gateway
        .docs(&session, stage.as_deref().unwrap_or(""))
        .await?;
    if json {
        print_json(&documents.iter().map(json::document).collect());
    }

    Ok(())
}

async fn doc_show(gateway: &Gateway, json: bool, resource: String) -> Result<()> {
    let content = gateway
        .call(|mut c| {
            let request = gateway.request(GetDocumentContentRequest {
                resource_id: resource.clone(),
            });
            async move { c.get_document_content(request).await }
        })
        .await?;
    if json {
        let mut value = content
            .document
            .as_ref()
            .map(json::document)
            .unwrap_or_default();
        value["content"] = content.content.into();
        value["mime_type"] = content.mime_type.into();
        print_json(&value);
    } else {
        print!("{}", content.content);
    }

    Ok(())
}

async fn doc_regenerate(gateway: &Gateway, json: bool, args: RegenerateArgs) -> Result<()> {
    let RegenerateArgs {
        session,
        stage,
        model,
        document,
        resource,
        request_id,
    } = args;
    // One id for every retry of this invocation, so a retried call after
    // an unavailable gateway cannot start a second regeneration.
    let request_id = request_id.unwrap_or_else(client_request_id);
    let done = gateway
        .call(|mut c| {
            let request = gateway.request(RegenerateDocumentRequest {
                session_id: session.clone(),
                stage_slug: stage.clone(),
                model: model.clone(),
                document_key: document.clone(),
                resource_id: resource.clone().unwrap_or_default(),
                client_request_id: request_id.clone(),
            });
            async move { c.regenerate_document(request).await }
        })
        .await?;
    if json {
        print_json(&json::regeneration(&done));
    } else {
        let verb = if done.created {
            "regenerating"
        } else {
            "already regenerating"
        };
        println!(
            "{verb} {document} as job {} ({} earlier job(s) superseded)",
            done.job_id,
            done.superseded_job_ids.len()
        );
    }

    Ok(())
}

async fn doc_edit(gateway: &Gateway, json: bool, resource: String, file: PathBuf) -> Result<()> {
    let body = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let document = gateway
        .call(|mut c| {
            let request = gateway.request(SaveDocumentEditRequest {
                resource_id: resource.clone(),
                content: body.clone(),
            });
            async move { c.save_document_edit(request).await }
        })
        .await?;
    if json {
        print_json(&json::document(&document));
    } else {
        println!("saved; re-rendering {}", document.storage_key);
    }

    Ok(())
}

fn project_document_line(d: &ProjectDocument) -> String {
    format!(
        "{}  {:>2}. {}  ({} bytes, {} chunks indexed)",
        d.resource_id, d.position, d.file_name, d.size_bytes, d.chunks
    )
}

/// Uploads each file in turn (their order is the order steps read them in);
/// each upload carries its own request id, so a retried call is not doubled.
async fn add_docs(gateway: &Gateway, json: bool, project: &str, files: &[PathBuf]) -> Result<()> {
    for document in upload_docs(gateway, project, files).await? {
        if json {
            print_json(&json::project_document(&document));
        } else {
            println!("{}", project_document_line(&document));
        }
    }
    Ok(())
}

/// Uploads `files` to the project in order (each retry-safe by its request id).
async fn upload_docs(
    gateway: &Gateway,
    project: &str,
    files: &[PathBuf],
) -> Result<Vec<ProjectDocument>> {
    let mut uploaded = Vec::with_capacity(files.len());
    for file in files {
        let content = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let file_name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let request_id = client_request_id();
        let document = gateway
            .call(|mut c| {
                let request = gateway.request(AddProjectDocumentRequest {
                    project_id: project.to_string(),
                    file_name: file_name.clone(),
                    content: content.clone(),
                    client_request_id: request_id.clone(),
                });
                async move { c.add_project_document(request).await }
            })
            .await?;
        uploaded.push(document);
    }
    Ok(uploaded)
}

async fn project_docs(gateway: &Gateway, json: bool, project: &str) -> Result<()> {
    let list = gateway
        .call(|mut c| {
            let request = gateway.request(ListProjectDocumentsRequest {
                project_id: project.to_string(),
            });
            async move { c.list_project_documents(request).await }
        })
        .await?;
    if json {
        print_json(&list.documents.iter().map(json::project_document).collect());
    } else {
        if list.documents.is_empty() {
            println!("no documents uploaded");
        }
        for d in &list.documents {
            println!("{}", project_document_line(d));
        }
    }
    Ok(())
}

async fn ask(
    gateway: &Gateway,
    json: bool,
    project: &str,
    model: String,
    text: String,
) -> Result<()> {
    // A retried call answers the first one's answer, never asking twice.
    let request_id = client_request_id();
    let answer = gateway
        .call(|mut c| {
            let request = gateway.request(QueryRequest {
                project_id: project.to_string(),
                text: text.clone(),
                model: model.clone(),
                client_request_id: request_id.clone(),
            });
            async move { c.query(request).await }
        })
        .await?;
    if json {
        print_json(&json::answer(&answer));
    } else {
        print!("{}", format::answer(&answer));
    }
    Ok(())
}

async fn blackboard(
    gateway: &Gateway,
    json: bool,
    session: &str,
    entry_type: String,
) -> Result<()> {
    let board = gateway
        .call(|mut c| {
            let request = gateway.request(GetBlackboardRequest {
                session_id: session.to_string(),
                entry_type: entry_type.clone(),
            });
            async move { c.get_blackboard(request).await }
        })
        .await?;
    if json {
        print_json(&board.entries.iter().map(json::board_entry).collect());
    } else {
        if board.entries.is_empty() {
            println!("the blackboard is empty");
        }
        for e in &board.entries {
            println!(
                "{} #{} ({}, {}/{}): {}",
                e.entry_type, e.seq, e.stage_slug, e.step_key, e.model, e.data_json
            );
        }
    }
    Ok(())
}

async fn projects(gateway: &Gateway, json: bool, limit: u32) -> Result<()> {
    let page = gateway
        .call(|mut c| {
            let request = gateway.request(ListProjectsRequest {
                page_size: limit,
                page_token: String::new(),
            });
            async move { c.list_projects(request).await }
        })
        .await?;
    if json {
        print_json(&page.projects.iter().map(json::project).collect());
    } else {
        if page.projects.is_empty() {
            println!("no projects yet");
        }
        for p in &page.projects {
            println!("{}  {}", p.id, p.name);
        }
    }

    Ok(())
}

async fn delete_project(gateway: &Gateway, json: bool, project: String) -> Result<()> {
    let done = gateway
        .call(|mut c| {
            let request = gateway.request(DeleteProjectRequest {
                project_id: project.clone(),
            });
            async move { c.delete_project(request).await }
        })
        .await?;
    if json {
        print_json(&json::deleted(&done));
    } else {
        println!("deleted ({} stored objects removed)", done.objects_deleted);
    }

    Ok(())
}

async fn sessions(gateway: &Gateway, json: bool, project: String) -> Result<()> {
    let page = gateway
        .call(|mut c| {
            let request = gateway.request(ListSessionsRequest {
                project_id: project.clone(),
                page_size: 0,
                page_token: String::new(),
            });
            async move { c.list_sessions(request).await }
        })
        .await?;
    if json {
        print_json(&page.sessions.iter().map(json::session).collect());
    } else {
        if page.sessions.is_empty() {
            println!("no sessions yet");
        }
        for s in &page.sessions {
            println!("{}  {}  iteration {}", s.id, s.status, s.iteration);
        }
    }

    Ok(())
}

async fn export(
    gateway: &Gateway,
    json: bool,
    project: String,
    out: Option<PathBuf>,
    url: bool,
) -> Result<()> {
    if url {
        let link = gateway
            .call(|mut c| {
                let request = gateway.request(ExportProjectRequest {
                    project_id: project.clone(),
                });
                async move { c.get_export_url(request).await }
            })
            .await?;
        if json {
            print_json(&json::export_url(&link));
        } else {
            println!("{}", link.url);
        }
        return Ok(());
    }
    let mut stream = gateway
        .call(|mut c| {
            let request = gateway.request(ExportProjectRequest {
                project_id: project.clone(),
            });
            async move { c.export_project(request).await }
        })
        .await?;
    let mut zip = Vec::new();
    let mut name = String::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if name.is_empty() {
            name = chunk.file_name;
        }
        zip.extend_from_slice(&chunk.data);
    }
    let path = out.unwrap_or_else(|| {
        PathBuf::from(if name.is_empty() {
            "export.zip".into()
        } else {
            name
        })
    });
    std::fs::write(&path, &zip).with_context(|| format!("cannot write {}", path.display()))?;
    if json {
        print_json(
            &serde_json::json!({"path": path.display().to_string(), "size_bytes": zip.len()}),
        );
    } else {
        println!("{} ({} bytes)", path.display(), zip.len());
    }

    Ok(())
}

fn pipeline_line(p: &Pipeline) -> String {
    let current = if p.current { "*" } else { " " };
    format!(
        "{current} {:<16} v{:<3} {}  ({})",
        p.slug,
        p.version,
        p.stages.join(" → "),
        p.name
    )
}

async fn pipeline_list(gateway: &Gateway, json: bool) -> Result<()> {
    let list = gateway
        .call(|mut c| {
            let request = gateway.request(ListPipelinesRequest {});
            async move { c.list_pipelines(request).await }
        })
        .await?;
    if json {
        print_json(&list.pipelines.iter().map(json::pipeline).collect());
    } else {
        for p in &list.pipelines {
            println!("{}", pipeline_line(p));
        }
    }
    Ok(())
}

async fn pipeline_install(gateway: &Gateway, json: bool, file: &Path) -> Result<()> {
    let content = std::fs::read_to_string(file)
        .with_context(|| format!("reading pipeline file {}", file.display()))?;
    let installed = gateway
        .call(|mut c| {
            let request = gateway.request(InstallPipelineRequest {
                content: content.clone(),
            });
            async move { c.install_pipeline(request).await }
        })
        .await?;
    if json {
        print_json(&json::installed(&installed));
        return Ok(());
    }
    let pipeline = installed
        .pipeline
        .context("the gateway answered without the pipeline")?;
    if installed.created {
        println!("installed {}", pipeline_line(&pipeline));
    } else {
        println!(
            "{} v{} already is this file; nothing installed",
            pipeline.slug, pipeline.version
        );
    }
    Ok(())
}

async fn recipe_list(gateway: &Gateway, json: bool) -> Result<()> {
    let list = gateway
        .call(|mut c| {
            let request = gateway.request(ListRecipesRequest {});
            async move { c.list_recipes(request).await }
        })
        .await?;
    if json {
        print_json(&json::recipes(&list.recipes));
    } else {
        for r in &list.recipes {
            let kind = if r.is_cloned { "cloned" } else { "template" };
            println!(
                "{:<12} {:>3} steps  {kind:<8}  {}",
                r.stage_slug, r.steps, r.display_name
            );
        }
    }

    Ok(())
}

async fn recipe_edit(
    gateway: &Gateway,
    json: bool,
    stage: String,
    skip: Vec<String>,
    unskip: Vec<String>,
    edges: Vec<String>,
) -> Result<()> {
    let add_edges = edges
        .iter()
        .map(|e| match e.split_once(':') {
            Some((from, to)) => Ok(RecipeEdge {
                from_step_key: from.trim().to_string(),
                to_step_key: to.trim().to_string(),
            }),
            None => Err(anyhow!("--edge {e:?} must be FROM:TO")),
        })
        .collect::<Result<Vec<_>>>()?;
    let recipe = gateway
        .call(|mut c| {
            let request = gateway.request(EditStageRecipeRequest {
                stage_slug: stage.clone(),
                skip: skip.clone(),
                unskip: unskip.clone(),
                add_edges: add_edges.clone(),
            });
            async move { c.edit_stage_recipe(request).await }
        })
        .await?;
    if json {
        print_json(&json::recipe(&recipe));
    } else {
        print!("{}", format::recipe(&recipe));
    }

    Ok(())
}

async fn recipe_show(gateway: &Gateway, json: bool, stage: String) -> Result<()> {
    let recipe = gateway
        .call(|mut c| {
            let request = gateway.request(GetStageRecipeRequest {
                stage_slug: stage.clone(),
            });
            async move { c.get_stage_recipe(request).await }
        })
        .await?;
    if json {
        print_json(&json::recipe(&recipe));
    } else {
        print!("{}", format::recipe(&recipe));
    }

    Ok(())
}

/// `dialectic run`: create, start, watch to `until`, then list the documents.
async fn run_session(gateway: &Gateway, json: bool, args: RunArgs) -> Result<()> {
    let RunArgs {
        name,
        prompt,
        models,
        until,
        no_auto_advance,
        timeout_secs,
        docs,
    } = args;
    let pipeline = prompt.pipeline.as_deref().unwrap_or("dialectic");
    // An unknown pipeline is CreateProject's NOT_FOUND, said below.
    if let Some(stages) = gateway.pipeline_stages(pipeline, None).await? {
        format::check_until(&until, &stages).map_err(|e| Failed::new(Kind::Usage, e))?;
    }
    let project = gateway.create_project(prompt.request(&name)?).await?;
    if !json {
        println!("project {}", project.id);
    }
    let uploaded = upload_docs(gateway, &project.id, &docs).await?;
    if !json {
        for document in &uploaded {
            println!("{}", project_document_line(document));
        }
    }
    let session = gateway
        .start_session(&project.id, &models, !no_auto_advance)
        .await?;
    if !json {
        println!("session {} {}", session.id, session.status);
    }
    let deadline = Instant::now() + Duration::from_secs(timeout_secs);
    let mut view = progress::View::new(json, &session.id);
    gateway
        .watch(&session.id, Some(&until), Some(deadline), &mut view)
        .await?;
    gateway
        .wait_for_renders(&session.id, deadline, &mut view)
        .await?;
    view.finish();
    let documents = gateway.docs(&session.id, "").await?;
    let summary = gateway.session(&session.id).await?;
    if json {
        print_json(&serde_json::json!({
            "project": json::project(&project),
            "uploaded": uploaded.iter().map(json::project_document).collect::<Vec<_>>(),
            "session": json::session(&summary),
            "documents": documents.iter().map(json::document).collect::<Vec<_>>(),
        }));
    } else {
        println!();
        print!("{}", format::summary(&summary, &documents));
    }

    Ok(())
}

fn print_json(value: &serde_json::Value) {
    println!("{value}");
}

/// A request id that makes a retried create/start idempotent on the server.
fn client_request_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("cli-{}-{nanos}", std::process::id())
}

/// Progress notes go to stderr so stdout stays parseable.
fn note(message: &str) {
    eprintln!("note: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

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
