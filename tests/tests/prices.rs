//! Prices in money (issue 56, "Prices"): a model's registry row prices its
//! input, output and cached input tokens; each captured call records what it
//! cost in money at the prices its call found; a session's `spent` is exactly
//! the sum of its captures; changing the price later rewrites nothing; an
//! unpriced model shows no money. The simulated provider reports the step's
//! system instruction as read from its prompt cache and its inputs as written
//! to it, so the cached and cache-write prices are exercised (issue 56,
//! "Prompt caching").

use dialectic_core::price::Prices;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{
    ListModelsRequest, ListWalletTransactionsRequest, Money, Session, WalletTransaction,
};
use dialectic_store::models::{self, ModelSpec, ProviderKind};
use uuid::Uuid;

const PRICED: &str = "priced-sim";
const UNPRICED: &str = "unpriced-sim";
const PROMPT: &str = "A repair café that lends tools by the hour.";

/// $1.25, $10 and $0.125 per million input, output and cached input tokens.
const INPUT_NANOS_PER_MTOK: i128 = 1_250_000_000;
const OUTPUT_NANOS_PER_MTOK: i128 = 10_000_000_000;
const CACHED_NANOS_PER_MTOK: i128 = 125_000_000;
/// Cache writes at 1.25× input, as Anthropic bills its 5-minute cache
/// (https://platform.claude.com/docs/en/build-with-claude/prompt-caching).
const fn cache_write_rate(input: i128) -> i128 {
    input * 5 / 4
}

fn spec(name: &str, prices: Option<Prices>) -> ModelSpec {
    ModelSpec {
        name: name.into(),
        display_name: None,
        provider: ProviderKind::Simulated,
        base_url: None,
        key_env: None,
        context_window: 128_000,
        max_output: 8192,
        structured_output: None,
        max_concurrency: None,
        requests_per_minute: None,
        tokens_per_minute: None,
        fallback: None,
        input_cost: None,
        output_cost: None,
        tokenizer: "estimate".into(),
        token_limit_param: None,
        reasoning: false,
        reasoning_effort: None,
        prices,
    }
}

fn usd(input: i128, output: i128, cached: i128) -> Option<Prices> {
    let nanos = |n: i128| i64::try_from(n).expect("fits");
    Some(Prices {
        currency: "USD".into(),
        input_per_mtok: nanos(input),
        output_per_mtok: nanos(output),
        cached_input_per_mtok: Some(nanos(cached)),
        cache_write_per_mtok: Some(nanos(cache_write_rate(input))),
    })
}

/// A captured call as the ledger recorded it.
#[derive(Debug, sqlx::FromRow)]
struct Capture {
    id: Uuid,
    amount: i64,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cached_input_tokens: Option<i64>,
    cache_write_input_tokens: Option<i64>,
    money_currency: Option<String>,
    money_nanos: Option<i64>,
}

async fn captures(env: &TestEnv, session: &str) -> Vec<Capture> {
    sqlx::query_as(
        "SELECT id, amount, input_tokens, output_tokens, cached_input_tokens,
                cache_write_input_tokens, money_currency, money_nanos
           FROM token_wallet_transactions WHERE session_id = $1 AND kind = 'capture' ORDER BY id",
    )
    .bind(Uuid::parse_str(session).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("captures")
}

/// What a call costs at the test's prices, computed here rather than by the
/// code under test: uncached input, cached input, cache writes and output at
/// their prices, the exact sum divided by a million once and rounded half up.
fn expected_nanos(c: &Capture) -> i128 {
    let input = i128::from(c.input_tokens.expect("input tokens recorded"));
    let output = i128::from(c.output_tokens.expect("output tokens recorded"));
    let cached = i128::from(c.cached_input_tokens.expect("cached tokens recorded"));
    let written = i128::from(c.cache_write_input_tokens.expect("cache writes recorded"));
    let exact = (input - cached - written) * INPUT_NANOS_PER_MTOK
        + cached * CACHED_NANOS_PER_MTOK
        + written * cache_write_rate(INPUT_NANOS_PER_MTOK)
        + output * OUTPUT_NANOS_PER_MTOK;
    (exact + 500_000) / 1_000_000
}

fn money(nanos: i128) -> Money {
    Money {
        currency_code: "USD".into(),
        units: i64::try_from(nanos / 1_000_000_000).expect("units"),
        nanos: i32::try_from(nanos % 1_000_000_000).expect("nanos"),
    }
}

/// Every transaction of the owner's wallet, through the public API.
async fn transactions(env: &TestEnv) -> Vec<WalletTransaction> {
    let mut client = env.gateway().await;
    let mut all = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_wallet_transactions(ListWalletTransactionsRequest {
                page_size: 100,
                page_token,
            })
            .await
            .expect("transactions")
            .into_inner();
        all.extend(page.transactions);
        if page.next_page_token.is_empty() {
            return all;
        }
        page_token = page.next_page_token;
    }
}

async fn run_first_stage(env: &TestEnv, model: &str) -> Session {
    let (_, session) = env.new_session(PROMPT, &[model], false).await;
    env.wait_for_session(&session, "pending_antithesis", true)
        .await;
    env.session(&session).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_s_money_is_the_exact_sum_of_its_priced_calls_and_never_rewritten() {
    let mut env = TestEnv::new().await;
    let cheap = usd(
        INPUT_NANOS_PER_MTOK,
        OUTPUT_NANOS_PER_MTOK,
        CACHED_NANOS_PER_MTOK,
    );
    models::register(env.store.pool(), &spec(PRICED, cheap.clone()))
        .await
        .expect("priced model");
    models::register(env.store.pool(), &spec(UNPRICED, None))
        .await
        .expect("unpriced model");
    env.start_all().await;

    // ListModels shows the prices, exactly.
    let listed = env
        .gateway()
        .await
        .list_models(ListModelsRequest::default())
        .await
        .expect("models")
        .into_inner()
        .models;
    let priced = listed
        .iter()
        .find(|m| m.api_identifier == PRICED)
        .expect("listed");
    let prices = priced.prices.as_ref().expect("priced model has prices");
    assert_eq!(prices.input_per_mtok, Some(money(INPUT_NANOS_PER_MTOK)));
    assert_eq!(prices.output_per_mtok, Some(money(OUTPUT_NANOS_PER_MTOK)));
    assert_eq!(
        prices.cached_input_per_mtok,
        Some(money(CACHED_NANOS_PER_MTOK))
    );
    assert_eq!(
        prices.cache_write_per_mtok,
        Some(money(cache_write_rate(INPUT_NANOS_PER_MTOK)))
    );
    let unpriced = listed.iter().find(|m| m.api_identifier == UNPRICED);
    assert_eq!(unpriced.expect("listed").prices, None);

    let session = run_first_stage(&env, PRICED).await;
    let calls = captures(&env, &session.id).await;
    assert!(!calls.is_empty(), "the stage made model calls");
    let mut total = 0;
    for call in &calls {
        // The recorded counts are what the wallet charged for (rates of 1
        // token unit per token), and the cached price was in play.
        let (input, output) = (call.input_tokens, call.output_tokens);
        assert_eq!(
            Some(call.amount),
            input.zip(output).map(|(i, o)| i + o),
            "{call:?}"
        );
        assert!(call.cached_input_tokens.unwrap_or(0) > 0, "{call:?}");
        assert!(call.cached_input_tokens < call.input_tokens, "{call:?}");
        // The step's inputs were written to the cache, and billed at the
        // cache-write rate.
        assert!(call.cache_write_input_tokens.unwrap_or(0) > 0, "{call:?}");
        let reads_and_writes = call.cached_input_tokens.zip(call.cache_write_input_tokens);
        assert!(
            reads_and_writes.map(|(r, w)| r + w) < call.input_tokens,
            "{call:?}"
        );
        let nanos = expected_nanos(call);
        assert_eq!(call.money_currency.as_deref(), Some("USD"), "{call:?}");
        assert_eq!(call.money_nanos.map(i128::from), Some(nanos), "{call:?}");
        total += nanos;
    }
    assert_eq!(session.spent, Some(money(total)));
    assert_eq!(session.cost, calls.iter().map(|c| c.amount).sum::<i64>());

    // The transactions list carries each capture's money and counts.
    let listed = transactions(&env).await;
    for call in &calls {
        let t = listed
            .iter()
            .find(|t| t.id == call.id.to_string())
            .unwrap_or_else(|| panic!("capture {} listed", call.id));
        assert_eq!(t.money, Some(money(expected_nanos(call))), "{t:?}");
        assert_eq!(Some(t.input_tokens as i64), call.input_tokens);
        assert_eq!(Some(t.output_tokens as i64), call.output_tokens);
        assert_eq!(Some(t.cached_input_tokens as i64), call.cached_input_tokens);
        assert_eq!(
            Some(t.cache_write_input_tokens as i64),
            call.cache_write_input_tokens
        );
    }
    let credits: Vec<_> = listed.iter().filter(|t| t.kind == "credit").collect();
    assert!(credits.iter().all(|t| t.money.is_none()), "{credits:?}");

    // A new price applies to new calls only: what was recorded stays.
    let dearer = usd(
        INPUT_NANOS_PER_MTOK * 2,
        OUTPUT_NANOS_PER_MTOK * 2,
        CACHED_NANOS_PER_MTOK * 2,
    );
    models::register(env.store.pool(), &spec(PRICED, dearer))
        .await
        .expect("price change");
    assert_eq!(env.session(&session.id).await.spent, Some(money(total)));
    let after: Vec<Option<i64>> = captures(&env, &session.id)
        .await
        .iter()
        .map(|c| c.money_nanos)
        .collect();
    assert_eq!(
        after,
        calls.iter().map(|c| c.money_nanos).collect::<Vec<_>>()
    );

    // An unpriced model: tokens are counted, no money is shown.
    let free = run_first_stage(&env, UNPRICED).await;
    let free_calls = captures(&env, &free.id).await;
    assert!(!free_calls.is_empty() && free.cost > 0);
    assert!(
        free_calls
            .iter()
            .all(|c| c.money_nanos.is_none() && c.input_tokens.is_some()),
        "{free_calls:?}"
    );
    assert_eq!(free.spent, None);
    let listed = transactions(&env).await;
    for call in &free_calls {
        let t = listed.iter().find(|t| t.id == call.id.to_string());
        assert_eq!(t.expect("listed").money, None);
    }
    env.teardown().await;
}
