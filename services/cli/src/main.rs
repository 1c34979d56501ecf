//! `dialectic`: the command-line client of the gateway.

mod admin;
mod format;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser, Subcommand};
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use dialectic_proto::v1::{
    CreateProjectRequest, GetDocumentContentRequest, GetSessionRequest, GetWalletRequest,
    ListModelsRequest, ListStageDocumentsRequest, PauseSessionRequest, ResumeSessionRequest,
    Session, StageDocument, StageResponse, StartSessionRequest, SubmitStageResponsesRequest,
    WatchSessionRequest,
};
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

/// How long to keep trying while the gateway starts or a dependency recovers.
const STARTUP_PATIENCE: Duration = Duration::from_secs(30);
const RETRY_DELAY: Duration = Duration::from_millis(500);

#[derive(Parser)]
#[command(
    name = "dialectic",
    version,
    about = "Drive dialectic sessions through the gateway"
)]
struct Cli {
    /// Gateway URL.
    #[arg(
        long,
        env = "DIALECTIC_GATEWAY",
        default_value = "http://127.0.0.1:7051",
        global = true
    )]
    gateway: String,
    /// Act as this user (UUID); without it the gateway's default user.
    #[arg(long, env = "DIALECTIC_USER", global = true)]
    user: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct PromptSource {
    /// The initial prompt text.
    #[arg(long)]
    prompt: Option<String>,
    /// Read the initial prompt from a file.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
}

impl PromptSource {
    fn read(&self) -> Result<String> {
        match (&self.prompt, &self.prompt_file) {
            (Some(text), _) => Ok(text.clone()),
            (None, Some(path)) => std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display())),
            (None, None) => bail!("give --prompt or --prompt-file"),
        }
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
    /// Print a session's events until it needs the user (or reaches --until).
    Watch {
        #[arg(long)]
        session: String,
        /// Stop when the session reaches this status.
        #[arg(long)]
        until: Option<String>,
    },
    /// List a session's rendered documents with their first lines.
    Docs {
        #[arg(long)]
        session: String,
        #[arg(long)]
        stage: Option<String>,
    },
    /// Create a project, start a session, watch it to --until, then list its documents.
    Run {
        #[arg(long)]
        name: String,
        #[command(flatten)]
        prompt: PromptSource,
        #[arg(long = "model")]
        models: Vec<String>,
        /// Stop when the session reaches this status.
        #[arg(long, default_value = "iteration_complete_pending_review")]
        until: String,
        /// Wait at each stage for `dialectic submit` instead of advancing by itself.
        #[arg(long)]
        no_auto_advance: bool,
        #[arg(long, default_value_t = 300)]
        timeout_secs: u64,
    },
    /// Operator commands against the broker (e.g. `admin dlq list|show|replay`).
    Admin(admin::AdminArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            match e.downcast_ref::<Status>() {
                Some(status) => eprintln!("error: {}", format::status(status)),
                None => eprintln!("error: {e:#}"),
            }
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    // Admin commands talk to the broker, not the gateway, which may be down.
    let command = match cli.command {
        Command::Admin(args) => return admin::run(args).await,
        command => command,
    };
    let gateway = Gateway::connect(&cli.gateway, cli.user.as_deref()).await?;
    match command {
        Command::Create { name, prompt } => {
            let project = gateway.create_project(&name, &prompt.read()?).await?;
            println!("{project}");
        }
        Command::Start {
            project,
            models,
            auto_advance,
        } => {
            let session = gateway
                .start_session(&project, &models, auto_advance)
                .await?;
            println!("{} {}", session.id, session.status);
        }
        Command::Submit {
            session,
            stage,
            feedback,
            document,
        } => {
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
            println!("{} {} (iteration {})", s.id, s.status, s.iteration);
        }
        Command::Pause { session } => {
            let s = gateway
                .call(|mut c| {
                    let request = gateway.request(PauseSessionRequest {
                        session_id: session.clone(),
                    });
                    async move { c.pause_session(request).await }
                })
                .await?;
            println!("{} {}", s.id, s.status);
        }
        Command::Resume { session } => {
            let s = gateway
                .call(|mut c| {
                    let request = gateway.request(ResumeSessionRequest {
                        session_id: session.clone(),
                    });
                    async move { c.resume_session(request).await }
                })
                .await?;
            println!("{} {}", s.id, s.status);
        }
        Command::Models => {
            let models = gateway
                .call(|mut c| {
                    let request = gateway.request(ListModelsRequest {});
                    async move { c.list_models(request).await }
                })
                .await?;
            for m in models.models {
                println!(
                    "{:<20} {:<12} context {:>7}  max output {:>6}  {}",
                    m.api_identifier,
                    m.provider,
                    m.context_window_tokens,
                    m.max_output_tokens,
                    m.name
                );
            }
        }
        Command::Wallet { history } => {
            let wallet = gateway
                .call(|mut c| {
                    let request = gateway.request(GetWalletRequest { history });
                    async move { c.get_wallet(request).await }
                })
                .await?;
            print!("{}", format::wallet(&wallet));
        }
        Command::Status { session } => {
            let s = gateway.session(&session).await?;
            print!("{}", format::session(&s));
        }
        Command::Watch { session, until } => {
            gateway.watch(&session, until.as_deref(), None).await?;
        }
        Command::Docs { session, stage } => {
            gateway
                .docs(&session, stage.as_deref().unwrap_or(""))
                .await?;
        }
        Command::Run {
            name,
            prompt,
            models,
            until,
            no_auto_advance,
            timeout_secs,
        } => {
            let project = gateway.create_project(&name, &prompt.read()?).await?;
            println!("project {project}");
            let session = gateway
                .start_session(&project, &models, !no_auto_advance)
                .await?;
            println!("session {} {}", session.id, session.status);
            let deadline = Instant::now() + Duration::from_secs(timeout_secs);
            gateway
                .watch(&session.id, Some(&until), Some(deadline))
                .await?;
            gateway.wait_for_renders(&session.id, deadline).await?;
            let documents = gateway.docs(&session.id, "").await?;
            let summary = gateway.session(&session.id).await?;
            println!();
            print!("{}", format::summary(&summary, &documents));
        }
        Command::Admin(args) => admin::run(args).await?,
    }
    Ok(())
}

struct Gateway {
    client: DialecticServiceClient<Channel>,
    user: Option<MetadataValue<tonic::metadata::Ascii>>,
}

/// A request id that makes a retried create/start idempotent on the server.
fn client_request_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("cli-{}-{nanos}", std::process::id())
}

impl Gateway {
    async fn connect(url: &str, user: Option<&str>) -> Result<Self> {
        let user = user
            .map(|u| {
                MetadataValue::try_from(u.trim())
                    .map_err(|_| anyhow!("--user {u:?} is not a valid header value"))
            })
            .transpose()?;
        let endpoint = Endpoint::from_shared(url.to_string())
            .with_context(|| format!("invalid gateway URL {url:?}"))?
            .connect_timeout(Duration::from_secs(2));
        let deadline = Instant::now() + STARTUP_PATIENCE;
        let channel = loop {
            match endpoint.connect().await {
                Ok(channel) => break channel,
                Err(e) if Instant::now() < deadline => {
                    note(&format!("gateway {url} not reachable yet ({e}); retrying"));
                    tokio::time::sleep(RETRY_DELAY).await;
                }
                Err(e) => {
                    return Err(
                        anyhow!(e).context(format!("cannot connect to the gateway at {url}"))
                    );
                }
            }
        };
        Ok(Self {
            client: DialecticServiceClient::new(channel),
            user,
        })
    }

    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(user) = &self.user {
            request
                .metadata_mut()
                .insert("x-dialectic-user", user.clone());
        }
        request
    }

    /// Calls until the answer is not UNAVAILABLE, for at most STARTUP_PATIENCE.
    async fn call<T, F, Fut>(&self, mut attempt: F) -> Result<T, Status>
    where
        F: FnMut(DialecticServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let deadline = Instant::now() + STARTUP_PATIENCE;
        loop {
            match attempt(self.client.clone()).await {
                Err(s) if s.code() == Code::Unavailable && Instant::now() < deadline => {
                    note(&format!("gateway unavailable ({}); retrying", s.message()));
                    tokio::time::sleep(RETRY_DELAY).await;
                }
                other => return other.map(tonic::Response::into_inner),
            }
        }
    }

    async fn create_project(&self, name: &str, prompt: &str) -> Result<String> {
        let message = CreateProjectRequest {
            name: name.to_string(),
            initial_user_prompt: prompt.to_string(),
            client_request_id: client_request_id(),
        };
        let project = self
            .call(|mut c| {
                let request = self.request(message.clone());
                async move { c.create_project(request).await }
            })
            .await?;
        Ok(project.id)
    }

    async fn start_session(
        &self,
        project: &str,
        models: &[String],
        auto_advance: bool,
    ) -> Result<Session> {
        let message = StartSessionRequest {
            project_id: project.to_string(),
            models: models.to_vec(),
            description: String::new(),
            client_request_id: client_request_id(),
            auto_advance,
        };
        Ok(self
            .call(|mut c| {
                let request = self.request(message.clone());
                async move { c.start_session(request).await }
            })
            .await?)
    }

    async fn session(&self, session: &str) -> Result<Session> {
        Ok(self
            .call(|mut c| {
                let request = self.request(GetSessionRequest {
                    session_id: session.to_string(),
                });
                async move { c.get_session(request).await }
            })
            .await?)
    }

    /// Prints events until `format::Stop` says so. A dropped stream is watched
    /// again (the new snapshot carries the current status); without a deadline
    /// it gives up after STARTUP_PATIENCE of failed attempts.
    async fn watch(
        &self,
        session: &str,
        until: Option<&str>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let mut stop = format::Stop::new(until);
        let mut last_ok = Instant::now();
        loop {
            let ended = async {
                let mut stream = self
                    .call(|mut c| {
                        let request = self.request(WatchSessionRequest {
                            session_id: session.to_string(),
                        });
                        async move { c.watch_session(request).await }
                    })
                    .await?;
                while let Some(item) = stream.next().await {
                    let event = item?;
                    println!("{}", format::event(&event));
                    match stop.observe(&event.session_status) {
                        format::Verdict::Continue => {}
                        format::Verdict::Reached => return Ok(true),
                        format::Verdict::Ended(status) => {
                            return Err(anyhow!(
                                "session ended as {status} before reaching {}",
                                until.unwrap_or("a review state")
                            ));
                        }
                    }
                }
                Ok::<bool, anyhow::Error>(false)
            };
            let outcome = match deadline {
                Some(d) => match tokio::time::timeout_at(d.into(), ended).await {
                    Ok(outcome) => outcome,
                    Err(_) => bail!(
                        "timed out waiting for status {}; last status {}",
                        until.unwrap_or("a review state"),
                        stop.last().unwrap_or("unknown")
                    ),
                },
                None => ended.await,
            };
            match outcome {
                Ok(true) => return Ok(()),
                Ok(false) => last_ok = Instant::now(),
                Err(e) => {
                    let retryable = e
                        .downcast_ref::<Status>()
                        .is_some_and(|s| s.code() == Code::Unavailable);
                    if !retryable || (deadline.is_none() && last_ok.elapsed() > STARTUP_PATIENCE) {
                        return Err(e);
                    }
                }
            }
            note("event stream ended; watching again");
            tokio::time::sleep(RETRY_DELAY).await;
        }
    }

    /// RENDER jobs do not gate a stage, so the last documents may still be
    /// rendering when the status moves on: wait until no job is in flight.
    async fn wait_for_renders(&self, session: &str, deadline: Instant) -> Result<()> {
        loop {
            let s = self.session(session).await?;
            if s.jobs.iter().all(|j| j.in_flight == 0) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("timed out waiting for documents to render");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn docs(&self, session: &str, stage: &str) -> Result<Vec<StageDocument>> {
        let list = self
            .call(|mut c| {
                let request = self.request(ListStageDocumentsRequest {
                    session_id: session.to_string(),
                    stage_slug: stage.to_string(),
                    iteration: 0,
                });
                async move { c.list_stage_documents(request).await }
            })
            .await?;
        if list.documents.is_empty() {
            println!("no documents yet");
        }
        for doc in &list.documents {
            let note = if doc.incomplete {
                ", incomplete: continuation limit reached"
            } else {
                ""
            };
            println!("{} ({} bytes{note})", doc.storage_key, doc.size_bytes);
            let content = self
                .call(|mut c| {
                    let request = self.request(GetDocumentContentRequest {
                        resource_id: doc.resource_id.clone(),
                    });
                    async move { c.get_document_content(request).await }
                })
                .await?;
            for line in format::head(&content.content, 6) {
                println!("    {line}");
            }
        }
        Ok(list.documents)
    }
}

/// Progress notes go to stderr so stdout stays parseable.
fn note(message: &str) {
    eprintln!("note: {message}");
}
