//! Seed 003's output record (`output:` in its session state): what a
//! finished session hands over. A pipeline marks it on its output rules
//! (`record = { document = true }` on the final document's, `record = {
//! fields = [...] }` on outputs whose number fields it carries); the record
//! then holds that document, its word count and those figures by name. A
//! figure can be the engine's own (`mean`), not the model's arithmetic.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// What of one output the session's output record carries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordRule {
    /// The output is the record's document: its words are counted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub document: bool,
    /// Number fields of the output's JSON the record carries by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// A figure the engine computes from a reply instead of taking the model's
/// arithmetic: `into` becomes the mean of the numbers under `key` in the
/// items of the reply's array `of` (the voice check's `voice_consistency_score`
/// of its `checks[].score`), rounded to two decimals; null when no item has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeanRule {
    pub of: String,
    pub key: String,
    pub into: String,
}

/// Writes `rule`'s mean into `reply`; returns it.
pub fn apply_mean(reply: &mut Value, rule: &MeanRule) -> Option<f64> {
    let scores: Vec<f64> = reply
        .get(&rule.of)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.get(&rule.key)?.as_f64())
                .collect()
        })
        .unwrap_or_default();
    let mean = (!scores.is_empty())
        .then(|| (scores.iter().sum::<f64>() / scores.len() as f64 * 100.0).round() / 100.0);
    if let Some(fields) = reply.as_object_mut() {
        fields.insert(rule.into.clone(), mean.map_or(Value::Null, Value::from));
    }
    mean
}

/// Words of markdown prose: runs of characters between whitespace that hold
/// a letter or a digit, so list markers, rules and `#` headings count none.
pub fn word_count(text: &str) -> u32 {
    let words = text
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count();
    u32::try_from(words).unwrap_or(u32::MAX)
}

/// The named number fields of `data` (a stored reply's JSON); a field that
/// is absent or not a number is left out rather than guessed.
pub fn figures(data: &Value, fields: &[String]) -> BTreeMap<String, f64> {
    fields
        .iter()
        .filter_map(|f| Some((f.clone(), data.get(f)?.as_f64()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_counted_as_a_reader_counts_them() {
        assert_eq!(word_count(""), 0);
        assert_eq!(word_count("# Final essay\n\nTrees cool streets."), 5);
        assert_eq!(word_count("- one\n- two 2\n\n---\n"), 3);
        assert_eq!(word_count("Shade — and air."), 3);
    }

    #[test]
    fn figures_are_the_named_numbers_only() {
        let data = serde_json::json!({
            "sources_verified": 2, "voice_consistency_score": 3.5,
            "claims": [], "note": "4",
        });
        let wanted: Vec<String> = [
            "sources_verified",
            "voice_consistency_score",
            "note",
            "gone",
        ]
        .map(String::from)
        .to_vec();
        let got = figures(&data, &wanted);
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            [
                ("sources_verified".to_string(), 2.0),
                ("voice_consistency_score".to_string(), 3.5)
            ]
        );
    }

    #[test]
    fn the_mean_is_the_engines_not_the_models() {
        let rule = MeanRule {
            of: "checks".into(),
            key: "score".into(),
            into: "voice_consistency_score".into(),
        };
        let mut reply = serde_json::json!({
            "checks": [{"score": 4}, {"score": 5}, {"score": "high"}, {"note": "x"}, {"score": 4}],
            "voice_consistency_score": 2,
        });
        assert_eq!(apply_mean(&mut reply, &rule), Some(4.33));
        assert_eq!(reply["voice_consistency_score"], 4.33);
        let mut unscored = serde_json::json!({"checks": ["fine"], "voice_consistency_score": 5});
        assert_eq!(apply_mean(&mut unscored, &rule), None);
        assert_eq!(unscored["voice_consistency_score"], Value::Null);
    }

    #[test]
    fn a_rule_reads_as_the_pipeline_file_writes_it() {
        let rule: RecordRule = toml::from_str("fields = [\"sources_verified\"]").expect("rule");
        assert_eq!(rule.fields, ["sources_verified"]);
        assert!(!rule.document);
        assert!(toml::from_str::<RecordRule>("documents = true").is_err());
    }
}
