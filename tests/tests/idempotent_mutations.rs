//! Issue 61, item 4: a retried mutation with the same `client_request_id`
//! gets the first answer instead of acting again. Shown with
//! SubmitStageResponses, whose plain retry is refused (the stage it answers
//! has moved on): the retry with the id returns the first Session exactly
//! and writes no second feedback; without an id the refusal is as before;
//! the same id with another request is ALREADY_EXISTS; a call that failed
//! leaves no claim, so its retry acts again. PauseSession's retry too.

use dialectic_e2e::{TestEnv, refusal};
use dialectic_proto::v1::{PauseSessionRequest, StageResponse, SubmitStageResponsesRequest};
use tonic::Code;

const PROMPT: &str = "A repair café that lends tools and teaches fixing.";

fn thesis_responses(session_id: &str, feedback: &str, id: &str) -> SubmitStageResponsesRequest {
    SubmitStageResponsesRequest {
        session_id: session_id.to_string(),
        stage_slug: "thesis".into(),
        responses: vec![StageResponse {
            resource_id: String::new(),
            document_key: "business_case".into(),
            feedback: feedback.into(),
        }],
        client_request_id: id.into(),
    }
}

async fn feedback_rows(env: &TestEnv, session_id: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_feedback WHERE session_id = $1 AND stage_slug = 'thesis'",
    )
    .bind(uuid::Uuid::parse_str(session_id).expect("uuid"))
    .fetch_one(env.store.pool())
    .await
    .expect("feedback count")
}

async fn claims(env: &TestEnv, request_id: &str) -> Vec<(String, bool)> {
    sqlx::query_as(
        "SELECT rpc, answer IS NOT NULL FROM dialectic_idempotent_calls WHERE request_id = $1",
    )
    .bind(request_id)
    .fetch_all(env.store.pool())
    .await
    .expect("claims")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retried_mutation_with_its_request_id_gets_the_first_answer() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let mut client = env.gateway().await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;

    // A call that fails forgets its claim: its retry acts again (and fails again here).
    let mut early = thesis_responses(&session_id, "Too early.", "early-1");
    early.stage_slug = "antithesis".into();
    for _ in 0..2 {
        let refused = client
            .submit_stage_responses(early.clone())
            .await
            .expect_err("antithesis has not run yet");
        assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    }
    assert_eq!(claims(&env, "early-1").await, []);

    let asked = thesis_responses(&session_id, "Price it for students too.", "submit-1");
    let first = client
        .submit_stage_responses(asked.clone())
        .await
        .expect("first submit")
        .into_inner();
    // The planner applies it: antithesis runs and the session waits again.
    env.wait_for_session(&session_id, "pending_synthesis", true)
        .await;
    let again = client
        .submit_stage_responses(asked.clone())
        .await
        .expect("the retry gets the first answer")
        .into_inner();
    assert_eq!(again, first);
    assert_eq!(feedback_rows(&env, &session_id).await, 1);
    assert_eq!(
        claims(&env, "submit-1").await,
        [("submit_stage_responses".to_string(), true)]
    );

    // Without an id, a retry is refused as it always was.
    let plain = client
        .submit_stage_responses(thesis_responses(
            &session_id,
            "Price it for students too.",
            "",
        ))
        .await
        .expect_err("the stage has moved on");
    assert_eq!(plain.code(), Code::FailedPrecondition, "{plain:?}");

    // The same id for another request is a mistake the caller must see.
    let reused = client
        .submit_stage_responses(thesis_responses(&session_id, "Something else.", "submit-1"))
        .await
        .expect_err("the id names another request");
    let (code, reason, ..) = refusal(&reused);
    assert_eq!(
        (code, reason.as_str()),
        (Code::AlreadyExists, "IDEMPOTENCY_KEY_REUSED"),
        "{reused:?}"
    );
    assert_eq!(feedback_rows(&env, &session_id).await, 1);

    // Pausing twice under one id: one pause, one answer.
    let pause = PauseSessionRequest {
        session_id: session_id.clone(),
        client_request_id: "pause-1".into(),
    };
    let paused = client
        .pause_session(pause.clone())
        .await
        .expect("pause")
        .into_inner();
    let repeated = client
        .pause_session(pause)
        .await
        .expect("the retried pause gets the first answer")
        .into_inner();
    assert_eq!(repeated, paused);
    env.teardown().await;
}
