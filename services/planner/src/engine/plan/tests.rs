use super::*;
use crate::engine::testing::{by_key, essay};

fn keys(steps: &[RecipeStep]) -> Vec<&str> {
    steps.iter().map(|s| s.step_key.as_str()).collect()
}

/// A child row as `jobs::children` reads it.
fn child(
    recipe: &Recipe,
    key: &str,
    job_type: JobType,
    status: JobStatus,
) -> (JobType, JobStatus, Option<StepId>) {
    (job_type, status, Some(by_key(recipe, key).id))
}

#[test]
fn a_root_plans_the_steps_after_its_own_then_those_after_each_completed_one() {
    let recipe = essay();
    let own = Some(by_key(&recipe, "plan").id);
    let none = BTreeSet::new();
    let first = ready(&recipe, &none, &progress(own, &[]));
    assert_eq!(keys(&first), ["outline"]);
    let outline_done = [child(
        &recipe,
        "outline",
        JobType::Execute,
        JobStatus::Completed,
    )];
    let next = ready(&recipe, &none, &progress(own, &outline_done));
    assert_eq!(keys(&next), ["draft", "critique"]);
    // Started and not done: nothing new until the draft completes.
    let drafting = [
        outline_done[0],
        child(&recipe, "draft", JobType::Execute, JobStatus::Processing),
        child(&recipe, "critique", JobType::Execute, JobStatus::Completed),
    ];
    assert!(ready(&recipe, &none, &progress(own, &drafting)).is_empty());
}

#[test]
fn renders_and_superseded_children_do_not_count_as_a_step_started() {
    let recipe = essay();
    let own = by_key(&recipe, "plan").id;
    let outline = by_key(&recipe, "outline").id;
    let rows = [
        (JobType::Render, JobStatus::Completed, Some(outline)),
        (JobType::Execute, JobStatus::Superseded, Some(outline)),
        (JobType::Render, JobStatus::Pending, None),
    ];
    let seen = progress(Some(own), &rows);
    assert_eq!(seen.done, HashSet::from([own]));
    assert!(seen.started.is_empty());
    // A superseded step (a clarification round replaced it) is planned again.
    assert_eq!(keys(&ready(&recipe, &BTreeSet::new(), &seen)), ["outline"]);
}

#[test]
fn a_skipped_step_never_starts_and_the_steps_after_it_wait_for_what_it_waited_for() {
    let recipe = essay();
    let own = Some(by_key(&recipe, "plan").id);
    let skipped = BTreeSet::from(["draft".to_string()]);
    let outline_done = [child(
        &recipe,
        "outline",
        JobType::Execute,
        JobStatus::Completed,
    )];
    let next = ready(&recipe, &skipped, &progress(own, &outline_done));
    assert_eq!(keys(&next), ["critique", "polish"]);
}

#[test]
fn a_clarification_round_reruns_the_asked_step_and_everything_downstream() {
    let recipe = essay();
    let round = Clarification {
        round: 1,
        asked_by: "critique".into(),
        step_key: "draft".into(),
        question: "Which audience?".into(),
    };
    let asked = asked_steps(&recipe, Some(&round)).expect("a known step");
    let mut asked: Vec<&str> = asked
        .iter()
        .map(|id| recipe.step(*id).expect("step").step_key.as_str())
        .collect();
    asked.sort_unstable();
    assert_eq!(asked, ["draft", "polish"]);
    assert_eq!(asked_steps(&recipe, None), None);
    let unknown = Clarification {
        step_key: "appendix".into(),
        ..round
    };
    assert_eq!(asked_steps(&recipe, Some(&unknown)), None);
}

#[test]
fn a_plan_plans_every_output_downstream_of_it_once_and_none_a_plan_skips() {
    let mut recipe = essay();
    let plan = by_key(&recipe, "plan").clone();
    assert_eq!(
        descendant_outputs(&recipe, &plan),
        ["outline", "draft", "critique", "polish"]
    );
    for step in &mut recipe.steps {
        if step.step_key == "critique" {
            step.is_skipped = true;
        }
        if step.step_key == "polish" {
            step.output_type = "draft".into();
        }
    }
    assert_eq!(descendant_outputs(&recipe, &plan), ["outline", "draft"]);
    let draft = by_key(&recipe, "draft").clone();
    assert_eq!(descendant_outputs(&recipe, &draft), ["draft"]);
}
