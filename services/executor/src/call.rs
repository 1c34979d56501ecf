//! Stage 3 of an attempt: the model call, paid from the wallet. The most it
//! can cost is held before the call; the actual usage is captured after it;
//! a call that fails releases its hold (no call, no charge).

use crate::billing::{self, Billing, Hold};
use crate::provider::Provider;
use crate::{Executor, model_call, permanent, retryable};
use dialectic_core::ids::TransactionId;
use dialectic_core::prompt::ChatRequest;
use dialectic_core::tokens::cost;
use dialectic_llm::{ChatResponse, LlmError};
use dialectic_runtime::worker::AttemptError;
use dialectic_store::Store;
use dialectic_store::jobs::JobRow;
use dialectic_store::ledger;
use dialectic_store::models::ModelRow;
use dialectic_telemetry::metrics;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{Instrument, info_span};

/// How long a reply waits for its cost to be written somewhere durable.
const CHARGE_PATIENCE: Duration = Duration::from_secs(15);

/// The error code of an attempt given back at shutdown.
pub const HANDED_BACK: &str = "handed_back";

pub(crate) struct Reply {
    pub response: ChatResponse,
    pub processing_ms: i64,
}

impl Executor {
    pub(crate) async fn call(
        &self,
        job: &JobRow,
        model: &ModelRow,
        provider: &Provider,
        request: &ChatRequest,
        timeout: Option<Duration>,
    ) -> Result<Reply, AttemptError> {
        // No call the wallet cannot pay for: hold the most it can cost first.
        let hold = match &self.billing {
            Some(billing) => Some(
                billing
                    .hold(job, billing::estimate(request, model))
                    .instrument(info_span!("hold"))
                    .await?,
            ),
            None => None,
        };
        let started = Instant::now();
        let outcome = tokio::select! {
            outcome = model_call::chat(provider, model, request) => outcome,
            _ = self.hand_back.cancelled() => return Err(self.hand_back(job, hold.as_ref()).await),
            // The step's (or its role's) `timeout_seconds`: the call is
            // dropped unanswered, so nothing is charged, and the job retries.
            _ = sleep_or_never(timeout) => {
                let after = timeout.unwrap_or_default().as_secs();
                let error = LlmError::Transient(format!("no reply within the step's timeout of {after} s"));
                return Err(self.call_failed(job, hold.as_ref(), error).await);
            }
        };
        let response = match outcome {
            Ok(response) => response,
            Err(e) => return Err(self.call_failed(job, hold.as_ref(), e).await),
        };
        let processing_ms = started.elapsed().as_millis() as i64;
        let actual = cost(
            response.input_tokens,
            response.output_tokens,
            model.input_token_cost_rate,
            model.output_token_cost_rate,
        );
        metrics::MODEL_COST.add(&[&model.api_identifier], actual as f64);
        if let (Some(billing), Some(hold)) = (&self.billing, hold) {
            // Spawned, so that an attempt abandoned from here on (its lease
            // lost, shutdown) still pays for the call that happened.
            let charging = tokio::spawn(charge(
                self.store.clone(),
                billing.clone(),
                job.clone(),
                Charge {
                    hold,
                    actual,
                    usage: billing::usage(model, &response),
                },
            ));
            charging
                .instrument(info_span!("charge"))
                .await
                .map_err(|e| retryable("charge", format!("charging the call stopped: {e}")))??;
        }
        Ok(Reply {
            response,
            processing_ms,
        })
    }

    /// Shutdown outlasted the call: drop it (no reply, so no charge) and let
    /// the planner retry the job on another executor.
    async fn hand_back(&self, job: &JobRow, hold: Option<&Hold>) -> AttemptError {
        tracing::warn!("shutdown grace over; handing the model call back");
        if let (Some(billing), Some(hold)) = (&self.billing, hold) {
            billing.release(job, hold, "handed back at shutdown").await;
        }
        retryable(
            HANDED_BACK,
            "the executor shut down before the model replied",
        )
    }

    async fn call_failed(
        &self,
        job: &JobRow,
        hold: Option<&Hold>,
        error: LlmError,
    ) -> AttemptError {
        if let (Some(billing), Some(hold)) = (&self.billing, hold) {
            billing.release(job, hold, "the model call failed").await;
        }
        match error {
            LlmError::Transient(m) => retryable("model_transient", m),
            other => permanent("model_failed", other),
        }
    }
}

/// Sleeps for `timeout`, or forever when there is none.
async fn sleep_or_never(timeout: Option<Duration>) {
    match timeout {
        Some(timeout) => tokio::time::sleep(timeout).await,
        None => std::future::pending().await,
    }
}

/// What a call that happened is charged: its cost in wallet units and what
/// it used and cost in money.
struct Charge {
    hold: Hold,
    actual: i64,
    usage: ledger::CallUsage,
}

/// The call happened: write down what it cost, then capture. Once the
/// usage row is written the charge is durable: the capture runs in the
/// background, off the job's critical path, and when it cannot reach the
/// wallet (or this process dies first) the wallet's sweep captures the
/// recorded cost once the attempt is over, under the same idempotency key.
/// So the reply is kept and the call is charged exactly once. While the
/// usage cannot be written (Postgres restarting) the capture is awaited
/// instead, and both are retried for a while.
async fn charge(
    store: Store,
    billing: Arc<Billing>,
    job: JobRow,
    charge: Charge,
) -> Result<(), AttemptError> {
    let Charge {
        hold,
        actual,
        usage,
    } = charge;
    let give_up = Instant::now() + CHARGE_PATIENCE;
    let mut delay = Duration::from_millis(200);
    loop {
        if record_usage(&store, &hold, billing::charged(&hold, actual), &usage).await {
            tokio::spawn(async move {
                if let Err(e) = billing.capture(&job, &hold, actual, &usage).await {
                    tracing::warn!(job_id = %job.id, error = %e,
                        "capture failed; the wallet's sweep captures the recorded usage");
                }
            });
            return Ok(());
        }
        match billing.capture(&job, &hold, actual, &usage).await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= give_up => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "neither the usage nor the capture was written; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
}

async fn record_usage(store: &Store, hold: &Hold, amount: i64, usage: &ledger::CallUsage) -> bool {
    let Ok(hold_id) = TransactionId::parse(&hold.hold_id) else {
        tracing::warn!(hold_id = %hold.hold_id, "the wallet's hold id is not a UUID");
        return false;
    };
    match ledger::record_call_usage(store.pool(), hold_id, amount, Some(usage)).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "could not record the call's usage");
            false
        }
    }
}
