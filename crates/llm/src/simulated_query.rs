//! The simulated model's replies to a question's calls (`query_route`,
//! `query_answer`): deterministic, and shaped as the real prompts ask.
//! `[[simulate:compound]]` in a question splits it in two parts;
//! `[[simulate:fabricate-citation]]` adds a citation quoting text no chunk has.

use dialectic_core::prompt::ChatRequest;
use dialectic_core::query::QuoteRules;
use serde_json::{Value, json};

pub const COMPOUND_DIRECTIVE: &str = "[[simulate:compound]]";
pub const FABRICATE_DIRECTIVE: &str = "[[simulate:fabricate-citation]]";

/// The quote a fabricated citation makes: it occurs in no stored text.
pub const FABRICATED_QUOTE: &str = "the tenant may keep a tiger in the loading bay";

/// Output types of a question's calls.
pub const ROUTE: &str = "query_route";
pub const ANSWER: &str = "query_answer";

fn question(prompt: &str) -> &str {
    prompt
        .split_once("<user_query>")
        .and_then(|(_, rest)| rest.split_once("</user_query>"))
        .map_or(prompt, |(q, _)| q.trim())
}

pub(crate) fn reply(request: &ChatRequest, prompt: &str) -> Option<Value> {
    match request.output_type.as_str() {
        ROUTE => Some(route(prompt)),
        ANSWER => Some(answer(prompt)),
        _ => None,
    }
}

fn route(prompt: &str) -> Value {
    let question = question(prompt);
    let mut reply =
        json!({"query_type": "truth_reconstitution", "entities": [], "confidence": 0.9});
    if question.contains(COMPOUND_DIRECTIVE) {
        reply["sub_queries"] = json!([
            {"query_type": "truth_reconstitution", "query_text": format!("{question} (what is in force)")},
            {"query_type": "conflict_detection", "query_text": format!("{question} (what conflicts)")},
        ]);
    }
    reply
}

/// Cites the first line that can support a claim (up to 60 characters; no
/// heading, nothing too short) of each of the first two chunks; the focus
/// line after the last chunk is the prompt's, not the chunk's.
fn answer(prompt: &str) -> Value {
    let rules = QuoteRules::default();
    let mut citations: Vec<Value> = prompt
        .split("--- Chunk ")
        .skip(1)
        .take(2)
        .filter_map(|section| {
            let (header, body) = section.split_once('\n')?;
            let id = header.split_whitespace().next()?;
            let quote = body
                .lines()
                .take_while(|l| !l.starts_with("Focus ("))
                .map(|l| l.trim().chars().take(60).collect::<String>())
                .find(|q| rules.problem(q.trim()).is_none())?;
            Some(json!({"chunk_id": id, "quote": quote.trim()}))
        })
        .collect();
    if let (true, Some(first)) = (
        question(prompt).contains(FABRICATE_DIRECTIVE),
        citations.first(),
    ) {
        let id = first["chunk_id"].clone();
        citations.push(json!({"chunk_id": id, "quote": FABRICATED_QUOTE}));
    }
    let quoted: Vec<String> = citations
        .iter()
        .filter_map(|c| c["quote"].as_str().map(|q| format!("\"{q}\"")))
        .collect();
    json!({
        "answer": format!("From the documents: {}.", quoted.join("; ")),
        "citations": citations,
        "confidence": 0.85,
        "caveats": [],
    })
}
