//! Models are data (DESIGN.md §10): `dialecticd model add | list | remove`
//! registers, lists and retires rows of `ai_providers` here, so nobody needs
//! SQL for them, and the services read them here ([`ModelRow`]). A row is
//! never deleted: jobs, contributions and regenerations reference it, so
//! removing a model deactivates it, and every read that picks models for new
//! work ([`active_models`], [`model_by_identifier`]) skips inactive rows.

use crate::StoreError;
pub use crate::error::ModelError;
use dialectic_core::ids::ModelId;
use dialectic_core::price::{self, Prices};
use dialectic_core::structured::StructuredOutput;
use serde_json::{Map, Value};
use sqlx::PgPool;
use sqlx::types::Json;
use std::fmt;
use std::str::FromStr;

/// The `config` keys a registration owns: re-adding a model sets or clears
/// each of them, and keeps any other key (`organization`, `embedder`).
const MANAGED_KEYS: [&str; 9] = [
    "base_url",
    "structured_output",
    "max_concurrency",
    "requests_per_minute",
    "tokens_per_minute",
    "fallback_model",
    "token_limit_param",
    "reasoning",
    "reasoning_effort",
];

/// The field an OpenAI-dialect request's output limit goes in
/// (`config.token_limit_param`, read by the executor's client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenLimitParam {
    /// Chat Completions' current field, the only one OpenAI's reasoning
    /// models take.
    #[default]
    MaxCompletionTokens,
    /// The deprecated one, for a server that reads no other (llama-cpp-python's).
    MaxTokens,
}

impl TokenLimitParam {
    pub const ALL: [TokenLimitParam; 2] = [
        TokenLimitParam::MaxCompletionTokens,
        TokenLimitParam::MaxTokens,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            TokenLimitParam::MaxCompletionTokens => "max_completion_tokens",
            TokenLimitParam::MaxTokens => "max_tokens",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown token limit parameter {0:?}: use max_completion_tokens (the default) or max_tokens"
)]
pub struct UnknownTokenLimitParam(pub String);

impl FromStr for TokenLimitParam {
    type Err = UnknownTokenLimitParam;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == text.trim())
            .ok_or_else(|| UnknownTokenLimitParam(text.to_string()))
    }
}

/// The `reasoning_effort` values OpenAI's Chat Completions reference lists.
pub const REASONING_EFFORTS: [&str; 6] = ["none", "minimal", "low", "medium", "high", "xhigh"];

const MAX_NAME_CHARS: usize = 200;

/// The `provider` column: which client calls the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// Offline and deterministic; calls no server.
    Simulated,
    /// OpenAI's API, or any server that speaks it when given a base URL.
    OpenAi,
    /// A server that speaks OpenAI's API and has no default address.
    OpenAiCompatible,
    /// Anthropic's Messages API.
    Anthropic,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 4] = [
        ProviderKind::Simulated,
        ProviderKind::OpenAi,
        ProviderKind::OpenAiCompatible,
        ProviderKind::Anthropic,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Simulated => "simulated",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiCompatible => "openai-compatible",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown provider {0:?}: use simulated, openai, openai-compatible (vLLM, llama.cpp, Ollama, OpenRouter) or anthropic"
)]
pub struct UnknownProvider(pub String);

impl FromStr for ProviderKind {
    type Err = UnknownProvider;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == text.trim())
            .ok_or_else(|| UnknownProvider(text.to_string()))
    }
}

/// Everything `model add` states about a model. Re-adding replaces each of
/// these (one left out takes its default) and re-activates the row.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    /// The name sessions and ListModels use (`api_identifier`), also the
    /// model name sent to the provider.
    pub name: String,
    /// What people see; the name when not given.
    pub display_name: Option<String>,
    pub provider: ProviderKind,
    /// The server's OpenAI-style base URL (`…/v1`); the provider's own when not given.
    pub base_url: Option<String>,
    /// The NAME of the environment variable holding the key, never the key.
    pub key_env: Option<String>,
    pub context_window: u32,
    pub max_output: u32,
    /// The JSON dialect the server understands; `json_schema` when not given.
    pub structured_output: Option<StructuredOutput>,
    /// Calls in flight at once, across every executor replica.
    pub max_concurrency: Option<u32>,
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    /// An active model that takes over when this one's provider keeps failing.
    pub fallback: Option<String>,
    /// Billing rates per token (1 when not given).
    pub input_cost: Option<f64>,
    pub output_cost: Option<f64>,
    /// The tokenizer the token counts use (the tokenizer crate validates the name).
    pub tokenizer: String,
    /// OpenAI dialect: the field the output limit goes in; `max_completion_tokens`
    /// when not given.
    pub token_limit_param: Option<TokenLimitParam>,
    /// OpenAI dialect: a reasoning model (the o-series, GPT-5), sent no
    /// `temperature` or `top_p`.
    pub reasoning: bool,
    /// OpenAI dialect: a reasoning model's `reasoning_effort`.
    pub reasoning_effort: Option<String>,
    /// What its tokens cost in money; None: unpriced (costs show no money).
    pub prices: Option<Prices>,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ModelError {
    ModelError::Invalid {
        field,
        reason: reason.into(),
    }
}

impl ModelSpec {
    /// Every rule that needs no database; the fallback's existence is checked
    /// where it is locked, in [`register`].
    pub fn validate(&self) -> Result<(), ModelError> {
        check_name("name", &self.name)?;
        if let Some(display) = &self.display_name {
            check_display_name(display)?;
        }
        self.check_limits()?;
        self.check_costs()?;
        self.check_prices()?;
        self.check_endpoint()?;
        if let Some(var) = &self.key_env {
            check_key_env(var)?;
        }
        if let Some(fallback) = &self.fallback {
            check_name("fallback", fallback)?;
            if fallback.trim() == self.name.trim() {
                return Err(invalid(
                    "fallback",
                    "a model cannot be its own fallback; name another model",
                ));
            }
        }
        if self.tokenizer.trim().is_empty() {
            return Err(invalid("tokenizer", "must not be empty"));
        }
        self.check_wire()
    }

    /// The OpenAI dialect's settings: only on a provider that speaks it, an
    /// effort only for a reasoning model, and one the API lists.
    fn check_wire(&self) -> Result<(), ModelError> {
        if self.provider == ProviderKind::Anthropic {
            let set = [
                ("token_limit_param", self.token_limit_param.is_some()),
                ("reasoning", self.reasoning),
                ("reasoning_effort", self.reasoning_effort.is_some()),
            ];
            if let Some((field, _)) = set.into_iter().find(|(_, set)| *set) {
                return Err(invalid(
                    field,
                    "is the OpenAI dialect's; Anthropic's Messages API always takes max_tokens and no reasoning_effort",
                ));
            }
        }
        let Some(effort) = &self.reasoning_effort else {
            return Ok(());
        };
        if !self.reasoning {
            return Err(invalid(
                "reasoning_effort",
                "is sent to a reasoning model only: add --reasoning",
            ));
        }
        if !REASONING_EFFORTS.contains(&effort.trim()) {
            return Err(invalid(
                "reasoning_effort",
                format!("{effort:?} is not one of {}", REASONING_EFFORTS.join(", ")),
            ));
        }
        Ok(())
    }

    fn check_limits(&self) -> Result<(), ModelError> {
        let window = positive_i32("context_window", u64::from(self.context_window))?;
        let output = positive_i32("max_output", u64::from(self.max_output))?;
        if output > window {
            return Err(invalid(
                "max_output",
                format!("{output} tokens exceeds the context window ({window})"),
            ));
        }
        let optional = [
            ("max_concurrency", self.max_concurrency.map(u64::from)),
            ("requests_per_minute", self.requests_per_minute),
            ("tokens_per_minute", self.tokens_per_minute),
        ];
        for (field, value) in optional {
            // The executor reads 0 as "no limit"; saying so is leaving it out.
            if value == Some(0) {
                return Err(invalid(
                    field,
                    "must be positive; leave it out for no limit",
                ));
            }
        }
        Ok(())
    }

    fn check_costs(&self) -> Result<(), ModelError> {
        for (field, rate) in [
            ("input_cost", self.input_cost),
            ("output_cost", self.output_cost),
        ] {
            if let Some(rate) = rate
                && !(rate.is_finite() && rate >= 0.0)
            {
                return Err(invalid(field, format!("{rate} is not a rate of 0 or more")));
            }
        }
        Ok(())
    }

    fn check_prices(&self) -> Result<(), ModelError> {
        let Some(prices) = &self.prices else {
            return Ok(());
        };
        price::check_currency(&prices.currency).map_err(|e| invalid("currency", e.to_string()))?;
        let each = [
            ("price_input_per_mtok", Some(prices.input_per_mtok)),
            ("price_output_per_mtok", Some(prices.output_per_mtok)),
            ("price_cached_input_per_mtok", prices.cached_input_per_mtok),
            ("price_cache_write_per_mtok", prices.cache_write_per_mtok),
        ];
        match each.into_iter().find(|(_, p)| p.is_some_and(|p| p < 0)) {
            Some((field, _)) => Err(invalid(field, "must be a price of 0 or more")),
            None => Ok(()),
        }
    }

    /// The price columns as stored: (input, output, cached input, cache
    /// write, currency).
    fn price_columns(&self) -> (Option<i64>, Option<i64>, Option<i64>, Option<i64>, &str) {
        match &self.prices {
            Some(p) => (
                Some(p.input_per_mtok),
                Some(p.output_per_mtok),
                p.cached_input_per_mtok,
                p.cache_write_per_mtok,
                p.currency.as_str(),
            ),
            None => (None, None, None, None, price::DEFAULT_CURRENCY),
        }
    }

    fn check_endpoint(&self) -> Result<(), ModelError> {
        match (&self.provider, &self.base_url, &self.key_env) {
            (ProviderKind::Simulated, Some(_), _) | (ProviderKind::Simulated, _, Some(_)) => {
                Err(invalid(
                    "provider",
                    "the simulated provider calls no server: leave out base_url and key_env",
                ))
            }
            (ProviderKind::OpenAiCompatible, None, _) => Err(invalid(
                "base_url",
                "an openai-compatible model needs its server's base URL (e.g. http://127.0.0.1:8080/v1)",
            )),
            (_, Some(url), _) => check_base_url(url),
            _ => Ok(()),
        }
    }

    /// The `config` keys this spec sets (those it leaves out are cleared).
    fn config(&self) -> Value {
        let mut config = Map::new();
        let mut set = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                config.insert(key.to_string(), value);
            }
        };
        set(
            "base_url",
            self.base_url.as_deref().map(normal_url).map(Value::from),
        );
        set(
            "structured_output",
            self.structured_output.map(|d| Value::from(d.as_str())),
        );
        set("max_concurrency", self.max_concurrency.map(Value::from));
        set(
            "requests_per_minute",
            self.requests_per_minute.map(Value::from),
        );
        set("tokens_per_minute", self.tokens_per_minute.map(Value::from));
        set(
            "fallback_model",
            self.fallback.as_deref().map(|f| Value::from(f.trim())),
        );
        set(
            "token_limit_param",
            self.token_limit_param.map(|p| Value::from(p.as_str())),
        );
        set("reasoning", self.reasoning.then_some(Value::Bool(true)));
        set(
            "reasoning_effort",
            self.reasoning_effort
                .as_deref()
                .map(|e| Value::from(e.trim())),
        );
        Value::Object(config)
    }
}

fn positive_i32(field: &'static str, value: u64) -> Result<i32, ModelError> {
    match i32::try_from(value) {
        Ok(0) => Err(invalid(field, "must be a positive number of tokens")),
        Ok(n) => Ok(n),
        Err(_) => Err(invalid(field, format!("{value} is more than {}", i32::MAX))),
    }
}

fn check_name(field: &'static str, name: &str) -> Result<(), ModelError> {
    if name.trim().is_empty() {
        return Err(invalid(field, "a model name must not be empty"));
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(
            field,
            format!("model name {name:?} has a space or control character"),
        ));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(invalid(
            field,
            format!("a model name has at most {MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(())
}

fn check_display_name(display: &str) -> Result<(), ModelError> {
    if display.trim().is_empty() || display.chars().any(char::is_control) {
        return Err(invalid(
            "display_name",
            "must be non-empty text on one line",
        ));
    }
    if display.chars().count() > MAX_NAME_CHARS {
        return Err(invalid(
            "display_name",
            format!("has at most {MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(())
}

/// A variable name a shell could export, that is not one of the platform's.
pub fn check_key_env(var: &str) -> Result<(), ModelError> {
    let mut chars = var.chars();
    let plausible = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && var.len() <= 128;
    if !plausible {
        return Err(invalid(
            "key_env",
            // Not echoed: what was given may be the key itself.
            format!(
                "the value given ({} characters) is not an environment variable name (letters, digits and _, e.g. OPENAI_API_KEY); it names the variable that holds the key, never the key itself",
                var.chars().count()
            ),
        ));
    }
    // The executor refuses to read these too (`dialectic_core::secrets`).
    if let Some(prefix) = dialectic_core::secrets::platform_prefix(var) {
        return Err(invalid(
            "key_env",
            format!(
                "{var} is one of the platform's own variables ({prefix}*), whose secrets a model must never send to its server; put the provider's key in a variable of its own, e.g. OPENAI_API_KEY"
            ),
        ));
    }
    Ok(())
}

/// An absolute http(s) URL with a host and no credentials in it.
pub fn check_base_url(text: &str) -> Result<(), ModelError> {
    let url = url::Url::parse(text.trim())
        .map_err(|e| invalid("base_url", format!("{text:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(
            "base_url",
            format!("{text:?} is not an http or https URL"),
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("base_url", format!("{text:?} has no host")));
    }
    // The row is readable by anyone with database access and is listed in
    // full; a key belongs in the environment (key_env).
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "base_url",
            "has credentials in it; name the variable holding the key with key_env instead",
        ));
    }
    Ok(())
}

/// The clients append `/chat/completions`: a trailing slash would double it.
fn normal_url(text: &str) -> String {
    text.trim().trim_end_matches('/').to_string()
}

/// What `register` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    Created(ModelId),
    /// The row existed; `reactivated` when it had been removed.
    Updated {
        id: ModelId,
        reactivated: bool,
    },
}

/// Validates `spec`, then inserts its row or replaces the existing row of the
/// same name (re-activating it). Config keys a spec does not manage are kept.
pub async fn register(pool: &PgPool, spec: &ModelSpec) -> Result<Registered, ModelError> {
    spec.validate()?;
    let name = spec.name.trim();
    let mut tx = pool.begin().await?;
    if let Some(fallback) = &spec.fallback {
        // FOR SHARE: a concurrent `remove` of the fallback waits for this
        // registration and then sees it as a user of the fallback, or wins
        // and this lookup finds no active row.
        let active: Option<ModelId> = sqlx::query_scalar(
            "SELECT id FROM ai_providers WHERE api_identifier = $1 AND is_active FOR SHARE",
        )
        .bind(fallback.trim())
        .fetch_optional(&mut *tx)
        .await?;
        if active.is_none() {
            return Err(ModelError::UnknownFallback(fallback.trim().to_string()));
        }
    }
    let before: Option<bool> = sqlx::query_scalar(
        "SELECT is_active FROM ai_providers WHERE api_identifier = $1 FOR UPDATE",
    )
    .bind(name)
    .fetch_optional(&mut *tx)
    .await?;
    let id = upsert(&mut tx, spec).await?;
    tx.commit().await?;
    Ok(match before {
        None => Registered::Created(id),
        Some(was_active) => Registered::Updated {
            id,
            reactivated: !was_active,
        },
    })
}

async fn upsert(tx: &mut crate::Tx<'_>, spec: &ModelSpec) -> Result<ModelId, ModelError> {
    let name = spec.name.trim();
    let display = spec.display_name.as_deref().map_or(name, str::trim);
    let (input, output, cached, cache_write, currency) = spec.price_columns();
    Ok(sqlx::query_scalar(
        "INSERT INTO ai_providers AS p
           (api_identifier, name, provider, context_window_tokens, max_output_tokens,
            input_token_cost_rate, output_token_cost_rate, tokenizer, secret_name, config, is_active,
            price_input_nanos_per_mtok, price_output_nanos_per_mtok,
            price_cached_input_nanos_per_mtok, price_currency, price_cache_write_nanos_per_mtok)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, true, $12, $13, $14, $15, $16)
         ON CONFLICT (api_identifier) DO UPDATE SET
           name = EXCLUDED.name,
           provider = EXCLUDED.provider,
           context_window_tokens = EXCLUDED.context_window_tokens,
           max_output_tokens = EXCLUDED.max_output_tokens,
           input_token_cost_rate = EXCLUDED.input_token_cost_rate,
           output_token_cost_rate = EXCLUDED.output_token_cost_rate,
           tokenizer = EXCLUDED.tokenizer,
           secret_name = EXCLUDED.secret_name,
           config = (p.config - $11::text[]) || EXCLUDED.config,
           is_active = true,
           price_input_nanos_per_mtok = EXCLUDED.price_input_nanos_per_mtok,
           price_output_nanos_per_mtok = EXCLUDED.price_output_nanos_per_mtok,
           price_cached_input_nanos_per_mtok = EXCLUDED.price_cached_input_nanos_per_mtok,
           price_currency = EXCLUDED.price_currency,
           price_cache_write_nanos_per_mtok = EXCLUDED.price_cache_write_nanos_per_mtok
         RETURNING id",
    )
    .bind(name)
    .bind(display)
    .bind(spec.provider.as_str())
    .bind(positive_i32("context_window", u64::from(spec.context_window))?)
    .bind(positive_i32("max_output", u64::from(spec.max_output))?)
    .bind(spec.input_cost.unwrap_or(1.0))
    .bind(spec.output_cost.unwrap_or(1.0))
    .bind(spec.tokenizer.trim())
    .bind(spec.key_env.as_deref().map(str::trim))
    .bind(Json(spec.config()))
    .bind(&MANAGED_KEYS[..])
    .bind(input)
    .bind(output)
    .bind(cached)
    .bind(currency)
    .bind(cache_write)
    .fetch_one(&mut **tx)
    .await?)
}

/// What `remove` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    Deactivated,
    /// It had been removed before; nothing changed.
    AlreadyInactive,
}

/// Deactivates the model `name`: new sessions, fallbacks and ListModels no
/// longer see it; rows that reference it keep doing so. Refused while an
/// active model names it as its fallback.
pub async fn remove(pool: &PgPool, name: &str) -> Result<Removed, ModelError> {
    let name = name.trim();
    let mut tx = pool.begin().await?;
    // FOR UPDATE waits for any registration holding this row as its fallback.
    let active: Option<bool> = sqlx::query_scalar(
        "SELECT is_active FROM ai_providers WHERE api_identifier = $1 FOR UPDATE",
    )
    .bind(name)
    .fetch_optional(&mut *tx)
    .await?;
    match active {
        None => return Err(ModelError::NotFound(name.to_string())),
        Some(false) => return Ok(Removed::AlreadyInactive),
        Some(true) => {}
    }
    let users: Vec<String> = sqlx::query_scalar(
        "SELECT api_identifier FROM ai_providers
          WHERE is_active AND config->>'fallback_model' = $1 AND api_identifier <> $1
          ORDER BY api_identifier",
    )
    .bind(name)
    .fetch_all(&mut *tx)
    .await?;
    if !users.is_empty() {
        return Err(ModelError::StillAFallback {
            name: name.to_string(),
            users,
        });
    }
    sqlx::query("UPDATE ai_providers SET is_active = false WHERE api_identifier = $1")
        .bind(name)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Removed::Deactivated)
}

/// What [`sync`] did, by model name (each list sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub added: Vec<String>,
    /// Changed, or active again.
    pub updated: Vec<String>,
    /// Active before and absent from the file: new sessions no longer see
    /// them; sessions already on them keep running.
    pub retired: Vec<String>,
    pub unchanged: Vec<String>,
}

impl SyncReport {
    /// Whether the registry was written to.
    pub fn changed(&self) -> bool {
        !(self.added.is_empty() && self.updated.is_empty() && self.retired.is_empty())
    }
}

/// Reconciles the registry with a declared set of models (a models file):
/// each is added, or updated when its row differs, and every active model
/// the set leaves out is retired (deactivated, as `remove` does; rows are
/// never deleted, so sessions and jobs that reference them keep running).
/// A model already as declared is not written, so a second sync of the same
/// set changes nothing. All or nothing, in one transaction; concurrent syncs
/// and registrations wait for it.
pub async fn sync(pool: &PgPool, specs: &[ModelSpec]) -> Result<SyncReport, ModelError> {
    let mut names = std::collections::BTreeSet::new();
    for spec in specs {
        spec.validate()?;
        if !names.insert(spec.name.trim()) {
            return Err(invalid(
                "name",
                format!("model {:?} is declared twice", spec.name.trim()),
            ));
        }
    }
    // Every model left active must fall back to one that stays active.
    for spec in specs {
        if let Some(fallback) = spec.fallback.as_deref().map(str::trim)
            && !names.contains(fallback)
        {
            return Err(invalid(
                "fallback",
                format!(
                    "model {:?} falls back to {fallback:?}, which the file does not declare (models it leaves out are retired)",
                    spec.name.trim()
                ),
            ));
        }
    }
    let mut tx = pool.begin().await?;
    // Against `register` and `remove` (row locks) and another sync: the
    // retirement below reads every row, so the table is held for the sync.
    sqlx::query("LOCK TABLE ai_providers IN SHARE ROW EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await?;
    let rows = sqlx::query_as::<_, RegisteredModel>(&format!(
        "SELECT id, api_identifier, name, provider, context_window_tokens, max_output_tokens,
                input_token_cost_rate, output_token_cost_rate, tokenizer, secret_name, config,
                is_active, {PRICE_COLUMNS}
           FROM ai_providers"
    ))
    .fetch_all(&mut *tx)
    .await?;
    let existing: std::collections::BTreeMap<&str, &RegisteredModel> = rows
        .iter()
        .map(|r| (r.api_identifier.as_str(), r))
        .collect();
    let mut report = SyncReport::default();
    for spec in specs {
        let name = spec.name.trim().to_string();
        match existing.get(name.as_str()) {
            Some(row) if declared_as(row, spec) => report.unchanged.push(name),
            Some(_) => {
                upsert(&mut tx, spec).await?;
                report.updated.push(name);
            }
            None => {
                upsert(&mut tx, spec).await?;
                report.added.push(name);
            }
        }
    }
    for row in &rows {
        if row.is_active && !names.contains(row.api_identifier.as_str()) {
            sqlx::query("UPDATE ai_providers SET is_active = false WHERE id = $1")
                .bind(row.id)
                .execute(&mut *tx)
                .await?;
            report.retired.push(row.api_identifier.clone());
        }
    }
    tx.commit().await?;
    for list in [
        &mut report.added,
        &mut report.updated,
        &mut report.retired,
        &mut report.unchanged,
    ] {
        list.sort();
    }
    Ok(report)
}

/// Whether `row` is active and already holds what `spec` states: what
/// [`upsert`] would write, with the config keys a spec manages compared and
/// the others (kept by an upsert) ignored.
fn declared_as(row: &RegisteredModel, spec: &ModelSpec) -> bool {
    let name = spec.name.trim();
    let managed: Map<String, Value> = row
        .config
        .0
        .as_object()
        .map(|config| {
            config
                .iter()
                .filter(|(k, _)| MANAGED_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    row.is_active
        && row.name == spec.display_name.as_deref().map_or(name, str::trim)
        && row.provider == spec.provider.as_str()
        && i64::from(row.context_window_tokens) == i64::from(spec.context_window)
        && i64::from(row.max_output_tokens) == i64::from(spec.max_output)
        && row.input_token_cost_rate == spec.input_cost.unwrap_or(1.0)
        && row.output_token_cost_rate == spec.output_cost.unwrap_or(1.0)
        && row.tokenizer == spec.tokenizer.trim()
        && row.secret_name.as_deref() == spec.key_env.as_deref().map(str::trim)
        && row.prices.prices() == spec.prices
        && Value::Object(managed) == spec.config()
}

/// A model row as `model list` shows it, active or not.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RegisteredModel {
    pub id: ModelId,
    pub api_identifier: String,
    pub name: String,
    /// As stored: a row written by SQL may name a provider this build lacks.
    pub provider: String,
    pub context_window_tokens: i32,
    pub max_output_tokens: i32,
    pub input_token_cost_rate: f64,
    pub output_token_cost_rate: f64,
    pub tokenizer: String,
    /// The NAME of the variable holding the key.
    pub secret_name: Option<String>,
    pub config: Json<Value>,
    pub is_active: bool,
    #[sqlx(flatten)]
    pub prices: PriceColumns,
}

/// A row's price columns (`ai_providers.price_*`), read as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow, serde::Deserialize)]
pub struct PriceColumns {
    #[serde(default)]
    pub price_input_nanos_per_mtok: Option<i64>,
    #[serde(default)]
    pub price_output_nanos_per_mtok: Option<i64>,
    #[serde(default)]
    pub price_cached_input_nanos_per_mtok: Option<i64>,
    #[serde(default)]
    pub price_cache_write_nanos_per_mtok: Option<i64>,
    #[serde(default = "default_currency")]
    pub price_currency: String,
}

fn default_currency() -> String {
    price::DEFAULT_CURRENCY.to_string()
}

impl PriceColumns {
    /// The model's prices; None when it is unpriced (the table's CHECK keeps
    /// input and output priced together).
    pub fn prices(&self) -> Option<Prices> {
        Some(Prices {
            currency: self.price_currency.clone(),
            input_per_mtok: self.price_input_nanos_per_mtok?,
            output_per_mtok: self.price_output_nanos_per_mtok?,
            cached_input_per_mtok: self.price_cached_input_nanos_per_mtok,
            cache_write_per_mtok: self.price_cache_write_nanos_per_mtok,
        })
    }
}

const PRICE_COLUMNS: &str = "price_input_nanos_per_mtok, price_output_nanos_per_mtok,
    price_cached_input_nanos_per_mtok, price_cache_write_nanos_per_mtok, price_currency";

impl RegisteredModel {
    pub fn settings(&self) -> ModelSettings {
        ModelSettings::from_config(&self.config.0)
    }
}

/// Every model row, removed ones too, by name.
pub async fn list(pool: &PgPool) -> Result<Vec<RegisteredModel>, ModelError> {
    Ok(sqlx::query_as::<_, RegisteredModel>(&format!(
        "SELECT id, api_identifier, name, provider, context_window_tokens, max_output_tokens,
                input_token_cost_rate, output_token_cost_rate, tokenizer, secret_name, config,
                is_active, {PRICE_COLUMNS}
           FROM ai_providers ORDER BY api_identifier"
    ))
    .fetch_all(pool)
    .await?)
}

#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub struct ModelRow {
    pub id: ModelId,
    pub api_identifier: String,
    pub name: String,
    pub provider: String,
    pub context_window_tokens: i32,
    pub max_output_tokens: i32,
    pub input_token_cost_rate: f64,
    pub output_token_cost_rate: f64,
    pub tokenizer: String,
    /// Name of the environment variable holding the provider key (never the key).
    pub secret_name: Option<String>,
    /// Provider settings such as `base_url`.
    pub config: Json<serde_json::Value>,
    /// What its tokens cost in money, as priced now (`prices()`).
    #[sqlx(flatten)]
    #[serde(flatten)]
    pub prices: PriceColumns,
}

pub(crate) const MODEL_COLUMNS: &str =
    "id, api_identifier, name, provider, context_window_tokens, max_output_tokens,
    input_token_cost_rate, output_token_cost_rate, tokenizer, secret_name, config,
    price_input_nanos_per_mtok, price_output_nanos_per_mtok,
    price_cached_input_nanos_per_mtok, price_cache_write_nanos_per_mtok, price_currency";

pub async fn active_models(pool: &PgPool) -> Result<Vec<ModelRow>, StoreError> {
    Ok(sqlx::query_as::<_, ModelRow>(&format!(
        "SELECT {MODEL_COLUMNS} FROM ai_providers WHERE is_active ORDER BY api_identifier"
    ))
    .fetch_all(pool)
    .await?)
}

pub async fn models_by_id(
    executor: impl sqlx::PgExecutor<'_>,
    ids: &[ModelId],
) -> Result<Vec<ModelRow>, StoreError> {
    Ok(sqlx::query_as::<_, ModelRow>(&format!(
        "SELECT {MODEL_COLUMNS} FROM ai_providers WHERE id = ANY($1)"
    ))
    .bind(ids)
    .fetch_all(executor)
    .await?)
}

pub async fn model_by_identifier(
    executor: impl sqlx::PgExecutor<'_>,
    api_identifier: &str,
) -> Result<ModelRow, StoreError> {
    sqlx::query_as::<_, ModelRow>(&format!(
        "SELECT {MODEL_COLUMNS} FROM ai_providers WHERE api_identifier = $1 AND is_active"
    ))
    .bind(api_identifier)
    .fetch_optional(executor)
    .await?
    .ok_or_else(|| StoreError::not_found("model", api_identifier))
}

pub async fn model(
    executor: impl sqlx::PgExecutor<'_>,
    id: ModelId,
) -> Result<ModelRow, StoreError> {
    models_by_id(executor, &[id])
        .await?
        .pop()
        .ok_or_else(|| StoreError::not_found("model", id))
}

/// The settings a row's `config` holds, read as the executor reads them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelSettings {
    pub base_url: Option<String>,
    /// The dialect's name: the stored one, `json_schema` when none is stored.
    /// A name this build does not know is shown as stored, so it can be fixed.
    pub structured_output: String,
    pub fallback_model: Option<String>,
    pub max_concurrency: Option<u64>,
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    /// The field an OpenAI-dialect request's output limit goes in: the
    /// stored one, `max_completion_tokens` when none is stored.
    pub token_limit_param: String,
    pub reasoning: bool,
    pub reasoning_effort: Option<String>,
}

impl ModelSettings {
    pub fn from_config(config: &Value) -> Self {
        let text = |k: &str| config.get(k).and_then(Value::as_str).map(str::to_string);
        // As executor::limits reads them: 0 or a non-number is no limit.
        let number = |k: &str| config.get(k).and_then(Value::as_u64).filter(|n| *n > 0);
        let structured_output = match StructuredOutput::of_model_config(config) {
            Ok(dialect) => dialect.as_str().to_string(),
            Err(unknown) => unknown.0,
        };
        Self {
            base_url: text("base_url"),
            structured_output,
            fallback_model: text("fallback_model"),
            max_concurrency: number("max_concurrency"),
            requests_per_minute: number("requests_per_minute"),
            tokens_per_minute: number("tokens_per_minute"),
            token_limit_param: text("token_limit_param")
                .unwrap_or_else(|| TokenLimitParam::default().as_str().to_string()),
            reasoning: config.get("reasoning").and_then(Value::as_bool) == Some(true),
            reasoning_effort: text("reasoning_effort"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> ModelSpec {
        ModelSpec {
            name: "llama3.1".into(),
            display_name: None,
            provider: ProviderKind::OpenAiCompatible,
            base_url: Some("http://127.0.0.1:11434/v1/".into()),
            key_env: Some("OLLAMA_API_KEY".into()),
            context_window: 8192,
            max_output: 2048,
            structured_output: Some(StructuredOutput::JsonObjectSchema),
            max_concurrency: Some(2),
            requests_per_minute: None,
            tokens_per_minute: Some(100_000),
            fallback: Some("simulated".into()),
            input_cost: None,
            output_cost: Some(0.5),
            tokenizer: "cl100k_base".into(),
            token_limit_param: Some(TokenLimitParam::MaxTokens),
            reasoning: false,
            reasoning_effort: None,
            prices: None,
        }
    }

    fn refused(change: impl FnOnce(&mut ModelSpec)) -> (&'static str, String) {
        let mut s = spec();
        change(&mut s);
        match s.validate() {
            Err(ModelError::Invalid { field, reason }) => (field, reason),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn prices_are_checked_and_stored_as_given() {
        let priced = |currency: &str, cached: Option<i64>| Prices {
            currency: currency.into(),
            input_per_mtok: 1_250_000_000,
            output_per_mtok: 10_000_000_000,
            cached_input_per_mtok: cached,
            cache_write_per_mtok: None,
        };
        let mut s = spec();
        s.prices = Some(priced("EUR", Some(125_000_000)));
        s.validate().expect("valid");
        assert_eq!(
            s.price_columns(),
            (
                Some(1_250_000_000),
                Some(10_000_000_000),
                Some(125_000_000),
                None,
                "EUR"
            )
        );
        assert_eq!(spec().price_columns(), (None, None, None, None, "USD"));
        let (field, _) = refused(|s| s.prices = Some(priced("usd", None)));
        assert_eq!(field, "currency");
        let (field, _) = refused(|s| s.prices = Some(priced("USD", Some(-1))));
        assert_eq!(field, "price_cached_input_per_mtok");
        // Read back: input and output make a price; cached is optional.
        let row = PriceColumns {
            price_input_nanos_per_mtok: Some(1_250_000_000),
            price_output_nanos_per_mtok: Some(10_000_000_000),
            price_cached_input_nanos_per_mtok: None,
            price_cache_write_nanos_per_mtok: None,
            price_currency: "USD".into(),
        };
        assert_eq!(row.prices(), Some(priced("USD", None)));
        assert_eq!(PriceColumns::default().prices(), None);
    }

    #[test]
    fn a_full_spec_is_valid_and_writes_only_the_keys_it_sets() {
        spec().validate().expect("valid");
        assert_eq!(
            spec().config(),
            json!({
                "base_url": "http://127.0.0.1:11434/v1",
                "structured_output": "json_object_schema",
                "max_concurrency": 2,
                "tokens_per_minute": 100000,
                "fallback_model": "simulated",
                "token_limit_param": "max_tokens",
            })
        );
        let mut reasoning = spec();
        reasoning.provider = ProviderKind::OpenAi;
        reasoning.token_limit_param = None;
        reasoning.reasoning = true;
        reasoning.reasoning_effort = Some("low".into());
        reasoning.validate().expect("valid");
        let config = reasoning.config();
        assert_eq!(config["reasoning"], json!(true));
        assert_eq!(config["reasoning_effort"], json!("low"));
        assert!(config.get("token_limit_param").is_none(), "{config}");
    }

    #[test]
    fn the_openai_wire_settings_are_checked() {
        let (field, reason) = refused(|s| s.reasoning_effort = Some("low".into()));
        assert_eq!(field, "reasoning_effort");
        assert!(reason.contains("--reasoning"), "{reason}");
        let (field, reason) = refused(|s| {
            s.reasoning = true;
            s.reasoning_effort = Some("extreme".into());
        });
        assert_eq!(field, "reasoning_effort");
        assert!(
            reason.contains("minimal") && reason.contains("xhigh"),
            "{reason}"
        );
        let (field, reason) = refused(|s| s.provider = ProviderKind::Anthropic);
        assert_eq!(field, "token_limit_param");
        assert!(reason.contains("Anthropic"), "{reason}");
        assert_eq!(
            "max_tokens".parse::<TokenLimitParam>(),
            Ok(TokenLimitParam::MaxTokens)
        );
        assert!("n_predict".parse::<TokenLimitParam>().is_err());
    }

    #[test]
    fn platform_variables_are_refused_as_key_env() {
        for var in [
            "DIALECTIC_INTERNAL__TOKEN_SECRET",
            "dialectic_s3__secret_key",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            let (field, reason) = refused(|s| s.key_env = Some(var.into()));
            assert_eq!(field, "key_env");
            assert!(reason.contains("platform's own"), "{reason}");
        }
        for var in ["sk-abc123", "MY KEY", "1KEY", ""] {
            let (field, reason) = refused(|s| s.key_env = Some(var.into()));
            assert_eq!(field, "key_env");
            assert!(
                reason.contains("not an environment variable name"),
                "{reason}"
            );
        }
        check_key_env("OPENAI_API_KEY").expect("plausible");
        check_key_env("_my_key2").expect("plausible");
    }

    #[test]
    fn base_urls_must_be_http_with_a_host_and_no_credentials() {
        for bad in [
            "127.0.0.1:8080/v1",
            "ftp://example.com/v1",
            "file:///etc/passwd",
            "http://",
            "not a url",
        ] {
            let (field, _) = refused(|s| s.base_url = Some(bad.into()));
            assert_eq!(field, "base_url", "{bad}");
        }
        let (_, reason) = refused(|s| s.base_url = Some("https://user:sk-1@example.com/v1".into()));
        assert!(reason.contains("credentials"), "{reason}");
        let (field, _) = refused(|s| s.base_url = None);
        assert_eq!(field, "base_url", "openai-compatible needs one");
        let mut openai = spec();
        openai.provider = ProviderKind::OpenAi;
        openai.base_url = None;
        openai.validate().expect("openai has a default server");
    }

    #[test]
    fn limits_must_be_positive_and_fit() {
        assert_eq!(refused(|s| s.context_window = 0).0, "context_window");
        assert_eq!(refused(|s| s.max_output = 0).0, "max_output");
        assert_eq!(refused(|s| s.max_output = 9000).0, "max_output");
        assert_eq!(refused(|s| s.context_window = u32::MAX).0, "context_window");
        assert_eq!(
            refused(|s| s.max_concurrency = Some(0)).0,
            "max_concurrency"
        );
        assert_eq!(
            refused(|s| s.requests_per_minute = Some(0)).0,
            "requests_per_minute"
        );
        assert_eq!(refused(|s| s.input_cost = Some(-1.0)).0, "input_cost");
        assert_eq!(refused(|s| s.output_cost = Some(f64::NAN)).0, "output_cost");
    }

    #[test]
    fn names_fallbacks_and_providers() {
        assert_eq!(refused(|s| s.name = "my model".into()).0, "name");
        assert_eq!(refused(|s| s.name = " ".into()).0, "name");
        let (field, reason) = refused(|s| s.fallback = Some("llama3.1".into()));
        assert_eq!(field, "fallback");
        assert!(reason.contains("its own fallback"), "{reason}");
        assert_eq!(
            refused(|s| s.provider = ProviderKind::Simulated).0,
            "provider",
            "a simulated model with a base URL"
        );
        assert_eq!(
            "openai-compatible".parse::<ProviderKind>(),
            Ok(ProviderKind::OpenAiCompatible)
        );
        assert!("ollama".parse::<ProviderKind>().is_err());
    }

    #[test]
    fn settings_read_config_as_the_executor_does() {
        let read = ModelSettings::from_config(&json!({
            "base_url": "http://h/v1",
            "max_concurrency": 0,
            "requests_per_minute": 60,
            "structured_output": "xml",
        }));
        assert_eq!(read.base_url.as_deref(), Some("http://h/v1"));
        assert_eq!(read.max_concurrency, None);
        assert_eq!(read.requests_per_minute, Some(60));
        assert_eq!(read.structured_output, "xml");
        let defaults = ModelSettings::from_config(&json!({}));
        assert_eq!(defaults.structured_output, "json_schema");
        assert_eq!(defaults.token_limit_param, "max_completion_tokens");
        assert!(!defaults.reasoning);
    }
}
