//! Seed 000 function 1, `sanitizeJsonContent`: strip the wrappers models put
//! around JSON, then try simple structural fixes; failing that, find the JSON
//! a reply holds inside prose ("Here is the plan: {…}") or in a fenced block
//! anywhere in it, as real models write when no server constrains them.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonSanitization {
    pub sanitized: String,
    /// Any wrapper removed, whitespace trimmed or structure fixed.
    pub was_sanitized: bool,
    /// Missing closing braces/brackets were added.
    pub was_structurally_fixed: bool,
    /// The JSON was found inside surrounding prose or a fenced block, and
    /// the rest of the reply dropped.
    pub was_extracted: bool,
    pub original_length: usize,
}

// Bytes the passes over a reply may still read, set by a test so that it
// can hold the sanitizer to work linear in the reply's length, which a
// timing could not show on a loaded machine. Running out panics at once:
// quadratic work fails the test instead of hanging it.
#[cfg(test)]
thread_local! {
    static READ_BUDGET: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

#[cfg(test)]
fn reads(bytes: usize) {
    READ_BUDGET.with(|budget| {
        let left = budget.get().checked_sub(bytes);
        budget.set(left.expect("the sanitizer read more than its budget of bytes"));
    });
}

#[cfg(not(test))]
fn reads(_bytes: usize) {}

fn parses(text: &str) -> bool {
    reads(text.len());
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
    reads(text.len());
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
    if !parses(&current)
        && let Some(escaped) = escape_raw_controls(&current)
    {
        current = escaped;
        was_sanitized = true;
    }
    let (mut was_structurally_fixed, mut was_extracted) = (false, false);
    if !parses(&current) {
        if let Some(fixed) = repaired(&current) {
            current = fixed;
            was_sanitized = true;
            was_structurally_fixed = true;
        } else if let Some(found) = extract(&escape_raw_controls(raw).unwrap_or_else(|| raw.into()))
        {
            was_structurally_fixed = found.fixed;
            current = found.text;
            was_sanitized = true;
            was_extracted = true;
        }
    }
    JsonSanitization {
        sanitized: current,
        was_sanitized,
        was_structurally_fixed,
        was_extracted,
        original_length,
    }
}

/// The text with control characters inside its strings escaped, when it
/// has any: JSON forbids them raw, and grammar-constrained servers (the
/// llama.cpp server's schema grammar among them) still let a model write a
/// line break inside a string.
fn escape_raw_controls(text: &str) -> Option<String> {
    reads(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut out: Option<String> = None;
    for (at, c) in text.char_indices() {
        let raw_control = in_string && !escaped && c.is_control() && (c as u32) < 0x20;
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => in_string = !in_string,
            _ => {}
        }
        if raw_control {
            let out = out.get_or_insert_with(|| text[..at].to_string());
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                other => out.push_str(&format!("\\u{:04x}", other as u32)),
            }
        } else if let Some(out) = out.as_mut() {
            out.push(c);
        }
    }
    out
}

/// The text made whole by the structural fixes, if they make it parse.
fn repaired(text: &str) -> Option<String> {
    close_open_structures(text)
        .filter(|c| parses(c))
        .or_else(|| open_missing_brace(text).filter(|c| parses(c)))
}

/// JSON found inside a longer reply.
struct Extracted {
    text: String,
    /// Closers were added: the value was cut off.
    fixed: bool,
}

/// Places in a reply where an object may start, tried in order; bounded so
/// that a hostile reply of many braces costs linear time, not quadratic.
const MAX_CANDIDATES: usize = 16;

/// The JSON object a reply holds somewhere: the first fenced block whose
/// body is (or, cut off, can be closed into) an object; else the first
/// complete object in the prose, read by serde_json's stream reader, which
/// stops at the value's end whatever follows; else, for a reply cut off
/// inside its object, that object closed.
fn extract(raw: &str) -> Option<Extracted> {
    fenced_blocks(raw)
        .find_map(first_object)
        .or_else(|| first_object(raw))
}

/// The bodies of ``` fenced blocks, wherever they stand; a block the reply
/// never closes runs to its end. A language tag stays: it is no object.
fn fenced_blocks(raw: &str) -> impl Iterator<Item = &str> {
    let mut rest = raw;
    std::iter::from_fn(move || {
        let after = &rest[rest.find("```")? + 3..];
        let end = after.find("```").unwrap_or(after.len());
        rest = &after[(end + 3).min(after.len())..];
        Some(&after[..end])
    })
    .take(MAX_CANDIDATES)
}

/// The first object in `text` that parses whole; else the first cut-off one
/// that closing its open structures makes whole.
fn first_object(text: &str) -> Option<Extracted> {
    let starts: Vec<usize> = text
        .match_indices('{')
        .map(|(i, _)| i)
        .take(MAX_CANDIDATES)
        .collect();
    // The outermost object first, whole or closed: an object the reply was
    // cut off in must not give way to a complete one nested inside it.
    starts.iter().find_map(|&start| {
        whole_object_at(text, start).or_else(|| {
            close_open_structures(text[start..].trim_end().trim_end_matches("```"))
                .filter(|c| holds_a_key(c))
                .map(|text| Extracted { text, fixed: true })
        })
    })
}

/// A cut-off object is worth closing only if it got as far as one key.
fn holds_a_key(text: &str) -> bool {
    reads(text.len());
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|v| v.as_object().is_some_and(|o| !o.is_empty()))
}

/// The object starting at `start`, read by serde_json's stream reader, which
/// stops at the value's end whatever prose follows.
fn whole_object_at(text: &str, start: usize) -> Option<Extracted> {
    reads(text.len() - start);
    let mut values =
        serde_json::Deserializer::from_str(&text[start..]).into_iter::<serde_json::Value>();
    match values.next() {
        Some(Ok(value)) if value.is_object() => Some(Extracted {
            text: text[start..start + values.byte_offset()].to_string(),
            fixed: false,
        }),
        _ => None,
    }
}

/// Reads a reply the model was cut off in (`finish_reason = length`, as a
/// constrained decoder stops too): the object it got as far as, closed where
/// it stopped, so the chunk is stored and continued. A reply that reads whole
/// without extraction is read as [`parse_model_json`] reads it.
pub fn parse_cut_off_json(
    raw: &str,
) -> Result<(serde_json::Value, JsonSanitization), MalformedJson> {
    let whole = parse_model_json(raw);
    if whole.as_ref().is_ok_and(|(_, s)| !s.was_extracted) {
        return whole;
    }
    let text = escape_raw_controls(raw).unwrap_or_else(|| raw.to_string());
    let closed = text
        .find('{')
        .and_then(|start| Some((start, close_cut_off(&text[start..])?)));
    match closed {
        Some((start, closed)) => {
            let value = serde_json::from_str(&closed).map_err(|e| MalformedJson {
                reason: e.to_string(),
                excerpt: raw.chars().take(200).collect(),
                original_length: raw.len(),
            })?;
            let sanitization = JsonSanitization {
                sanitized: closed,
                was_sanitized: true,
                was_structurally_fixed: true,
                was_extracted: start > 0,
                original_length: raw.len(),
            };
            Ok((value, sanitization))
        }
        None => whole,
    }
}

/// Where a cut-off object can end. An object cut inside an element of a
/// list of objects loses that element (a half finding or section would fail
/// its shape after the continuation is merged, as arrays join by element);
/// otherwise an open string is ended there and its structures closed; failing
/// that, it ends at the last complete member (a key or value cut in half is
/// dropped), tried from the end.
fn close_cut_off(text: &str) -> Option<String> {
    reads(text.len());
    let mut members_end = Vec::new();
    // The open structures: opener and where it stands.
    let mut open: Vec<(char, usize)> = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for (at, c) in text.char_indices() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => in_string = !in_string,
            (false, _, ',') => members_end.push(at),
            (false, _, '{' | '[') => {
                members_end.push(at + 1);
                open.push((c, at));
            }
            (false, _, '}' | ']') => {
                open.pop();
            }
            _ => {}
        }
    }
    let element_dropped = open
        .windows(2)
        .find(|pair| pair[0].0 == '[' && pair[1].0 == '{')
        .map(|pair| text[..pair[1].1].to_string());
    let mut ended = text.trim_end().to_string();
    if in_string {
        if escaped {
            ended.pop();
        }
        ended.push('"');
    }
    let at_members = members_end
        .iter()
        .rev()
        .take(MAX_CANDIDATES)
        .map(|&end| text[..end].to_string());
    element_dropped
        .into_iter()
        .chain(std::iter::once(ended))
        .chain(at_members)
        .filter_map(|prefix| close_open_structures(prefix.trim_end()))
        .find(|closed| holds_a_key(closed))
}

/// Sanitizes and parses; the error keeps the first bytes of the reply, which
/// its message leaves out: model output is tenant text, logged only at debug.
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
#[error("model reply is not valid JSON after sanitizing ({reason}; {original_length} bytes)")]
pub struct MalformedJson {
    pub reason: String,
    pub excerpt: String,
    pub original_length: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_error_message_leaves_the_reply_out() {
        let e = parse_model_json("confidential merger plan, no JSON").expect_err("not JSON");
        assert!(!e.to_string().contains("merger"), "{e}");
        assert!(e.excerpt.starts_with("confidential merger plan"));
    }

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
        // A million quotes: past the cap the peeling stops, and extraction
        // finds the object inside in linear time (the fuzz target's timeout
        // guards the time it takes).
        let (value, result) = parse_model_json(&nested(1_000_000)).expect("found inside");
        assert_eq!(value, serde_json::json!({"a": 1}));
        assert!(result.was_extracted);
        assert_eq!(result.original_length, 2_000_007);
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
    fn json_inside_prose_or_a_fence_anywhere_is_found() {
        let cases = [
            ("Sure! Here is the plan: {\"a\": 1} Let me know.", false),
            ("I think {this} is it:\n{\"a\": 1}", false),
            (
                "Here you go.\n```json\n{\"a\": 1}\n```\nAnything else?",
                false,
            ),
            ("Notes first.\n```\n{\"a\": 1}\n```", false),
            (
                "```python\nprint(1)\n```\nThen:\n```json\n{\"a\": 1}\n```",
                false,
            ),
            // Seen from SmolLM2: a sentence, then a fenced block cut off.
            (
                "The thesis is below.\n```json\n{\"a\": 1, \"b\": [\"x\"",
                true,
            ),
            ("Answer: {\"a\": 1, \"b\": {\"c\": \"d\"", true),
        ];
        for (case, cut_off) in cases {
            let (value, result) =
                parse_model_json(case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
            assert_eq!(value["a"], serde_json::json!(1), "{case:?}");
            assert!(result.was_extracted && result.was_sanitized, "{case:?}");
            assert_eq!(result.was_structurally_fixed, cut_off, "{case:?}");
        }
    }

    #[test]
    fn line_breaks_inside_strings_are_escaped_outside_left_alone() {
        // Seen from SmolLM2 under the llama.cpp server's schema grammar.
        let raw = "{\n  \"content\": \"Trees give shade.\nThey clean\tthe air.\",\n  \"n\": 1\n}";
        let (value, result) = parse_model_json(raw).expect("escaped");
        assert_eq!(value["content"], "Trees give shade.\nThey clean\tthe air.");
        assert!(result.was_sanitized && !result.was_structurally_fixed);
        let cut = "Here: {\"content\": \"one\ntwo";
        assert!(
            parse_model_json(cut).is_err(),
            "an unterminated string stays unfixable"
        );
        let cut = "Here: {\"content\": \"one\ntwo\", \"more\": [\"x\"";
        let (value, _) = parse_model_json(cut).expect("extracted and closed");
        assert_eq!(value["content"], "one\ntwo");
    }

    #[test]
    fn a_cut_off_reply_is_closed_where_it_stopped() {
        let cases = [
            // Inside a string: the string ends there.
            (
                "{\"content\": \"Trees give sha",
                json!({"content": "Trees give sha"}),
            ),
            // Inside an element of a list of objects: the outer object,
            // never an inner one alone, without the element cut in half.
            (
                "{\"content\": \"A lease.\", \"sections\": [{\"number\": \"1\"}, {\"number\": \"2\", \"ti",
                json!({"content": "A lease.", "sections": [{"number": "1"}]}),
            ),
            (
                "{\"content\": \"x\", \"blackboard\": [{\"data\": {\"summary\": \"y\"}, \"ty",
                json!({"content": "x", "blackboard": []}),
            ),
            // A key cut in half, a value not begun, an escape cut in half.
            ("{\"a\": \"x\", \"b", json!({"a": "x"})),
            ("{\"a\": \"x\", \"b\": ", json!({"a": "x"})),
            ("{\"a\": \"x\\", json!({"a": "x"})),
            // Prose first, a raw line break inside the string.
            ("Here it is: {\"a\": \"one\ntwo", json!({"a": "one\ntwo"})),
        ];
        for (raw, expected) in cases {
            let (value, result) =
                parse_cut_off_json(raw).unwrap_or_else(|e| panic!("{raw:?}: {e}"));
            assert_eq!(value, expected, "{raw:?}");
            assert!(result.was_structurally_fixed, "{raw:?}");
        }
        let (whole, result) = parse_cut_off_json("{\"a\": 1}").expect("whole");
        assert_eq!((whole, result.was_sanitized), (json!({"a": 1}), false));
        assert!(parse_cut_off_json("no JSON at all").is_err());
        assert!(parse_cut_off_json(&"{".repeat(100_000)).is_err());
    }

    #[test]
    fn extraction_is_bounded_on_hostile_text() {
        // Bytes read per byte of reply, whatever its length: every pass is
        // capped (wrapper layers, candidate starts, cut-off endings), so the
        // work grows with the reply, not with its square.
        const READS_PER_BYTE: usize = 256;
        let hostile = [
            "{".repeat(100_000),
            "```\n{".repeat(10_000),
            "{\"a\": [".repeat(10_000),
            "\"".repeat(100_000),
            "x {\"k\": 1, ".repeat(10_000),
        ];
        for text in &hostile {
            READ_BUDGET.with(|budget| budget.set(READS_PER_BYTE * text.len()));
            assert!(parse_model_json(text).is_err(), "{:?}…", &text[..12]);
            READ_BUDGET.with(|budget| budget.set(READS_PER_BYTE * text.len()));
            // Read as a cut-off reply, some of these close into an object.
            let cut_off = parse_cut_off_json(text);
            READ_BUDGET.with(|budget| budget.set(usize::MAX));
            eprintln!("{:?}…: cut off reads as {}", &text[..12], cut_off.is_ok());
        }
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
