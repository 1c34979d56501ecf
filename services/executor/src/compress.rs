//! The context compression loop (seed 001 3.b.ii.2, seed 000 "Context
//! Compression Loop"): count the assembled request; if it is over the model's
//! input limit, build the value-ordered candidates, run the holistic pre-flight
//! once (absolute affordability, then the 20% rationality check), then compress
//! the lowest-value candidate through the indexer, debit its actual indexing
//! tokens, replace it, recount, and repeat until the request fits or no
//! candidate is left (`context_window`). The indexer and the wallet sit behind
//! small traits so the seed's two test cases can count the calls.

use dialectic_core::context::{
    Candidate, Context, LOCAL_DIMS, PreflightError, Target, cosine, hashed_ngram_embedding,
    input_limit, preflight, target_tokens,
};
use dialectic_core::ids::{JobId, SessionId, UserId};
use dialectic_core::prompt::ChatRequest;
use dialectic_core::tokens::cost;
use dialectic_proto::v1::indexer::RetrieveRequest;
use dialectic_proto::v1::indexer::indexer_service_client::IndexerServiceClient;
use dialectic_runtime::service_auth::InternalChannel;
use dialectic_runtime::worker::AttemptError;
use dialectic_tokenizer::{Encoding, TokenCounter};
use serde::Serialize;
use tonic::Code;

/// Failure code of a prompt that cannot be made to fit (seed 001 `ContextWindowError`).
pub const CONTEXT_WINDOW_ERROR: &str = "context_window";
/// Pre-flight stage 1: the balance cannot pay for the inputs.
pub const COMPRESSION_UNAFFORDABLE: &str = "compression_unaffordable";
/// Pre-flight stage 2: affordable, but more than 20% of the balance.
pub const COMPRESSION_IRRATIONAL: &str = "compression_irrational";

pub struct Compressed {
    pub text: String,
    /// Embedding tokens the indexer spent; 0 when everything was indexed before.
    pub tokens_spent: u64,
}

#[async_trait::async_trait]
pub trait ContextIndexer: Send + Sync {
    /// The most relevant parts of `text` for `query` within `budget_tokens`.
    async fn compress(
        &self,
        text: &str,
        query: &str,
        budget_tokens: u64,
        embedder: &str,
        tokenizer: &str,
    ) -> Result<Compressed, AttemptError>;
}

/// Who pays, and the attempt a debit belongs to (part of its idempotency key).
#[derive(Debug, Clone)]
pub struct Payer {
    pub user_id: UserId,
    pub session_id: SessionId,
    pub job_id: JobId,
    pub attempt: i32,
}

#[async_trait::async_trait]
pub trait ContextWallet: Send + Sync {
    /// The spendable balance (total less holds).
    async fn balance(&self, payer: &Payer) -> Result<i64, AttemptError>;
    /// Charges `amount` once per `key`, whatever happens to retries of the call.
    async fn debit(&self, payer: &Payer, key: &str, amount: i64) -> Result<(), AttemptError>;
}

/// The model facts the loop needs.
#[derive(Debug, Clone)]
pub struct Limits {
    pub model: String,
    pub max_tokens: u32,
    /// The step's sampling temperature (its recipe's `config_override`).
    pub temperature: Option<f64>,
    pub output_type: String,
    pub hints: Vec<String>,
    pub encoding: Encoding,
    pub context_window: u64,
    pub input_rate: f64,
    pub embedder: String,
}

/// One compression step, for the progress event, the log and the contribution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// `resource` or `history`.
    pub kind: &'static str,
    /// Resource or contribution id.
    pub id: String,
    pub value: f64,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub embedding_tokens: u64,
    pub cost: i64,
    pub request_tokens_after: u64,
}

pub struct Fitted {
    pub request: ChatRequest,
    pub initial_tokens: u64,
    pub final_tokens: u64,
    pub steps: Vec<Step>,
}

/// What the loop runs against; None where a service is not configured.
pub struct Services<'a> {
    pub counter: &'a TokenCounter,
    pub indexer: Option<&'a dyn ContextIndexer>,
    pub wallet: Option<&'a dyn ContextWallet>,
}

fn counting(e: dialectic_tokenizer::TokenizerError) -> AttemptError {
    AttemptError::permanent("tokenizer", e)
}

fn too_long(message: String) -> AttemptError {
    AttemptError::permanent(CONTEXT_WINDOW_ERROR, message)
}

/// Builds the request and makes it fit the model's window; `on_step` sees
/// every compression as it happens (progress events, logs).
pub async fn fit(
    context: Context,
    limits: &Limits,
    payer: &Payer,
    services: &Services<'_>,
    on_step: &mut (dyn FnMut(&Step) + Send),
) -> Result<Fitted, AttemptError> {
    let request = build(&context, limits);
    let initial = services
        .counter
        .count_request(limits.encoding, &request)
        .await
        .map_err(counting)?;
    let limit = input_limit(limits.context_window, u64::from(limits.max_tokens));
    if initial <= limit {
        return Ok(Fitted {
            request,
            initial_tokens: initial,
            final_tokens: initial,
            steps: Vec::new(),
        });
    }
    let Some(indexer) = services.indexer else {
        return Err(too_long(format!(
            "the prompt has {initial} tokens, over the model's input limit of {limit}, and no indexer is configured to compress it"
        )));
    };
    let mut work = Compression {
        query: context.original.current_user_prompt.clone(),
        context,
        limits,
        payer,
        services,
        indexer,
    };
    let candidates = work.candidates();
    // Seed 001 3.b.ii.2 step 2: nothing that may be compressed, nothing to pay for.
    if candidates.is_empty() {
        return Err(too_long(format!(
            "the prompt has {initial} tokens, over the model's input limit of {limit}, and none of it may be compressed"
        )));
    }
    work.preflight(initial, limit).await?;
    let (request, tokens, steps) = work.until_fits(candidates, initial, limit, on_step).await?;
    Ok(Fitted {
        request,
        initial_tokens: initial,
        final_tokens: tokens,
        steps,
    })
}

fn build(context: &Context, limits: &Limits) -> ChatRequest {
    ChatRequest {
        temperature: limits.temperature,
        ..context.build(
            &limits.model,
            limits.max_tokens,
            &limits.output_type,
            &limits.hints,
        )
    }
}

/// The compression loop's state: the context it rewrites and what it runs against.
struct Compression<'a> {
    context: Context,
    query: String,
    limits: &'a Limits,
    payer: &'a Payer,
    services: &'a Services<'a>,
    indexer: &'a dyn ContextIndexer,
}

impl Compression<'_> {
    /// Lowest value first. Scoring uses the local embedding: free, so choosing
    /// what to compress never calls (or pays) the indexer.
    fn candidates(&self) -> Vec<Candidate> {
        let query_vector = hashed_ngram_embedding(&self.query, LOCAL_DIMS);
        self.context.candidates(&|doc| {
            cosine(
                &query_vector,
                &hashed_ngram_embedding(&doc.content, LOCAL_DIMS),
            )
        })
    }

    /// The holistic pre-flight, once, before any compression work.
    async fn preflight(&self, initial: u64, limit: u64) -> Result<(), AttemptError> {
        let Some(wallet) = self.services.wallet else {
            return Ok(());
        };
        let balance = wallet.balance(self.payer).await?;
        preflight(initial, limit, self.limits.input_rate, balance)
            .map(|_| ())
            .map_err(|e| {
                let code = match e {
                    PreflightError::Unaffordable { .. } => COMPRESSION_UNAFFORDABLE,
                    PreflightError::Irrational { .. } => COMPRESSION_IRRATIONAL,
                };
                AttemptError::permanent(code, e)
            })
    }

    async fn until_fits(
        &mut self,
        mut candidates: Vec<Candidate>,
        initial: u64,
        limit: u64,
        on_step: &mut (dyn FnMut(&Step) + Send),
    ) -> Result<(ChatRequest, u64, Vec<Step>), AttemptError> {
        let mut tokens = initial;
        let mut steps = Vec::new();
        while tokens > limit {
            if candidates.is_empty() {
                return Err(too_long(format!(
                    "the prompt still has {tokens} tokens after compressing every candidate, over the model's input limit of {limit}"
                )));
            }
            let victim = candidates.remove(0);
            let step = self.compress(&victim, tokens - limit, steps.len()).await?;
            tokens = step.request_tokens_after;
            on_step(&step);
            steps.push(step);
        }
        // The last step counted exactly this request; the check is seed 000's
        // step 12, the final sanity check before the model is called.
        if tokens > limit {
            return Err(too_long(format!(
                "the assembled request has {tokens} tokens, over the limit of {limit}"
            )));
        }
        Ok((build(&self.context, self.limits), tokens, steps))
    }

    /// One step: the candidate compressed through the indexer to what the
    /// overshoot leaves it, its indexing tokens debited, the request recounted.
    async fn compress(
        &mut self,
        victim: &Candidate,
        overshoot: u64,
        step_number: usize,
    ) -> Result<Step, AttemptError> {
        let (counter, encoding) = (self.services.counter, self.limits.encoding);
        let text = self
            .context
            .text_of(victim.target)
            .unwrap_or_default()
            .to_string();
        let before = counter.count(encoding, &text).await.map_err(counting)?;
        let compressed = self
            .indexer
            .compress(
                &text,
                &self.query,
                target_tokens(before, overshoot),
                &self.limits.embedder,
                encoding.name(),
            )
            .await?;
        let charge = self
            .debit(victim, step_number, compressed.tokens_spent)
            .await?;
        let after = counter
            .count(encoding, &compressed.text)
            .await
            .map_err(counting)?;
        self.context.replace(victim.target, compressed.text);
        let request_tokens_after = counter
            .count_request(encoding, &build(&self.context, self.limits))
            .await
            .map_err(counting)?;
        Ok(Step {
            kind: match victim.target {
                Target::History(_) => "history",
                Target::Resource(_) => "resource",
            },
            id: victim.id.clone(),
            value: victim.value,
            tokens_before: before,
            tokens_after: after,
            embedding_tokens: compressed.tokens_spent,
            cost: charge,
            request_tokens_after,
        })
    }

    /// Pays the indexing tokens a step spent; returns the charge.
    async fn debit(
        &self,
        victim: &Candidate,
        step_number: usize,
        tokens_spent: u64,
    ) -> Result<i64, AttemptError> {
        let charge = if tokens_spent == 0 {
            0
        } else {
            cost(tokens_spent, 0, self.limits.input_rate, 0.0)
        };
        if let (Some(wallet), true) = (self.services.wallet, charge > 0) {
            // One key per candidate and attempt: a redelivered attempt never pays
            // twice. The step number keeps two inputs read from one source apart;
            // it is stable across redeliveries because the order is deterministic.
            let key = format!(
                "{}:{}:{}:{}",
                self.payer.job_id, self.payer.attempt, step_number, victim.id
            );
            wallet.debit(self.payer, &key, charge).await?;
        }
        Ok(charge)
    }
}

/// The indexer service over gRPC.
#[derive(Clone)]
pub struct GrpcIndexer {
    client: IndexerServiceClient<InternalChannel>,
}

impl GrpcIndexer {
    pub fn new(channel: InternalChannel) -> Self {
        Self {
            client: IndexerServiceClient::new(channel),
        }
    }
}

#[async_trait::async_trait]
impl ContextIndexer for GrpcIndexer {
    async fn compress(
        &self,
        text: &str,
        query: &str,
        budget_tokens: u64,
        embedder: &str,
        tokenizer: &str,
    ) -> Result<Compressed, AttemptError> {
        let reply = self
            .client
            .clone()
            .retrieve(RetrieveRequest {
                text: text.to_string(),
                query: query.to_string(),
                budget_tokens,
                embedder: embedder.to_string(),
                tokenizer: tokenizer.to_string(),
            })
            .await
            .map_err(|s| match s.code() {
                Code::InvalidArgument | Code::FailedPrecondition | Code::NotFound => {
                    AttemptError::permanent("indexer_rejected", s.message())
                }
                _ => AttemptError::retryable("indexer_unavailable", s.message()),
            })?
            .into_inner();
        Ok(Compressed {
            text: reply.text,
            tokens_spent: reply.tokens_spent,
        })
    }
}
