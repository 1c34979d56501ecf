//! Structured output: the JSON Schema a step's reply must match, built from
//! its output rule, and the dialect a model's server understands it in.
//! `shape::check` stays the last word on what is accepted; the schema only
//! steers decoding so that a real model answers in that shape at once.

use crate::recipe::OutputRule;
use crate::shape::JsonKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// How a model's server is asked for JSON of a shape (a model row's
/// `config.structured_output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// `response_format: {"type": "json_schema", "json_schema": {…}}`: OpenAI
    /// structured outputs, vLLM, Ollama's OpenAI endpoint. Anthropic models
    /// get the schema as a forced tool whatever the row says, unless `none`.
    #[default]
    JsonSchema,
    /// `response_format: {"type": "json_object", "schema": {…}}`: the llama.cpp server.
    JsonObjectSchema,
    /// `response_format: {"type": "json_object"}`: any JSON, the shape by prompt.
    JsonObject,
    /// Nothing on the wire: the prompt alone asks for the shape.
    None,
}

impl StructuredOutput {
    pub const ALL: [StructuredOutput; 4] = [
        StructuredOutput::JsonSchema,
        StructuredOutput::JsonObjectSchema,
        StructuredOutput::JsonObject,
        StructuredOutput::None,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            StructuredOutput::JsonSchema => "json_schema",
            StructuredOutput::JsonObjectSchema => "json_object_schema",
            StructuredOutput::JsonObject => "json_object",
            StructuredOutput::None => "none",
        }
    }

    /// The dialect a model row names; a row that names none gets the default,
    /// and a value that is not a name (`3`, `true`) is as unknown as a
    /// misspelt one, not a reason to fall back to the default.
    pub fn of_model_config(config: &Value) -> Result<Self, UnknownDialect> {
        match config.get("structured_output") {
            None | Some(Value::Null) => Ok(Self::default()),
            Some(Value::String(name)) => name.parse(),
            Some(other) => Err(UnknownDialect(other.to_string())),
        }
    }
}

impl fmt::Display for StructuredOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown structured-output dialect {0:?}: use json_schema, json_object_schema, json_object or none"
)]
pub struct UnknownDialect(pub String);

impl FromStr for StructuredOutput {
    type Err = UnknownDialect;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|d| d.as_str() == text)
            .ok_or_else(|| UnknownDialect(text.to_string()))
    }
}

/// The key a turn cut off mid-reply may set (see `shape::CONTINUATION_FLAG`);
/// allowed by every schema so a model can say so.
const CONTINUATION_FLAG: &str = crate::shape::CONTINUATION_FLAG;

/// The schema a reply to this output rule must match: the rule's own `schema`
/// when the pipeline gives one, else an object with every required key and
/// every typed key; a header context also gets its planned-documents shape.
/// A publishing step's findings are typed by an enum of the types it
/// declares, in its own schema too unless that one shapes them itself.
pub fn reply_schema(rule: &OutputRule) -> Value {
    let mut schema = match &rule.schema {
        Some(schema) => schema.clone(),
        None => generated_schema(rule),
    };
    if !rule.publishes.is_empty()
        && let Some(Value::Object(properties)) = schema.get_mut("properties")
    {
        properties
            .entry(crate::blackboard::BLACKBOARD)
            .or_insert_with(|| findings_schema(&rule.publishes));
    }
    schema
}

fn generated_schema(rule: &OutputRule) -> Value {
    let mut schema = keys_schema(&rule.required_keys, &rule.key_types);
    if rule.file_type.as_deref() == Some("header_context")
        && let Some(Value::Object(properties)) = schema.get_mut("properties")
    {
        properties.insert("context_for_documents".into(), planned_documents_schema());
        properties
            .entry("system_materials")
            .or_insert_with(system_materials_schema);
    }
    schema
}

const MAX_FINDINGS: usize = 4;

/// What a step that publishes findings may put under `blackboard`: entries
/// of the types its rule names, each with its data.
fn findings_schema(types: &[String]) -> Value {
    json!({
        "type": "array",
        // A few per reply: a small model otherwise lists findings until its
        // token limit cuts it off.
        "maxItems": MAX_FINDINGS,
        "items": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": types},
                "data": {
                    "type": "object",
                    "properties": {
                        "section": {"type": "string"},
                        "summary": {"type": "string"},
                    },
                    "required": ["summary"],
                },
            },
            "required": ["type", "data"],
        },
    })
}

/// An object with every required key (of any type unless typed) and every
/// typed key.
pub fn keys_schema(required_keys: &[String], key_types: &BTreeMap<String, JsonKind>) -> Value {
    let mut properties = Map::new();
    for key in required_keys {
        properties.insert(key.clone(), json!({}));
    }
    for (key, kind) in key_types {
        properties.insert(key.clone(), kind_schema(*kind));
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required_keys,
    })
}

fn kind_schema(kind: JsonKind) -> Value {
    json!({ "type": kind.as_str() })
}

// Every object below names its properties: an open `{"type": "object"}`
// lets a grammar-constrained small model write keys and values until its
// token limit (seen with SmolLM2: 400 tokens of invented keys per plan).

/// What a PLAN step writes for each document it plans: the points it must make.
fn planned_documents_schema() -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "document_key": {"type": "string"},
                "content_to_include": {
                    "type": "object",
                    "properties": {
                        "points": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
                    },
                    "required": ["points"],
                },
            },
            "required": ["document_key", "content_to_include"],
        },
    })
}

/// Why the stage exists, in a sentence.
fn system_materials_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"stage_rationale": {"type": "string"}},
        "required": ["stage_rationale"],
    })
}

/// The schema for a turn that continues a cut-off reply: the same keys, and
/// required only those the chunks `written` so far lack, since the turn adds
/// only what is missing (its strings and arrays are appended to the chunks'
/// by `shape::merge_chunks`). A reply cut off inside its first key would
/// otherwise be continued with that key alone and never get the others (CI
/// saw SmolLM2 continue an argument map's `content` three attempts running,
/// each whole then refused for lacking `paragraphs`).
pub fn continuation_schema(schema: &Value, written: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(object) = schema.as_object_mut() {
        let missing: Vec<Value> = object
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|key| key.as_str().is_some_and(|k| written.get(k).is_none()))
            .cloned()
            .collect();
        if missing.is_empty() {
            object.remove("required");
        } else {
            object.insert("required".into(), Value::Array(missing));
        }
        if let Some(Value::Object(properties)) = object.get_mut("properties") {
            properties
                .entry(CONTINUATION_FLAG)
                .or_insert_with(|| json!({"type": "boolean"}));
        }
    }
    schema
}

/// Whether a schema meets OpenAI's strict mode: every object closed
/// (`additionalProperties: false`) with every property required, and every
/// array's items given. Strict is asked for only then; otherwise the server
/// is asked to follow the schema without it.
pub fn is_strict(schema: &Value) -> bool {
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            schema.get("additionalProperties") == Some(&Value::Bool(false))
                && properties.is_some_and(|p| {
                    p.iter()
                        .all(|(k, v)| required.contains(&k.as_str()) && is_strict(v))
                })
        }
        Some("array") => schema.get("items").is_some_and(is_strict),
        Some(_) => true,
        None => false,
    }
}

/// JSON Schema types the structured-output servers understand.
const TYPES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Problems with a pipeline's own reply schema, each with its place: it must
/// be an object schema that requires the rule's required keys, and use only
/// the part of JSON Schema that every dialect's server accepts.
pub fn schema_problems(schema: &Value, rule: &OutputRule) -> Vec<String> {
    let mut problems = Vec::new();
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        problems.push("a reply schema's top level must be {\"type\": \"object\", …}".into());
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for key in &rule.required_keys {
        if !required.contains(&key.as_str()) {
            problems.push(format!(
                "required key {key:?} is not in the schema's \"required\""
            ));
        }
    }
    check_node(schema, "schema", &mut problems);
    problems
}

fn check_node(node: &Value, place: &str, problems: &mut Vec<String>) {
    let Some(object) = node.as_object() else {
        problems.push(format!("{place}: a schema must be a JSON object"));
        return;
    };
    match object.get("type") {
        None => {}
        Some(Value::String(t)) if TYPES.contains(&t.as_str()) => {}
        Some(other) => problems.push(format!(
            "{place}.type: {other} is not one of {}",
            TYPES.join(", ")
        )),
    }
    let properties = match object.get("properties") {
        None => None,
        Some(Value::Object(properties)) => Some(properties),
        Some(_) => {
            problems.push(format!("{place}.properties must be an object"));
            None
        }
    };
    for (key, child) in properties.into_iter().flatten() {
        check_node(child, &format!("{place}.properties.{key}"), problems);
    }
    if let Some(required) = object.get("required") {
        let names: Option<Vec<&str>> = required
            .as_array()
            .and_then(|r| r.iter().map(Value::as_str).collect());
        match names {
            None => problems.push(format!("{place}.required must be a list of key names")),
            Some(names) => {
                for name in names
                    .iter()
                    .filter(|n| properties.is_none_or(|p| !p.contains_key(**n)))
                {
                    problems.push(format!(
                        "{place}.required names {name:?}, which is not in its properties"
                    ));
                }
            }
        }
    }
    if let Some(items) = object.get("items") {
        check_node(items, &format!("{place}.items"), problems);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(required: &[&str], types: &[(&str, JsonKind)], file_type: &str) -> OutputRule {
        OutputRule {
            document_key: "d".into(),
            file_type: Some(file_type.into()),
            template_filename: None,
            required_keys: required.iter().map(|k| k.to_string()).collect(),
            key_types: types
                .iter()
                .map(|(k, t)| (k.to_string(), *t))
                .collect::<BTreeMap<_, _>>(),
            publishes: vec![],
            confidence_gate: None,
            schema: None,
            verify_claims: None,
            record: None,
            mean: None,
        }
    }

    #[test]
    fn a_rule_becomes_an_object_schema_with_its_keys_and_types() {
        let schema = reply_schema(&rule(
            &["content", "sections"],
            &[
                ("sections", JsonKind::Array),
                ("confidence", JsonKind::Number),
            ],
            "json",
        ));
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "content": {},
                    "sections": {"type": "array"},
                    "confidence": {"type": "number"},
                },
                "required": ["content", "sections"],
            })
        );
        assert!(!is_strict(&schema), "open objects are not strict");
    }

    #[test]
    fn a_header_context_gets_the_planned_documents_shape() {
        let schema = reply_schema(&rule(
            &["context_for_documents"],
            &[("context_for_documents", JsonKind::Array)],
            "header_context",
        ));
        let items = &schema["properties"]["context_for_documents"]["items"];
        assert_eq!(
            items["required"],
            json!(["document_key", "content_to_include"])
        );
        assert_eq!(
            schema["properties"]["system_materials"]["required"],
            json!(["stage_rationale"])
        );
        let planned = &items["properties"]["content_to_include"];
        assert_eq!(
            planned["required"],
            json!(["points"]),
            "no open object: {planned}"
        );
    }

    #[test]
    fn a_publishing_step_may_list_findings_of_its_types_only() {
        let mut r = rule(&["content"], &[("content", JsonKind::String)], "json");
        r.publishes = vec!["buried_change".into(), "amendment_context".into()];
        let schema = reply_schema(&r);
        let entry = &schema["properties"]["blackboard"]["items"];
        assert_eq!(
            entry["properties"]["type"]["enum"],
            json!(["buried_change", "amendment_context"])
        );
        assert_eq!(
            schema["required"],
            json!(["content"]),
            "findings are optional"
        );
        // A pipeline's own schema gets the same enum, unless it shapes
        // findings itself.
        r.schema = Some(json!({
            "type": "object",
            "properties": {"content": {"type": "string"}},
            "required": ["content"],
        }));
        assert_eq!(
            reply_schema(&r)["properties"]["blackboard"]["items"]["properties"]["type"]["enum"],
            json!(["buried_change", "amendment_context"])
        );
        let shaped = json!({"type": "array", "maxItems": 1});
        r.schema = Some(json!({
            "type": "object",
            "properties": {"content": {"type": "string"}, "blackboard": shaped},
            "required": ["content"],
        }));
        assert_eq!(reply_schema(&r)["properties"]["blackboard"], shaped);
    }

    #[test]
    fn a_pipelines_own_schema_wins_and_is_checked() {
        let own = json!({
            "type": "object",
            "properties": {"content": {"type": "string"}},
            "required": ["content"],
            "additionalProperties": false,
        });
        let mut r = rule(&["content"], &[], "json");
        r.schema = Some(own.clone());
        assert_eq!(reply_schema(&r), own);
        assert!(is_strict(&own));
        assert!(schema_problems(&own, &r).is_empty());

        r.required_keys.push("claim_type".into());
        let bad = json!({
            "type": "object",
            "properties": {"content": {"type": "text"}, "list": {"items": 3}},
            "required": ["content", "missing"],
        });
        let problems = schema_problems(&bad, &r);
        assert_eq!(problems.len(), 4, "{problems:#?}");
        assert!(problems[0].contains("claim_type"));
        assert!(
            problems
                .iter()
                .any(|p| p.contains("\"text\" is not one of"))
        );
        assert!(problems.iter().any(|p| p.contains("properties.list.items")));
        assert!(problems.iter().any(|p| p.contains("\"missing\"")));
    }

    #[test]
    fn a_continuation_requires_only_the_missing_keys_and_may_say_it_is_cut_off() {
        let schema = reply_schema(&rule(
            &["content", "paragraphs"],
            &[
                ("content", JsonKind::String),
                ("paragraphs", JsonKind::Array),
            ],
            "json",
        ));
        let cut_in_content = continuation_schema(&schema, &json!({"content": "The first"}));
        assert_eq!(cut_in_content["required"], json!(["paragraphs"]));
        let whole = json!({"content": "The first", "paragraphs": ["one"]});
        let turn = continuation_schema(&schema, &whole);
        assert!(turn.get("required").is_none());
        assert_eq!(turn["properties"]["content"], json!({"type": "string"}));
        assert_eq!(
            turn["properties"][CONTINUATION_FLAG],
            json!({"type": "boolean"})
        );
    }

    #[test]
    fn dialects_round_trip_and_default_to_json_schema() {
        for dialect in StructuredOutput::ALL {
            assert_eq!(dialect.as_str().parse::<StructuredOutput>(), Ok(dialect));
        }
        assert!("yaml".parse::<StructuredOutput>().is_err());
        assert!(StructuredOutput::of_model_config(&json!({"structured_output": 3})).is_err());
        assert_eq!(
            StructuredOutput::of_model_config(&json!({})),
            Ok(StructuredOutput::JsonSchema)
        );
        assert_eq!(
            StructuredOutput::of_model_config(&json!({"structured_output": "json_object_schema"})),
            Ok(StructuredOutput::JsonObjectSchema)
        );
    }
}
