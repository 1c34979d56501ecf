//! Pure text formatting and the watch stop rule, kept apart for testing.

use dialectic_core::error::grpc_code_name;
use dialectic_core::session::SessionStatus;
use dialectic_proto::v1::{
    Model, Money, QueryResponse, Session, SessionEvent, SessionRevision, SessionState,
    StageDocument, Wallet,
};
use tonic::Status;
use tonic_types::StatusExt;

const REVIEW: &str = SessionStatus::REVIEW;

fn or_dash(value: &str) -> &str {
    if value.is_empty() { "-" } else { value }
}

/// `[kind] stage status job_type document_key model percent% message`;
/// empty fields print as `-` so the columns stay aligned for `awk`.
pub fn event(e: &SessionEvent) -> String {
    let line = format!(
        "[{}] {} {} {} {} {} {}%",
        e.kind,
        or_dash(&e.stage_slug),
        or_dash(&e.session_status),
        or_dash(&e.job_type),
        or_dash(&e.document_key),
        or_dash(&e.model),
        e.stage_percent
    );
    if e.message.is_empty() {
        line
    } else {
        format!("{line} {}", e.message)
    }
}

/// An amount exactly, every significant decimal: `$0.0123` for dollars,
/// `0.0123 EUR` for any other currency.
pub fn money(m: &Money) -> String {
    let nanos = i128::from(m.units) * 1_000_000_000 + i128::from(m.nanos);
    let amount = dialectic_core::price::decimal(i64::try_from(nanos).unwrap_or(i64::MAX));
    match m.currency_code.as_str() {
        "USD" => format!("${amount}"),
        code => format!("{amount} {code}"),
    }
}

/// ` ($0.0123)` after a token count when the session's calls were priced.
fn spent(s: &Session) -> String {
    s.spent
        .as_ref()
        .map(|m| format!(" ({})", money(m)))
        .unwrap_or_default()
}

pub fn session(s: &Session) -> String {
    let mut out = format!(
        "session {}\nstatus: {}\nstage: {}  iteration: {}\nmodels: {}\ncost: {} tokens{}\n",
        s.id,
        s.status,
        or_dash(&s.current_stage),
        s.iteration,
        s.models.join(", "),
        s.cost,
        spent(s)
    );
    if !s.model_roles.is_empty() {
        let mut roles: Vec<String> = s
            .model_roles
            .iter()
            .map(|(role, model)| format!("{role}={model}"))
            .collect();
        roles.sort();
        out.push_str(&format!("model roles: {}\n", roles.join(", ")));
    }
    // A failed stage's jobs are all over: its percent would read as done.
    let failed = s.state() == SessionState::Failed;
    match &s.position {
        Some(p) if failed => out.push_str(&format!("at: {} (failed)\n", p.summary)),
        Some(p) => out.push_str(&format!("at: {} ({}%)\n", p.summary, p.stage_percent)),
        None => {}
    }
    if !s.notice.is_empty() {
        out.push_str(&format!("notice: {}\n", s.notice));
    }
    if let Some(output) = &s.output {
        out.push_str(&output_record(output));
    }
    for skip in &s.skipped_steps {
        out.push_str(&format!(
            "skipped: {} (iteration {}): {}\n",
            skip.step_key, skip.iteration, skip.reason
        ));
    }
    if s.jobs.is_empty() {
        out.push_str("jobs: none yet\n");
    } else {
        out.push_str("jobs:\n");
        for j in &s.jobs {
            out.push_str(&format!(
                "  {}: plan {}, execute {}, render {} | completed {}, failed {}, in flight {}",
                j.stage_slug, j.plan, j.execute, j.render, j.completed, j.failed, j.in_flight
            ));
            if j.superseded > 0 {
                out.push_str(&format!(", superseded {}", j.superseded));
            }
            out.push('\n');
        }
    }
    out
}

/// Seed 003's output record: `output: final-essay.md (ID), 812 words;
/// sources_verified 2, voice_consistency_score 4.2; completed 2026-…`.
fn output_record(o: &dialectic_proto::v1::SessionOutput) -> String {
    let document = o.document.as_ref().map_or_else(
        || "no document yet".to_string(),
        |d| {
            let name = d.storage_key.rsplit('/').next().unwrap_or_default();
            format!("{name} ({})", d.resource_id)
        },
    );
    let mut line = format!("output: {document}, {} words", o.word_count);
    let mut figures: Vec<(&String, &f64)> = o.figures.iter().collect();
    figures.sort_by(|a, b| a.0.cmp(b.0));
    if !figures.is_empty() {
        let named: Vec<String> = figures.iter().map(|(k, v)| format!("{k} {v}")).collect();
        line.push_str(&format!("; {}", named.join(", ")));
    }
    if let Some(at) = &o.completed_at {
        // prost's Timestamp prints as RFC 3339.
        line.push_str(&format!("; completed {at}"));
    }
    line.push('\n');
    line
}

/// One row per stage: its jobs, its rendered documents and how it ended.
pub fn summary(s: &Session, documents: &[StageDocument]) -> String {
    let mut out = format!(
        "{:<20} {:>5} {:>8} {:>7} {:>10} {:>9}  {}\n",
        "stage", "plan", "execute", "render", "documents", "cost", "status"
    );
    for j in &s.jobs {
        let docs = documents
            .iter()
            .filter(|d| d.stage_slug == j.stage_slug)
            .count();
        let status = if j.failed > 0 {
            "failed"
        } else if j.in_flight > 0 {
            "running"
        } else {
            "completed"
        };
        out.push_str(&format!(
            "{:<20} {:>5} {:>8} {:>7} {:>10} {:>9}  {}\n",
            j.stage_slug, j.plan, j.execute, j.render, docs, j.cost, status
        ));
    }
    out.push_str(&format!(
        "session {} is {} (iteration {}), cost {} tokens{}\n",
        s.id,
        s.status,
        s.iteration,
        s.cost,
        spent(s)
    ));
    for skip in &s.skipped_steps {
        out.push_str(&format!("skipped {}: {}\n", skip.step_key, skip.reason));
    }
    if !s.notice.is_empty() {
        out.push_str(&format!("notice: {}\n", s.notice));
    }
    out
}

/// One revisit, as `history` prints it: `r2 synthesis (iteration 1) minor:
/// reworded; review parenthesis, paralysis` (or the versions it archived).
pub fn revision(r: &SessionRevision) -> String {
    let mut line = format!(
        "r{} {} (iteration {}) {}: {}",
        r.revision,
        r.stage_slug,
        r.iteration,
        r.impact,
        or_dash(&r.reason)
    );
    if !r.needs_review.is_empty() {
        line.push_str(&format!("; review {}", r.needs_review.join(", ")));
    }
    if !r.downstream_archived.is_empty() {
        line.push_str(&format!("; archived {}", r.downstream_archived.join(", ")));
    }
    line
}

pub fn wallet(w: &Wallet) -> String {
    let mut out = format!(
        "wallet {}\ntotal {}  held {}  available {}\n",
        w.wallet_id, w.total, w.held, w.available
    );
    for t in &w.history {
        // A priced call's money beside its tokens; `-` keeps the columns.
        let cost = t.money.as_ref().map_or_else(|| "-".to_string(), money);
        out.push_str(&format!(
            "  {:<8} {:>10} {:>14}  balance {:>10}  {}\n",
            t.kind,
            t.amount,
            cost,
            t.balance_after,
            or_dash(&t.reason)
        ));
    }
    out
}

/// `dialectic models`: one aligned row per model under a header; unset
/// settings print as `-` so the columns stay aligned for `awk`.
pub fn models(models: &[Model]) -> String {
    let header = [
        "NAME",
        "PROVIDER",
        "CONTEXT",
        "OUTPUT",
        "STRUCTURED",
        "LIMITS",
        "FALLBACK",
        "PRICE /MTOK (IN/CACHED/OUT)",
        "DISPLAY NAME",
    ];
    let mut rows = vec![header.map(str::to_string).to_vec()];
    rows.extend(models.iter().map(|m| {
        vec![
            m.api_identifier.clone(),
            m.provider.clone(),
            m.context_window_tokens.to_string(),
            m.max_output_tokens.to_string(),
            or_dash(&m.structured_output).to_string(),
            limits(m),
            or_dash(&m.fallback_model).to_string(),
            prices(m),
            m.name.clone(),
        ]
    }));
    table(&rows)
}

/// A model's prices per million tokens (`$1.25/$0.125/$10`; cache reads at
/// the input price when they have none of their own; `, writes $1.5625`
/// when cache writes have a price of their own), `-` when unpriced.
fn prices(m: &Model) -> String {
    let Some(p) = &m.prices else {
        return "-".into();
    };
    let (Some(input), Some(output)) = (&p.input_per_mtok, &p.output_per_mtok) else {
        return "-".into();
    };
    let cached = p.cached_input_per_mtok.as_ref().unwrap_or(input);
    let mut shown = format!("{}/{}/{}", money(input), money(cached), money(output));
    if let Some(writes) = &p.cache_write_per_mtok {
        shown.push_str(&format!(", writes {}", money(writes)));
    }
    shown
}

/// A model's call caps (`2 at once, 60 req/min, 90000 tok/min`), `-` for none.
fn limits(m: &Model) -> String {
    let caps: Vec<String> = [
        (u64::from(m.max_concurrency), "at once"),
        (m.requests_per_minute, "req/min"),
        (m.tokens_per_minute, "tok/min"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, unit)| format!("{n} {unit}"))
    .collect();
    if caps.is_empty() {
        "-".into()
    } else {
        caps.join(", ")
    }
}

/// Columns padded to their widest cell, two spaces apart; the last one unpadded.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
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
        let last = row.len().saturating_sub(1);
        for (c, cell) in row.iter().enumerate() {
            if c == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[c]));
            }
        }
        out.push('\n');
    }
    out
}

/// First `n` lines of a document.
/// A stage's recipe: one line per step, in execution order, with its inputs.
pub fn recipe(r: &dialectic_proto::v1::StageRecipe) -> String {
    let kind = if r.is_cloned {
        "cloned instance"
    } else {
        "template"
    };
    let mut out = format!("{} ({kind})\n", r.stage_slug);
    for step in &r.steps {
        let after = if step.after.is_empty() {
            "entry".to_string()
        } else {
            format!("after {}", step.after.join(", "))
        };
        let skipped = if step.skipped { "  [skipped]" } else { "" };
        out.push_str(&format!(
            "  {:<8} {:<36} {:<32} {after}{skipped}\n",
            step.job_type, step.step_key, step.granularity_strategy
        ));
    }
    out
}

pub fn head(text: &str, n: usize) -> impl Iterator<Item = &str> {
    // Blank lines carry nothing in a preview; skip them so the body shows.
    text.lines().filter(|l| !l.trim().is_empty()).take(n)
}

/// `CODE_NAME: message`, with the code spelled as in the gRPC spec, and the
/// ErrorInfo reason after it when the server gave one (what scripts match on).
/// A refusal as a person reads it: code, reason and message, then when to
/// try again (the server's RetryInfo) and the request id to quote.
pub fn status(s: &Status) -> String {
    let mut line = match s.get_details_error_info() {
        Some(info) => format!("{} ({}): {}", code_name(s), info.reason, s.message()),
        None => format!("{}: {}", code_name(s), s.message()),
    };
    if let Some(delay) = s.get_details_retry_info().and_then(|r| r.retry_delay) {
        line += &format!(" (retry after {})", humantime::format_duration(delay));
    }
    if let Some(id) = request_id(s) {
        line += &format!(" [request id {id}]");
    }
    line
}

/// The id the gateway gave the call: its RequestInfo, else the trailer
/// (a status a proxy rebuilt may keep only one of them).
fn request_id(s: &Status) -> Option<String> {
    s.get_details_request_info()
        .map(|info| info.request_id)
        .or_else(|| {
            s.metadata()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .filter(|id| !id.is_empty())
}

fn code_name(s: &Status) -> &'static str {
    grpc_code_name(s.code().into())
}

/// `--until`'s value parser: a session status's shape (a typo such as
/// `iteration_complete_pending_reviw` is a usage error before any call).
/// `--pushback`: full, light or minimal.
pub fn pushback(value: &str) -> Result<dialectic_core::pushback::Pushback, String> {
    value
        .parse()
        .map_err(|e: dialectic_core::pushback::UnknownPushback| e.to_string())
}

/// A wait's length: a duration (`90s`, `10m`, `1h 30m`) or, as the flag's
/// old spelling took, a bare number of seconds.
pub fn seconds_or_duration(value: &str) -> Result<std::time::Duration, String> {
    if let Ok(seconds) = value.trim().parse::<u64>() {
        return Ok(std::time::Duration::from_secs(seconds));
    }
    humantime::parse_duration(value).map_err(|e| format!("{e}; e.g. 300, 90s, 10m"))
}

pub fn until_status(value: &str) -> Result<String, String> {
    match SessionStatus::parse(value) {
        Ok(status) if status.stage() != Some("") => Ok(value.to_string()),
        _ => Err(format!(
            "not a session status; use {REVIEW}, {}, {}, {}, or {}STAGE / {}STAGE / {}STAGE",
            SessionStatus::PAUSED,
            SessionStatus::ABANDONED,
            SessionStatus::COMPLETED,
            SessionStatus::PENDING_PREFIX,
            SessionStatus::RUNNING_PREFIX,
            SessionStatus::FAILED_PREFIX
        )),
    }
}

/// Whether a session running `stages` can ever have the status `until`.
pub fn check_until(until: &str, stages: &[String]) -> Result<(), String> {
    let stage = SessionStatus::parse(until)
        .ok()
        .and_then(|s| s.stage().map(str::to_string));
    match stage {
        Some(stage) if !stages.contains(&stage) => Err(format!(
            "--until {until}: the session's pipeline has no stage {stage:?} (its stages: {})",
            stages.join(", ")
        )),
        _ => Ok(()),
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Continue,
    Reached,
    /// The session can no longer reach the awaited status.
    Ended(String),
}

/// When `watch` stops: at `until` if given; otherwise at the first status
/// where the user must act that differs from the one the watch began with.
pub struct Stop {
    until: Option<String>,
    initial: Option<String>,
    last: Option<String>,
}

impl Stop {
    pub fn new(until: Option<&str>) -> Self {
        Self {
            until: until.map(str::to_string),
            initial: None,
            last: None,
        }
    }

    pub fn last(&self) -> Option<&str> {
        self.last.as_deref()
    }

    pub fn observe(&mut self, status: &str) -> Verdict {
        if status.is_empty() {
            return Verdict::Continue;
        }
        let initial = self
            .initial
            .get_or_insert_with(|| status.to_string())
            .clone();
        self.last = Some(status.to_string());
        match &self.until {
            Some(until) if until == status => Verdict::Reached,
            // Abandoned and completed sessions never move again by
            // themselves, and a failed stage not until someone retries it,
            // so waiting on would only time out.
            _ if status == SessionStatus::ABANDONED
                || status == SessionStatus::COMPLETED
                || status.starts_with(SessionStatus::FAILED_PREFIX) =>
            {
                Verdict::Ended(status.to_string())
            }
            Some(_) => Verdict::Continue,
            None if status == REVIEW => Verdict::Reached,
            None if status.starts_with(SessionStatus::PENDING_PREFIX) && status != initial => {
                Verdict::Reached
            }
            None => Verdict::Continue,
        }
    }
}

/// An answer, its citations (numbered as the answer may refer to them), its
/// caveats and what it cost.
pub fn answer(a: &QueryResponse) -> String {
    let mut out = format!("{}\n", a.answer);
    if !a.sub_queries.is_empty() {
        out.push_str("\nasked as:\n");
        for part in &a.sub_queries {
            out.push_str(&format!("  - {part}\n"));
        }
    }
    if !a.citations.is_empty() {
        out.push_str("\ncitations:\n");
        for (i, c) in a.citations.iter().enumerate() {
            out.push_str(&format!(
                "  [{}] {} ({}, characters {}..{}): \"{}\"\n",
                i + 1,
                c.source_name,
                c.chunk_id,
                c.start,
                c.end,
                c.quote
            ));
        }
    }
    if !a.caveats.is_empty() {
        out.push_str("\ncaveats:\n");
        for caveat in &a.caveats {
            out.push_str(&format!("  - {caveat}\n"));
        }
    }
    out.push_str(&format!(
        "\n{} · confidence {:.2} · cost {}{}\n",
        or_dash(&a.query_type),
        a.confidence,
        a.cost,
        if a.cached { " (cached)" } else { "" }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_proto::v1::{ModelPrices, WalletTransaction};
    use std::collections::HashMap;
    use tonic::Code;
    use tonic_types::ErrorDetails;

    #[test]
    fn events_print_one_line_with_dashes_for_blanks() {
        let e = SessionEvent {
            kind: "job_completed".into(),
            stage_slug: "thesis".into(),
            session_status: "running_thesis".into(),
            job_type: "EXECUTE".into(),
            document_key: "business_case".into(),
            model: "simulated".into(),
            stage_percent: 40,
            message: "done".into(),
            ..Default::default()
        };
        assert_eq!(
            event(&e),
            "[job_completed] thesis running_thesis EXECUTE business_case simulated 40% done"
        );
        let snapshot = SessionEvent {
            kind: "snapshot".into(),
            session_status: "pending_thesis".into(),
            ..Default::default()
        };
        assert_eq!(event(&snapshot), "[snapshot] - pending_thesis - - - 0%");
    }

    #[test]
    fn models_print_their_settings_in_aligned_columns() {
        let listed = [
            Model {
                api_identifier: "simulated".into(),
                name: "Simulated (default)".into(),
                provider: "simulated".into(),
                context_window_tokens: 128000,
                max_output_tokens: 8192,
                structured_output: "json_schema".into(),
                ..Default::default()
            },
            Model {
                api_identifier: "qwen2.5".into(),
                name: "Qwen 2.5 on llama.cpp".into(),
                provider: "openai-compatible".into(),
                context_window_tokens: 8192,
                max_output_tokens: 1024,
                structured_output: "json_object_schema".into(),
                fallback_model: "simulated".into(),
                max_concurrency: 2,
                tokens_per_minute: 90000,
                prices: Some(ModelPrices {
                    input_per_mtok: Some(usd(1, 250_000_000)),
                    output_per_mtok: Some(usd(10, 0)),
                    cached_input_per_mtok: Some(usd(0, 125_000_000)),
                    cache_write_per_mtok: None,
                }),
                ..Default::default()
            },
        ];
        let text = models(&listed);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("NAME       PROVIDER           CONTEXT  OUTPUT  STRUCTURED"));
        assert!(
            lines[2].starts_with(
                "qwen2.5    openai-compatible  8192     1024    json_object_schema  2 at once, 90000 tok/min  simulated  $1.25/$0.125/$10             Qwen 2.5 on llama.cpp"
            ),
            "{text}"
        );
        let fields: Vec<&str> = lines[1]
            .split("  ")
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .collect();
        assert_eq!(
            fields,
            [
                "simulated",
                "simulated",
                "128000",
                "8192",
                "json_schema",
                "-",
                "-",
                "-",
                "Simulated (default)"
            ]
        );
    }

    #[test]
    fn a_cache_write_price_of_its_own_is_shown_after_the_others() {
        let mut priced = ModelPrices {
            input_per_mtok: Some(usd(1, 250_000_000)),
            output_per_mtok: Some(usd(10, 0)),
            cached_input_per_mtok: Some(usd(0, 125_000_000)),
            cache_write_per_mtok: None,
        };
        let model = |prices: &ModelPrices| Model {
            prices: Some(prices.clone()),
            ..Default::default()
        };
        assert_eq!(prices(&model(&priced)), "$1.25/$0.125/$10");
        priced.cache_write_per_mtok = Some(usd(1, 562_500_000));
        assert_eq!(prices(&model(&priced)), "$1.25/$0.125/$10, writes $1.5625");
    }

    #[test]
    fn the_output_record_is_one_line() {
        let mut output = dialectic_proto::v1::SessionOutput {
            document: Some(StageDocument {
                resource_id: "r1".into(),
                storage_key: "p/s/4_paragraph_writing/final-essay.md".into(),
                ..Default::default()
            }),
            word_count: 812,
            completed_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            ..Default::default()
        };
        output.figures.insert("voice_consistency_score".into(), 4.5);
        output.figures.insert("sources_verified".into(), 2.0);
        let session = Session {
            output: Some(output),
            ..Default::default()
        };
        assert!(
            super::session(&session).contains(
                "output: final-essay.md (r1), 812 words; sources_verified 2, \
                 voice_consistency_score 4.5; completed 2023-11-14T22:13:20Z\n"
            ),
            "{}",
            super::session(&session)
        );
    }

    fn usd(units: i64, nanos: i32) -> Money {
        Money {
            currency_code: "USD".into(),
            units,
            nanos,
        }
    }

    #[test]
    fn money_is_shown_exactly_beside_tokens() {
        let session = Session {
            id: "s1".into(),
            cost: 12_345,
            spent: Some(usd(0, 12_300_000)),
            ..Default::default()
        };
        assert!(
            super::session(&session).contains("cost: 12345 tokens ($0.0123)\n"),
            "{}",
            super::session(&session)
        );
        let unpriced = Session { cost: 7, ..session };
        assert!(
            super::session(&Session {
                spent: None,
                ..unpriced
            })
            .contains("cost: 7 tokens\n")
        );
        let euros = Money {
            currency_code: "EUR".into(),
            units: 2,
            nanos: 500_000_001,
        };
        assert_eq!(money(&euros), "2.500000001 EUR");
        let wallet = Wallet {
            history: vec![WalletTransaction {
                kind: "capture".into(),
                amount: 120,
                balance_after: 880,
                money: Some(usd(0, 1_500)),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(
            super::wallet(&wallet)
                .contains("  capture         120     $0.0000015  balance        880  -\n"),
            "{}",
            super::wallet(&wallet)
        );
    }

    #[test]
    fn until_takes_only_statuses_of_the_session_s_stages() {
        assert!(until_status(REVIEW).is_ok());
        assert!(until_status("paused").is_ok());
        assert!(until_status("pending_synthesis").is_ok());
        assert!(until_status("iteration_complete_pending_reviw").is_err());
        assert!(until_status("pending_").is_err(), "no stage");
        let stages = ["thesis".to_string(), "synthesis".to_string()];
        assert!(check_until("running_synthesis", &stages).is_ok());
        assert!(check_until(REVIEW, &stages).is_ok());
        let typo = check_until("pending_synthesys", &stages).unwrap_err();
        assert!(typo.contains("thesis, synthesis"), "{typo}");
    }

    #[test]
    fn watch_stops_at_until() {
        let mut stop = Stop::new(Some("pending_antithesis"));
        assert_eq!(stop.observe("pending_thesis"), Verdict::Continue);
        assert_eq!(stop.observe("running_thesis"), Verdict::Continue);
        assert_eq!(stop.observe(""), Verdict::Continue);
        assert_eq!(stop.observe("pending_antithesis"), Verdict::Reached);
        assert_eq!(stop.last(), Some("pending_antithesis"));
        let mut already = Stop::new(Some("pending_thesis"));
        assert_eq!(already.observe("pending_thesis"), Verdict::Reached);
        let mut dead = Stop::new(Some("pending_synthesis"));
        assert_eq!(
            dead.observe("abandoned"),
            Verdict::Ended("abandoned".into())
        );
    }

    #[test]
    fn watch_without_until_stops_when_the_user_must_act() {
        let mut stop = Stop::new(None);
        assert_eq!(stop.observe("pending_thesis"), Verdict::Continue);
        assert_eq!(stop.observe("running_thesis"), Verdict::Continue);
        assert_eq!(stop.observe("pending_thesis"), Verdict::Continue);
        assert_eq!(stop.observe("pending_antithesis"), Verdict::Reached);
        let mut review = Stop::new(None);
        assert_eq!(review.observe(REVIEW), Verdict::Reached);
    }

    /// A failed stage moves only when someone retries it: a watch, with or
    /// without --until, ends there instead of waiting for ever.
    #[test]
    fn watch_ends_at_a_failed_stage() {
        for until in [None, Some(REVIEW)] {
            let mut stop = Stop::new(until);
            assert_eq!(stop.observe("running_thesis"), Verdict::Continue);
            assert_eq!(
                stop.observe("failed_thesis"),
                Verdict::Ended("failed_thesis".into())
            );
        }
        let mut waiting_for_it = Stop::new(Some("failed_thesis"));
        assert_eq!(waiting_for_it.observe("failed_thesis"), Verdict::Reached);
    }

    #[test]
    fn a_failed_session_shows_where_it_failed_and_its_notice() {
        let session = Session {
            id: "s1".into(),
            status: "failed_draft".into(),
            state: SessionState::Failed.into(),
            current_stage: "draft".into(),
            position: Some(dialectic_proto::v1::SessionPosition {
                summary: "stage 1 of 2 (Draft), step Write the note".into(),
                stage_percent: 100,
                ..Default::default()
            }),
            notice: "stage draft failed: step draft_write failed: malformed_json. To run it again: dialectic session retry --session s1".into(),
            ..Default::default()
        };
        let shown = super::session(&session);
        assert!(
            shown.contains("status: failed_draft\n")
                && shown.contains("at: stage 1 of 2 (Draft), step Write the note (failed)\n")
                && shown.contains("notice: stage draft failed: step draft_write failed: malformed_json. To run it again: dialectic session retry --session s1\n")
                && !shown.contains("100%"),
            "{shown}"
        );
    }

    #[test]
    fn statuses_print_code_names() {
        assert_eq!(
            status(&Status::not_found("session x not found")),
            "NOT_FOUND: session x not found"
        );
        let described = Status::with_error_details(
            Code::NotFound,
            "session x not found",
            ErrorDetails::with_error_info("RESOURCE_NOT_FOUND", "dialectic.dev", HashMap::new()),
        );
        assert_eq!(
            status(&described),
            "NOT_FOUND (RESOURCE_NOT_FOUND): session x not found"
        );
    }

    #[test]
    fn a_refusal_names_its_request_and_when_to_retry() {
        let mut details =
            ErrorDetails::with_error_info("DATABASE_UNAVAILABLE", "dialectic.dev", HashMap::new());
        details.set_request_info("0193-abc", "");
        details.set_retry_info(Some(std::time::Duration::from_secs(1)));
        let outage = Status::with_error_details(Code::Unavailable, "database unavailable", details);
        assert_eq!(
            status(&outage),
            "UNAVAILABLE (DATABASE_UNAVAILABLE): database unavailable (retry after 1s) \
             [request id 0193-abc]"
        );
    }

    #[test]
    fn head_takes_the_first_lines() {
        assert_eq!(head("a\nb\nc", 2).collect::<Vec<_>>(), vec!["a", "b"]);
    }
}
