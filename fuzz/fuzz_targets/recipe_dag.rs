//! Users clone and change recipes: any set of steps and edges must be either
//! refused with a reason or accepted as a DAG whose order respects every edge
//! and from which every non-skipped step eventually becomes ready.
#![no_main]

use dialectic_core::ids::StepId;
use dialectic_core::job::JobType;
use dialectic_core::recipe::{Granularity, Recipe, RecipeError, RecipeStep};
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;

const MAX_STEPS: usize = 12;

fn step(index: u8, key_byte: u8, skipped: bool) -> RecipeStep {
    RecipeStep {
        progress: None,
        id: StepId(uuid::Uuid::from_u128(u128::from(index) + 1)),
        // Few distinct keys so duplicates happen.
        step_key: format!("s{}", key_byte % 16),
        step_name: String::new(),
        job_type: JobType::Execute,
        prompt_type: "Turn".into(),
        prompt_template: None,
        output_type: "doc".into(),
        granularity: Granularity::PerModel,
        inputs_required: vec![],
        inputs_relevance: serde_json::Value::Null,
        outputs_required: vec![],
        order: i32::from(key_byte),
        is_skipped: skipped,
        config: Default::default(),
        role: None,
        filter: Default::default(),
        skip_only_when: None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&count, rest)) = data.split_first() else {
        return;
    };
    let count = usize::from(count) % (MAX_STEPS + 1);
    if rest.len() < count {
        return;
    }
    let (step_bytes, edge_bytes) = rest.split_at(count);
    let steps: Vec<RecipeStep> = step_bytes
        .iter()
        .enumerate()
        .map(|(i, b)| step(i as u8, *b & 0x7f, *b & 0x80 != 0))
        .collect();
    // Ids one past the last step are allowed so edges can point outside the recipe.
    let id = |b: u8| StepId(uuid::Uuid::from_u128(u128::from(b) % (count as u128 + 2)));
    let edges: Vec<(StepId, StepId)> = edge_bytes
        .chunks_exact(2)
        .take(64)
        .map(|pair| (id(pair[0]), id(pair[1])))
        .collect();
    let recipe = Recipe { steps, edges };
    match recipe.validate() {
        Ok(()) => {
            let order = recipe
                .topological_order()
                .expect("validated recipe has an order");
            assert_eq!(order.len(), recipe.steps.len());
            let position = |s: StepId| order.iter().position(|o| *o == s).expect("step in order");
            for (from, to) in &recipe.edges {
                assert!(position(*from) < position(*to), "order respects every edge");
            }
            // Running the recipe to the end: every runnable step becomes ready exactly once.
            let mut done = HashSet::new();
            let started = HashSet::new();
            loop {
                let ready: Vec<StepId> = recipe
                    .ready_steps(&done, &started)
                    .iter()
                    .map(|s| s.id)
                    .collect();
                if ready.is_empty() {
                    break;
                }
                for id in ready {
                    assert!(done.insert(id), "a step became ready twice");
                }
            }
            let runnable = recipe.steps.iter().filter(|s| !s.is_skipped).count();
            assert_eq!(done.len(), runnable, "every runnable step is reached");
        }
        Err(RecipeError::Cycle(keys)) => assert!(!keys.is_empty()),
        Err(_) => {}
    }
});
