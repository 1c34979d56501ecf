//! Long documents: chunked by a small `max_tokens`, continued by new jobs with
//! the right history, rendered and assembled whole; the continuation cap; and
//! replies that never parse. Real stack, simulated model.

use dialectic_core::prompt::Role;
use dialectic_e2e::{TestEnv, eventually};
use dialectic_proto::v1::{
    GetDocumentContentRequest, ListStageDocumentsRequest, SaveDocumentEditRequest,
    SubmitStageResponsesRequest,
};
use std::collections::BTreeMap;

const EDIT_RENDER_ATTEMPTS: u32 = 7;

/// Runs a thesis stage for `prompt` with the `simulated` model; returns the
/// session id once its documents are all rendered (or `until_status` is reached).
async fn thesis(env: &TestEnv, prompt: &str, until_status: &str) -> String {
    let (_, session_id) = env.new_session(prompt, &["simulated"], false).await;
    env.wait_for_session(&session_id, until_status, true).await;
    session_id
}

/// document_key → (rendered markdown, incomplete flag)
async fn rendered(env: &TestEnv, session_id: &str) -> BTreeMap<String, (String, bool)> {
    let mut client = env.gateway().await;
    let docs = client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.into(),
            stage_slug: "thesis".into(),
            iteration: 1,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .documents;
    let mut out = BTreeMap::new();
    for doc in docs {
        let content = client
            .get_document_content(GetDocumentContentRequest {
                resource_id: doc.resource_id.clone(),
            })
            .await
            .expect("content")
            .into_inner()
            .content;
        out.insert(doc.document_key, (content, doc.incomplete));
    }
    out
}

/// The `content` of `key`'s raw reply in a session that wrote it in one turn.
async fn whole_content(env: &TestEnv, session_id: &str, key: &str) -> String {
    let paths: Vec<String> = sqlx::query_scalar(
        "SELECT raw_response_storage_path FROM dialectic_contributions
         WHERE session_id = $1 AND document_key = $2",
    )
    .bind(uuid::Uuid::parse_str(session_id).expect("uuid"))
    .bind(key)
    .fetch_all(env.store.pool())
    .await
    .expect("raw path");
    assert_eq!(paths.len(), 1, "{key} came whole in one turn: {paths:?}");
    let raw: serde_json::Value =
        serde_json::from_str(&env.blob.get_string(&paths[0]).await.expect("raw reply"))
            .expect("json");
    raw["content"].as_str().expect("content").to_string()
}

async fn set_max_tokens(env: &TestEnv, tokens: i32) {
    sqlx::query(
        "UPDATE ai_providers SET max_output_tokens = $1 WHERE api_identifier = 'simulated'",
    )
    .bind(tokens)
    .execute(env.store.pool())
    .await
    .expect("update model");
}

/// (file name, storage path, is_incomplete) of one document's chunks, in order.
async fn chunks(env: &TestEnv, session_id: &str, key: &str) -> Vec<(String, String, bool)> {
    sqlx::query_as(
        "SELECT file_name, storage_path, is_incomplete FROM dialectic_contributions
         WHERE session_id = $1 AND document_key = $2 ORDER BY created_at",
    )
    .bind(uuid::Uuid::parse_str(session_id).expect("uuid"))
    .bind(key)
    .fetch_all(env.store.pool())
    .await
    .expect("chunks")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn long_documents_are_continued_rendered_whole_and_capped() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let prompt =
        "A repair café network for small towns: volunteers fix toasters, bikes and phones.";

    // The same thesis twice: once whole, once in slices of at most 80 tokens.
    let whole = thesis(&env, prompt, "pending_antithesis").await;
    let expected = rendered(&env, &whole).await;
    assert_eq!(expected.len(), 4);
    set_max_tokens(&env, 80).await;
    let sliced = thesis(&env, prompt, "pending_antithesis").await;
    let got = rendered(&env, &sliced).await;
    assert_eq!(
        got, expected,
        "the merged chunks render the very same documents"
    );

    for key in [
        "business_case",
        "feature_spec",
        "technical_approach",
        "success_metrics",
    ] {
        let rows = chunks(&env, &sliced, key).await;
        assert!(rows.len() >= 3, "{key} came in {} chunks", rows.len());
        for (turn, (file, dir, incomplete)) in rows.iter().enumerate() {
            assert_eq!(
                file,
                &format!("simulated_0_{key}_continuation_{turn}_raw.json"),
                "chunk {turn} of {key}"
            );
            assert!(dir.ends_with("/1_thesis/_work"), "{dir}");
            assert!(!incomplete);
        }
        // Phase 4: the whole document is assembled at its root path.
        let root = format!(
            "{}/raw_responses/simulated_0_{key}_raw.json",
            rows[0].1.trim_end_matches("/_work")
        );
        let assembled: serde_json::Value = serde_json::from_str(
            &env.blob
                .get_string(&root)
                .await
                .expect("assembled document"),
        )
        .expect("json");
        let content = assembled["content"].as_str().expect("content");
        let unsliced = whole_content(&env, &whole, key).await;
        assert!(!unsliced.trim().is_empty(), "{key} has text to compare");
        assert_eq!(
            content, unsliced,
            "{key} assembled whole: every chunk, in order, is the unsliced document"
        );
        assert_eq!(assembled["chunks"], rows.len());
        assert_eq!(assembled["incomplete"], false, "{key} finished");
    }

    // History: turn k is the original request, k − 1 earlier chunks, then "continue".
    let requests: Vec<_> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.output_type == "feature_spec" && r.max_tokens == 80)
        .collect();
    assert!(requests.len() >= 3);
    let original = &requests[0].messages;
    assert_eq!(original.len(), 1);
    for (k, request) in requests.iter().enumerate().skip(1) {
        let m = &request.messages;
        assert_eq!(m.len(), k + 2, "turn {k}: original + {k} chunks + continue");
        assert_eq!(m[0], original[0], "turn {k} repeats the original request");
        assert!(
            m[1..=k]
                .iter()
                .all(|x| x.role == Role::Assistant && x.contribution_id.is_some())
        );
        assert_eq!(m[k + 1].role, Role::User);
        assert!(
            !m[k + 1].content.contains("--- Seed prompt ---"),
            "the continue turn never re-assembles the seed prompt"
        );
    }

    // The cap: slices of 10 tokens cannot finish in 1 + 5 turns.
    set_max_tokens(&env, 10).await;
    let capped = thesis(&env, prompt, "pending_antithesis").await;
    let docs = rendered(&env, &capped).await;
    assert_eq!(
        docs.keys().map(String::as_str).collect::<Vec<_>>(),
        expected.keys().map(String::as_str).collect::<Vec<_>>(),
        "every capped document is still rendered"
    );
    for (key, (markdown, incomplete)) in &docs {
        assert!(incomplete, "{key} is marked incomplete");
        assert!(markdown.contains("**Incomplete:**"), "{key} says so");
        let rows = chunks(&env, &capped, key).await;
        assert_eq!(
            rows.len(),
            6,
            "{key}: the first turn and five continuations"
        );
        assert!(rows.last().is_some_and(|r| r.2));
    }
    env.teardown().await;
}

/// The thesis documents' jobs, once the stage is over: (id, status, attempts, error).
async fn document_jobs(
    env: &TestEnv,
    session_id: &str,
) -> Vec<(uuid::Uuid, String, i32, serde_json::Value)> {
    sqlx::query_as(
        "SELECT id, status, attempt_count, COALESCE(error_details, 'null'::jsonb) FROM dialectic_generation_jobs
         WHERE session_id = $1 AND job_type = 'EXECUTE'",
    )
    .bind(uuid::Uuid::parse_str(session_id).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("jobs")
}

/// Every document job used all its attempts and failed for `code`, naming
/// `reason`; nothing was stored or rendered for them.
async fn every_document_failed(env: &TestEnv, session_id: &str, code: &str, reason: &str) {
    let failed = document_jobs(env, session_id).await;
    assert_eq!(failed.len(), 4);
    for (_, status, attempts, error) in &failed {
        assert_eq!(status, "retry_loop_failed");
        assert_eq!(*attempts, env.settings.planner.max_attempts as i32);
        assert_eq!(
            error["code"], code,
            "the cause survives the retries: {error}"
        );
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains(reason), "{message}");
    }
    let session = uuid::Uuid::parse_str(session_id).expect("uuid");
    let stored = env
        .count(
            "SELECT count(*) FROM dialectic_contributions WHERE session_id = $1 AND document_key <> 'header_context'",
            session,
        )
        .await;
    let resources = env
        .count(
            "SELECT count(*) FROM dialectic_project_resources WHERE session_id = $1",
            session,
        )
        .await;
    assert_eq!((stored, resources), (0, 0), "no broken document is stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replies_that_never_parse_end_in_retry_loop_failed_with_nothing_rendered() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let prompt = format!("A tool library. {}", dialectic_llm::MALFORMED_DIRECTIVE);
    let session_id = thesis(&env, &prompt, "failed_thesis").await;
    every_document_failed(&env, &session_id, "malformed_json", "").await;
    env.teardown().await;
}

/// The requests one job sent, in order.
fn requests_of(job: uuid::Uuid) -> Vec<dialectic_core::prompt::ChatRequest> {
    dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.job_id.as_deref() == Some(job.to_string().as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_missing_a_required_key_is_retried_with_the_reason_then_kept() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let prompt = format!("A tool library. {}", dialectic_llm::DROP_KEY_DIRECTIVE);
    let session_id = thesis(&env, &prompt, "pending_antithesis").await;
    let jobs = document_jobs(&env, &session_id).await;
    assert_eq!(jobs.len(), 4);
    for (job, status, attempts, _) in &jobs {
        assert_eq!((status.as_str(), *attempts), ("completed", 2), "job {job}");
        let sent = requests_of(*job);
        assert_eq!(sent.len(), 2, "job {job}: one refused reply, one kept");
        let prompt = |r: &dialectic_core::prompt::ChatRequest| {
            r.messages
                .last()
                .map(|m| m.content.clone())
                .unwrap_or_default()
        };
        assert!(!prompt(&sent[0]).contains(dialectic_core::prompt::REJECTED_REPLY));
        let retry = prompt(&sent[1]);
        assert!(
            retry.contains("Your previous reply was not accepted: ")
                && retry.contains("the reply has no `content` key"),
            "the retry says why: {retry}"
        );
    }
    assert_eq!(rendered(&env, &session_id).await.len(), 4);
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replies_that_keep_missing_a_required_key_end_in_retry_loop_failed_naming_it() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let prompt = format!(
        "A tool library. {}",
        dialectic_llm::DROP_KEY_ALWAYS_DIRECTIVE
    );
    let session_id = thesis(&env, &prompt, "failed_thesis").await;
    every_document_failed(&env, &session_id, "invalid_reply", "no `content` key").await;
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_user_edit_is_what_the_next_stage_reads() {
    let mut env = TestEnv::new().await;
    // A budget no code path writes by accident: the edit's render job takes it.
    env.settings.planner.max_attempts = EDIT_RENDER_ATTEMPTS;
    env.start_all_recording().await;
    let session_id = thesis(
        &env,
        "A seed library for balcony gardeners.",
        "pending_antithesis",
    )
    .await;
    let mut client = env.gateway().await;
    let docs = client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            iteration: 1,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .documents;
    let business_case = docs
        .iter()
        .find(|d| d.document_key == "business_case")
        .expect("business case");
    const EDIT: &str = "EDITED-4711: members pay in seeds, not money.";
    let empty = client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: business_case.resource_id.clone(),
            content: "  ".into(),
            client_request_id: String::new(),
        })
        .await
        .expect_err("an empty edit is refused");
    assert_eq!(empty.code(), tonic::Code::InvalidArgument);
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: business_case.resource_id.clone(),
            content: EDIT.into(),
            client_request_id: String::new(),
        })
        .await
        .expect("save edit");
    eventually(30, "the edit rendered", || {
        let mut client = client.clone();
        let resource_id = business_case.resource_id.clone();
        async move {
            let content = client
                .get_document_content(GetDocumentContentRequest { resource_id })
                .await
                .ok()?
                .into_inner()
                .content;
            content.contains(EDIT).then_some(())
        }
    })
    .await;
    let latest: Vec<(String, bool)> = sqlx::query_as(
        "SELECT contribution_type, is_latest_edit FROM dialectic_contributions
         WHERE session_id = $1 AND document_key = 'business_case' ORDER BY edit_version",
    )
    .bind(uuid::Uuid::parse_str(&session_id).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("chain");
    assert_eq!(
        latest,
        vec![
            ("business_case".to_string(), false),
            ("user_edit".to_string(), true)
        ]
    );
    // The planner queued the edit's render (it owns job state), with its configured budget.
    let edit_renders: Vec<i32> = sqlx::query_scalar(
        "SELECT max_retries FROM dialectic_generation_jobs
         WHERE session_id = $1 AND job_type = 'RENDER' AND parent_job_id IS NULL",
    )
    .bind(uuid::Uuid::parse_str(&session_id).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("edit renders");
    assert_eq!(edit_renders, vec![EDIT_RENDER_ATTEMPTS as i32]);

    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            responses: vec![],
            client_request_id: String::new(),
        })
        .await
        .expect("submit");
    eventually(60, "antithesis planned", || async {
        let planned = dialectic_llm::recorded_requests().into_iter().any(|r| {
            r.output_type == "header_context"
                && r.messages.iter().any(|m| m.content.contains("balcony"))
                && r.messages
                    .iter()
                    .any(|m| m.content.contains("--- Thesis proposals ---"))
        });
        planned.then_some(())
    })
    .await;
    let antithesis_header = dialectic_llm::recorded_requests()
        .into_iter()
        .find(|r| {
            r.output_type == "header_context"
                && r.messages.iter().any(|m| {
                    m.content.contains("--- Thesis proposals ---") && m.content.contains("balcony")
                })
        })
        .expect("the antithesis header request");
    assert!(
        antithesis_header.messages[0].content.contains(EDIT),
        "the next stage reads the user's edit"
    );
    env.teardown().await;
}
