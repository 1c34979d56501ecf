//! Confidence gates (seed 004 override resolution): a step whose output rule
//! sets a `confidence_gate` is run again while its reply's `confidence` is
//! below `min_confidence`, at most `max_reruns` times (optionally on a
//! stronger `rerun_model`); a reply still below the gate after that is kept
//! and flagged. The planner applies [`decide`]; nothing here does I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The reply key a gated step answers with, a number from 0 to 1.
pub const CONFIDENCE: &str = "confidence";

/// The blackboard entry type a kept low-confidence document is announced as.
pub const LOW_CONFIDENCE: &str = "low_confidence";

/// What marks a rerun's job key: `{original key}:rerun{n}`.
const RERUN_MARK: &str = ":rerun";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfidenceGate {
    pub min_confidence: f64,
    #[serde(default = "one")]
    pub max_reruns: u32,
    /// The model (API identifier) reruns use; the job's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_model: Option<String>,
}

fn one() -> u32 {
    1
}

impl ConfidenceGate {
    /// Why the gate cannot work, if it cannot.
    pub fn problem(&self) -> Option<String> {
        (!(0.0..=1.0).contains(&self.min_confidence)).then(|| {
            format!(
                "min_confidence {} is not between 0 and 1",
                self.min_confidence
            )
        })
    }
}

/// The confidence a reply states, when it is a number.
pub fn confidence_of(reply: &Value) -> Option<f64> {
    reply.get(CONFIDENCE).and_then(Value::as_f64)
}

/// What the planner does with a gated reply.
#[derive(Debug, Clone, PartialEq)]
pub enum GateDecision {
    /// At or above the gate, or no confidence stated: the document stands.
    Pass,
    /// Below the gate with reruns left: run rerun `number` (1-based) as `job_key`.
    Rerun { number: u32, job_key: String },
    /// Below the gate after every rerun: keep it, flagged.
    Flag { reruns: u32 },
}

/// Which rerun a job is (0 for the original) and the original's key.
fn rerun_of(job_key: &str) -> (&str, u32) {
    match job_key.rsplit_once(RERUN_MARK) {
        Some((original, n)) => match n.parse() {
            Ok(n) => (original, n),
            Err(_) => (job_key, 0),
        },
        None => (job_key, 0),
    }
}

pub fn decide(gate: &ConfidenceGate, confidence: Option<f64>, job_key: &str) -> GateDecision {
    if !confidence.is_some_and(|c| c < gate.min_confidence) {
        return GateDecision::Pass;
    }
    let (original, done) = rerun_of(job_key);
    if done < gate.max_reruns {
        GateDecision::Rerun {
            number: done + 1,
            job_key: format!("{original}{RERUN_MARK}{}", done + 1),
        }
    } else {
        GateDecision::Flag { reruns: done }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(max_reruns: u32) -> ConfidenceGate {
        ConfidenceGate {
            min_confidence: 0.7,
            max_reruns,
            rerun_model: None,
        }
    }

    #[test]
    fn a_low_reply_runs_again_until_the_reruns_are_spent_then_is_flagged() {
        assert_eq!(
            decide(&gate(2), Some(0.2), "k"),
            GateDecision::Rerun {
                number: 1,
                job_key: "k:rerun1".into()
            }
        );
        assert_eq!(
            decide(&gate(2), Some(0.2), "k:rerun1"),
            GateDecision::Rerun {
                number: 2,
                job_key: "k:rerun2".into()
            }
        );
        assert_eq!(
            decide(&gate(2), Some(0.2), "k:rerun2"),
            GateDecision::Flag { reruns: 2 }
        );
        assert_eq!(
            decide(&gate(0), Some(0.2), "k"),
            GateDecision::Flag { reruns: 0 }
        );
    }

    #[test]
    fn a_confident_or_silent_reply_passes() {
        assert_eq!(decide(&gate(2), Some(0.7), "k"), GateDecision::Pass);
        assert_eq!(decide(&gate(2), None, "k:rerun1"), GateDecision::Pass);
    }

    #[test]
    fn a_gate_outside_zero_to_one_is_a_problem() {
        assert!(gate(1).problem().is_none());
        let wrong = ConfidenceGate {
            min_confidence: 70.0,
            ..gate(1)
        };
        assert!(wrong.problem().is_some());
    }
}
