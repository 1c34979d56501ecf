//! Asking a project questions (seed 004 query pipeline) on six service
//! processes: every citation of an answer quotes the stored text at the range
//! it names; a fabricated citation is removed with a caveat; an answer is
//! billed once and then cached at no cost until a document edit; a compound
//! question's parts are answered in parallel; another user's project is
//! NOT_FOUND.

use dialectic_core::query::{Source, SourceKind, chunks};
use dialectic_e2e::{GatewayClient, TestEnv, upload_documents};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, CitationSourceKind, CreateProjectRequest, GetWalletRequest,
    ListProjectDocumentsRequest, ListStageDocumentsRequest, QueryRequest, QueryResponse,
    SaveDocumentEditRequest, StartSessionRequest,
};

const STACK: [(&str, &str); 3] = [
    (
        "base.md",
        "Base agreement.\n\n4.2 Rent is due on the first day of each month.\n\n7.1 The tenant maintains the docks as Exhibit B sets out.",
    ),
    (
        "amendment-1.md",
        "Amendment 1.\n\n4.2 Rent is due on the fifth day of each month.",
    ),
    ("amendment-2.md", "Amendment 2.\n\nExhibit B is deleted."),
];

async fn ask(client: &mut GatewayClient, project: &str, text: &str) -> QueryResponse {
    client
        .query(QueryRequest {
            project_id: project.to_string(),
            text: text.to_string(),
            model: String::new(),
            client_request_id: String::new(),
        })
        .await
        .expect("query")
        .into_inner()
}

async fn available(client: &mut GatewayClient) -> i64 {
    client
        .get_wallet(GetWalletRequest { history: 0 })
        .await
        .expect("wallet")
        .into_inner()
        .available
}

/// Every citation's quote is the stored text of its upload at the chunk's
/// range plus the citation's, and is marked as the user's own document.
async fn assert_citations_resolve(
    env: &TestEnv,
    client: &mut GatewayClient,
    project: &str,
    answer: &QueryResponse,
) {
    let uploads = client
        .list_project_documents(ListProjectDocumentsRequest {
            project_id: project.to_string(),
        })
        .await
        .expect("documents")
        .into_inner()
        .documents;
    assert!(!answer.citations.is_empty(), "{answer:?}");
    for citation in &answer.citations {
        let upload = uploads
            .iter()
            .find(|u| u.resource_id == citation.source_id)
            .unwrap_or_else(|| panic!("{} is an upload", citation.source_id));
        assert_eq!(
            (citation.source_kind(), citation.model_written),
            (CitationSourceKind::UploadedDocument, false),
            "{citation:?}"
        );
        let stored = env
            .blob
            .get_string(&upload.storage_key)
            .await
            .expect("stored");
        let source = Source {
            id: upload.resource_id.clone(),
            name: upload.file_name.clone(),
            kind: SourceKind::UploadedDocument,
            text: stored.clone(),
        };
        let chunk = chunks(&source)
            .into_iter()
            .find(|c| c.id == citation.chunk_id)
            .expect("the cited chunk");
        let at: String = stored
            .chars()
            .skip(chunk.start + citation.start as usize)
            .take((citation.end - citation.start) as usize)
            .collect();
        assert_eq!(at, citation.quote, "{citation:?}");
    }
}

/// Once an analysis resolved the stack's clauses, they stand for the uploads:
/// every citation is of something a model wrote, and says so.
fn written_by_the_analysis(answer: &QueryResponse) {
    assert!(!answer.citations.is_empty(), "{answer:?}");
    for citation in &answer.citations {
        assert!(
            citation.model_written
                && citation.source_kind() != CitationSourceKind::UploadedDocument
                && citation.source_kind() != CitationSourceKind::Unspecified,
            "{citation:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_quote_stored_text_and_are_cached_until_an_edit() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: "The lease and its amendments. [[simulate:items:sections:2]]"
                .into(),
            pipeline: "contract_stack".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id;
    upload_documents(&mut client, &project, &STACK).await;

    let before = available(&mut client).await;
    let answer = ask(&mut client, &project, "When is the rent due?").await;
    assert_citations_resolve(&env, &mut client, &project, &answer).await;
    assert!(answer.caveats.is_empty(), "{:?}", answer.caveats);
    assert!(!answer.cached && answer.cost > 0, "{answer:?}");
    assert_eq!(
        before - available(&mut client).await,
        answer.cost,
        "billed what it says"
    );

    let again = ask(&mut client, &project, "  when is the RENT due? ").await;
    assert!(again.cached && again.cost == 0, "{again:?}");
    assert_eq!(again.answer, answer.answer);
    assert_eq!(
        before - available(&mut client).await,
        answer.cost,
        "a hit is free"
    );

    let fabricated = ask(
        &mut client,
        &project,
        "Who maintains the docks? [[simulate:fabricate-citation]]",
    )
    .await;
    assert_citations_resolve(&env, &mut client, &project, &fabricated).await;
    assert!(
        fabricated
            .citations
            .iter()
            .all(|c| c.quote != dialectic_llm::FABRICATED_QUOTE)
    );
    assert_eq!(fabricated.caveats.len(), 1, "{:?}", fabricated.caveats);
    assert!(
        fabricated.caveats[0].contains("a citation was removed")
            && fabricated.caveats[0].contains(dialectic_llm::FABRICATED_QUOTE),
        "{:?}",
        fabricated.caveats
    );
    assert!(fabricated.confidence < answer.confidence);

    // A session renders the conflict report; editing it makes the next answer a miss.
    let session = client
        .start_session(StartSessionRequest {
            project_id: project.clone(),
            models: vec!["simulated".into()],
            auto_advance: true,
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner()
        .id;
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;
    let fresh = ask(&mut client, &project, "When is the rent due?").await;
    assert!(
        !fresh.cached,
        "the session's documents dropped the cached answer"
    );
    written_by_the_analysis(&fresh);
    assert!(
        ask(&mut client, &project, "When is the rent due?")
            .await
            .cached
    );
    let report = client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session.clone(),
            stage_slug: String::new(),
            iteration: 1,
        })
        .await
        .expect("documents")
        .into_inner()
        .documents
        .into_iter()
        .find(|d| d.document_key == "conflict_report")
        .expect("the conflict report");
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: report.resource_id,
            content: "No conflicts after all.".into(),
        })
        .await
        .expect("edit");
    let after_edit = ask(&mut client, &project, "When is the rent due?").await;
    assert!(!after_edit.cached && after_edit.cost > 0, "{after_edit:?}");
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compound_questions_run_their_parts_in_parallel_and_strangers_get_not_found() {
    let mut env = TestEnv::new().await;
    // Long enough that two calls started together overlap whatever the scheduling.
    env.start_all_with(|s| {
        s.executor.simulated_latency_ms = 300;
        s.executor.simulated_record_requests = true;
    })
    .await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: "The lease.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id;
    client
        .add_project_document(AddProjectDocumentRequest {
            project_id: project.clone(),
            file_name: STACK[0].0.into(),
            content: STACK[0].1.as_bytes().to_vec(),
            client_request_id: String::new(),
        })
        .await
        .expect("upload");

    let answer = ask(
        &mut client,
        &project,
        "What is the rent and does anything conflict? [[simulate:compound]]",
    )
    .await;
    assert_eq!(answer.sub_queries.len(), 2, "{answer:?}");
    assert_citations_resolve(&env, &mut client, &project, &answer).await;
    // Each part went to the synthesis with what its type asks for.
    let focused: Vec<bool> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.output_type == "query_answer")
        .map(|r| {
            r.messages[0]
                .content
                .contains(dialectic_core::query::focus("conflict_detection"))
        })
        .collect();
    assert_eq!(focused.iter().filter(|f| **f).count(), 1, "{focused:?}");
    let parts: Vec<_> = dialectic_llm::recorded_call_times()
        .into_iter()
        .filter(|(output, _, _)| output == "query_answer")
        .collect();
    assert_eq!(parts.len(), 2);
    let (a, b) = (&parts[0], &parts[1]);
    assert!(a.1 < b.2 && b.1 < a.2, "the two parts' calls overlap");

    let (_, key) = env.new_user("mallory").await;
    let mut stranger = env.gateway_with_key(&key).await;
    let refused = stranger
        .query(QueryRequest {
            project_id: project.clone(),
            text: "What is the rent?".into(),
            model: String::new(),
            client_request_id: String::new(),
        })
        .await
        .expect_err("another user's project");
    assert_eq!(refused.code(), tonic::Code::NotFound);
    env.teardown().await;
}
