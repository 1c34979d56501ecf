//! The command line: global flags and the commands, noun then verb
//! (`dialectic project list`, `dialectic session watch`) as gh and kubectl
//! are; the flat spellings of earlier releases are in [`crate::legacy`].

use crate::admin;
use crate::commands::doc::RegenerateArgs;
use crate::commands::project::PromptSource;
use crate::format;
use crate::legacy::Deprecated;
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
    /// PEM file of the certificate authority that signed an `https://` gateway's
    /// certificate [default: the context's ca_cert, else the system's roots].
    #[arg(long, env = "DIALECTIC_CA_CERT", global = true)]
    pub ca_cert: Option<PathBuf>,
    /// Do not check an `https://` gateway's certificate at all (a warning says so
    /// on stderr): anyone on the path can read the calls, the API key included.
    /// For a test gateway whose CA you do not have; prefer --ca-cert.
    #[arg(long, env = "DIALECTIC_INSECURE", global = true,
          value_parser = clap::builder::FalseyValueParser::new())]
    pub insecure: bool,
    /// Which gateway of the config file's contexts to use (`dialectic context list`)
    /// [default: the config file's current_context].
    #[arg(long, env = "DIALECTIC_CONTEXT", global = true)]
    pub context: Option<String>,
    /// TOML file with the contexts (gateway URL, CA, API key) [default: ~/.config/dialectic/cli.toml].
    #[arg(long, env = "DIALECTIC_CLI_CONFIG", global = true)]
    pub config_file: Option<PathBuf>,
    /// `json` prints one JSON document per answer (one line per watched event),
    /// `yaml` the same as YAML documents; every command honours it, `admin` included.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text, env = "DIALECTIC_OUTPUT", global = true)]
    pub output: Format,
    /// Print only these keys of each row, e.g. `--fields id,name` (a dotted
    /// path reaches into an object: `progress.stage`): a table as text, the
    /// same keys as JSON or YAML.
    #[arg(long, value_name = "A,B", value_parser = crate::shape::fields_arg, global = true)]
    pub fields: Option<Fields>,
    /// Run a jq filter (the jaq implementation) on the JSON answer and print
    /// each result, strings raw: `--jq '.[].id'`. Implies `--output json`.
    #[arg(long, value_name = "EXPR", value_parser = crate::shape::jq_arg, global = true)]
    pub jq: Option<String>,
    /// Leave the header row out of tables (`--fields` as text).
    #[arg(long, global = true)]
    pub no_headers: bool,
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

/// `--fields`: the keys to keep, in order.
pub type Fields = Vec<String>;

#[derive(Subcommand)]
pub enum Command {
    /// Projects: create, list, show, delete; their uploads, questions, export.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// A project's questions: `query history` lists them with their answers.
    #[command(subcommand)]
    Query(QueryCommand),
    /// A contract-stack analysis as data: `contract analysis` prints its
    /// clauses, dependency edges and conflicts (`--section 7`: what touches 7).
    #[command(subcommand)]
    Contract(ContractCommand),
    /// Sessions: start one, follow it, review its stages, pause, resume, cancel, retry.
    #[command(subcommand)]
    Session(SessionCommand),
    /// A session's rendered documents: list, show one, or save an edit.
    #[command(subcommand, alias = "docs")]
    Doc(DocCommand),
    /// Pipelines: list the installed versions, or install a pipeline file.
    #[command(subcommand)]
    Pipeline(PipelineCommand),
    /// Stage recipes: list them, or show one stage's DAG.
    #[command(subcommand)]
    Recipe(RecipeCommand),
    /// The models a session may use.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Your wallet: balance, held, available, and recent transactions.
    Wallet(WalletArgs),
    /// A session's revision history (`session history`).
    History(SessionRef),
    /// Create a project, start a session, watch it to --until, then list its documents.
    Run(RunArgs),
    /// Operator commands against the broker (e.g. `admin dlq list|show|replay`).
    Admin(admin::AdminArgs),
    /// Keep an API key in the config file, or check the one in use.
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Several gateways, each with its URL, CA and key: add, use, list, delete.
    #[command(subcommand)]
    Context(ContextCommand),
    /// This CLI's release and the gateway's: version, build, API, features.
    Version,
    /// Print a shell completion script: `source <(dialectic completion bash)`,
    /// `dialectic completion zsh > "${fpath[1]}/_dialectic"`,
    /// `dialectic completion fish | source`.
    Completion {
        /// The shell the script is for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Spellings of earlier releases, hidden; each says what replaces it.
    #[command(flatten)]
    Deprecated(Deprecated),
}

#[derive(Subcommand)]
pub enum ProjectCommand {
    /// Your projects, newest first (all of them unless --limit).
    List(ListProjects),
    /// Create a project; prints its id.
    Create(CreateProject),
    /// A project's name, pipeline, prompt and when it was created.
    Show(ProjectRef),
    /// Delete a project and its stored objects; asks first on a terminal.
    Delete(DeleteProject),
    /// Upload documents to a project (UTF-8 text or markdown, PDF with a
    /// text layer, DOCX; PDF and DOCX are converted to markdown), in order;
    /// steps read them through `project_document` input rules, by role when
    /// a rule names one (`--role writing_sample`, or `source=notes.md`).
    AddDoc(AddDocs),
    /// A project's uploaded documents, in upload order.
    Docs(ProjectRef),
    /// Ask a project a question: an answer whose citations quote its
    /// documents, with caveats and a confidence (cached answers cost nothing).
    Ask(Ask),
    /// Export a project as a zip in the seed folder structure.
    Export(Export),
}

#[derive(Subcommand)]
pub enum QueryCommand {
    /// The questions asked of a project, newest first: classification,
    /// latency, cost and the start of each answer (`--output json` for all of it).
    History(QueryHistory),
}

#[derive(Subcommand)]
pub enum ContractCommand {
    /// The resolved clauses (section, title, category, effective date, the
    /// document that last changed it), dependency edges and conflicts of the
    /// project's analysis or of one session.
    Analysis(ContractAnalysisArgs),
}

#[derive(Args)]
pub struct ContractAnalysisArgs {
    /// The project: its analysis is the session its questions read.
    #[arg(long, required_unless_present = "session", conflicts_with = "session")]
    pub project: Option<String>,
    /// One session instead.
    #[arg(long)]
    pub session: Option<String>,
    /// Only what touches this section ("7" also holds 7.2 and 7(a)).
    #[arg(long)]
    pub section: Option<String>,
}

#[derive(Args)]
pub struct QueryHistory {
    #[command(flatten)]
    pub target: ProjectRef,
    #[command(flatten)]
    pub page: crate::paging::PageArgs,
}

#[derive(Args)]
pub struct ListProjects {
    #[command(flatten)]
    pub page: crate::paging::PageArgs,
    #[command(flatten)]
    pub query: crate::paging::QueryArgs,
}

#[derive(Args)]
pub struct ListSessions {
    #[command(flatten)]
    pub target: ProjectRef,
    #[command(flatten)]
    pub page: crate::paging::PageArgs,
    #[command(flatten)]
    pub query: crate::paging::QueryArgs,
}

#[derive(Args)]
pub struct DeleteProject {
    #[command(flatten)]
    pub target: ProjectRef,
    /// Delete without asking; required when stdin is not a terminal (a script).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Args)]
pub struct CreateProject {
    /// The project's name (a later `project show NAME` finds it by this).
    #[arg(long)]
    pub name: String,
    #[command(flatten)]
    pub prompt: PromptSource,
}

pub use crate::refs::{ProjectRef, ResourceRef, SessionRef, StageRef};

#[derive(Args)]
pub struct AddDocs {
    /// The project's id, or its name when no other project of yours has that name.
    #[arg(long)]
    pub project: String,
    /// The role of every file that names none: source, writing_sample,
    /// context, constraint or success_criteria.
    #[arg(long, value_parser = crate::commands::project::role_arg)]
    pub role: Option<dialectic_core::document_role::DocumentRole>,
    /// FILE, or ROLE=FILE for a file of its own role.
    #[arg(required = true, value_parser = crate::commands::project::upload_arg)]
    pub files: Vec<crate::commands::project::Upload>,
}

#[derive(Args)]
pub struct Ask {
    /// The project's id, or its name when no other project of yours has that name.
    #[arg(long)]
    pub project: String,
    /// The model that answers; default: the executor's query_model.
    #[arg(long)]
    pub model: Option<String>,
    /// The question (its words may go unquoted).
    #[arg(required = true)]
    pub question: Vec<String>,
}

#[derive(Args)]
pub struct Export {
    #[command(flatten)]
    pub target: ProjectRef,
    /// Where to write the zip [default: ./{project_slug}.zip].
    #[arg(long, conflicts_with = "url")]
    pub out: Option<PathBuf>,
    /// Print a presigned S3 URL of the zip instead of downloading it.
    #[arg(long)]
    pub url: bool,
}

#[derive(Subcommand)]
pub enum SessionCommand {
    /// A project's sessions, newest first.
    List(ListSessions),
    /// Your newest session (of one project, if named), shown as `status` shows it.
    Last(LastSession),
    /// Start a session on a project; prints its id and status.
    Start(StartSession),
    /// Print a session's status and job counts.
    Status(SessionRef),
    /// Show a session's progress until it needs the user (or reaches --until):
    /// a bar per stage on a terminal, else one line per event.
    Watch(Watch),
    /// Review a completed stage: store feedback and start the next stage
    /// (or, after the last stage, the next iteration).
    #[command(alias = "feedback")]
    Submit(Submit),
    /// Pause a session: running jobs finish, nothing new starts.
    Pause(SessionRef),
    /// Resume a paused session where it stopped (also one abandoned while
    /// idle and unfinished).
    Resume(SessionRef),
    /// Cancel a session for good: running jobs finish, nothing new starts.
    Cancel(SessionRef),
    /// End a session at review as completed: read-only, still listed,
    /// exported and answering questions, never paused or abandoned on a timer.
    Complete(SessionRef),
    /// Run a stage's failed jobs again (fresh attempts; what completed is
    /// kept), optionally on another model; the session then goes on by itself.
    Retry(Retry),
    /// Revisit an earlier stage after changing it (seed 003 change impact):
    /// minor flags later stages; moderate archives, as .v{N}, the later
    /// documents downstream of what changed; major archives them all and
    /// re-runs from the stage after it at once. `--dry-run` changes nothing
    /// and shows what each impact would do, and the diff of each edited
    /// document against what the later stages read.
    Revisit(Revisit),
    /// A session's blackboard: the findings its steps published, by type.
    Blackboard(Blackboard),
    /// A session's revisits, oldest first: stage, impact, reason, what each
    /// flagged for review or archived (also `dialectic history`).
    History(SessionRef),
}

#[derive(Args)]
pub struct LastSession {
    /// Only this project's sessions: its id, or its name when no other
    /// project of yours has it [default: all your projects].
    #[arg(value_name = "PROJECT", conflicts_with = "project")]
    pub project_arg: Option<String>,
    /// The same as PROJECT, as a flag.
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
}

#[derive(Args)]
pub struct StartSession {
    #[command(flatten)]
    pub target: ProjectRef,
    /// Model api identifier or id (repeatable); default: the gateway's default model.
    #[arg(long = "model")]
    pub models: Vec<String>,
    /// Run the pipeline's steps of model role ROLE on MODEL only
    /// (repeatable): `--model-role analyst=gpt-5.1`.
    #[arg(long = "model-role", value_name = "ROLE=MODEL", value_parser = dialectic_core::model_role::parse_role_flag)]
    pub model_roles: Vec<(String, String)>,
    /// Start each next stage as soon as one completes, without stage responses.
    #[arg(long)]
    pub auto_advance: bool,
    /// How hard critique steps push back: full (the default), light or minimal.
    #[arg(long, value_parser = format::pushback)]
    pub pushback: Option<dialectic_core::pushback::Pushback>,
}

#[derive(Args)]
pub struct Watch {
    #[command(flatten)]
    pub target: SessionRef,
    /// Stop when the session reaches this status (one its pipeline has).
    #[arg(long, value_parser = format::until_status)]
    pub until: Option<String>,
}

#[derive(Args)]
pub struct Submit {
    #[command(flatten)]
    pub target: SessionRef,
    /// The stage that completed.
    #[arg(long)]
    pub stage: String,
    /// Feedback on the stage (or on --document).
    #[arg(long)]
    pub feedback: Option<String>,
    /// Document key the feedback is about.
    #[arg(long)]
    pub document: Option<String>,
}

#[derive(Args)]
pub struct Retry {
    #[command(flatten)]
    pub target: SessionRef,
    /// The stage to retry [default: the session's current stage].
    #[arg(long)]
    pub stage: Option<String>,
    /// Run the retried jobs on this model (api identifier or id) instead.
    #[arg(long)]
    pub model: Option<String>,
}

#[derive(Args)]
pub struct Revisit {
    #[command(flatten)]
    pub target: SessionRef,
    /// The earlier stage to revisit (its slug, e.g. thesis).
    #[arg(long)]
    pub stage: String,
    /// How far the change reaches: minor, moderate or major (see above).
    #[arg(long, value_parser = ["minor", "moderate", "major"], required_unless_present = "dry_run")]
    pub impact: Option<String>,
    /// Why, kept in the session's history.
    #[arg(long, default_value = "")]
    pub reason: String,
    /// Change nothing: show what minor, moderate and major would each flag,
    /// archive and re-run, and what changed in the edited documents.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Args)]
pub struct Blackboard {
    #[command(flatten)]
    pub target: SessionRef,
    /// Only entries of this type.
    #[arg(long = "type")]
    pub entry_type: Option<String>,
}

#[derive(Args)]
pub struct RunArgs {
    /// The new project's name.
    #[arg(long)]
    pub name: String,
    #[command(flatten)]
    pub prompt: PromptSource,
    /// Model api identifier or id (repeatable); default: the gateway's default model.
    #[arg(long = "model")]
    pub models: Vec<String>,
    /// Run the pipeline's steps of model role ROLE on MODEL only
    /// (repeatable): `--model-role analyst=gpt-5.1`.
    #[arg(long = "model-role", value_name = "ROLE=MODEL", value_parser = dialectic_core::model_role::parse_role_flag)]
    pub model_roles: Vec<(String, String)>,
    /// Stop when the session reaches this status (one its pipeline has).
    #[arg(long, default_value = dialectic_core::session::SessionStatus::REVIEW, value_parser = format::until_status)]
    pub until: String,
    /// Wait at each stage for `dialectic session submit` instead of advancing by itself.
    #[arg(long)]
    pub no_auto_advance: bool,
    /// How hard critique steps push back: full (the default), light or minimal.
    #[arg(long, value_parser = format::pushback)]
    pub pushback: Option<dialectic_core::pushback::Pushback>,
    /// How long to wait for --until before giving up (exit 75), e.g. 90s,
    /// 10m, 1h; a bare number is seconds (`--timeout-secs`, its old
    /// spelling, still works).
    #[arg(long, alias = "timeout-secs", default_value = "5m", value_parser = format::seconds_or_duration)]
    pub wait: Duration,
    /// Upload this file (text, markdown, PDF or DOCX) to the project before
    /// the session starts (repeat for several, in order; e.g. a base
    /// agreement, then its amendments). ROLE=FILE gives it a role:
    /// `--doc writing_sample=old-essay.md --doc source=paper.pdf`.
    #[arg(long = "doc", value_parser = crate::commands::project::upload_arg)]
    pub docs: Vec<crate::commands::project::Upload>,
}

#[derive(Subcommand)]
pub enum DocCommand {
    /// List a session's rendered documents with their first lines.
    List {
        #[command(flatten)]
        target: SessionRef,
        /// Only this stage's documents (its slug, e.g. thesis).
        #[arg(long)]
        stage: Option<String>,
    },
    /// Print one rendered document.
    Show {
        #[command(flatten)]
        target: ResourceRef,
    },
    /// The raw model chunks (and edits) a document was merged from.
    Chunks {
        #[command(flatten)]
        target: ResourceRef,
    },
    /// Write one document of the stage the session just finished again; the
    /// jobs that wrote it are superseded and the old version is archived.
    Regenerate(RegenerateArgs),
    /// Save your edited version of a document (later stages read it).
    Edit {
        #[command(flatten)]
        target: ResourceRef,
        /// The whole edited body (markdown).
        #[arg(long)]
        file: PathBuf,
    },
    /// Keep your view of one claim of a fact-check log with a rationale (the
    /// checked verdict stays; the log shows both).
    Override {
        /// The fact-check document (`doc list`).
        #[command(flatten)]
        target: ResourceRef,
        /// The claim's number in the log, from 1.
        #[arg(long)]
        claim: u32,
        /// Why your view differs, shown beside the checked verdict.
        #[arg(long)]
        rationale: String,
    },
}

#[derive(Subcommand)]
pub enum PipelineCommand {
    /// Every installed pipeline version; `*` marks the one new sessions run.
    List,
    /// Administrators: install a pipeline file (docs/pipelines.md) as its
    /// pipeline's next version.
    Install {
        /// The pipeline file (TOML).
        file: PathBuf,
        /// Install nothing: the gateway checks the file as an install would
        /// and answers the version it would become.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
pub enum RecipeCommand {
    /// Every stage and its recipe.
    List,
    /// One stage's steps in execution order, with what each waits for.
    Show {
        #[command(flatten)]
        target: StageRef,
    },
    /// Administrators: change a stage's recipe (cloned from its template on the first change).
    Edit {
        #[command(flatten)]
        target: StageRef,
        /// A step_key to skip (repeatable).
        #[arg(long)]
        skip: Vec<String>,
        /// A step_key to run again (repeatable).
        #[arg(long)]
        unskip: Vec<String>,
        /// `FROM:TO` step keys: TO also waits for FROM (repeatable).
        #[arg(long = "edge")]
        edges: Vec<String>,
        /// Change nothing: the gateway checks the edit (stage and steps
        /// known, no cycle) and answers the recipe as it would be.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
pub enum ContextCommand {
    /// Add a gateway, or change one: `dialectic context add prod --gateway
    /// https://gw.example.com --ca-cert ca.pem`; then `dialectic --context prod
    /// auth login` keeps its key.
    Add {
        /// The context's name (`default` is the file's top level).
        name: String,
        /// Use it from now on.
        #[arg(long = "use")]
        make_current: bool,
    },
    /// Use this context until another is chosen (`default`: the file's top level).
    Use {
        /// The context's name (`dialectic context list`).
        name: String,
    },
    /// Every context: its gateway, key (prefix) and CA; `*` marks the one in use.
    List,
    /// Forget a context and its key.
    Delete {
        /// The context's name (`dialectic context list`).
        name: String,
    },
}

#[derive(Subcommand)]
pub enum AuthCommand {
    /// Read a key from stdin (or a prompt that does not echo it) and write it
    /// to the config file's context in use, owner-only (with --gateway and
    /// --ca-cert, those too).
    Login,
    /// Which gateway and key (its prefix) are in use, and whether the key works.
    Status,
}

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Every model a session may use.
    List,
}

/// `wallet show`; a bare `wallet` (with `--history`) shows it too, as it did.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WalletArgs {
    #[command(subcommand)]
    pub command: Option<WalletCommand>,
    #[command(flatten)]
    pub history: History,
}

#[derive(Subcommand)]
pub enum WalletCommand {
    /// Balance, held, available, and the most recent transactions.
    Show(History),
}

#[derive(Args)]
pub struct History {
    /// How many recent transactions to list.
    #[arg(long, default_value_t = 10)]
    pub history: u32,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::CommandFactory;

    pub fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("dialectic").chain(args.iter().copied()))
    }

    fn parses(args: &[&str]) -> bool {
        parse(args).is_ok()
    }

    #[test]
    fn a_project_takes_one_prompt_and_optionally_a_pipeline() {
        fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
            [&["project", "create", "--name", "N"][..], extra].concat()
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
        assert!(parses(&["project", "add-doc", "--project", "P", "a.md"]));
        assert!(parses(&[
            "project",
            "add-doc",
            "--project",
            "P",
            "--role",
            "source",
            "a.md",
            "writing_sample=b.md"
        ]));
        assert!(
            !parses(&["project", "add-doc", "--project", "P", "sample=b.md"]),
            "unknown role"
        );
        assert!(
            !parses(&[
                "project",
                "add-doc",
                "--project",
                "P",
                "--role",
                "x",
                "a.md"
            ]),
            "unknown --role"
        );
        assert!(
            !parses(&["project", "add-doc", "--project", "P"]),
            "no file"
        );
    }

    #[test]
    fn help_lists_nouns_and_hides_the_old_flat_verbs() {
        let help = Cli::command().render_help().to_string();
        for noun in [
            "project", "session", "doc", "pipeline", "recipe", "model", "wallet",
        ] {
            assert!(
                help.contains(&format!("\n  {noun} ")),
                "{noun} missing:\n{help}"
            );
        }
        for old in [
            "projects",
            "delete-project",
            "status",
            "watch",
            "retry",
            "models",
        ] {
            assert!(
                !help.contains(&format!("\n  {old} ")),
                "{old} shown:\n{help}"
            );
        }
    }

    #[test]
    fn a_bare_wallet_still_shows_it_and_show_is_its_verb() {
        let history = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(Command::Wallet(WalletArgs {
                command: Some(WalletCommand::Show(h)),
                ..
            })) => Some(h.history),
            Ok(Command::Wallet(WalletArgs {
                command: None,
                history,
            })) => Some(history.history),
            _ => None,
        };
        assert_eq!(history(&["wallet", "show", "--history", "3"]), Some(3));
        assert_eq!(history(&["wallet", "--history", "4"]), Some(4));
        assert_eq!(history(&["wallet"]), Some(10));
    }

    #[test]
    fn the_definitions_are_consistent() {
        Cli::command().debug_assert();
    }
}
