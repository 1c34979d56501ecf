//! Guarding model calls with the wallet service: hold the estimated cost before
//! the call, capture the actual usage after it, release when no call was made.
//! Keys carry the job id and attempt, so a redelivered message never charges
//! twice and a retried attempt (a new call) is charged once for itself.

use dialectic_core::ids::UserId;
use dialectic_core::job::INSUFFICIENT_BALANCE;
use dialectic_core::price::{self, CallTokens};
use dialectic_core::prompt::ChatRequest;
use dialectic_core::tokens::{cost, estimate_tokens};
use dialectic_llm::ChatResponse;
use dialectic_proto::v1::wallet::wallet_service_client::WalletServiceClient;
use dialectic_proto::v1::wallet::{
    CallUsage, CaptureRequest, GetBalanceRequest, HoldRequest, ReleaseRequest,
};
use dialectic_runtime::service_auth::InternalChannel;
use dialectic_runtime::worker::AttemptError;
use dialectic_store::jobs::JobRow;
use dialectic_store::ledger::{self, CallUsage as RecordedUsage};
use dialectic_store::models::ModelRow;
use std::collections::HashMap;
use std::sync::Mutex;
use tonic::{Code, Status};

/// Unused holds give themselves back after this long (a worker that died mid-call).
const HOLD_SECS: u32 = 15 * 60;

pub struct Billing {
    // Traced: the wallet's spans join the job's trace.
    client: WalletServiceClient<InternalChannel>,
    wallets: Mutex<HashMap<UserId, String>>,
}

#[derive(Clone)]
pub struct Hold {
    wallet_id: String,
    pub(crate) hold_id: String,
    amount: i64,
}

fn wallet_error(what: &str, status: Status) -> AttemptError {
    match status.code() {
        Code::FailedPrecondition if status.message().contains("insufficient balance") => {
            AttemptError::permanent(INSUFFICIENT_BALANCE, status.message())
        }
        Code::NotFound => {
            AttemptError::permanent("no_wallet", format!("{what}: {}", status.message()))
        }
        Code::InvalidArgument | Code::AlreadyExists | Code::PermissionDenied => {
            AttemptError::permanent("wallet_rejected", format!("{what}: {}", status.message()))
        }
        _ => AttemptError::retryable(
            "wallet_unavailable",
            format!("{what}: {}", status.message()),
        ),
    }
}

/// The most a call can cost: the prompt as sent plus every token it may write.
pub fn estimate(request: &ChatRequest, model: &ModelRow) -> i64 {
    let prompt: u64 = request
        .messages
        .iter()
        .map(|m| estimate_tokens(&m.content))
        .sum::<u64>()
        + request
            .system_instruction
            .as_deref()
            .map_or(0, estimate_tokens);
    cost(
        prompt,
        u64::from(request.max_tokens),
        model.input_token_cost_rate,
        model.output_token_cost_rate,
    )
    .max(1)
}

/// What a call used, and cost in money at the model's prices as the call
/// found them (None when the model is unpriced): recorded on its capture.
pub fn usage(model: &ModelRow, response: &ChatResponse) -> RecordedUsage {
    let cached_input = response.cached_input_tokens.min(response.input_tokens);
    let tokens = CallTokens {
        input: response.input_tokens,
        output: response.output_tokens,
        cached_input,
        // Reads and writes are both parts of the input, never more than it.
        cache_write: response
            .cache_write_input_tokens
            .min(response.input_tokens - cached_input),
    };
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    RecordedUsage {
        input_tokens: count(tokens.input),
        output_tokens: count(tokens.output),
        cached_input_tokens: count(tokens.cached_input),
        cache_write_input_tokens: count(tokens.cache_write),
        money: model
            .prices
            .prices()
            .map(|prices| price::call_cost(&prices, tokens)),
    }
}

/// The usage as the wallet's capture carries it.
fn wire_usage(usage: &RecordedUsage) -> CallUsage {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    CallUsage {
        input_tokens: count(usage.input_tokens),
        output_tokens: count(usage.output_tokens),
        cached_input_tokens: count(usage.cached_input_tokens),
        cache_write_input_tokens: count(usage.cache_write_input_tokens),
        currency_code: usage
            .money
            .as_ref()
            .map(|m| m.currency.clone())
            .unwrap_or_default(),
        money_nanos: usage.money.as_ref().map_or(0, |m| m.nanos),
    }
}

/// What a call is charged: its cost, never more than was held.
pub fn charged(hold: &Hold, actual: i64) -> i64 {
    actual.clamp(0, hold.amount)
}

impl Billing {
    pub fn new(channel: InternalChannel) -> Self {
        Self {
            client: WalletServiceClient::new(channel),
            wallets: Mutex::new(HashMap::new()),
        }
    }

    async fn wallet_of(&self, user: UserId) -> Result<String, AttemptError> {
        if let Some(id) = self.wallets.lock().ok().and_then(|w| w.get(&user).cloned()) {
            return Ok(id);
        }
        let balance = self
            .client
            .clone()
            .get_balance(GetBalanceRequest {
                wallet_id: String::new(),
                user_id: user.to_string(),
            })
            .await
            .map_err(|s| wallet_error("the user's wallet", s))?
            .into_inner();
        if let Ok(mut wallets) = self.wallets.lock() {
            wallets.insert(user, balance.wallet_id.clone());
        }
        Ok(balance.wallet_id)
    }

    pub async fn hold(&self, job: &JobRow, amount: i64) -> Result<Hold, AttemptError> {
        self.place_hold(
            job.user_id,
            HoldRequest {
                amount,
                idempotency_key: format!("hold:{}:{}", job.id, job.attempt_count),
                session_id: job.session_id.to_string(),
                job_id: job.id.to_string(),
                attempt: u32::try_from(job.attempt_count).unwrap_or(0),
                purpose: "model_call".into(),
                expires_in_secs: HOLD_SECS,
                ..Default::default()
            },
        )
        .await
    }

    /// A hold for a model call that belongs to no job (a question's), under
    /// keys derived from `key`.
    pub async fn hold_for(
        &self,
        user: UserId,
        key: &str,
        amount: i64,
    ) -> Result<Hold, AttemptError> {
        self.place_hold(
            user,
            HoldRequest {
                amount,
                idempotency_key: format!("hold:{key}"),
                purpose: "query".into(),
                expires_in_secs: HOLD_SECS,
                ..Default::default()
            },
        )
        .await
    }

    async fn place_hold(
        &self,
        user: UserId,
        mut request: HoldRequest,
    ) -> Result<Hold, AttemptError> {
        let wallet_id = self.wallet_of(user).await?;
        request.wallet_id = wallet_id.clone();
        let amount = request.amount;
        let entry = self
            .client
            .clone()
            .hold(request)
            .await
            .map_err(|s| wallet_error("hold", s))?
            .into_inner();
        Ok(Hold {
            wallet_id,
            hold_id: entry.id,
            amount,
        })
    }

    /// Charges a jobless call what it cost (never more than was held).
    pub async fn capture_for(
        &self,
        key: &str,
        hold: &Hold,
        actual: i64,
        usage: &RecordedUsage,
    ) -> Result<(), AttemptError> {
        self.capture_keyed(format!("capture:{key}"), hold, actual, usage)
            .await
    }

    /// Charges what the call really cost (never more than was held), under
    /// the key the wallet's sweep would capture it with (`ledger::capture_key`).
    pub async fn capture(
        &self,
        job: &JobRow,
        hold: &Hold,
        actual: i64,
        usage: &RecordedUsage,
    ) -> Result<(), AttemptError> {
        let key = ledger::capture_key(job.id, job.attempt_count);
        self.capture_keyed(key, hold, actual, usage).await
    }

    async fn capture_keyed(
        &self,
        idempotency_key: String,
        hold: &Hold,
        actual: i64,
        usage: &RecordedUsage,
    ) -> Result<(), AttemptError> {
        self.client
            .clone()
            .capture(CaptureRequest {
                wallet_id: hold.wallet_id.clone(),
                hold_id: hold.hold_id.clone(),
                amount: charged(hold, actual),
                idempotency_key,
                usage: Some(wire_usage(usage)),
            })
            .await
            .map_err(|s| wallet_error("capture", s))?;
        Ok(())
    }

    /// Gives the hold back when no call was made (or the call failed before any output).
    pub async fn release(&self, job: &JobRow, hold: &Hold, reason: &str) {
        self.release_for(&format!("{}:{}", job.id, job.attempt_count), hold, reason)
            .await;
    }

    /// `release` for a hold placed under `key`.
    pub async fn release_for(&self, key: &str, hold: &Hold, reason: &str) {
        let result = self
            .client
            .clone()
            .release(ReleaseRequest {
                wallet_id: hold.wallet_id.clone(),
                hold_id: hold.hold_id.clone(),
                idempotency_key: format!("release:{key}"),
                reason: reason.to_string(),
            })
            .await;
        if let Err(e) = result {
            // The hold expires by itself; nothing is lost.
            tracing::warn!(error = %e, "could not release the hold");
        }
    }
}

#[async_trait::async_trait]
impl crate::compress::ContextWallet for Billing {
    async fn balance(&self, payer: &crate::compress::Payer) -> Result<i64, AttemptError> {
        let balance = self
            .client
            .clone()
            .get_balance(GetBalanceRequest {
                wallet_id: String::new(),
                user_id: payer.user_id.to_string(),
            })
            .await
            .map_err(|s| wallet_error("the user's wallet", s))?
            .into_inner();
        if let Ok(mut wallets) = self.wallets.lock() {
            wallets.insert(payer.user_id, balance.wallet_id.clone());
        }
        Ok(balance.available)
    }

    /// Indexing is paid after the fact (its cost is known only then): a hold of
    /// the exact amount, captured at once, both under keys derived from `key`.
    async fn debit(
        &self,
        payer: &crate::compress::Payer,
        key: &str,
        amount: i64,
    ) -> Result<(), AttemptError> {
        let wallet_id = self.wallet_of(payer.user_id).await?;
        let hold = self
            .client
            .clone()
            .hold(HoldRequest {
                wallet_id: wallet_id.clone(),
                amount,
                idempotency_key: format!("index-hold:{key}"),
                session_id: payer.session_id.to_string(),
                job_id: payer.job_id.to_string(),
                attempt: u32::try_from(payer.attempt).unwrap_or(0),
                purpose: "indexing".into(),
                expires_in_secs: HOLD_SECS,
            })
            .await
            .map_err(|s| wallet_error("indexing hold", s))?
            .into_inner();
        self.client
            .clone()
            .capture(CaptureRequest {
                wallet_id,
                hold_id: hold.id,
                amount,
                idempotency_key: format!("index-capture:{key}"),
                usage: None,
            })
            .await
            .map_err(|s| wallet_error("indexing capture", s))?;
        Ok(())
    }
}
