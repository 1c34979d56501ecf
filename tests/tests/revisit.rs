//! Revisiting thesis after the whole iteration ran (seed 003): a minor change
//! only flags the later stages; a major one (after an edit of a thesis
//! document) archives every later document as `.v1.md`, byte for byte, and
//! re-runs antithesis → paralysis to review again with new jobs.

use dialectic_e2e::{TestEnv, eventually};
use dialectic_proto::v1::{
    GetDocumentContentRequest, ListSessionRevisionsRequest, ListStageDocumentsRequest,
    RevisitImpact, RevisitStageRequest, SaveDocumentEditRequest, SessionState, StageDocument,
    SubmitStageResponsesRequest,
};
use std::collections::BTreeMap;
use tonic::Code;

const PROMPT: &str = "A lending library for power tools, run by neighbours for neighbours.";
const LATER: [&str; 4] = ["antithesis", "synthesis", "parenthesis", "paralysis"];

async fn documents(
    client: &mut dialectic_e2e::GatewayClient,
    session_id: &str,
) -> Vec<StageDocument> {
    client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.to_string(),
            stage_slug: String::new(),
            iteration: 0,
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner()
        .documents
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_major_revisit_of_thesis_archives_later_documents_and_reruns_them() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], true).await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let mut client = env.gateway().await;
    let before = documents(&mut client, &session_id).await;
    let mut later_before = BTreeMap::new();
    for doc in before.iter().filter(|d| d.stage_slug != "thesis") {
        later_before.insert(
            doc.storage_key.clone(),
            env.blob.get(&doc.storage_key).await.expect("object"),
        );
    }
    assert!(
        later_before.len() >= 4,
        "every later stage rendered something"
    );

    // Bad input and a stage that cannot be revisited.
    let refused = client
        .revisit_stage(RevisitStageRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            impact: "huge".into(),
            reason: String::new(),
            impact_level: 0,
            dry_run: false,
            client_request_id: String::new(),
        })
        .await
        .expect_err("unknown impact");
    assert_eq!(refused.code(), Code::InvalidArgument);

    // Minor: flagged for review, nothing archived, nothing moves.
    // (typed: impact_level, the string left empty)
    let minor = client
        .revisit_stage(RevisitStageRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            impact: String::new(),
            reason: "reworded".into(),
            impact_level: RevisitImpact::Minor.into(),
            dry_run: false,
            client_request_id: String::new(),
        })
        .await
        .expect("minor")
        .into_inner();
    assert_eq!(minor.needs_review, LATER);
    assert!(minor.archived.is_empty());
    let session = minor.session.expect("session");
    assert_eq!(session.status, "iteration_complete_pending_review");
    assert_eq!(session.state(), SessionState::Review);
    assert_eq!(
        documents(&mut client, &session_id).await.len(),
        before.len()
    );

    // The user edits a thesis document, then revisits thesis as a major change.
    let thesis_doc = before
        .iter()
        .find(|d| d.stage_slug == "thesis")
        .expect("a thesis document");
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: thesis_doc.resource_id.clone(),
            content: "A tool library that is also a repair café.".into(),
            client_request_id: String::new(),
        })
        .await
        .expect("edit");
    // The edit's re-render is a planner command sent through the outbox: its
    // job may not exist yet when the session first looks idle.
    eventually(60, "the edit rendered", || {
        let mut client = client.clone();
        let resource_id = thesis_doc.resource_id.clone();
        async move {
            let doc = client
                .get_document_content(GetDocumentContentRequest { resource_id })
                .await
                .ok()?
                .into_inner();
            doc.content.contains("repair café").then_some(())
        }
    })
    .await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let major = client
        .revisit_stage(RevisitStageRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            impact: "major".into(),
            reason: "now a repair café too".into(),
            impact_level: 0,
            dry_run: false,
            client_request_id: String::new(),
        })
        .await
        .expect("major")
        .into_inner();
    assert_eq!(major.revision, 1);
    assert_eq!(
        major.archived.len(),
        later_before.len(),
        "{:?}",
        major.archived
    );
    for (old_key, body) in &later_before {
        let archived = old_key
            .strip_suffix(".md")
            .map(|stem| format!("{stem}.v1.md"))
            .expect("markdown");
        assert!(major.archived.contains(&archived), "{archived} archived");
        assert!(
            env.blob.get(&archived).await.expect("archived object") == *body,
            "{archived} is the old document byte for byte"
        );
    }
    let rewound = major.session.expect("session").status;
    assert!(
        rewound == "pending_antithesis" || rewound == "running_antithesis",
        "{rewound}"
    );

    // It runs again from antithesis to review, with new jobs.
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let after = documents(&mut client, &session_id).await;
    assert_eq!(
        after.iter().filter(|d| d.stage_slug != "thesis").count(),
        later_before.len(),
        "every later document exists again, once"
    );
    for doc in after.iter().filter(|d| d.stage_slug != "thesis") {
        env.blob
            .get(&doc.storage_key)
            .await
            .expect("re-rendered object");
    }
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let roots: Vec<(String, i64)> = sqlx::query_as(
        "SELECT stage_slug, count(*) FROM dialectic_generation_jobs
         WHERE session_id = $1 AND job_type = 'PLAN' AND parent_job_id IS NULL GROUP BY 1 ORDER BY 1",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("roots");
    let roots: BTreeMap<String, i64> = roots.into_iter().collect();
    assert_eq!(
        roots.get("thesis"),
        Some(&1),
        "thesis did not re-run: {roots:?}"
    );
    for stage in LATER {
        assert!(
            roots.get(stage).copied().unwrap_or(0) >= 2,
            "{stage} re-ran: {roots:?}"
        );
    }
    let not_done: i64 = env.count("SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status <> 'completed'", session).await;
    assert_eq!(not_done, 0, "every job completed");
    let archived_rows: i64 = env.count("SELECT count(*) FROM dialectic_project_resources WHERE session_id = $1 AND resource_type = 'archived_document'", session).await;
    assert_eq!(archived_rows as usize, later_before.len());
    let history: Vec<(String, String)> = sqlx::query_as(
        "SELECT impact, stage_slug FROM dialectic_session_revisions WHERE session_id = $1 ORDER BY created_at",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("history");
    assert_eq!(
        history,
        [
            ("minor".to_string(), "thesis".to_string()),
            ("major".to_string(), "thesis".to_string())
        ]
    );
    env.teardown().await;
}

/// Moderate: later documents are archived and the session rewinds, but nothing
/// re-runs until the user says so with stage responses.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_moderate_revisit_archives_later_documents_and_waits_for_the_user() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], true).await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let mut client = env.gateway().await;
    let before = documents(&mut client, &session_id).await;
    let downstream = ["parenthesis", "paralysis"];
    let later_keys: Vec<String> = before
        .iter()
        .filter(|d| downstream.contains(&d.stage_slug.as_str()))
        .map(|d| d.storage_key.clone())
        .collect();
    assert!(!later_keys.is_empty(), "parenthesis and paralysis rendered");

    let moderate = client
        .revisit_stage(RevisitStageRequest {
            session_id: session_id.clone(),
            stage_slug: "synthesis".into(),
            impact: "moderate".into(),
            reason: "the synthesis dropped the membership fee".into(),
            impact_level: 0,
            dry_run: false,
            client_request_id: String::new(),
        })
        .await
        .expect("moderate")
        .into_inner();
    assert_eq!(moderate.revision, 1);
    assert_eq!(moderate.archived.len(), later_keys.len());
    assert_eq!(
        moderate.session.expect("session").status,
        "pending_parenthesis"
    );
    let current = documents(&mut client, &session_id).await;
    assert!(
        current
            .iter()
            .all(|d| !downstream.contains(&d.stage_slug.as_str())),
        "archived documents are no longer current"
    );
    for key in &later_keys {
        assert!(env.blob.get(key).await.is_err(), "{key} moved away");
    }

    // Nothing starts by itself: the planner gets a sweep and the session still waits.
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let parenthesis_roots = || async {
        env.count(
            "SELECT count(*) FROM dialectic_generation_jobs
             WHERE session_id = $1 AND stage_slug = 'parenthesis' AND parent_job_id IS NULL",
            session,
        )
        .await
    };
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(
        parenthesis_roots().await,
        1,
        "parenthesis did not re-run yet"
    );
    let waiting = client
        .get_session(dialectic_proto::v1::GetSessionRequest {
            session_id: session_id.clone(),
        })
        .await
        .expect("session")
        .into_inner();
    assert_eq!(waiting.status, "pending_parenthesis");

    // The user's go-ahead re-runs parenthesis and paralysis to review.
    client
        .submit_stage_responses(dialectic_proto::v1::SubmitStageResponsesRequest {
            session_id: session_id.clone(),
            stage_slug: "synthesis".into(),
            ..Default::default()
        })
        .await
        .expect("responses");
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    assert_eq!(parenthesis_roots().await, 2, "parenthesis re-ran once");
    let after = documents(&mut client, &session_id).await;
    assert_eq!(
        after
            .iter()
            .filter(|d| downstream.contains(&d.stage_slug.as_str()))
            .count(),
        later_keys.len(),
        "every later document exists again, once"
    );
    env.teardown().await;
}

/// Issue 40 item 3: a minor revisit's flag is kept per document and shown
/// (ListStageDocuments, GetSession) until the user edits the document or
/// submits the review.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_minor_revisit_flags_later_documents_until_edited_or_submitted() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let (_, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    let mut client = env.gateway().await;
    for stage in ["thesis", "antithesis", "synthesis", "parenthesis"] {
        env.wait_for_session(&session_id, &format!("pending_{}", next_of(stage)), true)
            .await;
        client
            .submit_stage_responses(SubmitStageResponsesRequest {
                session_id: session_id.clone(),
                stage_slug: stage.into(),
                responses: Vec::new(),
                client_request_id: String::new(),
            })
            .await
            .expect("submit");
    }
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    assert!(
        env.session(&session_id)
            .await
            .needs_review_stages
            .is_empty()
    );
    client
        .revisit_stage(RevisitStageRequest {
            session_id: session_id.clone(),
            stage_slug: "synthesis".into(),
            impact: "minor".into(),
            reason: "reworded".into(),
            impact_level: 0,
            dry_run: false,
            client_request_id: String::new(),
        })
        .await
        .expect("minor");
    let flagged = |docs: &[StageDocument]| -> Vec<(String, bool)> {
        let mut seen: Vec<(String, bool)> = docs
            .iter()
            .map(|d| (d.stage_slug.clone(), d.needs_review))
            .collect();
        seen.dedup();
        seen
    };
    let docs = documents(&mut client, &session_id).await;
    let by_stage: BTreeMap<String, bool> = flagged(&docs).into_iter().collect();
    assert_eq!(
        by_stage,
        BTreeMap::from(
            [
                ("thesis", false),
                ("antithesis", false),
                ("synthesis", false),
                ("parenthesis", true),
                ("paralysis", true),
            ]
            .map(|(s, f)| (s.to_string(), f))
        ),
        "{docs:?}"
    );
    assert_eq!(
        env.session(&session_id).await.needs_review_stages,
        ["parenthesis", "paralysis"]
    );
    // The revisit is in the session's history.
    let history = client
        .list_session_revisions(ListSessionRevisionsRequest {
            session_id: session_id.clone(),
        })
        .await
        .expect("history")
        .into_inner()
        .revisions;
    assert_eq!(history.len(), 1, "{history:?}");
    let minor = &history[0];
    assert_eq!(
        (
            minor.stage_slug.as_str(),
            minor.impact.as_str(),
            minor.reason.as_str()
        ),
        ("synthesis", "minor", "reworded")
    );
    assert_eq!(minor.needs_review, ["parenthesis", "paralysis"]);
    assert!(minor.downstream_archived.is_empty() && minor.created_at.is_some());
    let binary = dialectic_e2e::workspace_binary("dialectic-cli", "dialectic");
    let printed = dialectic_e2e::against_gateway(&mut tokio::process::Command::new(binary), &env)
        .args(["history", "--session", &session_id])
        .output()
        .await
        .expect("dialectic history");
    assert!(printed.status.success(), "{printed:?}");
    assert_eq!(
        String::from_utf8_lossy(&printed.stdout),
        format!(
            "r{} synthesis (iteration 1) minor: reworded; review parenthesis, paralysis\n",
            minor.revision
        )
    );
    let (_, key) = env.new_user("stranger").await;
    let hidden = env
        .gateway_with_key(&key)
        .await
        .list_session_revisions(ListSessionRevisionsRequest {
            session_id: session_id.clone(),
        })
        .await
        .expect_err("another user's session");
    assert_eq!(hidden.code(), Code::NotFound);

    // An edit clears its document's flag once it is rendered; the rest stay flagged.
    let edited = docs
        .iter()
        .find(|d| d.stage_slug == "parenthesis")
        .expect("a parenthesis document")
        .resource_id
        .clone();
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: edited.clone(),
            content: "Reviewed after the reworded synthesis.".into(),
            client_request_id: String::new(),
        })
        .await
        .expect("edit");
    eventually(60, "the edited document's flag cleared", || {
        let mut client = client.clone();
        let (session_id, edited) = (session_id.clone(), edited.clone());
        async move {
            let docs = documents(&mut client, &session_id).await;
            let doc = docs.iter().find(|d| d.resource_id == edited)?;
            (!doc.needs_review).then_some(())
        }
    })
    .await;
    let still: Vec<String> = documents(&mut client, &session_id)
        .await
        .into_iter()
        .filter(|d| d.needs_review)
        .map(|d| d.stage_slug)
        .collect();
    assert!(still.iter().any(|s| s == "paralysis"), "{still:?}");
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;

    // Submitting the review clears every flag of the iteration.
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.clone(),
            stage_slug: "paralysis".into(),
            responses: Vec::new(),
            client_request_id: String::new(),
        })
        .await
        .expect("submit the review");
    let docs = client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.clone(),
            stage_slug: String::new(),
            iteration: 1,
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner()
        .documents;
    assert!(docs.iter().all(|d| !d.needs_review), "{docs:?}");
    assert!(
        env.session(&session_id)
            .await
            .needs_review_stages
            .is_empty()
    );
    env.teardown().await;
}

fn next_of(stage: &str) -> &'static str {
    match stage {
        "thesis" => "antithesis",
        "antithesis" => "synthesis",
        "synthesis" => "parenthesis",
        _ => "paralysis",
    }
}
