//! A JSON output shown as a document a person reads and edits (an essay's
//! outline, an argument map): its template renders the reply's fields as
//! markdown, while the JSON stays the data later steps read. An edit of such
//! a document is read back into that JSON ([`parse_edit`]) and refused,
//! naming the field, when the result no longer fits the output's rules.
//!
//! An edit is either a JSON object (fields it names replace the current
//! ones) or markdown in the layout the shipped templates write:
//! - a `## Heading` line whose text is a field's title (`Target word count`
//!   for `target_word_count`) or its key starts that field's block, up to
//!   the next such heading; a list field takes the block's list items
//!   (`- item`, `* item`, `1. item`), one per item, a number field its text
//!   as a number, a string field its text;
//! - what comes before the first field heading, without a leading `# title`
//!   line, is `content`;
//! - a field whose heading the edit leaves out keeps its current value, and
//!   so does a list of objects (a dependency map's edges), which is shown for
//!   people and edited as JSON.

use crate::prompt::title_from_key;
use crate::recipe::OutputRule;
use crate::shape::{self, JsonKind, ShapeError};
use serde_json::{Map, Value};

/// Why an edit cannot become the output's data: the field and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {reason}")]
pub struct EditRefused {
    /// The field's path in the data (`sections`, `sections[2]`).
    pub field: String,
    pub reason: String,
}

impl EditRefused {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// The data an edit of a JSON-backed document makes of `current` (the
/// document's JSON now), checked against `rule`.
pub fn parse_edit(rule: &OutputRule, current: &Value, edit: &str) -> Result<Value, EditRefused> {
    let mut data = current.as_object().cloned().unwrap_or_default();
    let changed = match serde_json::from_str::<Value>(edit.trim()) {
        Ok(Value::Object(fields)) => fields,
        _ => from_markdown(rule, &data, edit)?,
    };
    // Only what the edit changes is held to the schema: a model's reply may
    // already stray from it (the executor checks keys and types, not enums),
    // and an edit must not be refused for a field it left alone.
    let touched: Vec<String> = changed
        .iter()
        .filter(|(key, value)| data.get(*key) != Some(*value))
        .map(|(key, _)| key.clone())
        .collect();
    data.extend(changed);
    let data = Value::Object(data);
    check_data(rule, &data, &touched)?;
    Ok(data)
}

/// Checks data against the output's `required_keys` and `key_types`, and the
/// `fields` of it named against the output's schema.
fn check_data(rule: &OutputRule, data: &Value, fields: &[String]) -> Result<(), EditRefused> {
    shape::check(data, &rule.required_keys, &rule.key_types).map_err(|e| match e {
        ShapeError::NotAnObject => EditRefused::new("", "the document's data must be an object"),
        ShapeError::Missing { key } => EditRefused::new(key, "is required"),
        ShapeError::WrongType {
            key,
            expected,
            found,
        } => EditRefused::new(key, format!("must be a {expected}, not {found}")),
    })?;
    let Some(schema) = &rule.schema else {
        return Ok(());
    };
    for field in fields {
        if let Some(property) = schema.get("properties").and_then(|p| p.get(field))
            && let Some(value) = data.get(field)
        {
            violation(property, value, field)?;
        }
    }
    Ok(())
}

/// The JSON type a top-level field has: its rule's `key_types`, else its
/// schema's, else its current value's.
fn kind_of(rule: &OutputRule, current: &Map<String, Value>, field: &str) -> Option<JsonKind> {
    if let Some(kind) = rule.key_types.get(field) {
        return Some(*kind);
    }
    let declared = rule
        .schema
        .as_ref()
        .and_then(|s| s.pointer(&format!("/properties/{field}/type")))
        .and_then(Value::as_str);
    match declared {
        Some("string") => Some(JsonKind::String),
        Some("number" | "integer") => Some(JsonKind::Number),
        Some("boolean") => Some(JsonKind::Boolean),
        Some("array") => Some(JsonKind::Array),
        Some("object") => Some(JsonKind::Object),
        _ => current.get(field).and_then(JsonKind::of),
    }
}

/// Every top-level field a markdown edit may set: those the output rule
/// declares (required, typed or in its schema). Other keys of a reply (a
/// turn's `_`-keys) are no heading's, so a `## Inputs` in `content` stays text.
fn fields(rule: &OutputRule) -> Vec<String> {
    let mut all: Vec<String> = rule.required_keys.clone();
    all.extend(rule.key_types.keys().cloned());
    if let Some(Value::Object(props)) = rule.schema.as_ref().and_then(|s| s.get("properties")) {
        all.extend(props.keys().cloned());
    }
    all.sort();
    all.dedup();
    all
}

/// The fields a markdown edit sets (see the module's layout).
fn from_markdown(
    rule: &OutputRule,
    current: &Map<String, Value>,
    edit: &str,
) -> Result<Map<String, Value>, EditRefused> {
    let names = fields(rule);
    let heading_field = |line: &str| -> Option<String> {
        let text = line.strip_prefix("## ")?.trim();
        names
            .iter()
            .filter(|f| f.as_str() != "content")
            .find(|f| text.eq_ignore_ascii_case(&title_from_key(f)) || text == f.as_str())
            .cloned()
    };
    let mut preamble: Vec<&str> = Vec::new();
    let mut blocks: Vec<(String, Vec<&str>)> = Vec::new();
    for line in edit.lines() {
        match (heading_field(line), blocks.last_mut()) {
            (Some(field), _) => blocks.push((field, Vec::new())),
            (None, Some((_, body))) => body.push(line),
            (None, None) => preamble.push(line),
        }
    }
    let mut set = Map::new();
    if names.iter().any(|f| f == "content") {
        set.insert("content".into(), Value::String(content_of(&preamble)));
    }
    for (field, body) in blocks {
        // A list of objects (a dependency map's edges) is shown one line per
        // object for people; it is edited as JSON, and its block keeps it.
        if holds_objects(current.get(&field)) {
            continue;
        }
        let value = block_value(kind_of(rule, current, &field), &field, &body)?;
        set.insert(field, value);
    }
    Ok(set)
}

fn holds_objects(value: Option<&Value>) -> bool {
    value
        .and_then(Value::as_array)
        .is_some_and(|items| items.iter().any(Value::is_object))
}

/// The text before the first field heading, without its `# title` line.
fn content_of(preamble: &[&str]) -> String {
    let mut lines = preamble
        .iter()
        .skip_while(|l| l.trim().is_empty())
        .peekable();
    if lines.peek().is_some_and(|l| l.starts_with("# ")) {
        lines.next();
    }
    lines
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// A field's value from its block's lines.
fn block_value(kind: Option<JsonKind>, field: &str, body: &[&str]) -> Result<Value, EditRefused> {
    let text = body.join("\n").trim().to_string();
    Ok(match kind {
        Some(JsonKind::Array) => {
            Value::Array(list_items(body).into_iter().map(Value::String).collect())
        }
        Some(JsonKind::Number) => text
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| text.parse::<f64>().map(Value::from))
            .map_err(|_| EditRefused::new(field, format!("must be a number, not {text:?}")))?,
        Some(JsonKind::Boolean) => match text.to_ascii_lowercase().as_str() {
            "true" | "yes" => Value::Bool(true),
            "false" | "no" => Value::Bool(false),
            _ => {
                return Err(EditRefused::new(
                    field,
                    format!("must be true or false, not {text:?}"),
                ));
            }
        },
        Some(JsonKind::Object) => serde_json::from_str(&text)
            .map_err(|_| EditRefused::new(field, "must be a JSON object; edit it as JSON"))?,
        Some(JsonKind::String) | None => Value::String(text),
    })
}

/// The items of a markdown list, one per `- `, `* `, `+ `, `1. ` or `1) `
/// line; a line without a marker continues the item before it.
fn list_items(body: &[&str]) -> Vec<String> {
    let mut items: Vec<String> = Vec::new();
    for line in body {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        match item_text(trimmed) {
            Some(text) => items.push(text.to_string()),
            None => match items.last_mut() {
                Some(last) => {
                    last.push(' ');
                    last.push_str(trimmed);
                }
                None => items.push(trimmed.to_string()),
            },
        }
    }
    items
}

fn item_text(line: &str) -> Option<&str> {
    for marker in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return Some(rest.trim());
        }
    }
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    let rest = &line[digits..];
    rest.strip_prefix(". ")
        .or_else(|| rest.strip_prefix(") "))
        .map(str::trim)
}

/// The first place `value` breaks `schema` (the part of JSON Schema reply
/// schemas use: type, enum, required, properties, items, minItems, maxItems).
fn violation(schema: &Value, value: &Value, place: &str) -> Result<(), EditRefused> {
    let refuse = |reason: String| Err(EditRefused::new(place, reason));
    if let Some(kind) = schema.get("type").and_then(Value::as_str)
        && !has_type(value, kind)
    {
        return refuse(format!("must be a JSON {kind}"));
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let names: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return refuse(format!("{value} is not one of {}", names.join(", ")));
    }
    match value {
        Value::Object(object) => {
            for key in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !object.contains_key(key) {
                    return Err(EditRefused::new(join(place, key), "is required"));
                }
            }
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (key, child) in props {
                    if let Some(found) = object.get(key) {
                        violation(child, found, &join(place, key))?;
                    }
                }
            }
        }
        Value::Array(items) => {
            let bound = |name: &str| schema.get(name).and_then(Value::as_u64);
            if let Some(min) = bound("minItems")
                && (items.len() as u64) < min
            {
                return refuse(format!(
                    "holds {} items; at least {min} are needed",
                    items.len()
                ));
            }
            if let Some(max) = bound("maxItems")
                && (items.len() as u64) > max
            {
                return refuse(format!(
                    "holds {} items; at most {max} are allowed",
                    items.len()
                ));
            }
            if let Some(item) = schema.get("items") {
                for (index, found) in items.iter().enumerate() {
                    violation(item, found, &format!("{place}[{index}]"))?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn join(place: &str, key: &str) -> String {
    if place.is_empty() {
        key.to_string()
    } else {
        format!("{place}.{key}")
    }
}

fn has_type(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::fill_document;
    use serde_json::json;

    const OUTLINE_TEMPLATE: &str = "# {{title}}\n\n{{content}}\n\n## Sections\n\n{% for section in sections %}{{ loop.index }}. {{ section }}\n{% endfor %}\n## Target word count\n\n{{target_word_count}}\n\n## Audience\n\n{{audience}}\n";

    fn outline_rule() -> OutputRule {
        let toml = r#"
document_key = "outline"
file_type = "json"
template_filename = "stage-2-outline.md"
required_keys = ["content", "sections", "target_word_count", "audience"]
key_types = { content = "string", sections = "array", target_word_count = "number", audience = "string" }
[schema]
type = "object"
required = ["content", "sections", "target_word_count", "audience"]
properties.content = { type = "string" }
properties.sections = { type = "array", items = { type = "string" }, minItems = 2, maxItems = 6 }
properties.target_word_count = { type = "number" }
properties.audience = { type = "string", enum = ["general", "semi-technical", "expert"] }
"#;
        toml::from_str(toml).expect("rule")
    }

    fn outline() -> Value {
        json!({
            "content": "The case, in three steps.\n\n## Why now\n\nPrices rose.",
            "sections": ["Costs", "Ownership", "Objections"],
            "target_word_count": 1200,
            "audience": "general",
        })
    }

    fn rendered(data: &Value) -> String {
        let content = data["content"].as_str().unwrap_or_default();
        fill_document(
            OUTLINE_TEMPLATE,
            &[("title", "Outline"), ("content", content)],
            data,
        )
    }

    #[test]
    fn the_rendered_outline_reads_back_as_its_data() {
        let data = outline();
        let markdown = rendered(&data);
        assert!(
            markdown.contains("1. Costs\n2. Ownership\n3. Objections\n"),
            "{markdown}"
        );
        assert_eq!(parse_edit(&outline_rule(), &data, &markdown), Ok(data));
    }

    #[test]
    fn removing_a_section_line_removes_the_section() {
        let markdown = rendered(&outline()).replace("2. Ownership\n", "");
        let edited = parse_edit(&outline_rule(), &outline(), &markdown).expect("fits");
        assert_eq!(edited["sections"], json!(["Costs", "Objections"]));
        assert_eq!(edited["content"], outline()["content"]);
    }

    #[test]
    fn an_edit_that_no_longer_fits_names_the_field() {
        let rule = outline_rule();
        let one = rendered(&outline()).replace("2. Ownership\n3. Objections\n", "");
        let refused = parse_edit(&rule, &outline(), &one).expect_err("one section");
        assert_eq!(refused.field, "sections");
        assert!(refused.reason.contains("at least 2"), "{refused}");
        let words = rendered(&outline()).replace("\n1200\n", "\nabout a thousand\n");
        assert_eq!(
            parse_edit(&rule, &outline(), &words).map_err(|e| e.field),
            Err("target_word_count".to_string())
        );
        let audience = rendered(&outline()).replace("\ngeneral\n", "\nchildren\n");
        assert_eq!(
            parse_edit(&rule, &outline(), &audience).map_err(|e| e.field),
            Err("audience".to_string())
        );
    }

    #[test]
    fn a_field_the_edit_leaves_alone_is_not_held_to_the_schema() {
        let mut stray = outline();
        stray["audience"] = json!("simulated audience for outline");
        let markdown = rendered(&stray).replace("3. Objections\n", "");
        let edited = parse_edit(&outline_rule(), &stray, &markdown).expect("fits");
        assert_eq!(edited["sections"], json!(["Costs", "Ownership"]));
        let changed = rendered(&stray).replace("simulated audience for outline", "children");
        assert_eq!(
            parse_edit(&outline_rule(), &stray, &changed).map_err(|e| e.field),
            Err("audience".to_string())
        );
    }

    #[test]
    fn a_json_edit_replaces_the_fields_it_names() {
        let edited =
            parse_edit(&outline_rule(), &outline(), r#"{"sections": ["A", "B"]}"#).expect("fits");
        assert_eq!(edited["sections"], json!(["A", "B"]));
        assert_eq!(edited["audience"], "general");
        let refused = parse_edit(&outline_rule(), &outline(), r#"{"sections": ["A", 2]}"#);
        assert_eq!(refused.map_err(|e| e.field), Err("sections[1]".to_string()));
    }

    #[test]
    fn a_left_out_heading_keeps_its_field() {
        let edited =
            parse_edit(&outline_rule(), &outline(), "# Outline\n\nShorter.\n").expect("fits");
        assert_eq!(edited["content"], "Shorter.");
        assert_eq!(edited["sections"], outline()["sections"]);
    }

    #[test]
    fn a_list_of_objects_is_shown_and_kept_not_parsed_back() {
        let rule: OutputRule = toml::from_str(
            r#"
document_key = "dependency_map"
file_type = "json"
required_keys = ["content", "edges"]
key_types = { content = "string", edges = "array" }
"#,
        )
        .expect("rule");
        let data = json!({"content": "Map.", "edges": [{"from_section": "7.1", "to_section": "7", "kind": "exhibit"}]});
        let edit = "# Dependency Map\n\nA new map.\n\n## Edges\n\n- 7.1 → 7 (exhibit)\n";
        let edited = parse_edit(&rule, &data, edit).expect("fits");
        assert_eq!(edited["content"], "A new map.");
        assert_eq!(edited["edges"], data["edges"]);
    }
}
