//! When a plan may skip a step. A PLAN reply's `skip_steps` is the model's
//! judgement; a pipeline file can bound it with `skip_only_when` on the step
//! (`skip_only_when = { max_documents = 1 }`), and a skip asked outside that
//! condition is overruled: the step runs, and watchers are told which
//! condition did not hold. A real model skipped amendment tracking over a
//! three-document stack; the engine, not the model, knows how many there are.

use crate::shape::SkipStep;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The condition under which a step may be skipped; every field given must
/// hold. Unknown keys are refused when the pipeline file is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkipCondition {
    /// The session's project holds at most this many uploaded documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_documents: Option<u32>,
}

/// The facts about a session a condition is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkipFacts {
    /// Uploaded documents of the session's project.
    pub documents: usize,
}

impl SkipCondition {
    /// Why the condition cannot be used, if it cannot: one that names
    /// nothing would allow every skip, which is what leaving it out says.
    pub fn problem(&self) -> Option<String> {
        (*self == SkipCondition::default())
            .then(|| "names no condition (known keys: max_documents)".to_string())
    }

    /// Why the condition does not hold for `facts`; None when it holds.
    pub fn unmet(&self, facts: SkipFacts) -> Option<String> {
        let max = self.max_documents?;
        (facts.documents > max as usize)
            .then(|| format!("the session has {} documents", facts.documents))
    }
}

impl fmt::Display for SkipCondition {
    /// As the pipeline file writes it: `max_documents = 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.max_documents {
            Some(max) => write!(f, "max_documents = {max}"),
            None => f.write_str("no condition"),
        }
    }
}

/// What becomes of the skips a plan asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    /// Skips to record.
    pub allowed: Vec<SkipStep>,
    /// Skips whose step's condition does not hold, each with the reason
    /// watchers see (naming the condition).
    pub overruled: Vec<(SkipStep, String)>,
    /// Skips naming no step of the pipeline.
    pub unknown: Vec<SkipStep>,
}

/// Sorts a plan's skips by the pipeline's steps (`rules`: every step key,
/// with its condition if it has one) and the session's `facts`.
pub fn judge(
    asked: Vec<SkipStep>,
    rules: &BTreeMap<String, Option<SkipCondition>>,
    facts: SkipFacts,
) -> Judged {
    let mut judged = Judged::default();
    for skip in asked {
        match rules.get(&skip.step_key) {
            None => judged.unknown.push(skip),
            Some(Some(condition)) => match condition.unmet(facts) {
                Some(why) => {
                    let reason = format!(
                        "the plan's skip is overruled: skip_only_when {condition} does not hold ({why}); the step runs"
                    );
                    judged.overruled.push((skip, reason));
                }
                None => judged.allowed.push(skip),
            },
            Some(None) => judged.allowed.push(skip),
        }
    }
    judged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(key: &str) -> SkipStep {
        SkipStep {
            step_key: key.into(),
            reason: "one document".into(),
        }
    }

    fn rules() -> BTreeMap<String, Option<SkipCondition>> {
        BTreeMap::from([
            (
                "track".to_string(),
                Some(SkipCondition {
                    max_documents: Some(1),
                }),
            ),
            ("review".to_string(), None),
        ])
    }

    /// (asked step, documents) → allowed | overruled | unknown.
    #[test]
    fn a_skip_is_allowed_only_where_its_condition_holds() {
        let table = [
            ("track", 0, "allowed"),
            ("track", 1, "allowed"),
            ("track", 2, "overruled"),
            ("track", 3, "overruled"),
            ("review", 3, "allowed"),
            ("review", 0, "allowed"),
            ("nowhere", 1, "unknown"),
        ];
        for (key, documents, expected) in table {
            let judged = judge(vec![skip(key)], &rules(), SkipFacts { documents });
            let got = match (
                judged.allowed.len(),
                judged.overruled.len(),
                judged.unknown.len(),
            ) {
                (1, 0, 0) => "allowed",
                (0, 1, 0) => "overruled",
                (0, 0, 1) => "unknown",
                other => panic!("{key} {documents}: {other:?}"),
            };
            assert_eq!(got, expected, "{key} with {documents} documents");
        }
    }

    #[test]
    fn an_overruled_skip_names_the_condition_and_the_count() {
        let judged = judge(
            vec![skip("track"), skip("review")],
            &rules(),
            SkipFacts { documents: 3 },
        );
        assert_eq!(judged.allowed, [skip("review")]);
        assert_eq!(
            judged.overruled,
            [(
                skip("track"),
                "the plan's skip is overruled: skip_only_when max_documents = 1 does not hold (the session has 3 documents); the step runs".to_string()
            )]
        );
    }

    #[test]
    fn a_condition_reads_from_toml_and_refuses_unknown_keys() {
        #[derive(Deserialize)]
        struct Step {
            skip_only_when: SkipCondition,
        }
        let read: Step = toml::from_str("skip_only_when = { max_documents = 1 }").expect("reads");
        assert_eq!(read.skip_only_when.max_documents, Some(1));
        let unknown = toml::from_str::<Step>("skip_only_when = { max_pages = 1 }")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            unknown.contains("unknown field `max_pages`, expected `max_documents`"),
            "{unknown}"
        );
        assert!(SkipCondition::default().problem().is_some());
        assert_eq!(read.skip_only_when.problem(), None);
    }
}
