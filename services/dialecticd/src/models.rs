//! `dialecticd model add | list | remove`: models are data, registered by a
//! command, never by SQL (DESIGN.md §10). The rules live in
//! `dialectic_store::models`; this file turns flags into a spec and results
//! into lines a person or a script reads.

use anyhow::anyhow;
use clap::{Args, Subcommand, ValueEnum};
use dialectic_config::Settings;
use dialectic_core::structured::StructuredOutput;
use dialectic_store::models::{
    self, ModelError, ModelSpec, ProviderKind, Registered, RegisteredModel, Removed,
    TokenLimitParam,
};
use serde_json::{Value, json};

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Register a model, or update the one of this name (and make it active
    /// again). Settings left out take their defaults; the row's other config
    /// keys (organization, embedder) are kept.
    // Boxed: its flags dwarf the other variants.
    Add(Box<AddArgs>),
    /// Every registered model, removed ones too (ACTIVE says which).
    List {
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Remove a model: new sessions, fallbacks and ListModels no longer see
    /// it; what it wrote stays. Refused while an active model falls back to it.
    Remove {
        /// The model's name (as `model list` shows it).
        name: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

#[derive(Args)]
pub struct AddArgs {
    /// The name sessions use, also sent to the provider as the model
    /// (e.g. llama3.1:8b, gpt-4o-mini).
    name: String,
    /// simulated, openai, openai-compatible (vLLM, llama.cpp, Ollama,
    /// OpenRouter) or anthropic.
    #[arg(long, value_parser = parse_provider)]
    provider: ProviderKind,
    /// The server's base URL, e.g. http://127.0.0.1:8080/v1 (openai and
    /// anthropic default to their own API).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The NAME of the environment variable that holds the key (never the
    /// key); set it where the executor runs. DIALECTIC_* (but
    /// DIALECTIC_MODEL_KEY_*) and AWS_* are refused, and so is a name outside
    /// executor.model_key_prefixes when that lists any.
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
    /// What people see (default: the name).
    #[arg(long, value_name = "TEXT")]
    display_name: Option<String>,
    /// Tokens the model reads and writes in one call.
    #[arg(long, value_name = "TOKENS")]
    context_window: u32,
    /// Tokens the model writes in one reply.
    #[arg(long, value_name = "TOKENS")]
    max_output: u32,
    /// How the server is asked for JSON of a shape: json_schema (OpenAI,
    /// vLLM, Ollama; the default), json_object_schema (llama.cpp server),
    /// json_object or none.
    #[arg(long, value_name = "DIALECT", value_parser = parse_dialect)]
    structured_output: Option<StructuredOutput>,
    /// Calls in flight at once, across every executor.
    #[arg(long, value_name = "N")]
    max_concurrency: Option<u32>,
    /// Calls per minute, across every executor.
    #[arg(long, value_name = "N")]
    requests_per_minute: Option<u64>,
    /// Tokens per minute, across every executor.
    #[arg(long, value_name = "N")]
    tokens_per_minute: Option<u64>,
    /// An active model that takes over when this one's provider keeps failing.
    #[arg(long, value_name = "MODEL")]
    fallback: Option<String>,
    /// Billing rate per input token (default 1).
    #[arg(long, value_name = "RATE")]
    input_cost: Option<f64>,
    /// Billing rate per output token (default 1).
    #[arg(long, value_name = "RATE")]
    output_cost: Option<f64>,
    /// cl100k_base, o200k_base, or estimate (4 bytes a token).
    #[arg(long, value_name = "T", default_value = "cl100k_base", value_parser = parse_tokenizer)]
    tokenizer: String,
    /// The request field the output limit goes in: max_completion_tokens
    /// (the default; OpenAI's current field, the only one its reasoning
    /// models take) or max_tokens (a server that reads no other, e.g.
    /// llama-cpp-python's). Not for anthropic.
    #[arg(long, value_name = "FIELD", value_parser = parse_token_limit_param)]
    token_limit_param: Option<TokenLimitParam>,
    /// A reasoning model (OpenAI's o-series, GPT-5): sent no temperature or
    /// top_p. Not for anthropic.
    #[arg(long)]
    reasoning: bool,
    /// A reasoning model's reasoning_effort: none, minimal, low, medium,
    /// high or xhigh (default: the provider's).
    #[arg(long, value_name = "EFFORT", requires = "reasoning")]
    reasoning_effort: Option<String>,
}

fn parse_token_limit_param(text: &str) -> Result<TokenLimitParam, models::UnknownTokenLimitParam> {
    text.parse()
}

fn parse_provider(text: &str) -> Result<ProviderKind, models::UnknownProvider> {
    text.parse()
}

fn parse_dialect(
    text: &str,
) -> Result<StructuredOutput, dialectic_core::structured::UnknownDialect> {
    text.parse()
}

fn parse_tokenizer(text: &str) -> Result<String, dialectic_tokenizer::TokenizerError> {
    dialectic_tokenizer::Encoding::from_name(text).map(|e| e.name().to_string())
}

impl AddArgs {
    fn spec(self: Box<Self>) -> ModelSpec {
        ModelSpec {
            name: self.name,
            display_name: self.display_name,
            provider: self.provider,
            base_url: self.base_url,
            key_env: self.key_env,
            context_window: self.context_window,
            max_output: self.max_output,
            structured_output: self.structured_output,
            max_concurrency: self.max_concurrency,
            requests_per_minute: self.requests_per_minute,
            tokens_per_minute: self.tokens_per_minute,
            fallback: self.fallback,
            input_cost: self.input_cost,
            output_cost: self.output_cost,
            tokenizer: self.tokenizer,
            token_limit_param: self.token_limit_param,
            reasoning: self.reasoning,
            reasoning_effort: self.reasoning_effort,
        }
    }
}

pub async fn run(settings: &Settings, command: ModelCommand) -> anyhow::Result<()> {
    let store = dialectic_runtime::store(settings)?;
    let pool = store.pool();
    match command {
        ModelCommand::Add(args) => {
            let spec = args.spec();
            check_key_env(settings, &spec)?;
            let done = models::register(pool, &spec).await.map_err(explain)?;
            println!("{}", registered_line(&spec.name, done));
        }
        ModelCommand::List { output } => {
            let rows = models::list(pool).await.map_err(explain)?;
            match output {
                Output::Text => print!("{}", table(&rows)),
                Output::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&rows.iter().map(json).collect::<Vec<_>>())?
                ),
            }
        }
        ModelCommand::Remove { name } => {
            let done = models::remove(pool, &name).await.map_err(explain)?;
            println!("{}", removed_line(name.trim(), done));
            if name.trim() == settings.executor.query_model {
                eprintln!(
                    "warning: {} is executor.query_model, which answers Query requests that name no model; set another",
                    name.trim()
                );
            }
        }
    }
    Ok(())
}

/// `--key-env` against the rules the executors apply, before anything is
/// written: a name they would never read (`executor.model_key_prefixes`, as
/// these settings give them) fails here, naming the prefixes, instead of at
/// the model's first call.
fn check_key_env(settings: &Settings, spec: &ModelSpec) -> anyhow::Result<()> {
    let Some(var) = spec.key_env.as_deref() else {
        return Ok(());
    };
    models::check_key_env(var).map_err(explain)?;
    dialectic_core::secrets::check_key_name(var, &settings.executor.model_key_prefixes)
        .map_err(|e| anyhow!("invalid --key-env: {e}"))
}

/// The store's error, with the flag at fault spelled as typed.
fn explain(error: ModelError) -> anyhow::Error {
    match error {
        ModelError::Invalid { field, reason } => {
            let flag = match field {
                "name" => "NAME".to_string(),
                other => format!("--{}", other.replace('_', "-")),
            };
            anyhow!("invalid {flag}: {reason}")
        }
        ModelError::Database(e) => {
            anyhow!(e).context("the database refused or is unreachable (database.url)")
        }
        other => anyhow!(other),
    }
}

fn registered_line(name: &str, done: Registered) -> String {
    let name = name.trim();
    match done {
        Registered::Created(_) => format!("registered model {name}"),
        Registered::Updated {
            reactivated: true, ..
        } => format!("updated model {name} (active again)"),
        Registered::Updated { .. } => format!("updated model {name}"),
    }
}

fn removed_line(name: &str, done: Removed) -> String {
    match done {
        Removed::Deactivated => {
            format!("removed model {name}: new sessions can no longer use it")
        }
        Removed::AlreadyInactive => format!("model {name} was already removed; nothing changed"),
    }
}

fn or_dash(value: Option<&str>) -> String {
    value.filter(|v| !v.is_empty()).unwrap_or("-").to_string()
}

/// `2 at once, 60 req/min, 90000 tok/min`, `-` for none.
fn limits(m: &RegisteredModel) -> String {
    let s = m.settings();
    let caps: Vec<String> = [
        (s.max_concurrency, "at once"),
        (s.requests_per_minute, "req/min"),
        (s.tokens_per_minute, "tok/min"),
    ]
    .into_iter()
    .filter_map(|(n, unit)| n.map(|n| format!("{n} {unit}")))
    .collect();
    if caps.is_empty() {
        "-".into()
    } else {
        caps.join(", ")
    }
}

/// What the OpenAI dialect sends differently for this model
/// (`max_tokens, reasoning: low`), `-` for nothing.
fn wire(m: &RegisteredModel) -> String {
    let s = m.settings();
    let mut notes = Vec::new();
    if s.token_limit_param != TokenLimitParam::default().as_str() {
        notes.push(s.token_limit_param.clone());
    }
    match (s.reasoning, &s.reasoning_effort) {
        (true, Some(effort)) => notes.push(format!("reasoning: {effort}")),
        (true, None) => notes.push("reasoning".into()),
        (false, _) => {}
    }
    if notes.is_empty() {
        "-".into()
    } else {
        notes.join(", ")
    }
}

/// One aligned row per model under a header; the key column shows the
/// variable's NAME only (the row holds nothing else).
fn table(rows: &[RegisteredModel]) -> String {
    let header = [
        "NAME",
        "PROVIDER",
        "BASE URL",
        "WINDOW",
        "OUTPUT",
        "STRUCTURED",
        "LIMITS",
        "WIRE",
        "FALLBACK",
        "KEY ENV",
        "ACTIVE",
    ];
    let mut cells = vec![header.map(str::to_string).to_vec()];
    cells.extend(rows.iter().map(|m| {
        let s = m.settings();
        vec![
            m.api_identifier.clone(),
            m.provider.clone(),
            or_dash(s.base_url.as_deref()),
            m.context_window_tokens.to_string(),
            m.max_output_tokens.to_string(),
            s.structured_output.clone(),
            limits(m),
            wire(m),
            or_dash(s.fallback_model.as_deref()),
            or_dash(m.secret_name.as_deref()),
            if m.is_active { "yes" } else { "no" }.to_string(),
        ]
    }));
    aligned(&cells)
}

/// Columns padded to their widest cell, two spaces apart; the last unpadded.
fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn json(m: &RegisteredModel) -> Value {
    let s = m.settings();
    json!({
        "name": m.api_identifier,
        "display_name": m.name,
        "provider": m.provider,
        "base_url": s.base_url,
        "key_env": m.secret_name,
        "context_window": m.context_window_tokens,
        "max_output": m.max_output_tokens,
        "structured_output": s.structured_output,
        "max_concurrency": s.max_concurrency,
        "requests_per_minute": s.requests_per_minute,
        "tokens_per_minute": s.tokens_per_minute,
        "fallback": s.fallback_model,
        "input_cost": m.input_token_cost_rate,
        "output_cost": m.output_token_cost_rate,
        "tokenizer": m.tokenizer,
        "token_limit_param": s.token_limit_param,
        "reasoning": s.reasoning,
        "reasoning_effort": s.reasoning_effort,
        "active": m.is_active,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: ModelCommand,
    }

    fn parse(args: &[&str]) -> Result<ModelCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("model").chain(args.iter().copied())).map(|c| c.command)
    }

    #[test]
    fn add_parses_every_flag_into_the_spec() {
        let Ok(ModelCommand::Add(args)) = parse(&[
            "add",
            "qwen2.5",
            "--provider",
            "openai-compatible",
            "--base-url",
            "http://127.0.0.1:8080/v1",
            "--key-env",
            "LLAMA_KEY",
            "--context-window",
            "8192",
            "--max-output",
            "1024",
            "--structured-output",
            "json_object_schema",
            "--max-concurrency",
            "2",
            "--tokens-per-minute",
            "90000",
            "--fallback",
            "simulated",
            "--tokenizer",
            "o200k",
            "--token-limit-param",
            "max_tokens",
        ]) else {
            panic!("add parses");
        };
        let spec = args.spec();
        assert_eq!(spec.token_limit_param, Some(TokenLimitParam::MaxTokens));
        assert!(!spec.reasoning);
        assert_eq!(spec.provider, ProviderKind::OpenAiCompatible);
        assert_eq!(
            spec.structured_output,
            Some(StructuredOutput::JsonObjectSchema)
        );
        assert_eq!(spec.tokenizer, "o200k_base");
        assert_eq!(spec.fallback.as_deref(), Some("simulated"));
        spec.validate().expect("valid");
    }

    #[test]
    fn a_reasoning_model_takes_an_effort_and_an_effort_needs_reasoning() {
        let base = [
            "add",
            "o4-mini",
            "--provider",
            "openai",
            "--context-window",
            "200000",
            "--max-output",
            "100000",
        ];
        let with = |extra: &[&str]| {
            let args: Vec<&str> = base.iter().chain(extra).copied().collect();
            parse(&args)
        };
        let Ok(ModelCommand::Add(args)) = with(&["--reasoning", "--reasoning-effort", "high"])
        else {
            panic!("add parses");
        };
        let spec = args.spec();
        assert!(spec.reasoning);
        assert_eq!(spec.reasoning_effort.as_deref(), Some("high"));
        assert_eq!(spec.token_limit_param, None, "the default field");
        spec.validate().expect("valid");
        assert!(with(&["--reasoning-effort", "high"]).is_err());
        let unknown = match with(&["--token-limit-param", "n_predict"]) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("an unknown field parsed"),
        };
        assert!(unknown.contains("max_completion_tokens"), "{unknown}");
    }

    #[test]
    fn unknown_names_are_refused_with_the_known_ones() {
        let base = ["add", "m", "--context-window", "8", "--max-output", "4"];
        let with = |extra: &[&str]| {
            let args: Vec<&str> = base.iter().chain(extra).copied().collect();
            match parse(&args) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{extra:?} parsed"),
            }
        };
        let provider = with(&["--provider", "ollama"]);
        assert!(provider.contains("openai-compatible"), "{provider}");
        let dialect = with(&["--provider", "openai", "--structured-output", "xml"]);
        assert!(dialect.contains("json_object_schema"), "{dialect}");
        let tokenizer = with(&["--provider", "openai", "--tokenizer", "bpe"]);
        assert!(tokenizer.contains("cl100k_base"), "{tokenizer}");
    }

    #[test]
    fn key_env_outside_the_allowed_prefixes_is_refused_up_front() {
        let spec = |key_env: &str| {
            let Ok(ModelCommand::Add(args)) = parse(&[
                "add",
                "m",
                "--provider",
                "openai",
                "--key-env",
                key_env,
                "--context-window",
                "8",
                "--max-output",
                "4",
            ]) else {
                panic!("add parses");
            };
            args.spec()
        };
        let mut settings = Settings::default();
        check_key_env(&settings, &spec("OPENAI_API_KEY")).expect("no list: any own name");
        settings.executor.model_key_prefixes = vec!["DIALECTIC_MODEL_KEY_".into()];
        check_key_env(&settings, &spec("DIALECTIC_MODEL_KEY_OPENAI")).expect("listed");
        let refused = check_key_env(&settings, &spec("OPENAI_API_KEY"))
            .expect_err("outside the list")
            .to_string();
        assert!(
            refused.starts_with("invalid --key-env:")
                && refused.contains("OPENAI_API_KEY")
                && refused.contains("DIALECTIC_MODEL_KEY_"),
            "{refused}"
        );
        let platform = check_key_env(&settings, &spec("DIALECTIC_S3__SECRET_KEY"))
            .expect_err("the platform's")
            .to_string();
        assert!(platform.contains("platform's own"), "{platform}");
    }

    #[test]
    fn invalid_fields_are_named_as_flags() {
        let e = explain(ModelError::Invalid {
            field: "key_env",
            reason: "no".into(),
        });
        assert_eq!(e.to_string(), "invalid --key-env: no");
        let e = explain(ModelError::Invalid {
            field: "name",
            reason: "empty".into(),
        });
        assert_eq!(e.to_string(), "invalid NAME: empty");
    }

    #[test]
    fn the_table_aligns_columns() {
        let text = aligned(&[
            vec!["NAME".into(), "ACTIVE".into()],
            vec!["simulated-b".into(), "yes".into()],
        ]);
        assert_eq!(text, "NAME         ACTIVE\nsimulated-b  yes\n");
    }
}
