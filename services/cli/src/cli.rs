//! The command line: global flags and the commands.

use crate::admin;
use crate::commands::doc::RegenerateArgs;
use crate::commands::project::PromptSource;
use crate::format;
use crate::output::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "dialectic",
    version,
    about = "Drive dialectic sessions through the gateway"
)]
pub struct Cli {
    /// Gateway URL [default: config file's gateway_url, else http://127.0.0.1:7051].
    #[arg(long, env = "DIALECTIC_GATEWAY_URL", global = true)]
    pub gateway: Option<String>,
    /// API key, sent as `authorization: Bearer <key>` (`dialecticd admin create-key`
    /// makes one) [default: config file's api_key].
    #[arg(long, env = "DIALECTIC_API_KEY", global = true, hide_env_values = true)]
    pub api_key: Option<String>,
    /// TOML file with `gateway_url` and `api_key` [default: ~/.config/dialectic/cli.toml].
    #[arg(long, env = "DIALECTIC_CLI_CONFIG", global = true)]
    pub config_file: Option<PathBuf>,
    /// `json` prints one JSON document per answer (one line per watched event);
    /// every command honours it, `admin` included.
    #[arg(long, value_enum, default_value_t = Format::Text, env = "DIALECTIC_OUTPUT", global = true)]
    pub output: Format,
    /// How long any one call may take (e.g. 500ms, 30s, 2m); a stream such as
    /// `watch` only until it starts.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, env = "DIALECTIC_TIMEOUT", global = true)]
    pub timeout: Duration,
    /// Keep trying this long while the gateway is unreachable or answers
    /// UNAVAILABLE (e.g. 30s while it starts) [default: fail at once].
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, global = true)]
    pub wait_for_gateway: Duration,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
pub struct RunArgs {
    #[arg(long)]
    pub name: String,
    #[command(flatten)]
    pub prompt: PromptSource,
    #[arg(long = "model")]
    pub models: Vec<String>,
    /// Stop when the session reaches this status (one its pipeline has).
    #[arg(long, default_value = dialectic_core::session::SessionStatus::REVIEW, value_parser = format::until_status)]
    pub until: String,
    /// Wait at each stage for `dialectic submit` instead of advancing by itself.
    #[arg(long)]
    pub no_auto_advance: bool,
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// Upload this file to the project before the session starts (repeat
    /// for several, in order; e.g. a base agreement, then its amendments).
    #[arg(long = "doc")]
    pub docs: Vec<PathBuf>,
}

#[derive(Subcommand)]
pub enum DocsCommand {
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
pub enum PipelineCommand {
    /// Every installed pipeline version; `*` marks the one new sessions run.
    List,
    /// Administrators: install a pipeline file (docs/pipelines.md) as its
    /// pipeline's next version.
    Install { file: PathBuf },
}

#[derive(Subcommand)]
pub enum RecipeCommand {
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
