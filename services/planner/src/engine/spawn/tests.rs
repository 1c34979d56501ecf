use super::*;
use crate::engine::testing::step;
use dialectic_core::ids::ModelId;

fn round(number: u32) -> Clarification {
    Clarification {
        round: number,
        asked_by: "critique".into(),
        step_key: "draft".into(),
        question: "Which audience?".into(),
    }
}

fn fan(discriminator: &str, lineage: Lineage) -> FanOutJob {
    FanOutJob {
        discriminator: discriminator.into(),
        lineage,
        sources: Vec::new(),
        after_previous: false,
    }
}

#[test]
fn a_childs_key_names_its_parent_step_discriminator_and_clarification_round() {
    let parent = JobId::new();
    let draft = step("draft", JobType::Execute);
    assert_eq!(
        child_job_key(parent, &draft, "", None),
        format!("{parent}:draft")
    );
    assert_eq!(
        child_job_key(parent, &draft, "doc-2", None),
        format!("{parent}:draft:doc-2")
    );
    assert_eq!(
        child_job_key(parent, &draft, "doc-2", Some(&round(3))),
        format!("{parent}:draft:doc-2:clarified3")
    );
}

#[test]
fn a_child_inherits_its_parents_model_and_lineage_and_plans_only_as_a_plan_step() {
    let parent = JobPayload {
        model_api_identifier: "model-a".into(),
        model_slug: "model-a".into(),
        stage_number: 3,
        lineage_model_id: Some(ModelId::new()),
        ..Default::default()
    };
    let asked_round = round(1);
    let child = Child {
        planned_documents: vec!["draft".into()],
        round: Some(&asked_round),
        asked: true,
        previous: None,
        previous_done: false,
        runs_on: None,
    };
    let plan = child_payload(
        &parent,
        &step("sub", JobType::Plan),
        fan("", Lineage::Plain),
        &child,
    );
    assert_eq!(plan.planned_documents, ["draft"]);
    assert_eq!(plan.lineage, None);
    assert_eq!(plan.lineage_model_id, parent.lineage_model_id);
    assert_eq!(plan.stage_number, 3);
    assert_eq!(plan.clarification, Some(asked_round.clone()));
    let critiquing = Lineage::Critiquing {
        source_model: "model-b".into(),
    };
    let not_asked = Child {
        asked: false,
        ..child
    };
    let execute = child_payload(
        &parent,
        &step("draft", JobType::Execute),
        fan("x", critiquing.clone()),
        &not_asked,
    );
    assert!(execute.planned_documents.is_empty());
    assert_eq!(execute.lineage, Some(critiquing));
    assert_eq!(execute.clarification, None);
    assert!(execute.recipe.is_none());
    let lineage = parent.lineage_model_id;
    let moved = Child {
        runs_on: Some(Placement {
            model_id: ModelId::new(),
            api_identifier: "analyst-model".into(),
            lineage_model_id: lineage,
        }),
        ..not_asked
    };
    let analysed = child_payload(
        &parent,
        &step("draft", JobType::Execute),
        fan("", Lineage::Plain),
        &moved,
    );
    assert_eq!(
        (
            analysed.model_api_identifier.as_str(),
            analysed.lineage_model_id
        ),
        ("analyst-model", lineage),
        "a role's model answers, in the parent's lineage"
    );
    assert_eq!(analysed.model_slug, "model-a", "named by its lineage");
}
