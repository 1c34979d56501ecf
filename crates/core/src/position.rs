//! Where a session is, in words a person reads at a glance ("stage 3 of 4
//! (Argument development): Map one section's argument, section 2 of 5"; seed
//! 003 "Session paused at [Stage N, Section M]").

use crate::recipe::{Granularity, RecipeStep};

/// A step of the current stage that has jobs: its definition and how many of
/// its jobs are done, in the order the steps started.
#[derive(Debug, Clone)]
pub struct StepTally {
    pub step: RecipeStep,
    pub done: u64,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Position {
    pub stage_number: u32,
    pub stage_count: u32,
    pub stage_name: String,
    /// The step under way (the last one when all are done); empty before any.
    pub step_key: String,
    pub step_name: String,
    /// What one of its jobs works on: "section", "document", "job".
    pub unit: String,
    /// The one under way, 1-based.
    pub index: u64,
    pub count: u64,
}

impl Position {
    pub fn new(stage: (u32, u32, &str), steps: &[StepTally]) -> Self {
        let (stage_number, stage_count, stage_name) = stage;
        let mut position = Position {
            stage_number,
            stage_count,
            stage_name: stage_name.to_string(),
            ..Default::default()
        };
        let current = steps
            .iter()
            .find(|s| s.done < s.total)
            .or_else(|| steps.last());
        if let Some(tally) = current {
            position.step_key = tally.step.step_key.clone();
            position.step_name = tally.step.step_name.clone();
            position.unit = unit_of(&tally.step);
            position.index = (tally.done + 1).min(tally.total);
            position.count = tally.total;
        }
        position
    }

    pub fn summary(&self) -> String {
        let mut text = format!(
            "stage {} of {} ({})",
            self.stage_number, self.stage_count, self.stage_name
        );
        if !self.step_name.is_empty() {
            text.push_str(&format!(": {}", self.step_name));
        }
        if self.count > 1 {
            text.push_str(&format!(", {} {} of {}", self.unit, self.index, self.count));
        }
        text
    }
}

/// What one job of the step works on: an item of the array its anchor rule
/// names (`items = "sections"` → "section"), a document, or just a job.
pub fn unit_of(step: &RecipeStep) -> String {
    let anchor = step
        .inputs_required
        .iter()
        .find(|r| r.kind == "document" || r.kind == "project_document");
    match (anchor.and_then(|r| r.items.as_deref()), step.granularity) {
        (Some(items), _) => items.strip_suffix('s').unwrap_or(items).replace('_', " "),
        (None, Granularity::PerSourceDocument | Granularity::Sequential) => "document".into(),
        _ => "job".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobType;
    use crate::recipe::InputRule;

    fn tally(
        key: &str,
        granularity: Granularity,
        items: Option<&str>,
        done: u64,
        total: u64,
    ) -> StepTally {
        let mut step = crate::recipe::tests::step(key, JobType::Execute, 1);
        step.step_name = format!("Run {key}");
        step.granularity = granularity;
        let rule: InputRule =
            serde_json::from_value(serde_json::json!({"type": "document", "items": items}))
                .expect("rule");
        step.inputs_required = vec![rule];
        StepTally { step, done, total }
    }

    #[test]
    fn the_first_unfinished_step_and_its_unit_tell_where_the_session_is() {
        let steps = [
            tally("plan", Granularity::AllToOne, None, 1, 1),
            tally("argue", Granularity::PerItem, Some("sections"), 1, 5),
        ];
        let position = Position::new((3, 4, "Argument development"), &steps);
        assert_eq!(
            position.summary(),
            "stage 3 of 4 (Argument development): Run argue, section 2 of 5"
        );
        let single = Position::new((1, 4, "Thesis development"), &steps[..1]);
        assert_eq!(
            single.summary(),
            "stage 1 of 4 (Thesis development): Run plan"
        );
        let none = Position::new((2, 6, "Parse"), &[]);
        assert_eq!(none.summary(), "stage 2 of 6 (Parse)");
        let chain = tally("track", Granularity::Sequential, None, 3, 3);
        assert_eq!(
            Position::new((1, 1, "Contract analysis"), &[chain]).summary(),
            "stage 1 of 1 (Contract analysis): Run track, document 3 of 3"
        );
    }
}
