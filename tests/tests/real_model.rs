//! The essay pipeline end to end on a real model: the llama.cpp server that
//! `deploy/local-model.sh up` starts on loopback (SmolLM2-135M-Instruct), with
//! no simulated model anywhere in the session. The step shapes go out as
//! structured output (`json_object_schema`, the llama.cpp dialect), so even a
//! 135M model answers every step in its declared shape.
//!
//! The server's address comes from `DIALECTIC_LOCAL_MODEL_URL` (README's test
//! command sets it). Without it the test fails and says how to start one;
//! `DIALECTIC_SKIP_LOCAL_MODEL=1` skips it on a machine that cannot build one.
//!
//! The writer uploads two sources and two writing samples first, so the
//! argument maps, the paragraphs and the fact-check read them on the real
//! model too.

use dialectic_core::structured::StructuredOutput;
use dialectic_e2e::{
    TestEnv, eventually, register_llama_cpp_model, sample_sum, start_uploaded_session,
};
use dialectic_proto::v1::{
    DocumentRole, GetDocumentContentRequest, GetSessionRequest, ListStageDocumentsRequest,
};

const PROMPT: &str = "A short essay arguing that every town should plant more street trees: \
    shade, cleaner air and calmer streets.";

/// The writer's uploads: two sources the fact-check holds quotes against,
/// two samples of their prose the paragraphs read for voice.
const UPLOADS: [(&str, DocumentRole, &str); 4] = [
    (
        "shade-study.md",
        DocumentRole::Source,
        "Streets lined with mature trees were on average 4 degrees cooler on summer afternoons. \
         The study measured 120 streets over three summers.",
    ),
    (
        "air-report.md",
        DocumentRole::Source,
        "Tree cover along roads removed a measurable share of fine particulate matter. \
         The effect was largest where the canopy closed over the street.",
    ),
    (
        "sample-one.md",
        DocumentRole::WritingSample,
        "I like short sentences. I say what I mean, then I show why. No jargon.",
    ),
    (
        "sample-two.md",
        DocumentRole::WritingSample,
        "Our town is small. That is its strength: a good idea can be tried by Friday.",
    ),
];

/// The local server, or None when this run skips real models.
fn local_model() -> Option<(String, String)> {
    if std::env::var("DIALECTIC_SKIP_LOCAL_MODEL").is_ok_and(|v| v == "1") {
        eprintln!("DIALECTIC_SKIP_LOCAL_MODEL=1: the real-model test is skipped");
        return None;
    }
    let url = std::env::var("DIALECTIC_LOCAL_MODEL_URL").unwrap_or_else(|_| {
        panic!(
            "DIALECTIC_LOCAL_MODEL_URL is not set: run `deploy/local-model.sh up && \
             eval \"$(deploy/local-model.sh env)\"` first (deploy/test.sh does), or set \
             DIALECTIC_SKIP_LOCAL_MODEL=1"
        )
    });
    let name = std::env::var("DIALECTIC_LOCAL_MODEL_NAME").unwrap_or_else(|_| "smollm2".into());
    Some((url, name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_essay_pipeline_finishes_on_the_local_llama_cpp_model() {
    let Some((url, name)) = local_model() else {
        return;
    };
    let mut env = TestEnv::new().await;
    let context = std::env::var("DIALECTIC_LOCAL_MODEL_CONTEXT")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(8192);
    register_llama_cpp_model(
        &env,
        &name,
        &url,
        StructuredOutput::JsonObjectSchema,
        context,
    )
    .await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let session_id =
        start_uploaded_session(&mut client, "essay", PROMPT.into(), &UPLOADS, &name).await;

    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let finished = eventually(1_800, "the essay session to reach review", || {
        let mut client = client.clone();
        let session_id = session_id.clone();
        async move {
            let s = client
                .get_session(GetSessionRequest { session_id })
                .await
                .ok()?
                .into_inner();
            let failed: u32 = s.jobs.iter().map(|j| j.failed).sum();
            assert_eq!(failed, 0, "a job gave up on the real model: {s:?}");
            (s.status == "iteration_complete_pending_review").then_some(s)
        }
    })
    .await;
    assert_eq!(
        finished.models,
        std::slice::from_ref(&name),
        "the session ran on the local model only"
    );

    // Every model call of the session went to the local model, none simulated.
    let simulated = env
        .count(
            "SELECT count(*) FROM dialectic_contributions c JOIN ai_providers m ON m.id = c.model_id \
             WHERE c.session_id = $1 AND m.provider = 'simulated'",
            session,
        )
        .await;
    assert_eq!(simulated, 0);
    let (jobs, attempts) = attempts(&env, session).await;
    assert!(jobs >= 8, "the essay's steps all ran: {jobs} model jobs");
    let per_job = attempts as f64 / jobs as f64;
    eprintln!("{jobs} model jobs, {attempts} attempts ({per_job:.2} per job)");
    assert!(per_job <= 2.0, "{attempts} attempts for {jobs} jobs");
    model_call_metrics_name_the_local_model(&name);

    // Whatever a 135M model claims, the stored fact-check calls a claim
    // verified only with a quote one of the sources holds.
    let check = stored_reply(&env, session, "fact_check").await;
    eprintln!("the fact-check: {check}");
    let claims = check["claims"].as_array().expect("a claims array");
    let verified = claims.iter().filter(|c| c["verdict"] == "verified");
    let squeeze = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    for claim in verified {
        let quote = squeeze(claim["quote"].as_str().unwrap_or_default());
        assert!(
            UPLOADS
                .iter()
                .any(|(name, role, text)| *role == DocumentRole::Source
                    && claim["source"] == *name
                    && squeeze(text).contains(&quote)),
            "a verified claim quotes its source: {claim}"
        );
    }
    assert_eq!(
        check["sources_verified"].as_u64(),
        Some(claims.iter().filter(|c| c["verdict"] == "verified").count() as u64)
    );

    let essay = final_essay(&mut client, &session_id).await;
    eprintln!("the final essay:\n{essay}");
    // What a 135M model writes varies from run to run: prose, a run-on word,
    // or (seen) an outline of "System_materials.json" and a final essay of
    // braces. The engine's part is that the model's last reply is the
    // document, whole: the template around exactly the content it wrote.
    let written = final_reply_content(&env, session).await;
    assert_eq!(
        essay,
        format!("# Final Essay\n\n{}\n", written.trim_end()),
        "the rendered essay is the model's final reply"
    );
    assert!(
        !essay.contains('\u{FFFD}'),
        "no corrupted characters: {essay:?}"
    );

    // The output record: the final essay, its words, and the claims a
    // source verified; the voice score is the engine's mean of whatever
    // scores the model gave (absent when it gave none).
    let output = finished.output.clone().expect("an output record at review");
    eprintln!("the output record: {output:?}");
    let document = output.document.as_ref().expect("the final essay");
    assert_eq!(document.document_key, "final_essay");
    let words = written
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count();
    assert_eq!(output.word_count as usize, words, "{written}");
    assert_eq!(
        output.figures.get("sources_verified").copied(),
        check["sources_verified"].as_f64()
    );
    let voice = stored_reply(&env, session, "voice_check").await;
    eprintln!("the voice check: {voice}");
    assert_eq!(
        output.figures.get("voice_consistency_score").copied(),
        voice["voice_consistency_score"].as_f64()
    );
    env.teardown().await;
}

/// The executor ran in this process, so its registry holds the session's
/// calls: llama-cpp-python streams, so every answered call has a first token
/// (the OpenAI dialect's streamed path measured it on a real server).
fn model_call_metrics_name_the_local_model(name: &str) {
    let metrics = dialectic_telemetry::metrics::render();
    let model = format!("model=\"{name}\"");
    let value = |series: &str, label: &str| sample_sum(&metrics, series, &[&model, label]);
    let answered = value("dialectic_model_calls_total", "result=\"ok\"");
    let first_tokens = sample_sum(
        &metrics,
        "dialectic_model_time_to_first_token_seconds_count",
        &[&model],
    );
    let output_tokens = value("dialectic_model_tokens_total", "direction=\"output\"");
    eprintln!(
        "{answered} answered calls, {first_tokens} first tokens, {output_tokens} output tokens"
    );
    assert!(answered >= 1.0, "the local model answered:\n{metrics}");
    assert_eq!(
        first_tokens, answered,
        "each streamed answer timed its first token"
    );
    assert!(output_tokens >= answered, "each answer wrote tokens");
}

/// The stored reply (all its turns') of the session's `document_key`.
async fn stored_reply(env: &TestEnv, session: uuid::Uuid, document_key: &str) -> serde_json::Value {
    let key: String = sqlx::query_scalar(
        "SELECT raw_response_storage_path FROM dialectic_contributions
          WHERE session_id = $1 AND document_key = $2 AND is_latest_edit",
    )
    .bind(session)
    .bind(document_key)
    .fetch_one(env.store.pool())
    .await
    .unwrap_or_else(|e| panic!("the {document_key} reply: {e}"));
    let whole = dialectic_core::paths::whole_document_key(&key);
    let raw = env.blob.get_string(&whole).await.expect("the stored reply");
    serde_json::from_str(&raw).expect("stored JSON")
}

/// The `content` of the final essay's stored reply (all its turns'), as the model wrote it.
async fn final_reply_content(env: &TestEnv, session: uuid::Uuid) -> String {
    let reply = stored_reply(env, session, "final_essay").await;
    reply["content"]
        .as_str()
        .expect("a content string")
        .to_string()
}

/// Model jobs of the session (PLAN and EXECUTE) and the attempts they took.
async fn attempts(env: &TestEnv, session: uuid::Uuid) -> (i64, i64) {
    sqlx::query_as(
        "SELECT count(*), COALESCE(sum(attempt_count), 0)::bigint FROM dialectic_generation_jobs \
         WHERE session_id = $1 AND job_type IN ('PLAN', 'EXECUTE')",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("attempts")
}

async fn final_essay(client: &mut dialectic_e2e::GatewayClient, session_id: &str) -> String {
    let documents = eventually(60, "the final essay to be rendered", || {
        let mut client = client.clone();
        let session_id = session_id.to_string();
        async move {
            let documents = client
                .list_stage_documents(ListStageDocumentsRequest {
                    session_id,
                    stage_slug: "paragraph_writing".into(),
                    iteration: 1,
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner()
                .documents;
            documents
                .into_iter()
                .find(|d| d.document_key == "final_essay")
        }
    })
    .await;
    client
        .get_document_content(GetDocumentContentRequest {
            resource_id: documents.resource_id,
        })
        .await
        .expect("the final essay's content")
        .into_inner()
        .content
}
