//! The simulated model's contract-stack analysis as data (issue 54, item 2):
//! what `pipelines/contract_stack.toml`'s parse, resolution, dependency and
//! conflict steps ask for, derived from what their prompts hold, so the
//! typed analysis (`GetContractAnalysis`) has plausible, deterministic data:
//! - a parsed document names its upload (`file_name`), as the stack a
//!   later step reads must, since uploads reach prompts by content only;
//! - a resolved clause takes its section from its item ("7.2 Budget", or
//!   item i of a simulated list as section i) and was last changed by the
//!   latest-dated document of the parsed stack, on that document's date;
//! - the dependency map chains the resolved sections (each on the one
//!   before it);
//! - the conflicts are a contradiction between the first two sections, a
//!   stale reference in the last one and, with three or more, a budget
//!   mismatch between the second and third.

use dialectic_core::contract_analysis::{ConflictKind, DependencyKind, Severity};
use dialectic_core::prompt::ChatRequest;
use serde_json::{Value, json};

/// Fills the typed keys of a contract step's finished reply, if it is one.
pub(crate) fn fill(request: &ChatRequest, prompt: &str, reply: &mut Value) {
    match request.output_type.as_str() {
        "parsed_document" => {
            if let Some(upload) = request.inputs.iter().find(|i| i.kind == "project_document") {
                reply["file_name"] = json!(upload.document_key);
            }
        }
        "resolved_clause" => resolved_clause(prompt, reply),
        "dependency_map" => reply["edges"] = edges(&sections(prompt)),
        "conflict_report" => reply["conflicts"] = conflicts(prompt),
        _ => {}
    }
}

/// The string values of `"key": "…"` in the prompt's JSON, in order.
fn values<'a>(prompt: &'a str, key: &str) -> Vec<&'a str> {
    let needle = format!("\"{key}\": \"");
    prompt
        .split(needle.as_str())
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(value, _)| value))
        .collect()
}

fn distinct(found: Vec<&str>) -> Vec<&str> {
    let mut seen = Vec::new();
    for value in found {
        if !value.is_empty() && !seen.contains(&value) {
            seen.push(value);
        }
    }
    seen
}

/// The resolved sections the prompt's clauses name, in section order
/// ("2" before "10"), whatever order the clauses came in.
fn sections(prompt: &str) -> Vec<&str> {
    let mut found = distinct(values(prompt, "section_number"));
    found.sort_by_key(|s| {
        s.split('.')
            .map(|part| part.parse::<u32>().unwrap_or(u32::MAX))
            .collect::<Vec<_>>()
    });
    found
}

/// The item a per-item job resolves, as (number, title).
fn section_of(prompt: &str) -> (String, String) {
    let item = prompt
        .split_once("--- Section ---\n")
        .map(|(_, rest)| rest.split("\n--- ").next().unwrap_or_default().trim())
        .unwrap_or_default();
    // A simulated list's "… item i of n" is section i.
    if let Some((_, counted)) = item.rsplit_once(" item ")
        && let Some((i, _)) = counted.split_once(" of ")
        && i.parse::<u32>().is_ok()
    {
        return (i.to_string(), format!("Section {i}"));
    }
    let first = item.split_whitespace().next().unwrap_or_default();
    let number = first.trim_end_matches(['.', ':']);
    if number.starts_with(|c: char| c.is_ascii_digit()) {
        let title = item[first.len()..].trim();
        return (number.to_string(), title.to_string());
    }
    ("1".to_string(), item.to_string())
}

/// The parsed stack's documents as (effective date, file name), in order;
/// a parsed document's keys are stored sorted, so its date comes first.
fn parsed_documents(prompt: &str) -> Vec<(String, String)> {
    let mut documents = Vec::new();
    let mut date = String::new();
    for piece in prompt.split('\n') {
        let line = piece.trim();
        if let Some(found) = values(line, "effective_date").first() {
            date = found.to_string();
        }
        if let Some(name) = values(line, "file_name").first() {
            documents.push((std::mem::take(&mut date), name.to_string()));
        }
    }
    documents
}

fn resolved_clause(prompt: &str, reply: &mut Value) {
    let (number, title) = section_of(prompt);
    let documents = parsed_documents(prompt);
    // ISO dates order as text; a document with none is the oldest.
    let last = documents.iter().max_by(|a, b| a.0.cmp(&b.0));
    let (date, name) = last.cloned().unwrap_or_default();
    reply["section_number"] = json!(number);
    reply["section_title"] = json!(title);
    reply["category"] = json!(if title.to_lowercase().contains("budget") {
        "payment"
    } else {
        "general"
    });
    reply["effective_date"] = json!(date);
    reply["last_changed_by"] = json!(name);
}

fn edges(sections: &[&str]) -> Value {
    sections
        .windows(2)
        .enumerate()
        .map(|(i, pair)| {
            let kind = DependencyKind::ALL[i % DependencyKind::ALL.len()];
            json!({"from_section": pair[1], "to_section": pair[0], "kind": kind.as_str()})
        })
        .collect()
}

fn conflicts(prompt: &str) -> Value {
    let sections = sections(prompt);
    let documents = distinct(values(prompt, "last_changed_by"));
    let conflict = |kind: ConflictKind, at: &[&str], severity: Severity, why: String| {
        json!({"kind": kind.as_str(), "sections": at, "documents": documents,
            "severity": severity.as_str(), "explanation": why})
    };
    let mut found = Vec::new();
    if let [first, second, ..] = sections.as_slice() {
        found.push(conflict(
            ConflictKind::Contradiction,
            &[*first, *second],
            Severity::High,
            format!("Section {first} and section {second} state different terms in force."),
        ));
    }
    if let Some(last) = sections.last() {
        found.push(conflict(
            ConflictKind::StaleReference,
            &[*last],
            Severity::Medium,
            format!("Section {last} refers to text an amendment removed."),
        ));
    }
    if let [_, second, third, ..] = sections.as_slice() {
        found.push(conflict(
            ConflictKind::BudgetMismatch,
            &[*second, *third],
            Severity::Low,
            format!("The amounts of section {second} and section {third} do not add up."),
        ));
    }
    Value::Array(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clause_is_last_changed_by_the_latest_dated_parsed_document() {
        let prompt = "--- Section ---\n7.2 Budget\n\n--- Parsed stack ---\n{\n  \"effective_date\": \"2021-03-01\",\n  \"file_name\": \"base.pdf\"\n}\n--- Parsed stack ---\n{\n  \"effective_date\": \"2022-06-01\",\n  \"file_name\": \"amendment.docx\"\n}\n";
        let mut reply = json!({});
        resolved_clause(prompt, &mut reply);
        assert_eq!(reply["section_number"], "7.2");
        assert_eq!(reply["section_title"], "Budget");
        assert_eq!(reply["category"], "payment");
        assert_eq!(reply["effective_date"], "2022-06-01");
        assert_eq!(reply["last_changed_by"], "amendment.docx");
        let mut counted = json!({});
        resolved_clause(
            "--- Section ---\nsimulated sections item 2 of 3\n",
            &mut counted,
        );
        assert_eq!(counted["section_number"], "2");
    }

    #[test]
    fn edges_chain_the_sections_and_conflicts_touch_them() {
        let prompt = r#""section_number": "1", "last_changed_by": "a.md" "section_number": "2" "section_number": "3" "section_number": "2""#;
        let map = edges(&sections(prompt));
        assert_eq!(map[0]["from_section"], "2");
        assert_eq!(map[1]["to_section"], "2");
        let found = conflicts(prompt);
        let at: Vec<&Value> = found
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["sections"])
            .collect();
        assert_eq!(at, [&json!(["1", "2"]), &json!(["3"]), &json!(["2", "3"])]);
        assert_eq!(found[0]["documents"], json!(["a.md"]));
    }
}
