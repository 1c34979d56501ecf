//! Feedback on a stage reaches every prompt of the stage after it: each
//! planning and each executing request of the next stage (and, for paralysis,
//! of the next iteration's thesis) carries the feedback as an input and its
//! text in the prompt. Alone in its test binary: it reads the simulated
//! provider's transcript, which is ordered, so the requests made after a
//! submission are exactly the next stage's. Each stage's `seed_prompt.md` is
//! the prompt its opening plan was sent.

use dialectic_core::job::JobType;
use dialectic_core::prompt::ChatRequest;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{StageResponse, SubmitStageResponsesRequest};

const PROMPT: &str = "# Feedback\n\nA community fridge network with volunteer drivers.";

/// (stage reviewed, the stage after it and its iteration, the status once it is done).
const REVIEWS: [(&str, &str, i32, &str); 5] = [
    ("thesis", "antithesis", 1, "pending_synthesis"),
    ("antithesis", "synthesis", 1, "pending_parenthesis"),
    ("synthesis", "parenthesis", 1, "pending_paralysis"),
    (
        "parenthesis",
        "paralysis",
        1,
        "iteration_complete_pending_review",
    ),
    ("paralysis", "thesis", 2, "pending_antithesis"),
];

fn prompt_text(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every step's job type by output, from the recipes, to tell plan and execute apart.
async fn job_type_of(env: &TestEnv, output_type: &str) -> String {
    sqlx::query_scalar(
        "SELECT job_type FROM dialectic_recipe_template_steps WHERE output_type = $1 LIMIT 1",
    )
    .bind(output_type)
    .fetch_one(env.store.pool())
    .await
    .unwrap_or_else(|e| panic!("step writing {output_type}: {e}"))
}

/// Seed 001's `seed_prompt.md`: in the stage's folder, named by the opening
/// plan's contribution, holding the prompt that plan was sent.
async fn seed_prompt_is_the_opening_plan(
    env: &TestEnv,
    session_id: &str,
    stage: &str,
    iteration: i32,
    opening: &ChatRequest,
) {
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT document_relationships->>'seed_prompt' FROM dialectic_contributions
          WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3
            AND document_relationships ? 'seed_prompt'",
    )
    .bind(uuid::Uuid::parse_str(session_id).expect("uuid"))
    .bind(stage)
    .bind(iteration)
    .fetch_all(env.store.pool())
    .await
    .expect("seed prompt links");
    assert_eq!(
        keys.len(),
        1,
        "{stage} {iteration}: one opening plan names it"
    );
    assert!(
        keys[0].contains(&format!("/iteration_{iteration}/"))
            && keys[0].ends_with(&format!("_{stage}/seed_prompt.md")),
        "{}",
        keys[0]
    );
    let text = env.blob.get_string(&keys[0]).await.expect("seed_prompt.md");
    let sent = &opening.messages.last().expect("a user message").content;
    assert!(
        text.contains(sent.as_str()),
        "{}: the prompt as sent",
        keys[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn feedback_on_each_stage_reaches_every_request_of_the_next() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let mut client = env.gateway().await;
    for (stage, next_stage, iteration, done) in REVIEWS {
        let feedback = format!("Feedback on {stage}: keep the {stage} focused on rural towns.");
        let from = dialectic_llm::recorded_requests().len();
        client
            .submit_stage_responses(SubmitStageResponsesRequest {
                session_id: session_id.clone(),
                stage_slug: stage.into(),
                responses: vec![StageResponse {
                    resource_id: String::new(),
                    document_key: String::new(),
                    feedback: feedback.clone(),
                }],
            })
            .await
            .unwrap_or_else(|e| panic!("submit {stage}: {e}"));
        env.wait_for_session(&session_id, done, true).await;

        let next = &dialectic_llm::recorded_requests()[from..];
        let (mut plans, mut executes) = (0, 0);
        for request in next {
            let step = format!("{stage} feedback → {}", request.output_type);
            assert!(
                prompt_text(request).contains(&feedback),
                "{step}: text missing"
            );
            assert!(
                request
                    .inputs
                    .iter()
                    .any(|i| i.kind == "feedback" && i.stage_slug == stage),
                "{step}: no feedback input in {:?}",
                request.inputs
            );
            if job_type_of(&env, &request.output_type).await == JobType::Plan.as_str() {
                plans += 1;
            } else {
                executes += 1;
            }
        }
        assert!(
            plans > 0 && executes > 0,
            "after {stage}: {plans} plan and {executes} execute requests"
        );
        let opening = next.first().expect("the next stage's first plan");
        seed_prompt_is_the_opening_plan(&env, &session_id, next_stage, iteration, opening).await;
    }
    env.teardown().await;
}
