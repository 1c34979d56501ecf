//! What the engine's unit tests build recipes from.

use dialectic_core::ids::StepId;
use dialectic_core::job::JobType;
use dialectic_core::recipe::{
    Granularity, ObjectFilter, OutputRule, Recipe, RecipeStep, StepConfig,
};

/// A step writing a document named after it.
pub(super) fn step(key: &str, job_type: JobType) -> RecipeStep {
    RecipeStep {
        id: StepId::new(),
        step_key: key.to_string(),
        step_name: key.to_string(),
        job_type,
        prompt_type: "Turn".into(),
        prompt_template: None,
        output_type: key.to_string(),
        granularity: Granularity::AllToOne,
        inputs_required: vec![],
        inputs_relevance: serde_json::json!([]),
        outputs_required: vec![],
        order: 0,
        is_skipped: false,
        config: StepConfig::default(),
        role: None,
        filter: ObjectFilter::default(),
        progress: None,
        skip_only_when: None,
    }
}

/// The step, writing its document as markdown (so it renders).
pub(super) fn markdown(mut step: RecipeStep) -> RecipeStep {
    step.outputs_required.push(OutputRule {
        document_key: step.output_type.clone(),
        file_type: Some("markdown".into()),
        template_filename: None,
        required_keys: vec![],
        key_types: Default::default(),
        publishes: vec![],
        confidence_gate: None,
        schema: None,
        verify_claims: None,
        record: None,
        mean: None,
    });
    step
}

/// A stage's recipe: `plan → outline → {draft, critique}`, `draft → polish`,
/// in that order.
pub(super) fn essay() -> Recipe {
    let mut steps = vec![
        step("plan", JobType::Plan),
        step("outline", JobType::Execute),
        step("draft", JobType::Execute),
        step("critique", JobType::Execute),
        step("polish", JobType::Execute),
    ];
    for (order, step) in steps.iter_mut().enumerate() {
        step.order = order as i32;
    }
    let id = |i: usize| steps[i].id;
    let edges = vec![
        (id(0), id(1)),
        (id(1), id(2)),
        (id(1), id(3)),
        (id(2), id(4)),
    ];
    Recipe { steps, edges }
}

/// The step of `recipe` with `key`.
pub(super) fn by_key<'r>(recipe: &'r Recipe, key: &str) -> &'r RecipeStep {
    recipe.step_by_key(key).expect("a step of the recipe")
}
