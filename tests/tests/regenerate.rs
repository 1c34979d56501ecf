//! RegenerateDocument (issue 7): a document of the stage the session just
//! finished is written again by one new job however often the call is
//! retried; the jobs that wrote it end `superseded`; when the new document
//! renders, the old one is an archived `.v{N}.md` version and no longer an
//! input; a second regeneration makes a running first one lose (it records
//! nothing); and a stage started meanwhile waits and reads only the new document.

use dialectic_e2e::{GatewayClient, TestEnv, eventually};
use dialectic_proto::v1::{
    ListStageDocumentsRequest, RegenerateDocumentRequest, RegenerateDocumentResponse,
    StageDocument, SubmitStageResponsesRequest,
};
use std::collections::BTreeSet;
use tonic::Code;
use uuid::Uuid;

const PROMPT: &str = "A lending library for power tools, run by neighbours for neighbours.";

async fn documents(
    client: &mut GatewayClient,
    session_id: &str,
    stage: &str,
) -> Vec<StageDocument> {
    client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.to_string(),
            stage_slug: stage.to_string(),
            iteration: 0,
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner()
        .documents
}

fn request(
    session_id: &str,
    doc: &StageDocument,
    client_request_id: &str,
) -> RegenerateDocumentRequest {
    RegenerateDocumentRequest {
        session_id: session_id.to_string(),
        stage_slug: doc.stage_slug.clone(),
        model: doc.model.clone(),
        document_key: doc.document_key.clone(),
        resource_id: String::new(),
        client_request_id: client_request_id.to_string(),
    }
}

async fn regenerate(
    client: &mut GatewayClient,
    req: RegenerateDocumentRequest,
) -> RegenerateDocumentResponse {
    client
        .regenerate_document(req)
        .await
        .expect("regenerate")
        .into_inner()
}

fn uuids(ids: &[String]) -> Vec<Uuid> {
    ids.iter()
        .map(|id| Uuid::parse_str(id).expect("uuid"))
        .collect()
}

async fn job(env: &TestEnv, id: Uuid) -> (String, String, i32) {
    sqlx::query_as(
        "SELECT job_type, status, attempt_count FROM dialectic_generation_jobs WHERE id = $1",
    )
    .bind(id)
    .fetch_one(env.store.pool())
    .await
    .expect("job")
}

async fn contributions_of(env: &TestEnv, job: Uuid) -> i64 {
    env.count(
        "SELECT count(*) FROM dialectic_contributions WHERE job_id = $1",
        job,
    )
    .await
}

/// The document of `model`/`key` among `docs`, which must be the only one.
fn only<'a>(docs: &'a [StageDocument], model: &str, key: &str) -> &'a StageDocument {
    let matching: Vec<&StageDocument> = docs
        .iter()
        .filter(|d| d.model == model && d.document_key == key)
        .collect();
    assert_eq!(matching.len(), 1, "one current {model}/{key}: {matching:?}");
    matching[0]
}

/// The job that wrote a document's first chunk.
async fn writer_of(env: &TestEnv, doc: &StageDocument) -> Uuid {
    sqlx::query_scalar("SELECT job_id FROM dialectic_contributions WHERE id = $1")
        .bind(Uuid::parse_str(&doc.source_contribution_id).expect("uuid"))
        .fetch_one(env.store.pool())
        .await
        .expect("writer")
}

/// Antithesis jobs whose payload names `key` (the thesis document they critique).
async fn antithesis_jobs_reading(env: &TestEnv, session: Uuid, key: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs
         WHERE session_id = $1 AND stage_slug = 'antithesis' AND strpos(payload::text, $2) > 0",
    )
    .bind(session)
    .bind(key)
    .fetch_one(env.store.pool())
    .await
    .expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_regenerated_thesis_document_replaces_the_old_one_once_and_antithesis_reads_it() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    // Two models: each critiques both thesis lineages, so an antithesis key
    // holds two documents per model.
    let (_, session_id) = env
        .new_session(PROMPT, &["simulated", "simulated-b"], false)
        .await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let mut client = env.gateway().await;
    let before = documents(&mut client, &session_id, "thesis").await;
    assert!(
        before.len() >= 2,
        "thesis rendered its documents: {before:?}"
    );
    let old = before[0].clone();
    let old_body = env.blob.get(&old.storage_key).await.expect("old object");
    let old_writer = writer_of(&env, &old).await;

    // Who may ask, and for what.
    let (_, stranger) = env.new_user("stranger").await;
    let denied = env
        .gateway_with_key(&stranger)
        .await
        .regenerate_document(request(&session_id, &old, "theirs"))
        .await
        .expect_err("not their session");
    assert_eq!(denied.code(), Code::NotFound);
    let unknown = client
        .regenerate_document(RegenerateDocumentRequest {
            document_key: "no_such_document".into(),
            ..request(&session_id, &old, "")
        })
        .await
        .expect_err("no such document");
    assert_eq!(unknown.code(), Code::NotFound);
    assert!(
        unknown.message().contains("no_such_document"),
        "{}",
        unknown.message()
    );
    let unknown_model = client
        .regenerate_document(RegenerateDocumentRequest {
            model: "gpt-none".into(),
            ..request(&session_id, &old, "")
        })
        .await
        .expect_err("no such model");
    assert_eq!(unknown_model.code(), Code::NotFound);
    // Antithesis has not run: the session does not wait after it.
    let not_yet = client
        .regenerate_document(RegenerateDocumentRequest {
            stage_slug: "antithesis".into(),
            document_key: "risk_register".into(),
            ..request(&session_id, &old, "")
        })
        .await
        .expect_err("antithesis has not run");
    assert_eq!(
        not_yet.code(),
        Code::FailedPrecondition,
        "{}",
        not_yet.message()
    );
    assert!(
        not_yet.message().contains("pending_antithesis"),
        "{}",
        not_yet.message()
    );

    // A double click: one regeneration, one new job, the same answer twice.
    let first = regenerate(&mut client, request(&session_id, &old, "click-1")).await;
    let second = regenerate(&mut client, request(&session_id, &old, "click-1")).await;
    assert!(first.created && !second.created);
    assert_eq!(first.job_id, second.job_id);
    assert_eq!(first.regeneration_id, second.regeneration_id);
    assert_eq!(first.superseded_job_ids, second.superseded_job_ids);
    let regenerations: i64 = env.count("SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND job_key LIKE '%:regen:%'", session).await;
    assert_eq!(regenerations, 1, "one new job for two identical calls");
    // The same request id for another document is a client bug, not a replay.
    let reused = client
        .regenerate_document(request(&session_id, &before[1], "click-1"))
        .await
        .expect_err("request id reused for another document");
    assert_eq!(reused.code(), Code::InvalidArgument);

    // The old document's EXECUTE and RENDER jobs are superseded.
    let superseded = uuids(&first.superseded_job_ids);
    assert!(superseded.contains(&old_writer), "{superseded:?}");
    let mut types = BTreeSet::new();
    for id in &superseded {
        let (job_type, status, _) = job(&env, *id).await;
        assert_eq!(status, "superseded", "{job_type} {id}");
        types.insert(job_type);
    }
    assert!(
        types.contains("EXECUTE") && types.contains("RENDER"),
        "{types:?}"
    );

    // It finishes; the stage's documents show the new one only.
    let new_job = Uuid::parse_str(&first.job_id).expect("uuid");
    eventually(120, "the regeneration completes", || async {
        (job(&env, new_job).await.1 == "completed").then_some(())
    })
    .await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let after = documents(&mut client, &session_id, "thesis").await;
    assert_eq!(after.len(), before.len(), "{after:?}");
    let current = only(&after, &old.model, &old.document_key);
    assert_ne!(current.storage_key, old.storage_key, "a new path");
    assert_ne!(current.resource_id, old.resource_id);
    assert_eq!(writer_of(&env, current).await, new_job);
    let (_, _, attempts) = job(&env, new_job).await;
    assert!(attempts >= 2, "attempts continue the old job's: {attempts}");
    assert!(
        current
            .storage_key
            .contains(&format!("_{}_{}", attempts - 1, old.document_key)),
        "{} is named by the new attempt",
        current.storage_key
    );
    env.blob
        .get(&current.storage_key)
        .await
        .expect("new object");

    // The old document is an archived version, byte for byte; its name is free.
    let archived_key = old
        .storage_key
        .strip_suffix(".md")
        .map(|stem| format!("{stem}.v1.md"))
        .expect("markdown");
    let (archived_type, archived_name): (String, String) = sqlx::query_as(
        "SELECT resource_type, file_name FROM dialectic_project_resources WHERE id = $1",
    )
    .bind(Uuid::parse_str(&old.resource_id).expect("uuid"))
    .fetch_one(env.store.pool())
    .await
    .expect("old row");
    assert_eq!(archived_type, "archived_document");
    assert!(archived_key.ends_with(&archived_name), "{archived_name}");
    assert!(env.blob.get(&archived_key).await.expect("archived") == old_body);
    assert!(
        env.blob.get(&old.storage_key).await.is_err(),
        "the old name holds nothing"
    );
    let live_old: i64 = env
        .count(
            "SELECT count(*) FROM dialectic_contributions WHERE job_id = $1 AND NOT is_archived",
            old_writer,
        )
        .await;
    assert_eq!(live_old, 0, "the old chunks are no input any more");

    // Moving on: antithesis reads the regenerated document, never the old one.
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            responses: vec![],
            client_request_id: String::new(),
        })
        .await
        .expect("submit");
    env.wait_for_session(&session_id, "pending_synthesis", true)
        .await;
    assert!(antithesis_jobs_reading(&env, session, &current.storage_key).await > 0);
    assert_eq!(
        antithesis_jobs_reading(&env, session, &old.storage_key).await,
        0
    );

    // Thesis is behind the session now.
    let late = client
        .regenerate_document(request(&session_id, current, ""))
        .await
        .expect_err("thesis is no longer the stage just finished");
    assert_eq!(late.code(), Code::FailedPrecondition, "{}", late.message());

    // An antithesis document: one per thesis lineage, so it is named by resource id.
    let critiques = documents(&mut client, &session_id, "antithesis").await;
    let critique = critiques
        .iter()
        .find(|d| {
            critiques
                .iter()
                .filter(|o| o.document_key == d.document_key)
                .count()
                > 1
        })
        .expect("a document key with several documents")
        .clone();
    let ambiguous = client
        .regenerate_document(request(&session_id, &critique, ""))
        .await
        .expect_err("several documents under the key");
    assert_eq!(ambiguous.code(), Code::InvalidArgument);
    let third = regenerate(
        &mut client,
        RegenerateDocumentRequest {
            resource_id: critique.resource_id.clone(),
            ..request(&session_id, &critique, "")
        },
    )
    .await;
    // Only that lineage's jobs were superseded, none of its siblings'.
    for id in uuids(&third.superseded_job_ids) {
        let (job_type, _, _) = job(&env, id).await;
        if job_type == "EXECUTE" {
            let key: String = sqlx::query_scalar(
                "SELECT document_key FROM dialectic_generation_jobs WHERE id = $1",
            )
            .bind(id)
            .fetch_one(env.store.pool())
            .await
            .expect("key");
            assert_eq!(key, critique.document_key);
        }
    }
    let third_job = Uuid::parse_str(&third.job_id).expect("uuid");
    eventually(120, "the critique's regeneration completes", || async {
        (job(&env, third_job).await.1 == "completed").then_some(())
    })
    .await;
    env.wait_for_session(&session_id, "pending_synthesis", true)
        .await;
    let critiques_after = documents(&mut client, &session_id, "antithesis").await;
    assert_eq!(critiques_after.len(), critiques.len());
    assert!(
        critiques_after
            .iter()
            .all(|d| d.resource_id != critique.resource_id),
        "the old critique is archived"
    );
    assert!(critiques_after.iter().any(|d| d.source_contribution_id
        != critique.source_contribution_id
        && d.document_key == critique.document_key));
    let failed: i64 = env.count("SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status IN ('failed', 'retry_loop_failed')", session).await;
    assert_eq!(failed, 0);
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_regeneration_makes_a_running_one_lose_and_the_next_stage_waits_for_it() {
    let mut env = TestEnv::new().await;
    // Slow model calls, so the first regeneration is still in its call when the second comes.
    env.settings.executor.simulated_latency_ms = 1_500;
    env.start_all().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    let mut client = env.gateway().await;
    // While thesis runs, none of its documents can be regenerated.
    let running = client
        .regenerate_document(RegenerateDocumentRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            model: "simulated".into(),
            document_key: "business_case".into(),
            resource_id: String::new(),
            client_request_id: "too-early".into(),
        })
        .await
        .expect_err("thesis is running");
    assert_eq!(
        running.code(),
        Code::FailedPrecondition,
        "{}",
        running.message()
    );
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let before = documents(&mut client, &session_id, "thesis").await;
    let old = before[0].clone();

    let a = regenerate(&mut client, request(&session_id, &old, "first")).await;
    let a_job = Uuid::parse_str(&a.job_id).expect("uuid");
    eventually(
        60,
        "the first regeneration is in its model call",
        || async { (job(&env, a_job).await.1 == "processing").then_some(()) },
    )
    .await;
    let b = regenerate(&mut client, request(&session_id, &old, "second")).await;
    assert_ne!(a.job_id, b.job_id);
    assert!(
        b.superseded_job_ids.contains(&a.job_id),
        "the running regeneration is superseded: {:?}",
        b.superseded_job_ids
    );
    assert_eq!(job(&env, a_job).await.1, "superseded");

    // Moving on while the regeneration runs: the next stage waits for it.
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            responses: vec![],
            client_request_id: String::new(),
        })
        .await
        .expect("submit");
    let b_job = Uuid::parse_str(&b.job_id).expect("uuid");
    let waiting: String = eventually(60, "antithesis roots", || async {
        sqlx::query_scalar::<_, String>(
            "SELECT status FROM dialectic_generation_jobs
             WHERE session_id = $1 AND stage_slug = 'antithesis' AND parent_job_id IS NULL",
        )
        .bind(session)
        .fetch_optional(env.store.pool())
        .await
        .expect("root")
    })
    .await;
    if job(&env, b_job).await.1 != "completed" {
        assert_eq!(
            waiting, "waiting_for_prerequisite",
            "antithesis waits for the regeneration"
        );
    }
    // Once the next stage exists, the documents it reads are fixed.
    let started = client
        .regenerate_document(request(&session_id, &old, "third"))
        .await
        .expect_err("antithesis has started");
    assert_eq!(
        started.code(),
        Code::FailedPrecondition,
        "{}",
        started.message()
    );

    env.wait_for_session(&session_id, "pending_synthesis", true)
        .await;
    assert_eq!(job(&env, b_job).await.1, "completed");
    let (_, a_status, a_attempts) = job(&env, a_job).await;
    assert_eq!(a_status, "superseded");
    assert_eq!(
        contributions_of(&env, a_job).await,
        0,
        "the loser recorded nothing"
    );
    assert_eq!(contributions_of(&env, b_job).await, 1);
    // Its chunk, written before it learnt it had lost, was removed again.
    let loser_name = format!("_{}_{}", a_attempts - 1, old.document_key);
    let keys = env.blob.list("").await.expect("objects");
    assert!(
        !keys.iter().any(|k| k.contains(&loser_name)),
        "no object of the losing attempt ({loser_name}) is left: {keys:?}"
    );
    // It was charged for the one call it made, no more.
    let a_captures: i64 = env
        .count(
            "SELECT count(*) FROM token_wallet_transactions WHERE job_id = $1 AND kind = 'capture'",
            a_job,
        )
        .await;
    assert!(a_captures <= 1, "{a_captures} captures for one call");

    let after = documents(&mut client, &session_id, "thesis").await;
    assert_eq!(after.len(), before.len());
    let current = only(&after, &old.model, &old.document_key);
    assert_eq!(writer_of(&env, current).await, b_job);
    assert!(antithesis_jobs_reading(&env, session, &current.storage_key).await > 0);
    assert_eq!(
        antithesis_jobs_reading(&env, session, &old.storage_key).await,
        0,
        "antithesis never saw the replaced document"
    );
    let archived: i64 = env.count("SELECT count(*) FROM dialectic_project_resources WHERE session_id = $1 AND resource_type = 'archived_document'", session).await;
    assert_eq!(archived, 1, "one archived version: the original");
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_document_written_in_several_chunks_is_regenerated_as_a_whole() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    // Replies of at most 80 tokens: every thesis document takes several turns.
    sqlx::query(
        "UPDATE ai_providers SET max_output_tokens = 80 WHERE api_identifier = 'simulated'",
    )
    .execute(env.store.pool())
    .await
    .expect("update model");
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let session = Uuid::parse_str(&session_id).expect("uuid");
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let mut client = env.gateway().await;
    let before = documents(&mut client, &session_id, "thesis").await;
    let old = only(&before, "simulated", "business_case").clone();
    let old_chain: Vec<(Uuid, Uuid)> = sqlx::query_as(
        "SELECT id, job_id FROM dialectic_contributions
         WHERE session_id = $1 AND document_key = 'business_case' ORDER BY created_at",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("chain");
    assert!(old_chain.len() >= 3, "several chunks: {old_chain:?}");

    let done = regenerate(&mut client, request(&session_id, &old, "chunks")).await;
    let superseded = uuids(&done.superseded_job_ids);
    for (_, writer) in &old_chain {
        assert!(
            superseded.contains(writer),
            "every chunk's job is the document's: {writer}"
        );
    }
    let renders: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE id = ANY($1) AND job_type = 'RENDER'",
    )
    .bind(&superseded)
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    assert_eq!(renders as usize, old_chain.len(), "one render per chunk");

    let new_job = Uuid::parse_str(&done.job_id).expect("uuid");
    eventually(120, "the regeneration completes", || async {
        (job(&env, new_job).await.1 == "completed").then_some(())
    })
    .await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let (_, _, attempts) = job(&env, new_job).await;
    let new_chain: Vec<(String, bool)> = sqlx::query_as(
        "SELECT file_name, is_archived FROM dialectic_contributions
         WHERE session_id = $1 AND document_key = 'business_case' AND NOT (job_id = ANY($2))
         ORDER BY created_at",
    )
    .bind(session)
    .bind(&superseded)
    .fetch_all(env.store.pool())
    .await
    .expect("new chain");
    assert!(new_chain.len() >= 3, "the new document is continued too");
    for (turn, (file, archived)) in new_chain.iter().enumerate() {
        assert_eq!(
            file,
            &format!(
                "simulated_{}_business_case_continuation_{turn}_raw.json",
                attempts - 1
            )
        );
        assert!(!archived);
    }
    let live_old: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_contributions WHERE id = ANY($1) AND NOT is_archived",
    )
    .bind(old_chain.iter().map(|(id, _)| *id).collect::<Vec<_>>())
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    assert_eq!(
        live_old, 0,
        "no chunk of the old chain is an input any more"
    );
    let after = documents(&mut client, &session_id, "thesis").await;
    assert_eq!(after.len(), before.len());
    let current = only(&after, "simulated", "business_case");
    assert_eq!(writer_of(&env, current).await, new_job);
    let body = env
        .blob
        .get_string(&current.storage_key)
        .await
        .expect("new document");
    let archived = env
        .blob
        .get_string(&old.storage_key.replace(".md", ".v1.md"))
        .await
        .expect("archived document");
    assert!(!body.trim().is_empty() && !archived.trim().is_empty());
    assert!(!current.incomplete);
    env.teardown().await;
}
