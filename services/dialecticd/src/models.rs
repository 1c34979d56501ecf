//! `dialecticd model add | list | remove`: models are data, registered by a
//! command, never by SQL (DESIGN.md §10). The rules live in
//! `dialectic_store::models`; this file turns flags into a spec and results
//! into lines a person or a script reads.

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand, ValueEnum};
use dialectic_config::Settings;
use dialectic_core::price::{self, Prices};
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
    /// Reconcile the registry with a models file (TOML, or JSON as the Helm
    /// chart renders it): add and update the models it declares, retire every
    /// active model it leaves out (sessions already on one keep running).
    /// Keys are named (key_env), never inline. Syncing the same file again
    /// changes nothing.
    Sync {
        /// The models file: `[[models]]` tables with `model add`'s settings.
        file: std::path::PathBuf,
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
    /// Price per million input tokens in --currency, e.g. 1.25 (exact to a
    /// billionth). Without prices the model is unpriced: costs show no money.
    #[arg(long, value_name = "PRICE", value_parser = parse_price, requires = "price_output_per_mtok")]
    price_input_per_mtok: Option<i64>,
    /// Price per million output tokens, e.g. 10.
    #[arg(long, value_name = "PRICE", value_parser = parse_price, requires = "price_input_per_mtok")]
    price_output_per_mtok: Option<i64>,
    /// Price per million input tokens read from the provider's prompt cache,
    /// e.g. 0.125 (default: the input price).
    #[arg(long, value_name = "PRICE", value_parser = parse_price, requires = "price_input_per_mtok")]
    price_cached_input_per_mtok: Option<i64>,
    /// Price per million input tokens written to the provider's prompt cache
    /// (Anthropic's cache writes), e.g. 1.5625 (default: the input price).
    #[arg(long, value_name = "PRICE", value_parser = parse_price, requires = "price_input_per_mtok")]
    price_cache_write_per_mtok: Option<i64>,
    /// The prices' ISO 4217 currency (default USD).
    #[arg(long, value_name = "CODE", requires = "price_input_per_mtok")]
    currency: Option<String>,
}

fn parse_price(text: &str) -> Result<i64, price::PriceError> {
    price::parse_decimal(text)
}

/// The prices a registration states, when it states any.
fn prices(
    input: Option<i64>,
    output: Option<i64>,
    cached: Option<i64>,
    cache_write: Option<i64>,
    currency: Option<String>,
) -> Option<Prices> {
    Some(Prices {
        currency: currency.unwrap_or_else(|| price::DEFAULT_CURRENCY.to_string()),
        input_per_mtok: input?,
        output_per_mtok: output?,
        cached_input_per_mtok: cached,
        cache_write_per_mtok: cache_write,
    })
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
            prices: prices(
                self.price_input_per_mtok,
                self.price_output_per_mtok,
                self.price_cached_input_per_mtok,
                self.price_cache_write_per_mtok,
                self.currency,
            ),
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
        ModelCommand::Sync { file } => sync_file(settings, &file).await?,
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

/// `dialecticd model sync FILE` (and `migrate --sync-models FILE`).
pub async fn sync_file(settings: &Settings, file: &std::path::Path) -> anyhow::Result<()> {
    // Read and checked whole before the database is touched.
    let specs = read_models_file(settings, file)?;
    let store = dialectic_runtime::store(settings)?;
    let report = models::sync(store.pool(), &specs)
        .await
        .map_err(explain_file)?;
    print!("{}", sync_lines(&report));
    Ok(())
}

/// Fields that would hold a key itself; a models file lives in Git.
const INLINE_KEY_FIELDS: [&str; 8] = [
    "key",
    "api_key",
    "apikey",
    "api-key",
    "key_value",
    "secret",
    "token",
    "password",
];

/// One `[[models]]` entry: `model add`'s settings under their flag names
/// (`_` for `-`). Unknown fields are refused, so a misspelt one is not
/// silently left at its default.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DeclaredModel {
    name: String,
    provider: String,
    display_name: Option<String>,
    base_url: Option<String>,
    /// The NAME of the variable holding the key (the chart fills it from a
    /// Secret), never the key.
    key_env: Option<String>,
    context_window: u32,
    max_output: u32,
    structured_output: Option<String>,
    max_concurrency: Option<u32>,
    requests_per_minute: Option<u64>,
    tokens_per_minute: Option<u64>,
    fallback: Option<String>,
    input_cost: Option<f64>,
    output_cost: Option<f64>,
    tokenizer: Option<String>,
    token_limit_param: Option<String>,
    #[serde(default)]
    reasoning: bool,
    reasoning_effort: Option<String>,
    /// Prices per million tokens, a number (`1.25`) or a string (`"1.25"`).
    price_input_per_mtok: Option<DeclaredPrice>,
    price_output_per_mtok: Option<DeclaredPrice>,
    price_cached_input_per_mtok: Option<DeclaredPrice>,
    price_cache_write_per_mtok: Option<DeclaredPrice>,
    currency: Option<String>,
}

/// A price as a file writes it.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum DeclaredPrice {
    Number(f64),
    Text(String),
}

impl DeclaredPrice {
    /// In nanos, exactly as written: a number is read back from its shortest
    /// decimal form (what was typed, e.g. 0.15, not 0.1499999…), never rounded.
    fn nanos(&self, field: &str) -> anyhow::Result<i64> {
        let text = match self {
            DeclaredPrice::Number(n) => format!("{n}"),
            DeclaredPrice::Text(t) => t.clone(),
        };
        price::parse_decimal(&text).map_err(|e| anyhow!("invalid {field}: {e}"))
    }
}

/// A file's prices: input and output together, cached, cache write and
/// currency only with them.
fn declared_prices(m: &DeclaredModel) -> anyhow::Result<Option<Prices>> {
    let nanos = |p: &Option<DeclaredPrice>, field| p.as_ref().map(|p| p.nanos(field)).transpose();
    let input = nanos(&m.price_input_per_mtok, "price_input_per_mtok")?;
    let output = nanos(&m.price_output_per_mtok, "price_output_per_mtok")?;
    let cached = nanos(
        &m.price_cached_input_per_mtok,
        "price_cached_input_per_mtok",
    )?;
    let cache_write = nanos(&m.price_cache_write_per_mtok, "price_cache_write_per_mtok")?;
    if input.is_some() != output.is_some() {
        bail!("price_input_per_mtok and price_output_per_mtok are given together or not at all");
    }
    if input.is_none() && (cached.is_some() || cache_write.is_some() || m.currency.is_some()) {
        bail!(
            "price_cached_input_per_mtok, price_cache_write_per_mtok and currency need \
             price_input_per_mtok and price_output_per_mtok"
        );
    }
    Ok(prices(
        input,
        output,
        cached,
        cache_write,
        m.currency.clone(),
    ))
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsFile {
    #[serde(default)]
    models: Vec<DeclaredModel>,
}

/// Reads and checks a models file: TOML, or JSON (`.json`, or text that
/// starts with `{`, as the chart renders it with toJson).
pub fn read_models_file(
    settings: &Settings,
    file: &std::path::Path,
) -> anyhow::Result<Vec<ModelSpec>> {
    let text =
        std::fs::read_to_string(file).map_err(|e| anyhow!("reading {}: {e}", file.display()))?;
    parse_models(
        settings,
        &text,
        file.extension().is_some_and(|e| e == "json"),
    )
    .map_err(|e| anyhow!("{}: {e}", file.display()))
}

fn parse_models(
    settings: &Settings,
    text: &str,
    json_file: bool,
) -> anyhow::Result<Vec<ModelSpec>> {
    let raw: Value = if json_file || text.trim_start().starts_with('{') {
        serde_json::from_str(text)?
    } else {
        serde_json::to_value(toml::from_str::<toml::Table>(text)?)?
    };
    // Before the typed read, so an inline key is named as such rather than
    // as an unknown field, and never echoed.
    for (i, model) in raw["models"].as_array().into_iter().flatten().enumerate() {
        let name = model["name"].as_str().unwrap_or("?");
        if let Some(field) = model.as_object().and_then(|m| {
            m.keys()
                .find(|k| INLINE_KEY_FIELDS.contains(&k.to_ascii_lowercase().as_str()))
        }) {
            bail!(
                "models[{i}] ({name}): {field:?} would put the key itself in the file (and in Git); name the environment variable that holds it instead: key_env = \"OPENAI_API_KEY\" (the chart sets it from a Secret)"
            );
        }
    }
    let file: ModelsFile = serde_json::from_value(raw)?;
    file.models
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let name = m.name.clone();
            let spec = declared_spec(m).map_err(|e| anyhow!("models[{i}] ({name}): {e}"))?;
            check_file_key_env(settings, &spec)
                .map_err(|e| anyhow!("models[{i}] ({name}): {e}"))?;
            spec.validate()
                .map_err(|e| anyhow!("models[{i}] ({name}): {}", explain_file(e)))?;
            Ok(spec)
        })
        .collect()
}

/// `key_env` against the executors' rules, as [`check_key_env`] checks the
/// flag, named as in the file.
fn check_file_key_env(settings: &Settings, spec: &ModelSpec) -> anyhow::Result<()> {
    let Some(var) = spec.key_env.as_deref() else {
        return Ok(());
    };
    models::check_key_env(var).map_err(explain_file)?;
    dialectic_core::secrets::check_key_name(var, &settings.executor.model_key_prefixes)
        .map_err(|e| anyhow!("invalid key_env: {e}"))
}

fn declared_spec(m: DeclaredModel) -> anyhow::Result<ModelSpec> {
    let prices = declared_prices(&m)?;
    Ok(ModelSpec {
        name: m.name,
        display_name: m.display_name,
        provider: parse_provider(&m.provider)?,
        base_url: m.base_url,
        key_env: m.key_env,
        context_window: m.context_window,
        max_output: m.max_output,
        structured_output: m
            .structured_output
            .as_deref()
            .map(parse_dialect)
            .transpose()?,
        max_concurrency: m.max_concurrency,
        requests_per_minute: m.requests_per_minute,
        tokens_per_minute: m.tokens_per_minute,
        fallback: m.fallback,
        input_cost: m.input_cost,
        output_cost: m.output_cost,
        tokenizer: parse_tokenizer(m.tokenizer.as_deref().unwrap_or("cl100k_base"))?,
        token_limit_param: m
            .token_limit_param
            .as_deref()
            .map(parse_token_limit_param)
            .transpose()?,
        reasoning: m.reasoning,
        reasoning_effort: m.reasoning_effort,
        prices,
    })
}

/// The store's error, with the field at fault spelled as in the file.
fn explain_file(error: ModelError) -> anyhow::Error {
    match error {
        ModelError::Invalid { field, reason } => anyhow!("invalid {field}: {reason}"),
        other => explain(other),
    }
}

/// `added 1 (a), updated 0, retired 2 (b, c), unchanged 3`.
fn sync_lines(report: &models::SyncReport) -> String {
    let part = |verb: &str, names: &[String]| {
        if names.is_empty() || verb == "unchanged" {
            format!("{verb} {}", names.len())
        } else {
            format!("{verb} {} ({})", names.len(), names.join(", "))
        }
    };
    let mut out = format!(
        "models: {}, {}, {}, {}\n",
        part("added", &report.added),
        part("updated", &report.updated),
        part("retired", &report.retired),
        part("unchanged", &report.unchanged)
    );
    if !report.changed() {
        out.push_str("the registry already matches the file; nothing changed\n");
    }
    out
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
        "PRICE /MTOK (IN/CACHED/OUT)",
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
            price_cell(m),
            if m.is_active { "yes" } else { "no" }.to_string(),
        ]
    }));
    aligned(&cells)
}

/// `1.25/0.125/10 USD` per million tokens (the input price again when
/// cache reads have none of their own), `-` when unpriced.
fn price_cell(m: &RegisteredModel) -> String {
    let Some(p) = m.prices.prices() else {
        return "-".into();
    };
    let cached = p.cached_input_per_mtok.unwrap_or(p.input_per_mtok);
    format!(
        "{}/{}/{} {}",
        price::decimal(p.input_per_mtok),
        price::decimal(cached),
        price::decimal(p.output_per_mtok),
        p.currency
    )
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
        // Decimal strings: exact, as a file may declare them.
        "price_input_per_mtok": m.prices.price_input_nanos_per_mtok.map(price::decimal),
        "price_output_per_mtok": m.prices.price_output_nanos_per_mtok.map(price::decimal),
        "price_cached_input_per_mtok": m.prices.price_cached_input_nanos_per_mtok.map(price::decimal),
        "price_cache_write_per_mtok": m.prices.price_cache_write_nanos_per_mtok.map(price::decimal),
        "currency": m.prices.price_currency,
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

    const FILE: &str = r#"
[[models]]
name = "gpt-5-mini"
provider = "openai"
key_env = "OPENAI_API_KEY"
context_window = 400000
max_output = 128000
reasoning = true
reasoning_effort = "low"
input_cost = 0.25
"#;

    #[test]
    fn a_models_file_reads_as_toml_or_as_the_charts_json() {
        let settings = Settings::default();
        let toml = parse_models(&settings, FILE, false).expect("toml");
        let json = parse_models(
            &settings,
            r#"{"models":[{"name":"gpt-5-mini","provider":"openai","key_env":"OPENAI_API_KEY","context_window":400000,"max_output":128000,"reasoning":true,"reasoning_effort":"low","input_cost":0.25}]}"#,
            true,
        )
        .expect("json");
        assert_eq!(toml, json);
        assert_eq!(toml[0].key_env.as_deref(), Some("OPENAI_API_KEY"));
        assert_eq!(toml[0].tokenizer, "cl100k_base", "the add default");
        assert!(
            parse_models(&settings, "", false)
                .expect("empty")
                .is_empty()
        );
    }

    #[test]
    fn an_inline_key_or_an_unknown_field_is_refused() {
        let settings = Settings::default();
        for field in ["api_key", "key", "Token"] {
            let text = FILE.replace(
                "key_env = \"OPENAI_API_KEY\"",
                &format!("{field} = \"sk-abcdef0123\""),
            );
            let error = parse_models(&settings, &text, false)
                .expect_err("inline key")
                .to_string();
            assert!(
                error.contains(&format!("{field:?} would put the key itself in the file"))
                    && !error.contains("sk-abcdef0123"),
                "{error}"
            );
        }
        let typo = parse_models(&settings, &FILE.replace("max_output", "max_outptu"), false)
            .expect_err("unknown field")
            .to_string();
        assert!(typo.contains("max_outptu"), "{typo}");
        let bad = parse_models(&settings, &FILE.replace("\"openai\"", "\"ollama\""), false)
            .expect_err("unknown provider")
            .to_string();
        assert!(bad.contains("models[0] (gpt-5-mini)"), "{bad}");
    }

    #[test]
    fn prices_read_exactly_from_a_file_or_flags() {
        let settings = Settings::default();
        let priced = FILE.to_string()
            + "price_input_per_mtok = 1.25\nprice_output_per_mtok = 10\nprice_cached_input_per_mtok = 0.15\n"
            + "price_cache_write_per_mtok = 1.5625\n";
        let spec = &parse_models(&settings, &priced, false).expect("priced")[0];
        let expected = Prices {
            currency: "USD".into(),
            input_per_mtok: 1_250_000_000,
            output_per_mtok: 10_000_000_000,
            cached_input_per_mtok: Some(150_000_000),
            cache_write_per_mtok: Some(1_562_500_000),
        };
        assert_eq!(spec.prices.as_ref(), Some(&expected));
        let json = r#"{"models":[{"name":"m","provider":"simulated","context_window":8,"max_output":4,
            "price_input_per_mtok":"1.25","price_output_per_mtok":10,"price_cached_input_per_mtok":0.15,
            "price_cache_write_per_mtok":"1.5625"}]}"#;
        let from_json = &parse_models(&settings, json, true).expect("json")[0];
        assert_eq!(from_json.prices.as_ref(), Some(&expected));
        let half = FILE.to_string() + "price_input_per_mtok = 1.25\n";
        let error = parse_models(&settings, &half, false)
            .expect_err("input without output")
            .to_string();
        assert!(error.contains("together"), "{error}");
        let euro = priced + "currency = \"eur\"\n";
        let error = parse_models(&settings, &euro, false)
            .expect_err("lower-case currency")
            .to_string();
        assert!(error.contains("invalid currency"), "{error}");
        let base = [
            "add",
            "m",
            "--provider",
            "simulated",
            "--context-window",
            "8",
        ];
        let Ok(ModelCommand::Add(args)) = parse(
            &[
                &base[..],
                &["--max-output", "4", "--price-input-per-mtok", "1.25"],
                &[
                    "--price-output-per-mtok",
                    "10",
                    "--price-cached-input-per-mtok",
                    "0.15",
                    "--price-cache-write-per-mtok",
                    "1.5625",
                ],
            ]
            .concat(),
        ) else {
            panic!("add parses");
        };
        assert_eq!(args.spec().prices, Some(expected));
        let alone = [
            &base[..],
            &["--max-output", "4", "--price-input-per-mtok", "1"],
        ]
        .concat();
        assert!(
            parse(&alone).is_err(),
            "an input price needs an output price"
        );
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
