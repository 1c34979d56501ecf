//! Uploads with a role (issue 55 Deliver 1) and the session's pushback
//! (Deliver 4), through all six services with the simulated model: a
//! `project_document` rule with a role reads exactly the uploads of that
//! role, the essay's argument maps read the writer's sources and its
//! paragraphs the writing samples, the dialectic's headers read seed 001's
//! typed context documents, and the thesis prompt argues as hard as the
//! session asked, with the thesis document showing its claim type. The essay's
//! fact-check verifies a claim only by a quote a source holds (Deliver 3).

use dialectic_core::prompt::ChatRequest;
use dialectic_e2e::{
    GatewayClient, TestEnv, document_text, eventually, session_requests, stage_documents,
};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, CompleteSessionRequest, CreateProjectRequest, DocumentRole,
    ListProjectDocumentsRequest, OverrideClaimRequest, ProjectDocument, Pushback, StageResponse,
    StartSessionRequest, SubmitStageResponsesRequest,
};
use dialectic_runtime::error_status::StatusExt;
use std::collections::BTreeSet;

const ESSAY_PROMPT: &str = "An essay arguing that towns should own their libraries' buildings. \
    [[simulate:items:sections:2]] [[simulate:items:paragraphs:1]]";

async fn create_project(client: &mut GatewayClient, pipeline: &str, prompt: &str) -> String {
    client
        .create_project(CreateProjectRequest {
            name: "Roles".into(),
            initial_user_prompt: prompt.into(),
            pipeline: pipeline.into(),
            ..Default::default()
        })
        .await
        .expect("create project")
        .into_inner()
        .id
}

async fn upload(
    client: &mut GatewayClient,
    project_id: &str,
    name: &str,
    role: DocumentRole,
) -> ProjectDocument {
    client
        .add_project_document(AddProjectDocumentRequest {
            project_id: project_id.into(),
            file_name: name.into(),
            content: format!("The text of {name}.").into_bytes(),
            role: role.into(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("upload {name}: {e}"))
        .into_inner()
}

async fn start(
    client: &mut GatewayClient,
    project_id: &str,
    auto_advance: bool,
    pushback: Pushback,
) -> String {
    let session = client
        .start_session(StartSessionRequest {
            project_id: project_id.into(),
            models: vec!["simulated".into()],
            auto_advance,
            pushback: pushback.into(),
            ..Default::default()
        })
        .await
        .expect("start session")
        .into_inner();
    let expected = match pushback {
        Pushback::Unspecified => Pushback::Full,
        other => other,
    };
    assert_eq!(
        session.pushback(),
        expected,
        "the session keeps its pushback"
    );
    session.id
}

/// Storage keys of the uploads (`project_document` inputs) each recorded
/// request of the session writing `output_type` read.
fn uploads_read(session_id: &str, output_type: &str) -> Vec<BTreeSet<String>> {
    let requests = session_requests(session_id, output_type);
    assert!(!requests.is_empty(), "no recorded {output_type} request");
    requests
        .iter()
        .map(|r| {
            r.inputs
                .iter()
                .filter(|i| i.kind == "project_document")
                .filter_map(|i| i.storage_key.clone())
                .collect()
        })
        .collect()
}

/// The prompt text of the session's (first) request writing `output_type`.
fn prompt_of(session_id: &str, output_type: &str) -> String {
    let requests = session_requests(session_id, output_type);
    let request = requests
        .first()
        .unwrap_or_else(|| panic!("no recorded {output_type} request"));
    request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn voice_profile(client: &mut GatewayClient, session_id: &str) -> String {
    let profile = stage_documents(client, session_id, "thesis_development", "voice_profile").await;
    let text = document_text(client, &profile[0].resource_id).await;
    assert!(text.starts_with("# Voice profile"), "{text}");
    text
}

const MINIMAL: &str = "Push back only on what would make the thesis false";
const FULL: &str = "Push back in full";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_essay_reads_sources_and_samples_by_role_and_argues_at_the_sessions_pushback() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let project = create_project(&mut client, "essay", ESSAY_PROMPT).await;
    let source = upload(&mut client, &project, "census.md", DocumentRole::Source).await;
    let sample = upload(
        &mut client,
        &project,
        "my-blog.md",
        DocumentRole::WritingSample,
    )
    .await;
    let untyped = upload(&mut client, &project, "notes.md", DocumentRole::Unspecified).await;
    assert_eq!(source.role(), DocumentRole::Source);
    assert_eq!(sample.role(), DocumentRole::WritingSample);
    let listed = client
        .list_project_documents(ListProjectDocumentsRequest {
            project_id: project.clone(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .documents;
    let roles: Vec<(String, DocumentRole)> = listed
        .iter()
        .map(|d| (d.file_name.clone(), d.role()))
        .collect();
    assert_eq!(
        roles,
        vec![
            ("census.md".into(), DocumentRole::Source),
            ("my-blog.md".into(), DocumentRole::WritingSample),
            ("notes.md".into(), DocumentRole::Unspecified),
        ]
    );
    let refused = client
        .add_project_document(AddProjectDocumentRequest {
            project_id: project.clone(),
            file_name: "x.md".into(),
            content: b"x".to_vec(),
            role: 99,
            ..Default::default()
        })
        .await
        .expect_err("an unknown role");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("role"), "{refused:?}");

    let refused = client
        .start_session(StartSessionRequest {
            project_id: project.clone(),
            pushback: 42,
            ..Default::default()
        })
        .await
        .expect_err("an unknown pushback");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("pushback"), "{refused:?}");

    let minimal = start(&mut client, &project, true, Pushback::Minimal).await;
    env.wait_for_session(&minimal, "iteration_complete_pending_review", true)
        .await;
    let only = |doc: &ProjectDocument| BTreeSet::from([doc.storage_key.clone()]);
    let maps = uploads_read(&minimal, "argument_map");
    assert_eq!(maps.len(), 2, "one argument map per section");
    assert!(maps.iter().all(|read| *read == only(&source)), "{maps:?}");
    let paragraphs = uploads_read(&minimal, "paragraph");
    assert!(
        paragraphs.iter().all(|read| *read == only(&sample)),
        "{paragraphs:?}"
    );
    assert!(
        !maps
            .iter()
            .chain(&paragraphs)
            .any(|r| r.contains(&untyped.storage_key)),
        "no rule of the essay reads an upload without a role"
    );
    let thesis_prompt = prompt_of(&minimal, "thesis_statement");
    assert!(thesis_prompt.contains(MINIMAL), "{thesis_prompt}");
    assert!(!thesis_prompt.contains(FULL), "{thesis_prompt}");
    assert!(
        !thesis_prompt.contains("{%"),
        "the template is filled: {thesis_prompt}"
    );
    let thesis = stage_documents(
        &mut client,
        &minimal,
        "thesis_development",
        "thesis_statement",
    )
    .await;
    let text = document_text(&mut client, &thesis[0].resource_id).await;
    assert!(
        text.contains("*Claim type: "),
        "the thesis shows its claim type: {text}"
    );

    // Seed 003's fact-check: the claim quoting the source is verified and
    // names it; the one the model called verified on an invented quote, and
    // the one it deferred, are deferred with their reasons.
    let fact_check =
        stage_documents(&mut client, &minimal, "paragraph_writing", "fact_check").await;
    let fact_check = fact_check[0].resource_id.clone();
    let log = document_text(&mut client, &fact_check).await;
    assert!(log.contains("1 claim(s) verified"), "{log}");
    assert!(
        log.contains("Verified by census.md: \"The text of census.md.\""),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "Deferred: the quote {:?} occurs in none of the sources",
            dialectic_llm::INVENTED_QUOTE
        )),
        "{log}"
    );
    assert!(
        log.contains("Deferred: no source covers the town's budget"),
        "{log}"
    );

    // The writer overrides the third claim with a rationale: kept beside
    // the checked verdict and shown in the log; a claim the log does not
    // hold, an empty rationale and a document that checks no claims are
    // refused, naming the field.
    let rationale = "The town's own budget book says so; I have it on my desk.";
    let overridden = client
        .override_claim(OverrideClaimRequest {
            resource_id: fact_check.clone(),
            claim: 3,
            rationale: rationale.into(),
            client_request_id: String::new(),
        })
        .await
        .expect("override")
        .into_inner();
    assert_eq!(overridden.resource_id, fact_check);
    let log = eventually(60, "the log rendered with the override", || {
        let mut client = client.clone();
        let fact_check = fact_check.clone();
        async move {
            let log = document_text(&mut client, &fact_check).await;
            log.contains(rationale).then_some(log)
        }
    })
    .await;
    assert!(log.contains("1 overridden by the writer"), "{log}");
    assert!(
        log.contains("Deferred: no source covers the town's budget"),
        "the checked verdict stays: {log}"
    );
    let refusals = [
        (3, fact_check.as_str(), "", "rationale"),
        (4, fact_check.as_str(), "x", "claim"),
        (1, thesis[0].resource_id.as_str(), "x", "resource_id"),
    ];
    for (claim, resource_id, rationale, field) in refusals {
        let refused = client
            .override_claim(OverrideClaimRequest {
                resource_id: resource_id.into(),
                claim,
                rationale: rationale.into(),
                client_request_id: String::new(),
            })
            .await
            .expect_err("refused");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        let named: Vec<String> = refused
            .get_details_bad_request()
            .map(|b| b.field_violations.into_iter().map(|v| v.field).collect())
            .unwrap_or_default();
        assert_eq!(named, [field], "{refused:?}");
    }

    // Seed 003's voice: the profile reads the sample, each paragraph is
    // checked against it in the voice-check log.
    let profiles = uploads_read(&minimal, "voice_profile");
    assert_eq!(
        profiles,
        vec![only(&sample)],
        "the profile reads the samples"
    );
    let voice_log =
        stage_documents(&mut client, &minimal, "paragraph_writing", "voice_check").await;
    let voice_log = document_text(&mut client, &voice_log[0].resource_id).await;
    assert!(voice_log.starts_with("# Voice-check log"), "{voice_log}");
    // The simulated checks score 4 and 5; the model states no mean.
    assert!(
        voice_log.contains("Voice consistency: 4.5 of 5 (the mean of the scores below)."),
        "the engine's mean: {voice_log}"
    );
    let with_sample = voice_profile(&mut client, &minimal).await;
    output_record_of_the_essay(&env, &mut client, &minimal).await;

    let full = start(&mut client, &project, false, Pushback::Unspecified).await;
    env.wait_for_session(&full, "pending_essay_structuring", true)
        .await;
    let thesis_prompt = prompt_of(&full, "thesis_statement");
    assert!(thesis_prompt.contains(FULL), "{thesis_prompt}");
    assert!(!thesis_prompt.contains(MINIMAL), "{thesis_prompt}");

    // Without writing samples the profile is read from the idea alone, and
    // differs from the one the sample shaped.
    let bare = create_project(&mut client, "essay", ESSAY_PROMPT).await;
    let unsampled = start(&mut client, &bare, false, Pushback::Unspecified).await;
    env.wait_for_session(&unsampled, "pending_essay_structuring", true)
        .await;
    assert_eq!(
        uploads_read(&unsampled, "voice_profile"),
        vec![BTreeSet::new()]
    );
    let without_sample = voice_profile(&mut client, &unsampled).await;
    assert_ne!(with_sample, without_sample, "the samples shape the profile");
    env.teardown().await;
}

/// Seed 003's output record at review: the final essay, its word count, the
/// claims a source verified (the override above changes no verdict) and the
/// voice score; `completed_at` once the writer completes the session.
async fn output_record_of_the_essay(env: &TestEnv, client: &mut GatewayClient, session_id: &str) {
    let output = env
        .session(session_id)
        .await
        .output
        .expect("an output record at review");
    let document = output.document.expect("the final essay");
    assert_eq!(document.document_key, "final_essay");
    let essay = document_text(client, &document.resource_id).await;
    let body = essay
        .strip_prefix("# Final Essay\n")
        .unwrap_or_else(|| panic!("{essay}"));
    let words = body
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count();
    assert!(words > 0, "{essay}");
    assert_eq!(output.word_count as usize, words, "{essay}");
    let figures: Vec<(&str, f64)> = output
        .figures
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    let mut figures = figures;
    figures.sort_by(|a, b| a.0.cmp(b.0));
    assert_eq!(
        figures,
        [("sources_verified", 1.0), ("voice_consistency_score", 4.5)]
    );
    assert_eq!(output.completed_at, None, "not completed yet");
    client
        .complete_session(CompleteSessionRequest {
            session_id: session_id.to_string(),
            client_request_id: String::new(),
        })
        .await
        .expect("complete");
    let completed = env
        .session(session_id)
        .await
        .output
        .expect("a completed session keeps its record");
    assert!(completed.completed_at.is_some(), "{completed:?}");
    assert_eq!(completed.word_count, output.word_count);
}

/// Seed 001's typed context documents: an upload's file name, its role, and
/// the header the dialectic's stage headers read it under.
const CONTEXT_DOCUMENTS: [(&str, DocumentRole, &str); 3] = [
    (
        "where.md",
        DocumentRole::Context,
        "--- Deployment context (where and how it will be used) ---",
    ),
    (
        "limits.md",
        DocumentRole::Constraint,
        "--- Constraint boundaries (non-negotiable) ---",
    ),
    (
        "goals.md",
        DocumentRole::SuccessCriteria,
        "--- Success criteria ---",
    ),
];

/// What the thesis stage's requests write: its header, then its documents.
const THESIS_OUTPUTS: [&str; 5] = [
    "header_context",
    "business_case",
    "feature_spec",
    "success_metrics",
    "technical_approach",
];

fn uploads_of(request: &ChatRequest) -> BTreeSet<String> {
    request
        .inputs
        .iter()
        .filter(|i| i.kind == "project_document")
        .filter_map(|i| i.storage_key.clone())
        .collect()
}

fn text_of(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A stage header reads exactly the typed uploads, each right under the
/// header naming its role, and none of the other uploads' text.
fn assert_reads_the_typed_context(
    request: &ChatRequest,
    typed: &BTreeSet<String>,
    others: &[ProjectDocument],
) {
    assert_eq!(&uploads_of(request), typed, "exactly the typed uploads");
    let prompt = text_of(request);
    for (name, _, header) in CONTEXT_DOCUMENTS {
        let section = format!("{header}\nThe text of {name}.");
        assert!(
            prompt.contains(&section),
            "{name} under its header: {prompt}"
        );
    }
    for other in others {
        let text = format!("The text of {}.", other.file_name);
        assert!(
            !prompt.contains(&text),
            "{} is not read: {prompt}",
            other.file_name
        );
    }
}

async fn submit_thesis_feedback(client: &mut GatewayClient, session_id: &str) {
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.into(),
            stage_slug: "thesis".into(),
            responses: vec![StageResponse {
                feedback: "Mind the volunteers' time.".into(),
                ..Default::default()
            }],
            client_request_id: String::new(),
        })
        .await
        .expect("submit the thesis");
}

/// Seed 001's deployment context, constraint boundaries and success criteria
/// reach the dialectic's thesis and antithesis headers by role: each header
/// reads exactly the three typed uploads under their headers; an untyped
/// upload and a source (the essay's role) reach no thesis request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_dialectic_headers_read_the_typed_context_documents() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let project = create_project(&mut client, "", "A tool library for a small town.").await;
    let mut typed = BTreeSet::new();
    for (name, role, _) in CONTEXT_DOCUMENTS {
        typed.insert(upload(&mut client, &project, name, role).await.storage_key);
    }
    let others = [
        upload(&mut client, &project, "notes.md", DocumentRole::Unspecified).await,
        upload(&mut client, &project, "paper.md", DocumentRole::Source).await,
    ];
    let session = start(&mut client, &project, false, Pushback::Unspecified).await;
    env.wait_for_session(&session, "pending_antithesis", true)
        .await;
    let thesis: Vec<ChatRequest> = THESIS_OUTPUTS
        .iter()
        .flat_map(|output| session_requests(&session, output))
        .collect();
    assert_eq!(thesis.len(), 5, "the header and four documents");
    assert_reads_the_typed_context(&thesis[0], &typed, &others);
    let read: BTreeSet<String> = thesis.iter().flat_map(uploads_of).collect();
    assert_eq!(read, typed, "the thesis reads the typed uploads only");

    submit_thesis_feedback(&mut client, &session).await;
    env.wait_for_session(&session, "pending_synthesis", true)
        .await;
    let headers = session_requests(&session, "header_context");
    assert_eq!(headers.len(), 2, "the thesis and antithesis headers");
    assert_reads_the_typed_context(&headers[1], &typed, &others);
    env.teardown().await;
}
