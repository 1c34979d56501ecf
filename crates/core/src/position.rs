//! Where a session is, in words a person reads at a glance ("stage 3 of 4
//! (Argument development): Map one section's argument, section 2 of 5"; seed
//! 003 "Session paused at [Stage N, Section M]"). A step that works through
//! the items of several documents in turn (a paragraph of each section's
//! argument map) names the document's place too: "section 2 of 3, paragraph
//! 1 of 2", not "paragraph 3 of 6".

use crate::recipe::{Granularity, InputRule, RecipeStep};

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
    /// The one under way, 1-based: within `within` when it is set.
    pub index: u64,
    pub count: u64,
    /// The document whose items the step is working through, when it works
    /// through the items of more than one.
    pub within: Option<Within>,
}

/// The place of the document a job's item belongs to ("section 2 of 3").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Within {
    pub unit: String,
    pub index: u64,
    pub count: u64,
}

/// One job of a step that fans out over the items of documents: the
/// document it reads an item of, and whether it is done; in the jobs' order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemJob {
    pub source: String,
    pub done: bool,
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

    /// Places the step's current job within the document its item comes
    /// from, when the step's jobs read the items of more than one document;
    /// `unit` names those documents' place ("section").
    pub fn within_documents(mut self, unit: &str, jobs: &[ItemJob]) -> Self {
        let mut groups: Vec<(&str, Vec<bool>)> = Vec::new();
        for job in jobs {
            match groups.last_mut() {
                Some((source, done)) if *source == job.source => done.push(job.done),
                _ => groups.push((&job.source, vec![job.done])),
            }
        }
        if groups.len() < 2 {
            return self;
        }
        let current = groups
            .iter()
            .position(|(_, done)| done.contains(&false))
            .unwrap_or(groups.len() - 1);
        let done = &groups[current].1;
        self.index = (done.iter().filter(|d| **d).count() as u64 + 1).min(done.len() as u64);
        self.count = done.len() as u64;
        self.within = Some(Within {
            unit: unit.to_string(),
            index: current as u64 + 1,
            count: groups.len() as u64,
        });
        self
    }

    pub fn summary(&self) -> String {
        let mut text = format!(
            "stage {} of {} ({})",
            self.stage_number, self.stage_count, self.stage_name
        );
        if !self.step_name.is_empty() {
            text.push_str(&format!(": {}", self.step_name));
        }
        if let Some(within) = &self.within {
            text.push_str(&format!(
                ", {} {} of {}",
                within.unit, within.index, within.count
            ));
        }
        if self.count > 1 || self.within.is_some() {
            text.push_str(&format!(", {} {} of {}", self.unit, self.index, self.count));
        }
        text
    }
}

/// What one job of the step works on: an item of the array its anchor rule
/// names (`items = "sections"` → "section"), a document, or just a job.
pub fn unit_of(step: &RecipeStep) -> String {
    match (
        anchor(step).and_then(|r| r.items.as_deref()),
        step.granularity,
    ) {
        (Some(items), _) => items.strip_suffix('s').unwrap_or(items).replace('_', " "),
        (None, Granularity::PerSourceDocument | Granularity::Sequential) => "document".into(),
        _ => "job".into(),
    }
}

/// The input rule a step fans out over: its first document rule.
fn anchor(step: &RecipeStep) -> Option<&InputRule> {
    step.inputs_required
        .iter()
        .find(|r| r.kind == "document" || r.kind == "project_document")
}

/// The stage and document key of the documents whose items the step works
/// through, when it works through items of an earlier step's documents.
pub fn item_documents(step: &RecipeStep) -> Option<(&str, &str)> {
    let rule = anchor(step).filter(|r| r.items.is_some())?;
    Some((rule.stage_slug.as_deref()?, rule.document_key.as_deref()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobType;

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

    #[test]
    fn paragraphs_are_counted_within_their_section() {
        let job = |source: &str, done: bool| ItemJob {
            source: source.into(),
            done,
        };
        let jobs = [
            job("map-1", true),
            job("map-1", true),
            job("map-2", true),
            job("map-2", false),
            job("map-3", false),
        ];
        let steps = [tally(
            "write",
            Granularity::Sequential,
            Some("paragraphs"),
            3,
            5,
        )];
        let position = Position::new((4, 4, "Paragraph writing"), &steps);
        assert_eq!(
            position
                .clone()
                .within_documents("section", &jobs)
                .summary(),
            "stage 4 of 4 (Paragraph writing): Run write, section 2 of 3, paragraph 2 of 2"
        );
        let one_source = [job("map-1", true), job("map-1", false)];
        assert_eq!(
            position.within_documents("section", &one_source).summary(),
            "stage 4 of 4 (Paragraph writing): Run write, paragraph 4 of 5"
        );
    }
}
