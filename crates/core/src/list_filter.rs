//! The `filter` and `order_by` of list calls (issue 61): a small AIP-160
//! subset, parsed here into typed conditions that the store binds into SQL.
//!
//! Grammar: terms joined by `AND` (or plain whitespace). A term is
//! `field OP value` or a bare value, which matches names containing it.
//! - `name = "x"` exact, `name:"pre*"` prefix, `name:"part"` substring
//!   (case-insensitive, like a bare value)
//! - `state = RUNNING` (a `SessionState` name, with or without its
//!   `SESSION_STATE_` prefix, any case)
//! - `created_at > "2026-01-01T00:00:00Z"` (also `>=`, `<`, `<=`; RFC 3339)
//!
//! Values are quoted with `"` (`\"` and `\\` escape) or bare words.

use chrono::{DateTime, Utc};
use std::fmt;
use thiserror::Error;

/// A filter or order this list does not accept; `field` is the request field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {message}")]
pub struct ListQueryError {
    pub field: &'static str,
    pub message: String,
}

fn filter_error(message: impl Into<String>) -> ListQueryError {
    ListQueryError {
        field: "filter",
        message: message.into(),
    }
}

/// A field a list can filter on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Name,
    State,
    CreatedAt,
}

impl Field {
    fn parse(word: &str) -> Option<Self> {
        match word {
            "name" => Some(Field::Name),
            "state" => Some(Field::State),
            "created_at" => Some(Field::CreatedAt),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Field::Name => "name",
            Field::State => "state",
            Field::CreatedAt => "created_at",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameMatch {
    Exact(String),
    Prefix(String),
    /// Case-insensitive.
    Contains(String),
}

impl NameMatch {
    /// The SQL `LIKE` pattern (backslash escapes) this match binds.
    pub fn like_pattern(&self) -> String {
        match self {
            NameMatch::Exact(s) => like_escape(s),
            NameMatch::Prefix(s) => format!("{}%", like_escape(s)),
            NameMatch::Contains(s) => format!("%{}%", like_escape(s)),
        }
    }

    pub fn case_insensitive(&self) -> bool {
        matches!(self, NameMatch::Contains(_))
    }
}

fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A session's state as the API names it (`SessionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateName {
    Pending,
    Running,
    Review,
    Paused,
    Abandoned,
    Failed,
    Completed,
}

impl StateName {
    fn parse(word: &str) -> Option<Self> {
        let upper = word.to_ascii_uppercase();
        let name = upper.strip_prefix("SESSION_STATE_").unwrap_or(&upper);
        Some(match name {
            "PENDING" => StateName::Pending,
            "RUNNING" => StateName::Running,
            "REVIEW" => StateName::Review,
            "PAUSED" => StateName::Paused,
            "ABANDONED" => StateName::Abandoned,
            "FAILED" => StateName::Failed,
            "COMPLETED" => StateName::Completed,
            _ => return None,
        })
    }

    /// The `LIKE` pattern of the stored statuses in this state (see
    /// `SessionStatus`).
    pub fn status_like_pattern(self) -> String {
        use crate::session::SessionStatus as S;
        match self {
            StateName::Pending => format!("{}%", like_escape(S::PENDING_PREFIX)),
            StateName::Running => format!("{}%", like_escape(S::RUNNING_PREFIX)),
            StateName::Failed => format!("{}%", like_escape(S::FAILED_PREFIX)),
            StateName::Review => like_escape(S::REVIEW),
            StateName::Completed => like_escape(S::COMPLETED),
            StateName::Paused => like_escape(S::PAUSED),
            StateName::Abandoned => like_escape(S::ABANDONED),
        }
    }
}

/// One end of a `created_at` range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBound {
    pub at: DateTime<Utc>,
    pub inclusive: bool,
}

/// A parsed filter: every present condition must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    pub name: Option<NameMatch>,
    pub state: Option<StateName>,
    pub created_after: Option<TimeBound>,
    pub created_before: Option<TimeBound>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Has,
    Gt,
    Ge,
    Lt,
    Le,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Eq => "=",
            Op::Has => ":",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Op(Op),
}

fn lex(input: &str) -> Result<Vec<Token>, ListQueryError> {
    let mut tokens = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            tokens.push(Token::Quoted(quoted(&mut chars)?));
        } else if let Some(op) = operator(&mut chars) {
            tokens.push(Token::Op(op));
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                // A time's colons belong to it; a field's colon is `:`.
                let field_colon = c == ':' && word.chars().all(|w| w.is_alphanumeric() || w == '_');
                if c.is_whitespace() || c == '"' || "=<>!".contains(c) || field_colon {
                    break;
                }
                word.push(c);
                chars.next();
            }
            if word.is_empty() {
                return Err(filter_error(format!("unexpected {c:?}")));
            }
            tokens.push(Token::Word(word));
        }
    }
    Ok(tokens)
}

fn quoted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<String, ListQueryError> {
    let mut value = String::new();
    loop {
        match chars.next() {
            Some('"') => return Ok(value),
            Some('\\') => match chars.next() {
                Some(c @ ('"' | '\\')) => value.push(c),
                _ => return Err(filter_error("only \\\" and \\\\ escape in a quoted value")),
            },
            Some(c) => value.push(c),
            None => return Err(filter_error("a quoted value is not closed")),
        }
    }
}

fn operator(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<Op> {
    let op = match chars.peek()? {
        '=' => Op::Eq,
        ':' => Op::Has,
        '>' => Op::Gt,
        '<' => Op::Lt,
        _ => return None,
    };
    chars.next();
    if matches!(op, Op::Gt | Op::Lt) && chars.peek() == Some(&'=') {
        chars.next();
        return Some(if op == Op::Gt { Op::Ge } else { Op::Le });
    }
    Some(op)
}

/// Parses `input` for a list that filters on `allowed`; empty: no filter.
pub fn parse_filter(input: &str, allowed: &[Field]) -> Result<ListFilter, ListQueryError> {
    if input.len() > 1024 {
        return Err(filter_error("longer than 1024 bytes"));
    }
    let mut tokens = lex(input)?.into_iter().peekable();
    let mut filter = ListFilter::default();
    while let Some(token) = tokens.next() {
        let term = match token {
            Token::Word(w) if w == "AND" => continue,
            Token::Word(w) if matches!(tokens.peek(), Some(Token::Op(_))) => {
                let field = Field::parse(&w)
                    .filter(|f| allowed.contains(f))
                    .ok_or_else(|| unknown_field(&w, allowed))?;
                let Some(Token::Op(op)) = tokens.next() else {
                    unreachable!("peeked an operator")
                };
                let value = match tokens.next() {
                    Some(Token::Word(v) | Token::Quoted(v)) => v,
                    _ => return Err(filter_error(format!("{w} {op} needs a value"))),
                };
                (field, op, value)
            }
            Token::Word(v) | Token::Quoted(v) if allowed.contains(&Field::Name) => {
                (Field::Name, Op::Has, v)
            }
            Token::Word(v) | Token::Quoted(v) => {
                return Err(filter_error(format!(
                    "{v:?} is not a term: use field OP value ({})",
                    names(allowed)
                )));
            }
            Token::Op(op) => return Err(filter_error(format!("{op} without a field"))),
        };
        apply(&mut filter, term)?;
    }
    Ok(filter)
}

fn names(allowed: &[Field]) -> String {
    allowed
        .iter()
        .map(|f| f.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn unknown_field(word: &str, allowed: &[Field]) -> ListQueryError {
    filter_error(format!(
        "unknown field {word:?}: this list filters on {}",
        names(allowed)
    ))
}

fn apply(
    filter: &mut ListFilter,
    (field, op, value): (Field, Op, String),
) -> Result<(), ListQueryError> {
    let twice = || filter_error(format!("{} is given twice", field.as_str()));
    let bad_op = || filter_error(format!("{} does not take {op}", field.as_str()));
    match field {
        Field::Name => {
            let m = match op {
                Op::Eq => NameMatch::Exact(value),
                Op::Has => match value.strip_suffix('*') {
                    Some(prefix) => NameMatch::Prefix(prefix.to_string()),
                    None => NameMatch::Contains(value),
                },
                _ => return Err(bad_op()),
            };
            set(&mut filter.name, m).ok_or_else(twice)
        }
        Field::State => {
            if op != Op::Eq {
                return Err(bad_op());
            }
            let state = StateName::parse(&value).ok_or_else(|| {
                filter_error(format!(
                    "unknown state {value:?}: PENDING, RUNNING, REVIEW, PAUSED, ABANDONED, FAILED or COMPLETED"
                ))
            })?;
            set(&mut filter.state, state).ok_or_else(twice)
        }
        Field::CreatedAt => {
            let at = DateTime::parse_from_rfc3339(&value)
                .map_err(|e| filter_error(format!("created_at {value:?} is not RFC 3339: {e}")))?
                .with_timezone(&Utc);
            let (slot, inclusive) = match op {
                Op::Gt => (&mut filter.created_after, false),
                Op::Ge => (&mut filter.created_after, true),
                Op::Lt => (&mut filter.created_before, false),
                Op::Le => (&mut filter.created_before, true),
                _ => return Err(bad_op()),
            };
            set(slot, TimeBound { at, inclusive }).ok_or_else(twice)
        }
    }
}

/// Fills an empty slot; None when it was already set.
fn set<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(())
}

/// The order of a list's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListOrder {
    #[default]
    CreatedDesc,
    CreatedAsc,
    NameAsc,
    NameDesc,
}

/// Parses `order_by` (`created_at desc` when empty) among `allowed`.
pub fn parse_order(input: &str, allowed: &[ListOrder]) -> Result<ListOrder, ListQueryError> {
    let words: Vec<&str> = input.split_whitespace().collect();
    let order = match words.as_slice() {
        [] => Some(ListOrder::CreatedDesc),
        ["created_at"] | ["created_at", "asc"] => Some(ListOrder::CreatedAsc),
        ["created_at", "desc"] => Some(ListOrder::CreatedDesc),
        ["name"] | ["name", "asc"] => Some(ListOrder::NameAsc),
        ["name", "desc"] => Some(ListOrder::NameDesc),
        _ => None,
    };
    order
        .filter(|o| allowed.contains(o))
        .ok_or_else(|| ListQueryError {
            field: "order_by",
            message: format!(
                "{input:?} is not an order of this list: {}",
                allowed
                    .iter()
                    .map(|o| o.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

impl ListOrder {
    pub fn as_str(self) -> &'static str {
        match self {
            ListOrder::CreatedDesc => "created_at desc",
            ListOrder::CreatedAsc => "created_at",
            ListOrder::NameAsc => "name",
            ListOrder::NameDesc => "name desc",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROJECTS: &[Field] = &[Field::Name, Field::CreatedAt];
    const SESSIONS: &[Field] = &[Field::State, Field::CreatedAt];

    #[test]
    fn parses_names_states_and_times() {
        let f = parse_filter(r#"name = "my \"x\"""#, PROJECTS).expect("exact");
        assert_eq!(f.name, Some(NameMatch::Exact("my \"x\"".into())));
        let f = parse_filter(r#"name:"pre*""#, PROJECTS).expect("prefix");
        assert_eq!(f.name, Some(NameMatch::Prefix("pre".into())));
        let f = parse_filter("essay", PROJECTS).expect("bare");
        assert_eq!(f.name, Some(NameMatch::Contains("essay".into())));
        let f = parse_filter("state = running", SESSIONS).expect("state");
        assert_eq!(f.state, Some(StateName::Running));
        let f = parse_filter(
            r#"state=SESSION_STATE_REVIEW AND created_at >= "2026-01-01T00:00:00Z" created_at<2027-01-01T00:00:00Z"#,
            SESSIONS,
        )
        .expect("range");
        assert_eq!(f.state, Some(StateName::Review));
        assert!(f.created_after.is_some_and(|b| b.inclusive));
        assert!(f.created_before.is_some_and(|b| !b.inclusive));
        assert_eq!(parse_filter("  ", PROJECTS), Ok(ListFilter::default()));
    }

    #[test]
    fn refuses_what_it_cannot_mean() {
        for (input, allowed) in [
            ("state = RUNNING", PROJECTS),
            ("name = x", SESSIONS),
            ("state = SLEEPING", SESSIONS),
            ("created_at > yesterday", PROJECTS),
            ("name >", PROJECTS),
            ("name = \"open", PROJECTS),
            ("= x", PROJECTS),
            ("name = a name = b", PROJECTS),
            ("name > a", PROJECTS),
            ("running", SESSIONS),
        ] {
            let err = parse_filter(input, allowed).expect_err(input);
            assert_eq!(err.field, "filter", "{input}");
        }
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(
            NameMatch::Prefix("50%_a".into()).like_pattern(),
            r"50\%\_a%"
        );
        assert_eq!(NameMatch::Contains("x".into()).like_pattern(), "%x%");
        assert_eq!(StateName::Running.status_like_pattern(), r"running\_%");
        assert_eq!(StateName::Paused.status_like_pattern(), "paused");
    }

    #[test]
    fn orders_within_what_the_list_allows() {
        let all = [
            ListOrder::CreatedDesc,
            ListOrder::CreatedAsc,
            ListOrder::NameAsc,
        ];
        assert_eq!(parse_order("", &all), Ok(ListOrder::CreatedDesc));
        assert_eq!(parse_order("created_at", &all), Ok(ListOrder::CreatedAsc));
        assert_eq!(parse_order("name", &all), Ok(ListOrder::NameAsc));
        let err = parse_order("name", &all[..2]).expect_err("sessions have no name");
        assert_eq!(err.field, "order_by");
        assert!(parse_order("size desc", &all).is_err());
    }
}
