//! Clarification loops (seed 004 `needs_clarification`): a reply may ask an
//! earlier step of its stage a question. The planner runs that step again
//! with the question in its prompt, then every step downstream of it, at most
//! `max_clarification_rounds` times per session.

use crate::ids::StepId;
use crate::recipe::Recipe;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The reply key that asks for a clarification.
pub const NEEDS_CLARIFICATION: &str = "needs_clarification";

/// The heading of the note a clarified step's prompt carries.
pub const NOTE_HEADING: &str = "--- Clarification requested ---";

/// What a reply asks: which step, and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClarificationRequest {
    pub step_key: String,
    pub question: String,
}

/// The requests a reply makes: none without `needs_clarification`; else an
/// array of `{"step_key", "question"}` objects, each naming a step and asking
/// something, or an error naming what is wrong.
pub fn requests(reply: &Value) -> Result<Vec<ClarificationRequest>, String> {
    let Some(listed) = reply.get(NEEDS_CLARIFICATION) else {
        return Ok(Vec::new());
    };
    let asked: Vec<ClarificationRequest> = serde_json::from_value(listed.clone()).map_err(|e| {
        format!(
            "{NEEDS_CLARIFICATION} must be an array of {{\"step_key\", \"question\"}} objects: {e}"
        )
    })?;
    match asked
        .iter()
        .position(|r| r.step_key.trim().is_empty() || r.question.trim().is_empty())
    {
        Some(index) => Err(format!(
            "{NEEDS_CLARIFICATION}[{index}] needs a step_key and a question"
        )),
        None => Ok(asked),
    }
}

/// A clarification round as the jobs it re-runs carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clarification {
    /// 1 for the session's first round.
    pub round: u32,
    /// The step whose reply asked.
    pub asked_by: String,
    pub step_key: String,
    pub question: String,
}

impl Clarification {
    /// What the prompt of every step the round re-runs ends with.
    pub fn prompt_note(&self) -> String {
        format!(
            "\n\n{NOTE_HEADING}\nRound {}: step {} asked step {}: {}\nTake it into account.",
            self.round, self.asked_by, self.step_key, self.question
        )
    }
}

/// Why a request starts no round.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0}: no such step in this stage")]
    UnknownStep(String),
    #[error("the session has had its {0} clarification round(s)")]
    RoundsSpent(u32),
}

/// The steps a round re-runs: the asked step and every step downstream of
/// it; refused for a step the stage lacks or once `max_rounds` are spent.
pub fn rerun_steps(
    recipe: &Recipe,
    request: &ClarificationRequest,
    rounds_so_far: u32,
    max_rounds: u32,
) -> Result<Vec<StepId>, Refusal> {
    let step = recipe
        .steps
        .iter()
        .find(|s| s.step_key == request.step_key)
        .ok_or_else(|| Refusal::UnknownStep(request.step_key.clone()))?;
    if rounds_so_far >= max_rounds {
        return Err(Refusal::RoundsSpent(max_rounds));
    }
    let mut steps = vec![step.id];
    steps.extend(recipe.descendants(step.id));
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recipe() -> Recipe {
        let step = |key: &str| -> crate::recipe::RecipeStep {
            serde_json::from_value(json!({
                "id": StepId::new(), "step_key": key, "step_name": key, "job_type": "EXECUTE",
                "prompt_type": "Turn", "prompt_template": null, "output_type": key,
                "granularity": "all_to_one", "inputs_required": [], "inputs_relevance": [],
                "outputs_required": [], "order": 1, "is_skipped": false
            }))
            .expect("step")
        };
        let (plan, find, check, other) = (step("plan"), step("find"), step("check"), step("other"));
        Recipe {
            edges: vec![(plan.id, find.id), (find.id, check.id), (plan.id, other.id)],
            steps: vec![plan, find, check, other],
        }
    }

    #[test]
    fn a_round_reruns_the_asked_step_and_what_follows_it_until_rounds_are_spent() {
        let recipe = recipe();
        let ask = |key: &str| ClarificationRequest {
            step_key: key.into(),
            question: "which clause?".into(),
        };
        let keys = |ids: Vec<StepId>| -> Vec<String> {
            ids.iter()
                .filter_map(|id| recipe.step(*id).map(|s| s.step_key.clone()))
                .collect()
        };
        assert_eq!(
            keys(rerun_steps(&recipe, &ask("find"), 0, 2).expect("runs")),
            ["find", "check"]
        );
        assert_eq!(
            rerun_steps(&recipe, &ask("find"), 2, 2),
            Err(Refusal::RoundsSpent(2))
        );
        assert_eq!(
            rerun_steps(&recipe, &ask("nope"), 0, 2),
            Err(Refusal::UnknownStep("nope".into()))
        );
    }

    #[test]
    fn requests_name_a_step_and_ask_something() {
        let reply =
            json!({"needs_clarification": [{"step_key": "find", "question": "which clause?"}]});
        assert_eq!(requests(&reply).expect("valid").len(), 1);
        assert_eq!(requests(&json!({})), Ok(Vec::new()));
        for bad in [
            json!({"needs_clarification": "find"}),
            json!({"needs_clarification": [{"step_key": "find"}]}),
            json!({"needs_clarification": [{"step_key": " ", "question": "q"}]}),
        ] {
            assert!(requests(&bad).is_err(), "{bad}");
        }
    }
}
