//! Asking a project questions (seed 004 query pipeline) on six service
//! processes: every citation of an answer quotes its source's text at the
//! range it names, and opens through GetDocumentContent (upload, rendered
//! document, resolved clause, blackboard entry); the sources are indexed once;
//! a fabricated citation is removed with a caveat; an answer is billed once
//! and then cached at no cost until a document edit; after a second analysis
//! answers read it only and name it; a compound question's parts are answered
//! in parallel; another user's project is NOT_FOUND.

use dialectic_e2e::{GatewayClient, TestEnv, upload_documents};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, CitationSourceKind, CreateProjectRequest, GetDocumentContentRequest,
    GetWalletRequest, ListProjectDocumentsRequest, QueryRequest, QueryResponse,
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

/// Every citation's quote is the stored text of its upload at the citation's
/// range (characters of the whole text), and is marked as the user's own document.
async fn assert_citations_resolve(
    env: &TestEnv,
    client: &mut GatewayClient,
    project: &str,
    answer: &QueryResponse,
) {
    let uploads = client
        .list_project_documents(ListProjectDocumentsRequest {
            project_id: project.to_string(),
            ..Default::default()
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
        let at: String = stored
            .chars()
            .skip(citation.start as usize)
            .take((citation.end - citation.start) as usize)
            .collect();
        assert_eq!(at, citation.quote, "{citation:?}");
    }
}

/// When the project's index last changed a source's row.
async fn last_indexed(env: &TestEnv, project: &str) -> chrono::DateTime<chrono::Utc> {
    sqlx::query_scalar("SELECT max(indexed_at) FROM query_sources WHERE project_id = $1::uuid")
        .bind(project)
        .fetch_one(env.store.pool())
        .await
        .expect("indexed_at")
}

/// How many of the project's sources of `kind` the query index holds.
async fn indexed(env: &TestEnv, project: &str, kind: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM query_sources WHERE project_id = $1::uuid AND kind = $2",
    )
    .bind(project)
    .bind(kind)
    .fetch_one(env.store.pool())
    .await
    .expect("index rows")
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
    resolve_through_the_api(&mut client, &answer).await;
    assert_eq!(
        answer.analysis_session_id, "",
        "no session yet: the uploads alone"
    );
    // The first question indexed the uploads; the next miss reads the index as it is.
    assert_eq!(indexed(&env, &project, "uploaded_document").await, 3);
    let first_indexed = last_indexed(&env, &project).await;
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
    assert_eq!(
        last_indexed(&env, &project).await,
        first_indexed,
        "a source is indexed once"
    );

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
    resolve_through_the_api(&mut client, &fresh).await;
    assert_eq!(fresh.analysis_session_id, session, "{fresh:?}");
    // The analysis's resolved clauses replaced the uploads in the index too.
    assert_eq!(indexed(&env, &project, "uploaded_document").await, 0);
    assert!(indexed(&env, &project, "contribution").await > 0);
    assert_eq!(
        indexed(&env, &project, "rendered_document").await,
        1,
        "the conflict report: the timeline's, clauses' and map's rendered copies are not read twice"
    );
    assert!(
        ask(&mut client, &project, "When is the rent due?")
            .await
            .cached
    );
    let reports = dialectic_e2e::stage_documents(
        &mut client,
        &session,
        "contract_analysis",
        "conflict_report",
    )
    .await;
    let report = reports.first().expect("the conflict report");
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: report.resource_id.clone(),
            content: "No conflicts after all.".into(),
            client_request_id: String::new(),
        })
        .await
        .expect("edit");
    // The edit is re-rendered in the background; a citation names the text
    // as it was when the question was answered, so ask once it is there.
    for _ in 0..200 {
        let shown = client
            .get_document_content(GetDocumentContentRequest {
                resource_id: report.resource_id.clone(),
            })
            .await
            .expect("report")
            .into_inner()
            .content;
        if shown.contains("No conflicts after all.") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let after_edit = ask(&mut client, &project, "When is the rent due?").await;
    assert!(!after_edit.cached && after_edit.cost > 0, "{after_edit:?}");
    resolve_through_the_api(&mut client, &after_edit).await;

    // A second analysis of the stack: answers read it, and only it.
    let second = client
        .start_session(StartSessionRequest {
            project_id: project.clone(),
            models: vec!["simulated".into()],
            auto_advance: true,
            ..Default::default()
        })
        .await
        .expect("second session")
        .into_inner()
        .id;
    env.wait_for_session(&second, "iteration_complete_pending_review", true)
        .await;
    let latest = ask(&mut client, &project, "Who maintains the docks now?").await;
    assert_eq!(latest.analysis_session_id, second, "{latest:?}");
    written_by_the_analysis(&latest);
    resolve_through_the_api(&mut client, &latest).await;
    for citation in &latest.citations {
        let id = uuid::Uuid::parse_str(&citation.source_id).expect("source id");
        assert_eq!(
            env.count(&of_session(&second), id).await,
            1,
            "{citation:?} is of the second analysis"
        );
    }
    env.teardown().await;
}

/// SQL counting the rendered documents, contributions and blackboard
/// entries of `session` whose id is $1.
fn of_session(session: &str) -> String {
    format!(
        "SELECT count(*) FROM (
           SELECT id FROM dialectic_project_resources WHERE session_id = '{session}'
           UNION ALL SELECT id FROM dialectic_contributions WHERE session_id = '{session}'
           UNION ALL SELECT id FROM dialectic_blackboard_entries WHERE session_id = '{session}'
         ) o WHERE o.id = $1"
    )
}

/// Every citation's source opens through `GetDocumentContent` (an upload, a
/// rendered document, a resolved clause's content, a blackboard entry's
/// data), and its text has the quote at the citation's `start..end`.
async fn resolve_through_the_api(client: &mut GatewayClient, answer: &QueryResponse) {
    assert!(!answer.citations.is_empty(), "{answer:?}");
    for citation in &answer.citations {
        let content = client
            .get_document_content(GetDocumentContentRequest {
                resource_id: citation.source_id.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("{citation:?} opens: {e}"))
            .into_inner()
            .content;
        let at: String = content
            .chars()
            .skip(citation.start as usize)
            .take((citation.end - citation.start) as usize)
            .collect();
        assert_eq!(at, citation.quote, "{citation:?}");
    }
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
            ..Default::default()
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
