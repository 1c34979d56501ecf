//! Seed 000 function 1, `sanitizeJsonContent`: strip the wrappers models put
//! around JSON, then try simple structural fixes.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonSanitization {
    pub sanitized: String,
    /// Any wrapper removed, whitespace trimmed or structure fixed.
    pub was_sanitized: bool,
    /// Missing closing braces/brackets were added.
    pub was_structurally_fixed: bool,
    pub original_length: usize,
}

fn parses(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok()
}

fn looks_structured(text: &str) -> bool {
    let t = text.trim();
    (t.starts_with('{') || t.starts_with('[')) && (t.ends_with('}') || t.ends_with(']'))
}

/// Removes one wrapper layer, in the seed's order: triple backticks (with an
/// optional json/JSON tag), single quotes, double quotes (only around a JSON
/// structure), surrounding whitespace.
fn strip_once(text: &str) -> Option<&str> {
    if let Some(inner) = text.strip_prefix("```") {
        // Whitespace after the closing fence must not hide it.
        let inner = inner.trim_end();
        let inner = inner.strip_suffix("```").unwrap_or(inner);
        let inner = inner
            .strip_prefix("json")
            .or_else(|| inner.strip_prefix("JSON"))
            .unwrap_or(inner);
        return Some(inner);
    }
    if text.len() >= 2 && text.starts_with('\'') && text.ends_with('\'') {
        return Some(&text[1..text.len() - 1]);
    }
    if text.len() >= 2 && text.starts_with('"') && text.ends_with('"') {
        let inner = &text[1..text.len() - 1];
        if looks_structured(inner) || inner.trim_start().starts_with("```") {
            return Some(inner);
        }
    }
    let trimmed = text.trim();
    if trimmed.len() != text.len() {
        return Some(trimmed);
    }
    None
}

/// Appends the closers that a truncated object or array is missing, ignoring
/// brackets inside strings. Returns None when the text is not fixable this way.
fn close_open_structures(text: &str) -> Option<String> {
    let mut stack = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' if stack.pop() != Some(c) => return None,
            _ => {}
        }
    }
    if in_string || stack.is_empty() {
        return None;
    }
    let mut fixed = text.trim_end().trim_end_matches(',').to_string();
    while let Some(closer) = stack.pop() {
        fixed.push(closer);
    }
    Some(fixed)
}

/// Adds a missing opening brace when the text reads like the body of an object.
fn open_missing_brace(text: &str) -> Option<String> {
    let t = text.trim();
    if t.starts_with('"') && t.ends_with('}') {
        return Some(format!("{{{t}"));
    }
    None
}

/// More wrapper layers than this are not a model's formatting but garbage.
const MAX_WRAPPER_LAYERS: usize = 32;

pub fn sanitize_json(raw: &str) -> JsonSanitization {
    let original_length = raw.len();
    let mut peeled = raw;
    let mut was_sanitized = false;
    // Nested wrappers: keep peeling until nothing changes. Slices, not copies,
    // and a cap on layers: a reply of a million quotes once took seconds per
    // megabyte here (found by the json_sanitizer fuzz target); no model nests
    // wrappers more than a few deep.
    for _ in 0..MAX_WRAPPER_LAYERS {
        if parses(peeled) {
            break;
        }
        match strip_once(peeled) {
            Some(next) if next.len() < peeled.len() => {
                peeled = next;
                was_sanitized = true;
            }
            _ => break,
        }
    }
    let trimmed = peeled.trim();
    if trimmed.len() != peeled.len() {
        was_sanitized = true;
    }
    let mut current = trimmed.to_string();
    let mut was_structurally_fixed = false;
    if !parses(&current) {
        let candidate = close_open_structures(&current)
            .filter(|c| parses(c))
            .or_else(|| open_missing_brace(&current).filter(|c| parses(c)));
        if let Some(fixed) = candidate {
            current = fixed;
            was_sanitized = true;
            was_structurally_fixed = true;
        }
    }
    JsonSanitization {
        sanitized: current,
        was_sanitized,
        was_structurally_fixed,
        original_length,
    }
}

/// Sanitizes and parses; the error keeps the first bytes of the reply for the job's error details.
pub fn parse_model_json(raw: &str) -> Result<(serde_json::Value, JsonSanitization), MalformedJson> {
    let result = sanitize_json(raw);
    match serde_json::from_str::<serde_json::Value>(&result.sanitized) {
        // A reply that is a JSON string holding the object (double-encoded) means the object.
        Ok(serde_json::Value::String(inner)) if looks_structured(&inner) && parses(&inner) => {
            let value = serde_json::from_str(&inner).unwrap_or(serde_json::Value::String(inner));
            Ok((value, result))
        }
        Ok(value) => Ok((value, result)),
        Err(e) => Err(MalformedJson {
            reason: e.to_string(),
            excerpt: raw.chars().take(200).collect(),
            original_length: raw.len(),
        }),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model reply is not valid JSON after sanitizing ({reason}); first bytes: {excerpt:?}")]
pub struct MalformedJson {
    pub reason: String,
    pub excerpt: String,
    pub original_length: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_json_is_untouched() {
        let r = sanitize_json(r#"{"a":1}"#);
        assert_eq!(r.sanitized, r#"{"a":1}"#);
        assert!(!r.was_sanitized && !r.was_structurally_fixed);
        assert_eq!(r.original_length, 7);
    }

    #[test]
    fn wrapper_layers_beyond_the_cap_are_garbage_not_json() {
        let nested = |layers: usize| format!("{q}{{\"a\":1}}{q}", q = "'".repeat(layers));
        let (value, _) = parse_model_json(&nested(MAX_WRAPPER_LAYERS)).expect("within the cap");
        assert_eq!(value, serde_json::json!({"a": 1}));
        // A million quotes: refused (the fuzz target's timeout guards the time it takes).
        let error = parse_model_json(&nested(1_000_000)).expect_err("beyond the cap");
        assert_eq!(error.original_length, 2_000_007);
    }

    #[test]
    fn wrappers_are_removed_in_order_and_when_nested() {
        let cases = [
            "```json\n{\"a\":1}\n```",
            "```JSON{\"a\":1}```",
            "```\n{\"a\":1}\n```",
            "'{\"a\":1}'",
            "\"{\"a\":1}\"",
            "   {\"a\":1}\n\n",
            "'```json\n{\"a\":1}\n```'",
            "  \"```json {\"a\":1} ```\"  ",
        ];
        for case in cases {
            let r = sanitize_json(case);
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&r.sanitized).unwrap(),
                serde_json::json!({"a":1}),
                "{case:?}"
            );
            assert!(r.was_sanitized, "{case:?}");
            assert!(!r.was_structurally_fixed, "{case:?}");
        }
    }

    #[test]
    fn missing_closers_and_openers_are_fixed() {
        let r = sanitize_json("{\"a\": {\"b\": [1, 2]");
        assert!(r.was_structurally_fixed);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&r.sanitized).unwrap(),
            serde_json::json!({"a":{"b":[1,2]}})
        );
        let r = sanitize_json("\"content\": \"x\"}");
        assert!(r.was_structurally_fixed);
        let r = sanitize_json("```json\n{\"content\": \"a } inside\"\n```");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&r.sanitized).unwrap()["content"],
            "a } inside"
        );
    }

    #[test]
    fn unfixable_input_is_an_error() {
        for case in [
            "",
            "hello there",
            "{\"a\": }",
            "{\"a\": \"unterminated",
            "][",
        ] {
            assert!(parse_model_json(case).is_err(), "{case:?}");
        }
    }
}
