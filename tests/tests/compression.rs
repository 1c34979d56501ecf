//! Context-window management (seed 001 Phase 3) against the real indexer,
//! wallet, Postgres and Redis: the seed's two test cases (rationality check
//! failure; affordable compression), free re-runs, `ContextWindowError`, and a
//! session whose small-window model must compress in antithesis and synthesis.

use dialectic_core::context::{Context, input_limit};
use dialectic_core::prompt::{Message, PromptConstructionPayload, ResourceDocument};
use dialectic_e2e::{ALL_SERVICES, TestEnv, eventually};
use dialectic_executor::billing::Billing;
use dialectic_executor::compress::{
    self, COMPRESSION_IRRATIONAL, CONTEXT_WINDOW_ERROR, Compressed, ContextIndexer, ContextWallet,
    GrpcIndexer, Limits, Payer, Services, Step,
};
use dialectic_proto::v1::wallet::ListTransactionsRequest;
use dialectic_proto::v1::wallet::wallet_service_client::WalletServiceClient;
use dialectic_runtime::worker::AttemptError;
use dialectic_tokenizer::{Encoding, TokenCounter};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use uuid::Uuid;

const LOCAL_USER: &str = "00000000-0000-0000-0000-000000000001";
const LOCAL_WALLET: &str = "60000000-0000-0000-0000-000000000001";
const SEED_BALANCE: i64 = 100_000_000;

/// The real indexer client, counting calls.
struct CountingIndexer {
    inner: GrpcIndexer,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl ContextIndexer for CountingIndexer {
    async fn compress(
        &self,
        text: &str,
        query: &str,
        budget: u64,
        embedder: &str,
        tokenizer: &str,
    ) -> Result<Compressed, AttemptError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner
            .compress(text, query, budget, embedder, tokenizer)
            .await
    }
}

/// The real wallet client, counting balance reads and debits.
struct CountingWallet {
    inner: Billing,
    balances: AtomicUsize,
    debits: AtomicUsize,
}

#[async_trait::async_trait]
impl ContextWallet for CountingWallet {
    async fn balance(&self, payer: &Payer) -> Result<i64, AttemptError> {
        self.balances.fetch_add(1, Ordering::SeqCst);
        self.inner.balance(payer).await
    }
    async fn debit(&self, payer: &Payer, key: &str, amount: i64) -> Result<(), AttemptError> {
        self.debits.fetch_add(1, Ordering::SeqCst);
        self.inner.debit(payer, key, amount).await
    }
}

fn paragraph(topic: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("The {topic} note number {i} explains how {topic} affects pricing, staffing and the rollout plan in detail.\n\n"))
        .collect()
}

fn doc(id: &str, relevance: f64, content: String) -> ResourceDocument {
    ResourceDocument {
        id: id.into(),
        kind: "document".into(),
        stage_slug: "thesis".into(),
        document_key: id.into(),
        model: None,
        content,
        section_header: None,
        relevance,
        storage_key: None,
    }
}

/// A prompt of four resource documents, about 700 tokens each; `salt` makes
/// the texts unique to one test so the shared index starts empty for them.
fn oversized(salt: &str) -> Context {
    Context {
        original: PromptConstructionPayload {
            system_instruction: Some("You are a careful analyst.".into()),
            conversation_history: Vec::new(),
            resource_documents: vec![
                doc(
                    "pricing",
                    0.9,
                    format!("{salt}\n{}", paragraph("pricing", 30)),
                ),
                doc(
                    "gardening",
                    0.2,
                    format!("{salt}\n{}", paragraph("gardening", 30)),
                ),
                doc(
                    "staffing",
                    0.6,
                    format!("{salt}\n{}", paragraph("staffing", 30)),
                ),
                doc(
                    "weather",
                    0.1,
                    format!("{salt}\n{}", paragraph("weather", 30)),
                ),
            ],
            current_user_prompt: "Write the pricing and staffing plan.".into(),
        },
        chunks: Vec::new(),
        continue_instruction: "continue".into(),
    }
}

fn limits(window: u64, rate: f64) -> Limits {
    Limits {
        model: "test-model".into(),
        max_tokens: 200,
        temperature: None,
        output_type: "business_case".into(),
        hints: Vec::new(),
        encoding: Encoding::Cl100k,
        context_window: window,
        input_rate: rate,
        embedder: "local".into(),
    }
}

struct Rig {
    env: TestEnv,
    indexer: CountingIndexer,
    wallet: CountingWallet,
    counter: TokenCounter,
}

async fn rig() -> Rig {
    let mut env = TestEnv::new().await;
    env.start(&["wallet", "indexer"]).await;
    env.wait_serving("wallet").await;
    env.wait_serving("indexer").await;
    let indexer = CountingIndexer {
        inner: GrpcIndexer::new(env.internal_channel(
            &env.settings.executor.indexer_url,
            dialectic_core::service_auth::ServiceName::Executor,
        )),
        calls: AtomicUsize::new(0),
    };
    let wallet = CountingWallet {
        inner: Billing::new(env.internal_channel(
            &env.settings.executor.wallet_url,
            dialectic_core::service_auth::ServiceName::Executor,
        )),
        balances: AtomicUsize::new(0),
        debits: AtomicUsize::new(0),
    };
    let cache = Arc::new(OnceLock::new());
    if let Ok(c) = dialectic_cache::Cache::connect(&env.settings.redis.url, 60).await {
        let _ = cache.set(c);
    }
    Rig {
        env,
        indexer,
        wallet,
        counter: TokenCounter::new(cache),
    }
}

fn payer(job: Uuid, attempt: i32) -> Payer {
    Payer {
        user_id: dialectic_core::ids::UserId::parse(LOCAL_USER).expect("uuid"),
        session_id: dialectic_core::ids::SessionId::new(),
        job_id: dialectic_core::ids::JobId(job),
        attempt,
    }
}

async fn run(
    rig: &Rig,
    context: Context,
    limits: &Limits,
    payer: &Payer,
) -> Result<(Vec<Step>, u64), AttemptError> {
    let services = Services {
        counter: &rig.counter,
        indexer: Some(&rig.indexer),
        wallet: Some(&rig.wallet),
    };
    let mut seen = Vec::new();
    let fitted = compress::fit(context, limits, payer, &services, &mut |s: &Step| {
        seen.push(s.clone())
    })
    .await?;
    assert_eq!(seen, fitted.steps, "every step was reported as it happened");
    let tokens = rig
        .counter
        .count_request(limits.encoding, &fitted.request)
        .await
        .expect("count");
    assert_eq!(tokens, fitted.final_tokens);
    Ok((fitted.steps, tokens))
}

/// Wallet entries about indexing: (kind, amount, idempotency key).
async fn indexing_entries(rig: &Rig) -> Vec<(String, i64, String)> {
    let mut client = WalletServiceClient::new(rig.env.internal_channel(
        &rig.env.settings.executor.wallet_url,
        dialectic_core::service_auth::ServiceName::Gateway,
    ));
    let entries = client
        .list_transactions(ListTransactionsRequest {
            wallet_id: LOCAL_WALLET.into(),
            page_size: 500,
            page_token: String::new(),
        })
        .await
        .expect("history")
        .into_inner()
        .entries;
    entries
        .into_iter()
        .filter(|e| e.purpose == "indexing" || e.idempotency_key.starts_with("index-"))
        .map(|e| (e.kind, e.amount, e.idempotency_key))
        .collect()
}

async fn indexed_documents(env: &TestEnv) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM index_documents")
        .fetch_one(env.store.pool())
        .await
        .expect("count")
}

/// Seed 001 3.b.ii.1 test case 1: affordable, but more than 20% of the balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rationality_check_failure_is_a_clear_error_and_calls_no_indexer() {
    let rig = rig().await;
    let context = oversized("rationality");
    // About 2,900 tokens against a 1,000-token limit: the estimate is the whole
    // prompt's tokens × rate. At this rate it is within the balance, but over 20%.
    let l = limits(1200, 20_000.0);
    let err = run(&rig, context, &l, &payer(Uuid::now_v7(), 1))
        .await
        .expect_err("irrational compression is refused");
    match err {
        AttemptError::Permanent { code, message } => {
            assert_eq!(code, COMPRESSION_IRRATIONAL);
            assert!(
                message.contains("more than 20% of the balance"),
                "{message}"
            );
            let estimated: i64 = message
                .split_whitespace()
                .find_map(|w| w.parse().ok())
                .expect("the estimate is in the message");
            assert!(
                estimated < SEED_BALANCE && estimated * 5 > SEED_BALANCE,
                "{message}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(rig.wallet.balances.load(Ordering::SeqCst), 1);
    assert_eq!(
        rig.indexer.calls.load(Ordering::SeqCst),
        0,
        "the indexer was never called"
    );
    assert_eq!(rig.wallet.debits.load(Ordering::SeqCst), 0);
    assert_eq!(indexed_documents(&rig.env).await, 0, "nothing was indexed");
    assert!(indexing_entries(&rig).await.is_empty());
    rig.env.teardown().await;
}

/// Seed 001 3.b.ii.1 test case 2, then the same job retried: the balance is
/// read once, the indexer and the wallet are called once per step, the
/// lowest-value candidate goes first, the result fits; the retry spends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn affordable_compression_pays_per_step_and_a_retry_is_free() {
    let rig = rig().await;
    let l = limits(1200, 1.0);
    let limit = input_limit(l.context_window, u64::from(l.max_tokens));
    let job = Uuid::now_v7();
    let (steps, tokens) = run(&rig, oversized("affordable"), &l, &payer(job, 1))
        .await
        .expect("compressed");
    assert!(tokens <= limit, "{tokens} > {limit}");
    assert!(steps.len() >= 2, "several steps: {steps:?}");
    assert_eq!(
        rig.wallet.balances.load(Ordering::SeqCst),
        1,
        "balance read once"
    );
    assert_eq!(rig.indexer.calls.load(Ordering::SeqCst), steps.len());
    assert_eq!(rig.wallet.debits.load(Ordering::SeqCst), steps.len());
    // Weather (relevance 0.1, off-topic) first, then gardening.
    assert_eq!(steps[0].id, "weather");
    assert_eq!(steps[1].id, "gardening");
    assert!(steps.windows(2).all(|w| w[0].value <= w[1].value));
    for s in &steps {
        assert!(s.tokens_after < s.tokens_before, "{s:?}");
        assert!(s.embedding_tokens > 0 && s.cost > 0, "{s:?}");
    }
    let charged: i64 = steps.iter().map(|s| s.cost).sum();
    let first = indexing_entries(&rig).await;
    let captured: i64 = first.iter().filter(|e| e.0 == "capture").map(|e| e.1).sum();
    assert_eq!(
        captured, charged,
        "the wallet charged exactly the indexing tokens: {first:?}"
    );
    assert_eq!(
        first.iter().filter(|e| e.0 == "capture").count(),
        steps.len()
    );

    // The same job, next attempt: same victims, same texts, all indexed already.
    let (again, tokens_again) = run(&rig, oversized("affordable"), &l, &payer(job, 2))
        .await
        .expect("compressed again");
    assert_eq!(tokens_again, tokens);
    assert_eq!(again.len(), steps.len());
    assert!(
        again.iter().all(|s| s.embedding_tokens == 0 && s.cost == 0),
        "{again:?}"
    );
    assert_eq!(
        rig.wallet.debits.load(Ordering::SeqCst),
        steps.len(),
        "no new debit"
    );
    assert_eq!(
        indexing_entries(&rig).await,
        first,
        "the wallet history is unchanged"
    );
    rig.env.teardown().await;
}

/// Nothing left to compress and still too big: `context_window`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prompt_that_cannot_fit_fails_with_context_window_error() {
    let rig = rig().await;
    let mut context = oversized("hopeless");
    // The prompt itself is immutable and alone larger than the window.
    context.original.current_user_prompt = paragraph("instructions", 80);
    let err = run(&rig, context, &limits(1200, 1.0), &payer(Uuid::now_v7(), 1))
        .await
        .expect_err("cannot fit");
    match err {
        AttemptError::Permanent { code, message } => {
            assert_eq!(code, CONTEXT_WINDOW_ERROR);
            assert!(
                message.contains("after compressing every candidate"),
                "{message}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        rig.indexer.calls.load(Ordering::SeqCst),
        4,
        "every candidate was tried"
    );
    rig.env.teardown().await;
}

/// History turns: the first and last two assistant turns are never compressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn continuation_history_compresses_only_middle_turns() {
    let rig = rig().await;
    let mut context = oversized("history");
    context.original.resource_documents.truncate(0);
    context.chunks = (0..6)
        .map(|i| Message::assistant(paragraph(&format!("turn{i}"), 12), Some(format!("c{i}"))))
        .collect();
    let (steps, tokens) = run(&rig, context, &limits(1500, 1.0), &payer(Uuid::now_v7(), 1))
        .await
        .expect("fits");
    assert!(tokens <= 1300);
    let ids: Vec<&str> = steps.iter().map(|s| s.id.as_str()).collect();
    assert!(!ids.is_empty());
    assert!(
        ids.iter().all(|id| ["c1", "c2", "c3"].contains(id)),
        "{ids:?}"
    );
    assert_eq!(ids[0], "c1", "the oldest middle turn goes first");
    rig.env.teardown().await;
}

/// Indexing the same text twice through the service: the second call is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn indexing_is_idempotent_by_content_hash() {
    use dialectic_proto::v1::indexer::indexer_service_client::IndexerServiceClient;
    use dialectic_proto::v1::indexer::{CountTokensRequest, IndexRequest};
    let rig = rig().await;
    let mut client = IndexerServiceClient::new(rig.env.internal_channel(
        &rig.env.settings.executor.indexer_url,
        dialectic_core::service_auth::ServiceName::Executor,
    ));
    let text = paragraph("idempotency", 50);
    let first = client
        .index(IndexRequest {
            text: text.clone(),
            embedder: "local".into(),
            tokenizer: "cl100k_base".into(),
        })
        .await
        .expect("index")
        .into_inner();
    assert!(!first.already_indexed && first.tokens_spent > 0 && first.chunks > 1);
    let counted = client
        .count_tokens(CountTokensRequest {
            tokenizer: "cl100k_base".into(),
            texts: vec![text.clone()],
        })
        .await
        .expect("count")
        .into_inner();
    // Chunks are cut at boundaries, so their counts add up to about the whole.
    assert!(
        first.tokens_spent.abs_diff(counted.total) <= u64::from(first.chunks),
        "{} vs {}",
        first.tokens_spent,
        counted.total
    );
    let second = client
        .index(IndexRequest {
            text,
            embedder: "local".into(),
            tokenizer: "cl100k_base".into(),
        })
        .await
        .expect("index again")
        .into_inner();
    assert!(second.already_indexed);
    assert_eq!(second.tokens_spent, 0);
    assert_eq!(second.content_hash, first.content_hash);
    assert_eq!(indexed_documents(&rig.env).await, 1);
    let bad = client
        .index(IndexRequest {
            text: "x".into(),
            embedder: "openai".into(),
            tokenizer: String::new(),
        })
        .await
        .expect_err("no endpoint configured");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    rig.env.teardown().await;
}

async fn add_model(env: &TestEnv, name: &str, window: i32, max_output: i32) {
    sqlx::query(
        "INSERT INTO ai_providers (api_identifier, name, provider, context_window_tokens, max_output_tokens,
                                   input_token_cost_rate, output_token_cost_rate, tokenizer)
         VALUES ($1, $1, 'simulated', $2, $3, 1, 1, 'cl100k_base')",
    )
    .bind(name)
    .bind(window)
    .bind(max_output)
    .execute(env.store.pool())
    .await
    .expect("model row");
}

async fn start_recording(env: &mut TestEnv) {
    env.settings.executor.simulated_record_requests = true;
    env.start(&ALL_SERVICES).await;
    for name in ALL_SERVICES {
        env.wait_serving(name).await;
    }
}

const SESSION_PROMPT: &str = "A neighbourhood tool library: members borrow drills, ladders and \
    sewing machines for a small yearly fee; volunteers run two pick-up points; we need a plan \
    for pricing, insurance, stock, volunteers and a booking app.";

/// Window of the small model: thesis fits; antithesis and synthesis, which
/// read earlier stages' documents, must compress.
const SMALL_WINDOW: i32 = 2600;
const SMALL_MAX_OUTPUT: i32 = 1200;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_small_window_session_compresses_and_every_request_fits() {
    let mut env = TestEnv::new().await;
    add_model(&env, "simulated-small", SMALL_WINDOW, SMALL_MAX_OUTPUT).await;
    start_recording(&mut env).await;
    let (_, session_id) = env
        .new_session(SESSION_PROMPT, &["simulated-small"], true)
        .await;
    let mut events = env
        .gateway()
        .await
        .watch_session(dialectic_proto::v1::WatchSessionRequest {
            session_id: session_id.clone(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    let watcher = tokio::spawn(async move {
        use futures::StreamExt;
        let mut steps = Vec::new();
        // The stream ends by itself once the session waits for review.
        while let Some(Ok(event)) = events.next().await {
            if event.kind == "context_compressed" {
                steps.push((event.stage_slug, event.message));
            }
        }
        steps
    });
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let progress = tokio::time::timeout(std::time::Duration::from_secs(10), watcher)
        .await
        .expect("the watch ends at review")
        .expect("watcher");
    for stage in ["antithesis", "synthesis"] {
        assert!(
            progress
                .iter()
                .any(|(s, m)| s == stage && m.contains(" -> ") && m.contains("cost")),
            "{stage} compression steps were visible: {progress:?}"
        );
    }
    let session = Uuid::parse_str(&session_id).expect("uuid");
    let compressed: Vec<(String, serde_json::Value)> = sqlx::query_as(
        "SELECT stage_slug, compressed_inputs FROM dialectic_contributions
         WHERE session_id = $1 AND compressed_inputs <> '[]'::jsonb",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("contributions");
    for stage in ["antithesis", "synthesis"] {
        assert!(
            compressed.iter().any(|(s, _)| s == stage),
            "{stage} compressed its inputs: {:?}",
            compressed.iter().map(|c| &c.0).collect::<Vec<_>>()
        );
    }
    for (_, steps) in &compressed {
        for step in steps.as_array().expect("steps") {
            assert!(
                step["tokens_after"].as_u64() < step["tokens_before"].as_u64(),
                "{step}"
            );
        }
    }
    // The executor's /metrics counts the steps (the registry is per process,
    // and the services run in this one).
    let counted: f64 = ["history", "resource"]
        .iter()
        .map(|kind| dialectic_telemetry::metrics::COMPRESSION_STEPS.get(&[kind]))
        .sum();
    assert!(
        counted >= compressed.len() as f64,
        "compression steps counted: {counted}"
    );
    // Every request the model received fits its window, counted with its tokenizer.
    let counter = TokenCounter::default();
    let limit = input_limit(SMALL_WINDOW as u64, SMALL_MAX_OUTPUT as u64);
    let requests: Vec<_> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.model == "simulated-small")
        .collect();
    assert!(!requests.is_empty());
    let mut largest = 0;
    for r in &requests {
        let tokens = counter
            .count_request(Encoding::Cl100k, r)
            .await
            .expect("count");
        largest = largest.max(tokens);
        assert!(
            tokens <= limit,
            "a request of {tokens} tokens went to a window of {limit}"
        );
    }
    eprintln!(
        "{} requests, largest {largest} tokens, limit {limit}",
        requests.len()
    );
    // Indexing was paid for from the wallet.
    let paid: i64 = sqlx::query_scalar(
        "SELECT COALESCE(SUM(amount), 0)::bigint FROM token_wallet_transactions
         WHERE kind = 'capture' AND session_id = $1 AND idempotency_key LIKE 'index-capture:%'",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("paid");
    assert!(paid > 0, "indexing was charged");
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_whose_prompt_cannot_fit_fails_with_context_window_and_calls_no_model() {
    let mut env = TestEnv::new().await;
    // Room for 40 input tokens: less than the stage's own instructions.
    add_model(&env, "simulated-tiny", 60, 20).await;
    start_recording(&mut env).await;
    let (_, session_id) = env
        .new_session(SESSION_PROMPT, &["simulated-tiny"], false)
        .await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    let error: serde_json::Value = eventually(60, "the job fails", || {
        let pool = env.store.pool().clone();
        async move {
            sqlx::query_scalar(
                "SELECT error_details FROM dialectic_generation_jobs
                 WHERE session_id = $1 AND status IN ('failed', 'retry_loop_failed')",
            )
            .bind(session)
            .fetch_optional(&pool)
            .await
            .ok()
            .flatten()
        }
    })
    .await;
    assert_eq!(error["code"], CONTEXT_WINDOW_ERROR, "{error}");
    assert!(
        dialectic_llm::recorded_requests()
            .iter()
            .all(|r| r.model != "simulated-tiny"),
        "no model call"
    );
    env.teardown().await;
}

/// The same job retried: every attempt compresses the same seed prompt, only
/// the first pays for indexing; the wallet history shows no charge for the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retried_job_compresses_again_without_new_embedding_tokens() {
    let mut env = TestEnv::new().await;
    add_model(&env, "simulated-retry", 1500, 300).await;
    // Every model call fails (transiently), so the planning job is attempted
    // up to planner.max_attempts times, compressing its prompt each time.
    env.settings.executor.simulated_failure_rate = 1.0;
    start_recording(&mut env).await;
    let prompt = format!("{SESSION_PROMPT}\n\n{}", paragraph("background", 120));
    let (_, session_id) = env.new_session(&prompt, &["simulated-retry"], false).await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    let (job, attempts, error): (Uuid, i32, serde_json::Value) =
        eventually(90, "the job runs out of attempts", || {
            let pool = env.store.pool().clone();
            async move {
                sqlx::query_as(
                    "SELECT id, attempt_count, error_details FROM dialectic_generation_jobs
                     WHERE session_id = $1 AND status = 'retry_loop_failed'",
                )
                .bind(session)
                .fetch_optional(&pool)
                .await
                .ok()
                .flatten()
            }
        })
        .await;
    assert_eq!(error["code"], "model_transient", "{error}");
    assert!(attempts >= 2, "retried: {attempts}");
    // Every attempt sent a request that fits the window.
    let counter = TokenCounter::default();
    let sent: Vec<_> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.model == "simulated-retry")
        .collect();
    assert_eq!(sent.len(), attempts as usize, "one model call per attempt");
    for r in &sent {
        let tokens = counter
            .count_request(Encoding::Cl100k, r)
            .await
            .expect("count");
        assert!(tokens <= 1200, "{tokens}");
    }
    // Indexing charges by attempt, from the wallet history.
    let charges: Vec<(String, i64)> = sqlx::query_as(
        "SELECT idempotency_key, amount FROM token_wallet_transactions
         WHERE kind = 'capture' AND job_id = $1 AND idempotency_key LIKE 'index-capture:%'
         ORDER BY created_at",
    )
    .bind(job)
    .fetch_all(env.store.pool())
    .await
    .expect("history");
    assert!(!charges.is_empty(), "the first attempt paid for indexing");
    let first_attempt = format!("index-capture:{job}:1:");
    assert!(
        charges
            .iter()
            .all(|(k, a)| k.starts_with(&first_attempt) && *a > 0),
        "only the first attempt was charged: {charges:?}"
    );
    let provenance: i64 = sqlx::query_scalar(
        "SELECT COALESCE(SUM(embedding_tokens), 0)::bigint FROM index_documents",
    )
    .fetch_one(env.store.pool())
    .await
    .expect("index");
    let paid: i64 = charges.iter().map(|c| c.1).sum();
    assert_eq!(
        paid, provenance,
        "what was charged is what indexing spent, once"
    );
    env.teardown().await;
}

/// Counts of long texts land in Redis under the text's hash; a cached count is
/// what the counter answers (so a poisoned entry shows the cache is consulted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_counts_are_cached_in_redis_by_content_hash() {
    let settings = dialectic_e2e::base_settings();
    let cache = dialectic_cache::Cache::connect(&settings.redis.url, 60)
        .await
        .expect("redis");
    let cell = Arc::new(OnceLock::new());
    let _ = cell.set(cache.clone());
    let counter = TokenCounter::new(cell);
    let text = format!("{} {}", Uuid::now_v7(), paragraph("caching", 20));
    let key = dialectic_tokenizer::cache_key(Encoding::Cl100k, &text);
    assert_eq!(
        cache
            .get_counts(std::slice::from_ref(&key))
            .await
            .expect("get"),
        vec![None]
    );
    let exact = Encoding::Cl100k.count(&text).expect("count");
    assert_eq!(
        counter.count(Encoding::Cl100k, &text).await.expect("count"),
        exact
    );
    assert_eq!(
        cache
            .get_counts(std::slice::from_ref(&key))
            .await
            .expect("get"),
        vec![Some(exact)]
    );
    cache.set_counts(&[(key, 7)], 60).await.expect("set");
    assert_eq!(
        counter.count(Encoding::Cl100k, &text).await.expect("count"),
        7
    );
    // Short texts are counted on the spot, never cached.
    assert_eq!(
        counter
            .count(Encoding::Cl100k, "hello world")
            .await
            .expect("count"),
        2
    );
}

/// Only immutable parts (first and last two turns, no resources): the job
/// fails at once, before the wallet or the indexer is asked anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_compressible_fails_before_any_wallet_or_indexer_call() {
    let rig = rig().await;
    let mut context = oversized("immutable");
    context.original.resource_documents.clear();
    context.chunks = (0..3)
        .map(|i| Message::assistant(paragraph(&format!("turn{i}"), 25), Some(format!("c{i}"))))
        .collect();
    let err = run(&rig, context, &limits(1200, 1.0), &payer(Uuid::now_v7(), 1))
        .await
        .expect_err("cannot fit");
    match err {
        AttemptError::Permanent { code, message } => {
            assert_eq!(code, CONTEXT_WINDOW_ERROR);
            assert!(
                message.contains("none of it may be compressed"),
                "{message}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(rig.wallet.balances.load(Ordering::SeqCst), 0);
    assert_eq!(rig.indexer.calls.load(Ordering::SeqCst), 0);
    rig.env.teardown().await;
}
