use super::*;
use crate::engine::testing::{essay, markdown, step};
use dialectic_proto::v1::queue::JobStarted;

const TYPES: [JobType; 3] = [JobType::Plan, JobType::Execute, JobType::Render];

fn processing(job_type: JobType, root: bool) -> Reported {
    Reported {
        job_type,
        status: JobStatus::Processing,
        attempt_count: 2,
        root,
    }
}

fn started() -> job_outcome::Result {
    job_outcome::Result::Started(JobStarted {
        worker: "executor-1".into(),
    })
}

fn succeeded() -> job_outcome::Result {
    job_outcome::Result::Succeeded(JobSucceeded::default())
}

fn failed(code: &str) -> job_outcome::Result {
    job_outcome::Result::Failed(JobFailed {
        error_code: code.into(),
        message: "no".into(),
        retryable: true,
    })
}

#[test]
fn only_a_root_plan_job_starting_moves_its_session() {
    for job_type in TYPES {
        for root in [true, false] {
            let moves = matches!(
                react(processing(job_type, root), 2, &started()),
                Reaction::Started {
                    moves_session: true,
                    worker: "executor-1"
                }
            );
            assert_eq!(
                moves,
                root && job_type == JobType::Plan,
                "{job_type:?} root={root}"
            );
        }
    }
}

#[test]
fn an_outcome_of_the_current_attempt_is_taken_for_every_job_type() {
    for job_type in TYPES {
        let job = processing(job_type, false);
        assert!(matches!(
            react(job, 2, &succeeded()),
            Reaction::Succeeded(_)
        ));
        assert!(matches!(
            react(job, 2, &failed("provider_error")),
            Reaction::Failed(f) if f.retryable
        ));
        assert!(matches!(
            react(job, 2, &failed(INSUFFICIENT_BALANCE)),
            Reaction::PauseForFunds { reason: "no" }
        ));
    }
}

#[test]
fn a_success_or_failure_of_another_attempt_or_a_job_no_longer_processing_is_stale() {
    for job_type in TYPES {
        let earlier = processing(job_type, true);
        let retrying = Reported {
            status: JobStatus::Retrying,
            ..earlier
        };
        for result in [
            succeeded(),
            failed("provider_error"),
            failed(INSUFFICIENT_BALANCE),
        ] {
            assert!(matches!(react(earlier, 1, &result), Reaction::Stale));
            assert!(matches!(react(retrying, 2, &result), Reaction::Stale));
        }
        // A start is news whatever the attempt: watchers hear of it.
        assert!(matches!(
            react(retrying, 1, &started()),
            Reaction::Started { .. }
        ));
    }
}

fn payload(step: Option<RecipeStep>, with_recipe: bool) -> JobPayload {
    JobPayload {
        step,
        recipe: with_recipe.then(essay),
        ..Default::default()
    }
}

fn reply(contribution: &str, continuation_needed: bool) -> JobSucceeded {
    JobSucceeded {
        contribution_id: contribution.into(),
        continuation_needed,
        ..Default::default()
    }
}

#[test]
fn a_root_plan_job_plans_its_next_steps_and_does_nothing_else() {
    let root = payload(Some(step("plan", JobType::Plan)), true);
    let after = after_success(JobType::Plan, &root, &reply("c", false));
    assert_eq!(
        after,
        AfterSuccess {
            plans_next: true,
            ..Default::default()
        }
    );
    // A PLAN step planned under a root carries no recipe: it just succeeds.
    let child = payload(Some(step("sub_plan", JobType::Plan)), false);
    let after = after_success(JobType::Plan, &child, &reply("c", false));
    assert_eq!(after, AfterSuccess::default());
}

#[test]
fn a_whole_markdown_reply_is_gated_then_rendered() {
    let job = payload(Some(markdown(step("draft", JobType::Execute))), false);
    let after = after_success(JobType::Execute, &job, &reply("c", false));
    let expected = AfterSuccess {
        gated: true,
        renders: true,
        ..Default::default()
    };
    assert_eq!(after, expected);
    // A JSON document is gated and never rendered.
    let json = payload(Some(step("outline", JobType::Execute)), false);
    let after = after_success(JobType::Execute, &json, &reply("c", false));
    assert_eq!(
        after,
        AfterSuccess {
            gated: true,
            ..Default::default()
        }
    );
}

#[test]
fn a_cut_off_reply_continues_ungated_and_its_chunk_still_renders() {
    let job = payload(Some(markdown(step("draft", JobType::Execute))), false);
    let after = after_success(JobType::Execute, &job, &reply("c", true));
    let expected = AfterSuccess {
        continues: true,
        renders: true,
        ..Default::default()
    };
    assert_eq!(after, expected);
    // Without a contribution there is nothing to render.
    let after = after_success(JobType::Execute, &job, &reply("", false));
    assert!(!after.renders);
}

#[test]
fn a_render_tells_watchers_its_document_is_out() {
    let after = after_success(JobType::Render, &JobPayload::default(), &reply("", false));
    assert_eq!(
        after,
        AfterSuccess {
            rendered: true,
            ..Default::default()
        }
    );
}

#[test]
fn a_jobs_results_name_what_its_reply_produced() {
    let done = JobSucceeded {
        contribution_id: "c1".into(),
        resource_id: "r1".into(),
        finish_reason: "stop".into(),
        ..Default::default()
    };
    assert_eq!(
        results_of(&done),
        json!({"contribution_id": "c1", "resource_id": "r1", "finish_reason": "stop"})
    );
}
