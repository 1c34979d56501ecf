//! The shape a step's JSON reply must have (its output rule's `required_keys`
//! and `key_types`), and how the chunks of a continued reply merge into one
//! JSON document.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// A JSON value's type, as an output rule's `key_types` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonKind {
    String,
    Number,
    Boolean,
    Array,
    Object,
}

impl JsonKind {
    pub fn of(value: &Value) -> Option<JsonKind> {
        match value {
            Value::String(_) => Some(JsonKind::String),
            Value::Number(_) => Some(JsonKind::Number),
            Value::Bool(_) => Some(JsonKind::Boolean),
            Value::Array(_) => Some(JsonKind::Array),
            Value::Object(_) => Some(JsonKind::Object),
            Value::Null => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            JsonKind::String => "string",
            JsonKind::Number => "number",
            JsonKind::Boolean => "boolean",
            JsonKind::Array => "array",
            JsonKind::Object => "object",
        }
    }
}

impl fmt::Display for JsonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a reply that parsed is still not the document its step asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("the reply is not a JSON object")]
    NotAnObject,
    #[error("the reply has no `{key}` key, which the step requires")]
    Missing { key: String },
    #[error("`{key}` must be a JSON {expected}, not {found}")]
    WrongType {
        key: String,
        expected: JsonKind,
        found: &'static str,
    },
}

/// Checks a reply against its output's rules: every required key present,
/// every typed key (required or not, when present) of its type.
pub fn check(
    value: &Value,
    required_keys: &[String],
    key_types: &BTreeMap<String, JsonKind>,
) -> Result<(), ShapeError> {
    let Some(object) = value.as_object() else {
        return Err(ShapeError::NotAnObject);
    };
    if let Some(key) = required_keys.iter().find(|k| !object.contains_key(*k)) {
        return Err(ShapeError::Missing { key: key.clone() });
    }
    for (key, expected) in key_types {
        let Some(found) = object.get(key) else {
            continue;
        };
        if JsonKind::of(found) != Some(*expected) {
            return Err(ShapeError::WrongType {
                key: key.clone(),
                expected: *expected,
                found: JsonKind::of(found).map_or("null", JsonKind::as_str),
            });
        }
    }
    Ok(())
}

/// The key a turn sets when it was cut off; not part of the document.
pub const CONTINUATION_FLAG: &str = "continuation_needed";

/// One JSON document from the chunks of a continued reply, in order: each
/// chunk continues the one before, so strings and arrays under the same key
/// join, objects merge key by key, and any other value is replaced by the
/// later one. Keys starting with `_` describe a turn, not the document: the
/// last turn's value stands. Chunks that are not objects add nothing.
pub fn merge_chunks<'a>(chunks: impl IntoIterator<Item = &'a Value>) -> Value {
    let mut whole = Map::new();
    for chunk in chunks {
        let Some(object) = chunk.as_object() else {
            continue;
        };
        for (key, value) in object {
            if key == CONTINUATION_FLAG {
                continue;
            }
            match whole.get_mut(key) {
                Some(existing) if !key.starts_with('_') => join(existing, value),
                _ => {
                    whole.insert(key.clone(), value.clone());
                }
            }
        }
    }
    Value::Object(whole)
}

fn join(existing: &mut Value, next: &Value) {
    match (existing, next) {
        (Value::String(a), Value::String(b)) => a.push_str(b),
        (Value::Array(a), Value::Array(b)) => a.extend(b.iter().cloned()),
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in b {
                match a.get_mut(key) {
                    Some(inner) => join(inner, value),
                    None => {
                        a.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (slot, next) => *slot = next.clone(),
    }
}

/// The key of a PLAN reply that asks the planner to skip steps for this
/// session (seed 004 adaptive execution).
pub const SKIP_STEPS: &str = "skip_steps";

/// One step a plan skips, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipStep {
    pub step_key: String,
    pub reason: String,
}

/// The steps a PLAN reply skips: none when it has no `skip_steps`; else an
/// array of `{"step_key", "reason"}` objects, each with a step key, or an
/// error naming what is wrong.
pub fn skip_steps(reply: &Value) -> Result<Vec<SkipStep>, String> {
    let Some(listed) = reply.get(SKIP_STEPS) else {
        return Ok(Vec::new());
    };
    let skips: Vec<SkipStep> = serde_json::from_value(listed.clone()).map_err(|e| {
        format!("{SKIP_STEPS} must be an array of {{\"step_key\", \"reason\"}} objects: {e}")
    })?;
    match skips.iter().position(|s| s.step_key.trim().is_empty()) {
        Some(index) => Err(format!("{SKIP_STEPS}[{index}] has an empty step_key")),
        None => Ok(skips),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_skips_the_steps_it_names_with_reasons() {
        let reply = serde_json::json!({"skip_steps": [{"step_key": "amendments", "reason": "one document"}]});
        assert_eq!(
            skip_steps(&reply),
            Ok(vec![SkipStep {
                step_key: "amendments".into(),
                reason: "one document".into()
            }])
        );
        assert_eq!(skip_steps(&serde_json::json!({})), Ok(Vec::new()));
        for bad in [
            serde_json::json!({"skip_steps": "amendments"}),
            serde_json::json!({"skip_steps": [{"reason": "no key"}]}),
            serde_json::json!({"skip_steps": [{"step_key": " ", "reason": "blank"}]}),
        ] {
            assert!(skip_steps(&bad).is_err(), "{bad}");
        }
    }
    use serde_json::json;

    fn types(pairs: &[(&str, JsonKind)]) -> BTreeMap<String, JsonKind> {
        pairs.iter().map(|(k, t)| (k.to_string(), *t)).collect()
    }

    #[test]
    fn a_reply_needs_every_required_key_with_its_type() {
        let required = vec!["dimensions".to_string(), "scores".to_string()];
        let typed = types(&[
            ("dimensions", JsonKind::Array),
            ("scores", JsonKind::Object),
            ("rationale", JsonKind::Object),
        ]);
        let good = json!({"dimensions": ["cost"], "scores": {"cost": 3}});
        assert_eq!(check(&good, &required, &typed), Ok(()));
        assert_eq!(
            check(&json!({"dimensions": []}), &required, &typed),
            Err(ShapeError::Missing {
                key: "scores".into()
            })
        );
        let wrong = json!({"dimensions": ["cost"], "scores": "cost 3"});
        let err = check(&wrong, &required, &typed).expect_err("wrong type");
        assert_eq!(
            err.to_string(),
            "`scores` must be a JSON object, not string"
        );
        let optional_wrong = json!({"dimensions": [], "scores": {}, "rationale": null});
        assert!(matches!(
            check(&optional_wrong, &required, &typed),
            Err(ShapeError::WrongType { key, found: "null", .. }) if key == "rationale"
        ));
        assert_eq!(
            check(&json!(["x"]), &required, &typed),
            Err(ShapeError::NotAnObject)
        );
    }

    #[test]
    fn continued_chunks_merge_into_one_document() {
        let chunks = [
            json!({"content": "Al", "items": ["a"], "plan": {"summary": "S", "steps": ["1"]}, "_inputs": ["x"], "continuation_needed": true}),
            json!({"content": "pha", "items": ["b"], "plan": {"steps": ["2"], "owner": "o"}, "_inputs": ["x"], "score": 1}),
            json!({"content": "bet", "score": 2, "_inputs": ["x"], "continuation_needed": false}),
        ];
        assert_eq!(
            merge_chunks(&chunks),
            json!({
                "content": "Alphabet",
                "items": ["a", "b"],
                "plan": {"summary": "S", "steps": ["1", "2"], "owner": "o"},
                "_inputs": ["x"],
                "score": 2,
            })
        );
    }
}
