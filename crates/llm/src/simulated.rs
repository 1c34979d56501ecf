//! The default provider: offline and deterministic. It writes recipe-shaped
//! JSON derived from its inputs (the seed prompt and header context show up in
//! what it writes) and honours `max_tokens`: a long document comes back in
//! slices with `finish_reason = length`, each continuing exactly where the
//! previous one stopped, so the merged chunks equal the whole text.
//!
//! It also shows what it was given: every reply lists its request's inputs
//! (kind, stage, document key and content digest, see [`InputRef`]) under
//! [`INPUTS_KEY`] in its JSON and, for documents, in a final `## Inputs`
//! section the renderer keeps; and its text depends on those digests, so a
//! step that reads the wrong inputs writes a different document. Ids and
//! storage keys stay out of the reply: they differ from session to session,
//! and the same prompt must still give the same documents (replay).

use crate::{ChatResponse, FinishReason, LlmError, ModelProvider};
use async_trait::async_trait;
use dialectic_core::prompt::{ChatRequest, InputRef, REJECTED_REPLY, Role, title_from_key};
use dialectic_core::shape::JsonKind;
use dialectic_core::tokens::estimate_tokens;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct SimulatedSettings {
    pub latency_ms: u64,
    /// Share of calls (0..=1) that fail with a transient error.
    pub failure_rate: f64,
    /// Paragraphs per document; more paragraphs make longer documents.
    pub paragraphs: usize,
    /// Keep every request in a process-wide transcript ([`recorded_requests`]),
    /// so tests and debugging can see exactly what a model was sent.
    pub record_requests: bool,
    /// Append a line per call that returned a reply to this file: the calls a
    /// real provider would bill, counted where they happen.
    pub call_log: Option<std::path::PathBuf>,
}

/// Seed prompt directive that makes every document reply malformed JSON, to
/// exercise the sanitizer's failure path and the retry loop.
pub const MALFORMED_DIRECTIVE: &str = "[[simulate:malformed]]";

/// Prompt directive `[[simulate:malformed-on:MODEL]]`: as MALFORMED_DIRECTIVE,
/// for the named model only, so a stage fails on it and a retry of the
/// failed jobs on another model (RetryStage's `model`) gets them written.
const MALFORMED_ON_DIRECTIVE: &str = "[[simulate:malformed-on:";

/// Whether this request's document reply comes back malformed.
fn malformed(request: &ChatRequest, first_user: &str) -> bool {
    first_user.contains(MALFORMED_DIRECTIVE)
        || directive_keys(first_user, MALFORMED_ON_DIRECTIVE).contains(&request.model.as_str())
}

/// Seed prompt directive: every document reply leaves out its step's last
/// required key until the prompt says a reply was refused (a retry), to
/// exercise the refusal and its note.
pub const DROP_KEY_DIRECTIVE: &str = "[[simulate:drop-key]]";

/// Seed prompt directive: every document reply leaves out its step's last
/// required key, retries included, so the job exhausts its attempts.
pub const DROP_KEY_ALWAYS_DIRECTIVE: &str = "[[simulate:drop-key-always]]";

/// Prompt directive: every reply of a publishing step also lists a finding
/// of type [`STRAY_FINDING_TYPE`], which no step declares, until the prompt
/// says a reply was refused (a retry), as a small model inventing a type.
pub const STRAY_FINDING_DIRECTIVE: &str = "[[simulate:stray-finding]]";

/// The entry type a stray-finding directive makes up.
pub const STRAY_FINDING_TYPE: &str = "low_confidence";

/// Prompt directive `[[simulate:skip:STEP_KEY]]`: every plan (header
/// context) reply names that step in its `skip_steps`, to exercise
/// plan-driven skipping. It may appear more than once.
pub const SKIP_DIRECTIVE: &str = "[[simulate:skip:";

/// Prompt directive `[[simulate:skip-single:STEP_KEY]]`: a plan reply names
/// that step in its `skip_steps` when its request reads at most one project
/// document, as a model judging a contract stack with no amendments would.
pub const SKIP_SINGLE_DIRECTIVE: &str = "[[simulate:skip-single:";

/// The keys a directive names, in order.
fn directive_keys<'a>(prompt: &'a str, directive: &str) -> Vec<&'a str> {
    prompt
        .split(directive)
        .skip(1)
        .filter_map(|rest| rest.split_once("]]").map(|(key, _)| key.trim()))
        .filter(|key| !key.is_empty())
        .collect()
}

/// The steps the prompt's skip directives name for this request, in order.
fn skip_directives(request: &ChatRequest, prompt: &str) -> Vec<serde_json::Value> {
    let skip = |key: &str, reason: &str| serde_json::json!({"step_key": key, "reason": reason});
    let mut skips: Vec<serde_json::Value> = directive_keys(prompt, SKIP_DIRECTIVE)
        .into_iter()
        .map(|key| skip(key, "the prompt asked for it to be skipped"))
        .collect();
    let documents = request
        .inputs
        .iter()
        .filter(|i| i.kind == "project_document")
        .count();
    if documents <= 1 {
        skips.extend(
            directive_keys(prompt, SKIP_SINGLE_DIRECTIVE)
                .into_iter()
                .map(|key| skip(key, "the stack holds a single document")),
        );
    }
    skips
}

/// Prompt directive: every reply that states a `confidence` (a gated step)
/// states 0.2 instead of 0.9, to exercise confidence gates and their reruns.
pub const LOW_CONFIDENCE_DIRECTIVE: &str = "[[simulate:low-confidence]]";

/// Prompt directive `[[simulate:clarify:OUTPUT>STEP_KEY]]`: the reply for
/// output type OUTPUT asks step STEP_KEY a question (`needs_clarification`)
/// unless its prompt already carries a clarification note, so a round runs once.
pub const CLARIFY_DIRECTIVE: &str = "[[simulate:clarify:";

/// The question a clarify directive asks.
pub const CLARIFY_QUESTION: &str = "Which version of the clause is in force?";

/// The step this reply asks, per the prompt's clarify directives.
fn clarify_target(request: &ChatRequest, prompt: &str) -> Option<String> {
    if prompt.contains(dialectic_core::clarify::NOTE_HEADING) {
        return None;
    }
    prompt
        .split(CLARIFY_DIRECTIVE)
        .skip(1)
        .filter_map(|rest| rest.split_once("]]").map(|(target, _)| target))
        .filter_map(|target| target.split_once('>'))
        .find(|(output, _)| output.trim() == request.output_type)
        .map(|(_, step)| step.trim().to_string())
}

/// Prompt directive `[[simulate:items:KEY:N]]`: a reply's array key KEY holds
/// N items (`"<model> KEY item i of N"`) instead of one, for `per_item` fan-out.
pub const ITEMS_DIRECTIVE: &str = "[[simulate:items:";

/// How many items the prompt's items directive gives `key`, if it names it.
fn items_for(prompt: &str, key: &str) -> Option<usize> {
    prompt
        .split(ITEMS_DIRECTIVE)
        .skip(1)
        .filter_map(|rest| rest.split_once("]]").map(|(spec, _)| spec))
        .filter_map(|spec| spec.rsplit_once(':'))
        .find(|(named, _)| named.trim() == key)
        .and_then(|(_, n)| n.trim().parse().ok())
}

/// The reserved key of a simulated reply that lists the request's inputs.
pub const INPUTS_KEY: &str = "_inputs";

/// Heading of a simulated document's final section listing its inputs.
pub const INPUTS_HEADING: &str = "## Inputs";

/// One line of the inputs list: `kind stage/document_key digest`.
pub fn input_line(input: &InputRef) -> String {
    format!(
        "{} {}/{} {}",
        input.kind, input.stage_slug, input.document_key, input.digest
    )
}

fn inputs_json(request: &ChatRequest) -> serde_json::Value {
    request
        .inputs
        .iter()
        .map(|i| serde_json::Value::String(input_line(i)))
        .collect()
}

static TRANSCRIPT: std::sync::Mutex<Vec<ChatRequest>> = std::sync::Mutex::new(Vec::new());

/// When each recorded call ran: (output type, started, finished).
type CallTimes = Vec<(String, std::time::Instant, std::time::Instant)>;

static CALL_TIMES: std::sync::Mutex<CallTimes> = std::sync::Mutex::new(Vec::new());

/// Every request a recording simulated provider received in this process, in order.
pub fn recorded_requests() -> Vec<ChatRequest> {
    TRANSCRIPT.lock().map(|t| t.clone()).unwrap_or_default()
}

/// When each call of a recording simulated provider started and finished, in
/// the order they finished: whether calls overlapped, without timing anything.
pub fn recorded_call_times() -> CallTimes {
    CALL_TIMES.lock().map(|t| t.clone()).unwrap_or_default()
}

pub struct SimulatedProvider {
    settings: SimulatedSettings,
    calls: AtomicU64,
}

impl SimulatedProvider {
    pub fn new(settings: SimulatedSettings) -> Self {
        Self {
            settings,
            calls: AtomicU64::new(0),
        }
    }
}

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

/// Text of the section a resource header introduced (`--- Seed prompt ---` …), if present.
fn section<'a>(prompt: &'a str, header: &str) -> Option<&'a str> {
    let start = prompt.find(header)? + header.len();
    let rest = &prompt[start..];
    let end = rest.find("\n--- ").unwrap_or(rest.len());
    Some(rest[..end].trim())
}

fn excerpt(text: &str, max_chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max_chars {
        flat
    } else {
        let cut: String = flat.chars().take(max_chars).collect();
        format!("{cut}…")
    }
}

const VERBS: [&str; 8] = [
    "prioritise",
    "validate",
    "measure",
    "de-risk",
    "stage",
    "document",
    "automate",
    "review",
];
const NOUNS: [&str; 8] = [
    "the rollout",
    "the core workflow",
    "user onboarding",
    "the data model",
    "cost controls",
    "the pilot",
    "integration points",
    "support load",
];

impl SimulatedProvider {
    /// The whole reply this model means to write for the request.
    fn full_document(&self, request: &ChatRequest, first_user: &str) -> (bool, String) {
        let seed = section(first_user, "--- Seed prompt ---").unwrap_or(first_user);
        let header = section(first_user, "--- Header context ---");
        let key = request.output_type.as_str();
        if key == "header_context" || key.starts_with("header_context") {
            let docs: Vec<serde_json::Value> = request
                .output_hints
                .iter()
                .map(|d| {
                    serde_json::json!({
                        "document_key": d,
                        "content_to_include": {
                            "focus": format!("{} for: {}", title_from_key(d), excerpt(seed, 120)),
                            "written_by": request.model,
                        }
                    })
                })
                .collect();
            let mut value = serde_json::json!({
                "system_materials": {
                    "stage_rationale": format!("{} plans {} documents", request.model, docs.len()),
                    "seed_summary": excerpt(seed, 240),
                },
                "context_for_documents": docs,
                INPUTS_KEY: inputs_json(request),
            });
            let skips = skip_directives(request, first_user);
            if !skips.is_empty() {
                value["skip_steps"] = serde_json::Value::Array(skips);
            }
            return (false, value.to_string());
        }
        let inputs: Vec<String> = request.inputs.iter().map(input_line).collect();
        let d = digest(&[&request.model, key, seed, &inputs.join("\n")]);
        let title = title_from_key(key);
        let mut body = format!(
            "## Overview\n\n{} writes the {} for this request: {}\n",
            request.model,
            title.to_lowercase(),
            excerpt(seed, 400)
        );
        if let Some(h) = header {
            body.push_str(&format!("\n## Header context\n\n{}\n", excerpt(h, 400)));
        }
        let paragraphs = self.settings.paragraphs.max(1);
        for i in 0..paragraphs {
            let v = VERBS[d[i % 32] as usize % VERBS.len()];
            let n = NOUNS[d[(i + 7) % 32] as usize % NOUNS.len()];
            let n2 = NOUNS[d[(i + 13) % 32] as usize % NOUNS.len()];
            body.push_str(&format!(
                "\n### Point {}\n\nWe {v} {n} first, because {n2} depends on it; the {title} tracks this as item {}-{:02x}.\n",
                i + 1,
                key,
                d[(i + 3) % 32]
            ));
        }
        if !inputs.is_empty() {
            body.push_str(&format!("\n{INPUTS_HEADING}\n\n"));
            for line in &inputs {
                body.push_str(&format!("- {line}\n"));
            }
        }
        (true, body)
    }
}

#[async_trait]
impl ModelProvider for SimulatedProvider {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let reply = self.reply(request).await?;
        if let Some(path) = &self.settings.call_log {
            log_call(path, request)?;
        }
        Ok(reply)
    }
}

/// A value for a required key of the type its step names (a string when untyped).
fn typed_value(request: &ChatRequest, key: &str) -> serde_json::Value {
    let text = format!(
        "{} {} for {}",
        request.model,
        key.replace('_', " "),
        title_from_key(&request.output_type).to_lowercase()
    );
    match request.key_types.get(key) {
        None | Some(JsonKind::String) => serde_json::Value::String(text),
        Some(JsonKind::Number) => serde_json::json!(3),
        Some(JsonKind::Boolean) => serde_json::json!(true),
        Some(JsonKind::Array) => serde_json::json!([text]),
        Some(JsonKind::Object) => serde_json::json!({ "summary": text }),
    }
}

/// A reply key the simulator fills with claims to fact-check, as a model
/// would: one verified claim quoting the first sentence of each source in
/// the prompt (sections whose header starts with [`SOURCES_HEADER`]), one
/// it calls verified on a quote no source holds, and one it defers.
pub const CLAIMS_KEY: &str = "claims";
pub const SOURCES_HEADER: &str = "--- The writer's sources";
/// The quote the simulator invents for a claim no source supports.
pub const INVENTED_QUOTE: &str = "Every town that owns its library building saves money.";

/// A reply key the simulator fills with two scored checks (paragraphs 1 and
/// 2, scored 4 and 5): their mean, 4.5, is what the engine, not the model,
/// records (`mean` on an output rule).
pub const SCORED_CHECKS_KEY: &str = "checks";

fn simulated_checks() -> serde_json::Value {
    (1..=2)
        .map(|n| serde_json::json!({"paragraph": n, "score": 3 + n, "note": format!("note {n}")}))
        .collect()
}

fn simulated_claims(prompt: &str) -> serde_json::Value {
    let claim = |n: usize, verdict: &str, quote: &str, reason: &str| {
        serde_json::json!({"paragraph": n, "claim": format!("claim {n}"), "verdict": verdict,
            "source": "", "quote": quote, "reason": reason})
    };
    let mut claims: Vec<serde_json::Value> = source_sections(prompt)
        .filter_map(first_sentence)
        .enumerate()
        .map(|(i, quote)| claim(i + 1, "verified", &quote, ""))
        .collect();
    let n = claims.len();
    claims.push(claim(n + 1, "verified", INVENTED_QUOTE, ""));
    claims.push(claim(
        n + 2,
        "deferred",
        "",
        "no source covers the town's budget",
    ));
    serde_json::Value::Array(claims)
}

/// A text's first sentence: up to a full stop followed by whitespace or the
/// end, within its first paragraph.
fn first_sentence(text: &str) -> Option<String> {
    let paragraph = text.split("\n\n").next().unwrap_or_default();
    let end = paragraph
        .char_indices()
        .find(|(i, c)| {
            *c == '.'
                && paragraph[i + 1..]
                    .chars()
                    .next()
                    .is_none_or(char::is_whitespace)
        })
        .map_or(paragraph.len(), |(i, _)| i + 1);
    let sentence = paragraph[..end].trim();
    (!sentence.is_empty()).then(|| sentence.to_string())
}

/// The text of each source section of a prompt, in order.
fn source_sections(prompt: &str) -> impl Iterator<Item = &str> {
    prompt.split(SOURCES_HEADER).skip(1).map(|rest| {
        let body = rest.split_once('\n').map_or("", |(_, body)| body);
        body.split("\n--- ").next().unwrap_or_default().trim()
    })
}

/// Prompt directive: a date the step asks for is copied as the input writes
/// it after its first "Effective " (to the sentence's end), not put in
/// YYYY-MM-DD, as a model ignoring the format its prompt asks for would:
/// for tests of what the engine does with dates in mixed forms.
pub const DATES_AS_WRITTEN_DIRECTIVE: &str = "[[simulate:dates-as-written]]";

/// The date after the text's first "Effective ", as written, when the text
/// carries the dates-as-written directive: up to a full stop that ends the
/// sentence (followed by whitespace or the end), so "1.3.2021" stays whole.
fn date_as_written(text: &str) -> Option<String> {
    if !text.contains(DATES_AS_WRITTEN_DIRECTIVE) {
        return None;
    }
    let (_, rest) = text.split_once("Effective ")?;
    let bytes = rest.as_bytes();
    let end = (0..bytes.len())
        .find(|&i| {
            bytes[i] == b'\n'
                || (bytes[i] == b'.' && bytes.get(i + 1).is_none_or(u8::is_ascii_whitespace))
        })
        .unwrap_or(bytes.len());
    Some(rest[..end].trim().to_string())
}

/// The first date the text states, as YYYY-MM-DD: written so ("2024-09-01")
/// or as a day, a month's name and a year ("1 September 2024").
fn first_date(text: &str) -> Option<String> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ',' || c == '.' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().enumerate().find_map(|(i, word)| {
        let iso = word.len() == 10
            && word.char_indices().all(|(at, c)| match at {
                4 | 7 => c == '-',
                _ => c.is_ascii_digit(),
            });
        if iso {
            return Some(word.to_string());
        }
        let day: u32 = word.parse().ok().filter(|d| (1..=31).contains(d))?;
        let month = dialectic_core::dates::MONTHS
            .iter()
            .position(|m| words.get(i + 1).is_some_and(|w| w.eq_ignore_ascii_case(m)))?;
        let year: u32 = words.get(i + 2)?.parse().ok().filter(|y| *y >= 1000)?;
        Some(format!("{year:04}-{:02}-{day:02}", month + 1))
    })
}

/// One blackboard entry per type the step may publish, each naming the
/// model, the type and a digest of the prompt: deterministic, and distinct
/// per job, so a test can find an entry in the prompt of a step that reads it.
fn board_entries(request: &ChatRequest, first_user: &str) -> serde_json::Value {
    let tag: String = digest(&[first_user, &request.output_type])[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    request
        .publishes
        .iter()
        .map(|entry_type| {
            serde_json::json!({
                "type": entry_type,
                "data": {
                    "finding": format!("{} {} in {} #{tag}", request.model, entry_type.replace('_', " "), request.output_type),
                },
            })
        })
        .collect()
}

/// Whether a reply was refused before in this job (its prompt says so).
fn is_retry(request: &ChatRequest) -> bool {
    request
        .messages
        .iter()
        .any(|m| m.role == Role::User && m.content.contains(REJECTED_REPLY))
}

/// Whether this reply adds a finding of an undeclared type.
fn strays(request: &ChatRequest, first_user: &str) -> bool {
    first_user.contains(STRAY_FINDING_DIRECTIVE) && !is_retry(request)
}

/// The required key a drop-key directive leaves out of this reply, if any.
fn dropped_key<'a>(request: &'a ChatRequest, first_user: &str) -> Option<&'a str> {
    let retried = is_retry(request);
    let drops = first_user.contains(DROP_KEY_ALWAYS_DIRECTIVE)
        || (first_user.contains(DROP_KEY_DIRECTIVE) && !retried);
    drops.then(|| request.required_keys.last().map(String::as_str))?
}

/// One line per call, appended in one write, so processes sharing the file
/// never interleave within a line.
/// One line per answered call, `{job id or -} {output type}`, so a harness
/// can count the calls each job made from the provider's side of the wire.
fn log_call(path: &std::path::Path, request: &ChatRequest) -> Result<(), LlmError> {
    use std::io::Write;
    let job = request.job_id.as_deref().unwrap_or("-");
    let line = format!("{job} {}\n", request.output_type);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(line.as_bytes()))
        .map_err(|e| LlmError::Transient(format!("simulated call log {}: {e}", path.display())))
}

impl SimulatedProvider {
    async fn reply(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        if let (true, Ok(mut transcript)) = (self.settings.record_requests, TRANSCRIPT.lock()) {
            transcript.push(request.clone());
        }
        let started = std::time::Instant::now();
        if self.settings.latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.settings.latency_ms)).await;
        }
        if let (true, Ok(mut times)) = (self.settings.record_requests, CALL_TIMES.lock()) {
            times.push((
                request.output_type.clone(),
                started,
                std::time::Instant::now(),
            ));
        }
        if self.settings.failure_rate > 0.0 {
            let roll = digest(&[&call.to_string(), &request.model])[0] as f64 / 255.0;
            if roll < self.settings.failure_rate {
                return Err(LlmError::Transient(
                    "simulated provider fault injection".into(),
                ));
            }
        }
        let first_user = request
            .messages
            .iter()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.as_str())
            .unwrap_or_default();
        if let Some(reply) = crate::simulated_query::reply(request, first_user) {
            return Ok(plain_reply(request, reply.to_string()));
        }
        let (is_document, full) = self.full_document(request, first_user);
        if is_document && malformed(request, first_user) {
            let text = "Here is the document you asked for: {\"content\": \"it was cut".to_string();
            return Ok(ChatResponse {
                input_tokens: request
                    .messages
                    .iter()
                    .map(|m| estimate_tokens(&m.content))
                    .sum(),
                output_tokens: estimate_tokens(&text),
                cached_input_tokens: 0,
                cache_write_input_tokens: 0,
                raw: serde_json::json!({ "text": text }),
                text,
                finish_reason: FinishReason::Stop,
                usage_estimated: true,
                time_to_first_token: None,
                response_model: None,
            });
        }
        let (text, finish_reason) = if is_document {
            // Earlier turns of this chain: continue exactly after what they wrote.
            let written: usize = request
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .filter_map(|m| serde_json::from_str::<serde_json::Value>(&m.content).ok())
                .filter_map(|v| v.get("content").and_then(|c| c.as_str()).map(str::len))
                .sum();
            let start = floor_char_boundary(&full, written.min(full.len()));
            let budget = (request.max_tokens as usize).saturating_mul(4).max(16);
            let end = floor_char_boundary(&full, (start + budget).min(full.len()));
            let end = if end == start && start < full.len() {
                ceil_char_boundary(&full, start + 1)
            } else {
                end
            };
            let more = end < full.len();
            let slice = &full[start..end];
            let mut reply = serde_json::json!({
                "content": slice,
                "continuation_needed": more,
                INPUTS_KEY: inputs_json(request),
            });
            // Structured steps name the keys they need; the last turn gives
            // each a value of its type, as a model following a schema would.
            if !more {
                for key in request.required_keys.iter().filter(|k| *k != "content") {
                    let date = date_as_written(first_user).or_else(|| first_date(first_user));
                    if key == CLAIMS_KEY {
                        reply[key.as_str()] = simulated_claims(first_user);
                        continue;
                    }
                    if key == SCORED_CHECKS_KEY {
                        reply[key.as_str()] = simulated_checks();
                        continue;
                    }
                    reply[key.as_str()] = match (items_for(first_user, key), date) {
                        (Some(n), _) => (1..=n)
                            .map(|i| format!("{} {key} item {i} of {n}", request.model))
                            .collect(),
                        // A date the step asks for is the first one its input
                        // states, as a model reading the document would say.
                        (None, Some(date)) if key.ends_with("date") => date.into(),
                        (None, _) => typed_value(request, key),
                    };
                }
                crate::simulated_contract::fill(request, first_user, &mut reply);
                if !request.publishes.is_empty() {
                    reply["blackboard"] = board_entries(request, first_user);
                    if strays(request, first_user)
                        && let Some(entries) = reply["blackboard"].as_array_mut()
                    {
                        entries.push(serde_json::json!({
                            "type": STRAY_FINDING_TYPE,
                            "data": {"finding": "a type no step declares"},
                        }));
                    }
                }
                if let Some(step) = clarify_target(request, first_user) {
                    reply["needs_clarification"] =
                        serde_json::json!([{"step_key": step, "question": CLARIFY_QUESTION}]);
                }
                if request.required_keys.iter().any(|k| k == "confidence") {
                    let low = first_user.contains(LOW_CONFIDENCE_DIRECTIVE);
                    reply["confidence"] = serde_json::json!(if low { 0.2 } else { 0.9 });
                }
            }
            if let Some(key) = dropped_key(request, first_user)
                && let Some(fields) = reply.as_object_mut()
            {
                fields.remove(key);
            }
            (
                reply.to_string(),
                if more {
                    FinishReason::Length
                } else {
                    FinishReason::Stop
                },
            )
        } else {
            (full, FinishReason::Stop)
        };
        let input_tokens = prompt_tokens(request);
        let output_tokens = estimate_tokens(&text);
        let raw = serde_json::json!({
            "provider": "simulated",
            "model": request.model,
            "choices": [{ "message": { "role": "assistant", "content": text }, "finish_reason": finish_reason.as_str() }],
            "usage": { "prompt_tokens": input_tokens, "completion_tokens": output_tokens },
        });
        Ok(ChatResponse {
            text,
            finish_reason,
            input_tokens,
            output_tokens,
            cached_input_tokens: cached_tokens(request),
            cache_write_input_tokens: cache_write_tokens(request),
            usage_estimated: false,
            time_to_first_token: None,
            response_model: None,
            raw,
        })
    }
}

/// What a request's prompt counts, system instruction included.
fn prompt_tokens(request: &ChatRequest) -> u64 {
    request
        .system_instruction
        .as_deref()
        .map(estimate_tokens)
        .unwrap_or(0)
        + request
            .messages
            .iter()
            .map(|m| estimate_tokens(&m.content))
            .sum::<u64>()
}

/// The part of a prompt a provider's cache would hold: the system
/// instruction, the prefix every call of a step repeats. Deterministic, so
/// prices of cache reads are exercised offline.
fn cached_tokens(request: &ChatRequest) -> u64 {
    request
        .system_instruction
        .as_deref()
        .map_or(0, estimate_tokens)
}

/// The part of a prompt a provider would write to its cache: the request's
/// shared prefix (its inputs), so prices of cache writes are exercised
/// offline too. A real provider writes a prefix once and reads it after;
/// this one reports both on every call, to keep its counts deterministic.
fn cache_write_tokens(request: &ChatRequest) -> u64 {
    request
        .shared_prefix
        .and_then(|p| request.messages.get(p.message)?.content.get(..p.bytes))
        .map_or(0, estimate_tokens)
}

/// A whole reply in one turn, usage counted as the other replies count it.
fn plain_reply(request: &ChatRequest, text: String) -> ChatResponse {
    let input_tokens = prompt_tokens(request);
    let output_tokens = estimate_tokens(&text);
    ChatResponse {
        raw: serde_json::json!({ "provider": "simulated", "text": text }),
        text,
        finish_reason: FinishReason::Stop,
        input_tokens,
        output_tokens,
        cached_input_tokens: cached_tokens(request),
        cache_write_input_tokens: cache_write_tokens(request),
        usage_estimated: false,
        time_to_first_token: None,
        response_model: None,
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i.min(s.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_core::prompt::Message;

    fn request(max_tokens: u32, history: Vec<Message>) -> ChatRequest {
        let mut messages = vec![Message::user(
            "--- Seed prompt ---\nA bakery app for night owls\n--- Header context ---\n{\"x\":1}\n\nWrite it.",
        )];
        messages.extend(history);
        ChatRequest {
            model: "simulated".into(),
            system_instruction: Some("sys".into()),
            messages,
            max_tokens,
            output_type: "business_case".into(),
            output_hints: vec![],
            required_keys: vec![],
            temperature: None,
            ..Default::default()
        }
    }

    #[test]
    fn a_model_named_by_the_malformed_on_directive_alone_replies_malformed() {
        let mut asked = request(1000, vec![]);
        asked.messages[0].content += "\n[[simulate:malformed-on:simulated-b]]";
        let first = asked.messages[0].content.clone();
        assert!(!malformed(&asked, &first), "simulated is not named");
        asked.model = "simulated-b".into();
        assert!(malformed(&asked, &first));
    }

    #[test]
    fn dates_are_read_as_written_or_by_month_name() {
        assert_eq!(
            first_date("Effective 1 September 2024.").as_deref(),
            Some("2024-09-01")
        );
        assert_eq!(
            first_date("from 2021-03-01 on, (12 May 2025)").as_deref(),
            Some("2021-03-01")
        );
        assert_eq!(first_date("clause 4.1 of 2021"), None);
    }

    #[test]
    fn the_dates_as_written_directive_copies_the_date_after_effective() {
        let directive = DATES_AS_WRITTEN_DIRECTIVE;
        for (text, date) in [
            ("Effective 1.3.2021. Rent is due.", Some("1.3.2021")),
            ("Lease. Effective March 1, 2021. 4.2", Some("March 1, 2021")),
            ("Effective next spring.", Some("next spring")),
            ("Effective 01/09/2024\nmore", Some("01/09/2024")),
            ("No date here.", None),
        ] {
            assert_eq!(
                date_as_written(&format!("{directive} {text}")).as_deref(),
                date,
                "{text}"
            );
        }
        assert_eq!(date_as_written("Effective 1.3.2021. Rent."), None);
    }

    #[tokio::test]
    async fn documents_reflect_their_inputs_and_are_deterministic() {
        let p = SimulatedProvider::new(SimulatedSettings {
            paragraphs: 3,
            ..Default::default()
        });
        let a = p.chat(&request(100_000, vec![])).await.unwrap();
        let b = p.chat(&request(100_000, vec![])).await.unwrap();
        assert_eq!(a.text, b.text);
        assert_eq!(a.finish_reason, FinishReason::Stop);
        let content = serde_json::from_str::<serde_json::Value>(&a.text).unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(content.contains("bakery app for night owls"));
        assert!(content.contains("Header context"));
    }

    #[tokio::test]
    async fn replies_list_their_inputs_and_change_with_them() {
        let p = SimulatedProvider::new(SimulatedSettings {
            paragraphs: 3,
            ..Default::default()
        });
        let input = |digest: &str| InputRef {
            id: "c1".into(),
            kind: "document".into(),
            stage_slug: "thesis".into(),
            document_key: "business_case".into(),
            storage_key: Some("projects/p/x.md".into()),
            digest: digest.into(),
        };
        let mut first = request(100_000, vec![]);
        first.inputs = vec![input("aaaaaaaaaaaa")];
        let mut second = first.clone();
        second.inputs = vec![input("bbbbbbbbbbbb")];
        let a: serde_json::Value =
            serde_json::from_str(&p.chat(&first).await.unwrap().text).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(&p.chat(&second).await.unwrap().text).unwrap();
        assert_eq!(
            a[INPUTS_KEY],
            serde_json::json!(["document thesis/business_case aaaaaaaaaaaa"])
        );
        let content = a["content"].as_str().unwrap();
        assert!(
            content.ends_with("## Inputs\n\n- document thesis/business_case aaaaaaaaaaaa\n"),
            "{content}"
        );
        let body = |v: &serde_json::Value| {
            let c = v["content"].as_str().unwrap().to_string();
            c[..c.find(INPUTS_HEADING).unwrap()].to_string()
        };
        assert_ne!(body(&a), body(&b), "other inputs, another document");
    }

    #[tokio::test]
    async fn small_max_tokens_slices_and_the_slices_merge_to_the_whole() {
        let p = SimulatedProvider::new(SimulatedSettings {
            paragraphs: 6,
            ..Default::default()
        });
        let whole = p.chat(&request(100_000, vec![])).await.unwrap();
        let whole_content =
            serde_json::from_str::<serde_json::Value>(&whole.text).unwrap()["content"]
                .as_str()
                .unwrap()
                .to_string();
        let mut history = Vec::new();
        let mut merged = String::new();
        for turn in 0..100 {
            let r = p.chat(&request(40, history.clone())).await.unwrap();
            let v: serde_json::Value = serde_json::from_str(&r.text).unwrap();
            merged.push_str(v["content"].as_str().unwrap());
            history.push(Message::assistant(r.text.clone(), Some(format!("c{turn}"))));
            if r.finish_reason == FinishReason::Stop {
                assert!(turn >= 2, "expected several slices");
                break;
            }
            assert_eq!(r.finish_reason, FinishReason::Length);
            assert_eq!(v["continuation_needed"], true);
        }
        assert_eq!(merged, whole_content);
    }
}
