//! Feedback on a stage reaches every prompt of the stage after it, in each
//! shipped pipeline: each planning and each executing request of the next
//! stage (and, after the last stage, of the next iteration's first) carries
//! the feedback as an input and its text in the prompt. The tests share the
//! simulated provider's transcript, which is ordered, and take turns on it, so
//! the requests made after a submission are exactly the next stage's. Each
//! dialectic stage's `seed_prompt.md` is the prompt its opening plan was sent.

use dialectic_core::job::JobType;
use dialectic_core::prompt::ChatRequest;
use dialectic_e2e::{GatewayClient, TestEnv, upload_documents};
use dialectic_proto::v1::{
    CreateProjectRequest, StageResponse, StartSessionRequest, SubmitStageResponsesRequest,
};

/// One test at a time: the transcript is global to the test binary.
static TRANSCRIPT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

/// Submits `feedback` on `document_key` of `stage`, waits for the session to
/// reach `done` and checks every request made meanwhile: the feedback's text
/// is in its prompt and a `feedback` input of `stage` among its inputs, and
/// both plans and executes were made. Returns those requests.
async fn submit_and_check_next(
    env: &TestEnv,
    client: &mut GatewayClient,
    session_id: &str,
    (stage, document_key, done): (&str, &str, &str),
    feedback: &str,
) -> Vec<ChatRequest> {
    let from = dialectic_llm::recorded_requests().len();
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.to_string(),
            stage_slug: stage.into(),
            responses: vec![StageResponse {
                resource_id: String::new(),
                document_key: document_key.into(),
                feedback: feedback.to_string(),
            }],
            client_request_id: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("submit {stage}: {e}"));
    env.wait_for_session(session_id, done, true).await;

    let next = dialectic_llm::recorded_requests().split_off(from);
    let (mut plans, mut executes) = (0, 0);
    for request in &next {
        let step = format!("{stage} feedback → {}", request.output_type);
        assert!(
            prompt_text(request).contains(feedback),
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
        if job_type_of(env, &request.output_type).await == JobType::Plan.as_str() {
            plans += 1;
        } else {
            executes += 1;
        }
    }
    assert!(
        plans > 0 && executes > 0,
        "after {stage}: {plans} plan and {executes} execute requests"
    );
    next
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn feedback_on_each_stage_reaches_every_request_of_the_next() {
    let _turn = TRANSCRIPT.lock().await;
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let mut client = env.gateway().await;
    for (stage, next_stage, iteration, done) in REVIEWS {
        let feedback = format!("Feedback on {stage}: keep the {stage} focused on rural towns.");
        let next =
            submit_and_check_next(&env, &mut client, &session_id, (stage, "", done), &feedback)
                .await;
        let opening = next.first().expect("the next stage's first plan");
        seed_prompt_is_the_opening_plan(&env, &session_id, next_stage, iteration, opening).await;
    }
    env.teardown().await;
}

const ESSAY_PROMPT: &str = "An essay arguing that small towns should own their broadband. \
    [[simulate:items:sections:2]] [[simulate:items:paragraphs:1]]";

/// (stage reviewed, the document the feedback is on, the status once the
/// stage after it is done): the last review starts the next iteration.
const ESSAY_REVIEWS: [(&str, &str, &str); 4] = [
    (
        "thesis_development",
        "thesis_statement",
        "pending_argument_development",
    ),
    ("essay_structuring", "outline", "pending_paragraph_writing"),
    (
        "argument_development",
        "argument_map",
        "iteration_complete_pending_review",
    ),
    (
        "paragraph_writing",
        "final_essay",
        "pending_essay_structuring",
    ),
];

/// The essay reads the feedback on each document in every step of the stage
/// after it, and the feedback on the final essay in the next iteration's thesis.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn essay_feedback_on_each_document_reaches_the_next_stage() {
    let _turn = TRANSCRIPT.lock().await;
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let (_, session_id) = env
        .new_session_on("essay", ESSAY_PROMPT, &["simulated"], false)
        .await;
    env.wait_for_session(&session_id, "pending_essay_structuring", true)
        .await;
    let mut client = env.gateway().await;
    for (stage, document_key, done) in ESSAY_REVIEWS {
        let feedback = format!("Feedback on the {document_key}: argue from one town's accounts.");
        submit_and_check_next(
            &env,
            &mut client,
            &session_id,
            (stage, document_key, done),
            &feedback,
        )
        .await;
    }
    env.teardown().await;
}

const STACK: [(&str, &str); 2] = [
    ("base.md", "Base agreement. 4.2: Rent is due on the first."),
    (
        "amendment-1.md",
        "Amendment 1. 4.2: Rent is due on the fifth.",
    ),
];

/// The single-stage contract analysis reads the feedback on its report in
/// every step of the next iteration, the analysis run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contract_feedback_reaches_every_step_of_the_next_analysis() {
    let _turn = TRANSCRIPT.lock().await;
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: "Analyse the lease stack. [[simulate:items:sections:2]]".into(),
            pipeline: "contract_stack".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    upload_documents(&mut client, &project.id, &STACK).await;
    let session_id = client
        .start_session(StartSessionRequest {
            project_id: project.id,
            models: vec!["simulated".into()],
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner()
        .id;
    let done = "iteration_complete_pending_review";
    env.wait_for_session(&session_id, done, true).await;
    let feedback = "Feedback on the conflict report: 4.2 was amended on 2024-03-01.";
    let review = ("contract_analysis", "conflict_report", done);
    let next = submit_and_check_next(&env, &mut client, &session_id, review, feedback).await;
    let steps: std::collections::BTreeSet<&str> =
        next.iter().map(|r| r.output_type.as_str()).collect();
    assert_eq!(steps.len(), 7, "every step ran again: {steps:?}");
    env.teardown().await;
}
