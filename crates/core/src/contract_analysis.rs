//! The contract-stack analysis as data (issue 54, items 2 and 3): what the
//! contract pipeline's override resolution, dependency mapping and conflict
//! detection replies hold (`pipelines/contract_stack.toml` asks for these
//! keys and sends their enums in its reply schemas), read into typed values
//! the API serves (`GetContractAnalysis`), and where a cited position of a
//! converted upload lies: its section heading and its page anchor.
//!
//! Reading is lenient: a reply is checked for its keys and their types when
//! it is accepted, not for the values inside its lists, so a kind or
//! severity outside the enums reads as `None` (the API's `UNSPECIFIED`) and
//! the text as written is kept beside it.

use crate::dates::{self, Date, NumericOrder};
use serde_json::Value;

/// How numeric dates with the year last are read: day first, as the
/// pipeline orders amendments (`order_by = { …, day_first = true }`).
pub const DATE_ORDER: NumericOrder = NumericOrder::DayFirst;

/// The output types the analysis is read from.
pub const RESOLVED_CLAUSE: &str = "resolved_clause";
pub const DEPENDENCY_MAP: &str = "dependency_map";
pub const CONFLICT_REPORT: &str = "conflict_report";

macro_rules! named_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant,)+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)+ }
            }

            /// The value a reply names (case and spaces forgiven), if any.
            pub fn parse(text: &str) -> Option<Self> {
                let wanted = text.trim().to_ascii_lowercase().replace([' ', '-'], "_");
                Self::ALL.iter().copied().find(|v| v.as_str() == wanted)
            }
        }
    };
}

named_enum! {
    /// What kind of conflict conflict detection found.
    ConflictKind {
        Contradiction => "contradiction",
        StaleReference => "stale_reference",
        BudgetMismatch => "budget_mismatch",
        DateInconsistency => "date_inconsistency",
        Ambiguity => "ambiguity",
    }
}

named_enum! {
    /// How much a conflict matters.
    Severity {
        Low => "low",
        Medium => "medium",
        High => "high",
        Critical => "critical",
    }
}

named_enum! {
    /// Why one section depends on another.
    DependencyKind {
        CrossReference => "cross_reference",
        DefinedTerm => "defined_term",
        PaymentSchedule => "payment_schedule",
        Condition => "condition",
        Exhibit => "exhibit",
    }
}

/// One resolved clause: the text in force of one section.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Clause {
    pub section_number: String,
    pub section_title: String,
    pub category: String,
    /// The effective date read as a date; None when the reply's text is not one.
    pub effective_date: Option<Date>,
    /// The effective date as the reply wrote it.
    pub effective_date_text: String,
    /// The document that last changed the section.
    pub last_changed_by: String,
    pub content: String,
    pub confidence: Option<f64>,
}

/// One dependency between two sections.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Edge {
    pub from_section: String,
    pub to_section: String,
    pub kind: Option<DependencyKind>,
    pub kind_text: String,
}

/// One conflict between clauses in force.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conflict {
    pub kind: Option<ConflictKind>,
    pub kind_text: String,
    pub sections: Vec<String>,
    pub documents: Vec<String>,
    pub severity: Option<Severity>,
    pub severity_text: String,
    pub explanation: String,
}

fn text(data: &Value, key: &str) -> String {
    match data.get(key) {
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn texts(data: &Value, key: &str) -> Vec<String> {
    data.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| match v {
            Value::String(s) => Some(s.trim().to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// An effective date as written, read as a calendar date (day first).
pub fn parse_date(written: &str) -> Option<Date> {
    dates::parse(written, DATE_ORDER).ok()
}

/// The effective date a document states of itself ("Effective Date: 1 March
/// 2021", "effective as of March 1, 2021"): the first date that follows the
/// word "effective" on a line.
pub fn stated_effective_date(text: &str) -> Option<Date> {
    text.lines().find_map(|line| {
        let lower = line.to_ascii_lowercase();
        let at = lower.find("effective")? + "effective".len();
        let words: Vec<&str> = line[at..]
            .split_whitespace()
            .skip_while(|w| {
                matches!(
                    w.to_ascii_lowercase().trim_end_matches(':'),
                    "date" | "as" | "of" | "on" | "from" | ":" | "-"
                )
            })
            .take(5)
            .collect();
        (1..=words.len()).rev().find_map(|n| {
            let candidate = words[..n].join(" ");
            parse_date(candidate.trim_end_matches(['.', ',', ';', ')']))
                .or_else(|| parse_date(&candidate))
        })
    })
}

/// A resolved clause reply (or its edit) as a clause.
pub fn clause(data: &Value) -> Clause {
    let effective_date_text = text(data, "effective_date");
    Clause {
        section_number: text(data, "section_number"),
        section_title: text(data, "section_title"),
        category: text(data, "category"),
        effective_date: parse_date(&effective_date_text),
        effective_date_text,
        last_changed_by: text(data, "last_changed_by"),
        content: data
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string(),
        confidence: data.get("confidence").and_then(Value::as_f64),
    }
}

fn objects<'a>(data: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    data.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.is_object())
}

/// A dependency map reply's `edges`; an entry without both ends is no edge.
pub fn edges(data: &Value) -> Vec<Edge> {
    objects(data, "edges")
        .map(|e| {
            let kind_text = text(e, "kind");
            Edge {
                from_section: text(e, "from_section"),
                to_section: text(e, "to_section"),
                kind: DependencyKind::parse(&kind_text),
                kind_text,
            }
        })
        .filter(|e| !e.from_section.is_empty() && !e.to_section.is_empty())
        .collect()
}

/// A conflict report reply's `conflicts`.
pub fn conflicts(data: &Value) -> Vec<Conflict> {
    objects(data, "conflicts")
        .map(|c| {
            let kind_text = text(c, "kind");
            let severity_text = text(c, "severity");
            Conflict {
                kind: ConflictKind::parse(&kind_text),
                kind_text,
                sections: texts(c, "sections"),
                documents: texts(c, "documents"),
                severity: Severity::parse(&severity_text),
                severity_text,
                explanation: text(c, "explanation"),
            }
        })
        .collect()
}

/// A section as a number to compare: "Section 7.2 Payment" and "§ 7.2."
/// are "7.2"; text with no number is kept whole, lower-cased.
pub fn section_key(section: &str) -> String {
    let mut rest = section.trim();
    for prefix in ["section", "clause", "article", "§"] {
        if rest.len() >= prefix.len()
            && rest.is_char_boundary(prefix.len())
            && rest[..prefix.len()].eq_ignore_ascii_case(prefix)
        {
            rest = rest[prefix.len()..].trim_start();
            break;
        }
    }
    match section_number(rest) {
        Some(number) => number,
        None => rest.trim().to_lowercase(),
    }
}

/// The number a section's text starts with ("7.", "2.1", "12.3(b)"), if any.
fn section_number(text: &str) -> Option<String> {
    let first = text.split_whitespace().next()?;
    let first = first.trim_end_matches(['.', ':', ',']);
    let numeric = first.starts_with(|c: char| c.is_ascii_digit())
        && first
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '(' | ')'));
    numeric.then(|| first.to_lowercase())
}

/// Whether `section` is the section `filter` names or one inside it: "7"
/// holds "7", "7.2" and "7(a)", not "70".
pub fn within(section: &str, filter: &str) -> bool {
    let (section, filter) = (section_key(section), section_key(filter));
    if filter.is_empty() {
        return false;
    }
    section == filter
        || section
            .strip_prefix(&filter)
            .is_some_and(|rest| rest.starts_with(['.', '(']))
}

impl Clause {
    pub fn touches(&self, filter: &str) -> bool {
        within(&self.section_number, filter)
    }
}

impl Edge {
    pub fn touches(&self, filter: &str) -> bool {
        within(&self.from_section, filter) || within(&self.to_section, filter)
    }
}

impl Conflict {
    pub fn touches(&self, filter: &str) -> bool {
        self.sections.iter().any(|s| within(s, filter))
    }
}

/// A markdown heading of a converted upload: its number, when it has one,
/// and its title ("## 7. Budget" is 7, "Budget").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    pub number: Option<String>,
    pub title: String,
}

/// The heading a markdown line is, if it is one.
pub fn heading(line: &str) -> Option<Heading> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let text = line[hashes..].strip_prefix(' ')?.trim();
    if text.is_empty() {
        return None;
    }
    let number = section_number(text);
    let title = match &number {
        Some(_) => text
            .split_once(char::is_whitespace)
            .map_or("", |(_, rest)| rest)
            .trim(),
        None => text,
    };
    Some(Heading {
        number,
        title: title.to_string(),
    })
}

/// The page a page anchor line (`<!-- page 3 -->`, crates/convert) starts.
pub fn page_anchor(line: &str) -> Option<u32> {
    line.trim()
        .strip_prefix("<!-- page ")?
        .strip_suffix(" -->")?
        .trim()
        .parse()
        .ok()
}

/// Where a position of a converted upload lies: the last heading and page
/// anchor that begin at or before it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Place {
    pub section: Option<Heading>,
    pub page: Option<u32>,
}

/// The place of character `position` (characters, as a citation counts
/// them) of `text`.
pub fn place_at(text: &str, position: usize) -> Place {
    let end = text
        .char_indices()
        .nth(position)
        .map_or(text.len(), |(byte, _)| byte);
    let mut place = Place::default();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if at > end {
            break;
        }
        if let Some(page) = page_anchor(line) {
            place.page = Some(page);
        } else if let Some(found) = heading(line.trim_end()) {
            place.section = Some(found);
        }
        at += line.len();
    }
    place
}

/// The page on which the heading of `section` begins in `text`, when the
/// text has page anchors and such a heading.
pub fn page_of_section(text: &str, section: &str) -> Option<u32> {
    let wanted = section_key(section);
    let mut page = None;
    for line in text.lines() {
        if let Some(p) = page_anchor(line) {
            page = Some(p);
        } else if heading(line).is_some_and(|h| h.number.as_deref() == Some(wanted.as_str())) {
            return page;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_resolved_clause_reads_its_fields_and_its_date_as_a_date() {
        let read = clause(&json!({
            "content": "Rent is due on the fifth.", "confidence": 0.9,
            "section_number": "4.2", "section_title": "Rent", "category": "payment",
            "effective_date": "1 January 2023", "last_changed_by": "amendment-1.md",
        }));
        assert_eq!(read.section_number, "4.2");
        assert_eq!(
            read.effective_date.map(|d| d.to_string()).as_deref(),
            Some("2023-01-01")
        );
        assert_eq!(read.effective_date_text, "1 January 2023");
        assert_eq!(read.last_changed_by, "amendment-1.md");
        assert_eq!(read.confidence, Some(0.9));
        let undated = clause(&json!({"effective_date": "next spring"}));
        assert_eq!(
            (undated.effective_date, undated.effective_date_text.as_str()),
            (None, "next spring")
        );
        assert_eq!(
            clause(&json!({"effective_date": "01/03/2021"}))
                .effective_date
                .map(|d| d.to_string())
                .as_deref(),
            Some("2021-03-01")
        );
    }

    #[test]
    fn kinds_outside_the_enums_read_as_none_and_keep_their_text() {
        let read = conflicts(&json!({"conflicts": [
            {"kind": "Stale reference", "sections": ["7.1", 9], "documents": ["base.md"],
             "severity": "HIGH", "explanation": "B is gone"},
            {"kind": "feud", "sections": [], "documents": [], "severity": "dire", "explanation": ""},
            "not an object",
        ]}));
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].kind, Some(ConflictKind::StaleReference));
        assert_eq!(read[0].severity, Some(Severity::High));
        assert_eq!(read[0].sections, ["7.1", "9"]);
        assert_eq!((read[1].kind, read[1].kind_text.as_str()), (None, "feud"));
        assert_eq!(read[1].severity, None);
        let map = edges(&json!({"edges": [
            {"from_section": "7.1", "to_section": "7", "kind": "exhibit"},
            {"from_section": "", "to_section": "7", "kind": "exhibit"},
        ]}));
        assert_eq!(map.len(), 1, "an edge needs both ends");
        assert_eq!(map[0].kind, Some(DependencyKind::Exhibit));
    }

    #[test]
    fn a_section_holds_its_subsections_and_no_other() {
        for (section, filter, holds) in [
            ("7", "7", true),
            ("7.2", "7", true),
            ("Section 7.2 Payment", "7", true),
            ("7(a)", "7", true),
            ("§ 7.", "7", true),
            ("70", "7", false),
            ("17.1", "7", false),
            ("4.2", "7", false),
            ("7", "7.2", false),
            ("Exhibit B", "exhibit b", true),
            ("7", "", false),
        ] {
            assert_eq!(within(section, filter), holds, "{section} within {filter}");
        }
    }

    #[test]
    fn a_position_lies_under_its_heading_and_page() {
        let text = "<!-- page 1 -->\n\n# Master Services Agreement\n\n## 2. Term\n\nThree years.\n\n<!-- page 2 -->\n\n## 7. Budget\n\n| Item | Amount |\n";
        let chars = |needle: &str| text[..text.find(needle).unwrap()].chars().count();
        let term = place_at(text, chars("Three"));
        assert_eq!(term.page, Some(1));
        assert_eq!(
            term.section,
            Some(Heading {
                number: Some("2".into()),
                title: "Term".into()
            })
        );
        let budget = place_at(text, chars("| Item"));
        assert_eq!(budget.page, Some(2));
        assert_eq!(budget.section.and_then(|h| h.number).as_deref(), Some("7"));
        let title = place_at(text, chars("Master"));
        assert_eq!(
            title.section,
            Some(Heading {
                number: None,
                title: "Master Services Agreement".into()
            })
        );
        assert_eq!(place_at("plain text, no anchors", 3), Place::default());
        assert_eq!(page_of_section(text, "Section 7"), Some(2));
        assert_eq!(page_of_section(text, "2"), Some(1));
        assert_eq!(page_of_section(text, "9"), None);
        assert_eq!(
            page_of_section("## 7. Budget\n", "7"),
            None,
            "no anchors, no page"
        );
    }

    #[test]
    fn a_document_states_its_effective_date() {
        let date = |text: &str| stated_effective_date(text).map(|d| d.to_string());
        assert_eq!(
            date("# Agreement\n\nEffective Date: 1 March 2021\n").as_deref(),
            Some("2021-03-01")
        );
        assert_eq!(
            date("This lease is effective as of March 1, 2021.").as_deref(),
            Some("2021-03-01")
        );
        assert_eq!(
            date("Effective 2022-06-01. Rent rises.").as_deref(),
            Some("2022-06-01")
        );
        assert_eq!(date("Effective next spring.\nNo date."), None);
    }

    #[test]
    fn headings_read_their_numbers() {
        assert_eq!(
            heading("## 2.1 Revised Exhibit B"),
            Some(Heading {
                number: Some("2.1".into()),
                title: "Revised Exhibit B".into()
            })
        );
        assert_eq!(
            heading("# 2. Budget").and_then(|h| h.number).as_deref(),
            Some("2")
        );
        assert_eq!(heading("#hashtag"), None);
        assert_eq!(heading("####### seven"), None);
        assert_eq!(page_anchor("<!-- page 12 -->"), Some(12));
        assert_eq!(page_anchor("<!-- pages -->"), None);
    }

    /// The enums the shipped pipeline's reply schemas send are these, so a
    /// value a real model is constrained to always reads as typed.
    #[test]
    fn the_shipped_reply_schemas_send_these_enums() {
        let file = crate::pipeline::PipelineFile::parse(include_str!(
            "../../../pipelines/contract_stack.toml"
        ))
        .expect("parses");
        let schema = |output: &str| {
            file.stages
                .iter()
                .flat_map(|s| &s.steps)
                .flat_map(|s| s.outputs.iter())
                .find(|o| o.document_key == output)
                .and_then(|o| o.schema.clone())
                .unwrap_or_else(|| panic!("{output} has a schema"))
        };
        let listed = |schema: &Value, pointer: &str| -> Vec<String> {
            schema
                .pointer(pointer)
                .and_then(Value::as_array)
                .unwrap_or_else(|| panic!("{pointer}"))
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        let names = |all: Vec<&str>| all.into_iter().map(str::to_string).collect::<Vec<_>>();
        let conflict = schema(CONFLICT_REPORT);
        assert_eq!(
            listed(
                &conflict,
                "/properties/conflicts/items/properties/kind/enum"
            ),
            names(ConflictKind::ALL.iter().map(|k| k.as_str()).collect())
        );
        assert_eq!(
            listed(
                &conflict,
                "/properties/conflicts/items/properties/severity/enum"
            ),
            names(Severity::ALL.iter().map(|k| k.as_str()).collect())
        );
        assert_eq!(
            listed(
                &schema(DEPENDENCY_MAP),
                "/properties/edges/items/properties/kind/enum"
            ),
            names(DependencyKind::ALL.iter().map(|k| k.as_str()).collect())
        );
    }
}
