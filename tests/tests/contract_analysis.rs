//! Issue 54, items 2 and 3, on the simulated model: the contract-stack
//! analysis as data through the public API alone (GetContractAnalysis):
//! typed clauses, edges and conflicts; a section filter that keeps exactly
//! the conflicts touching that section; dependency edges a program walks;
//! the same data in the rendered documents, the export and the CLI. And
//! citations a lawyer can check: each names its document, section,
//! effective date and, for a PDF, its page.

use dialectic_convert::fixtures::{self, Placed, placed};
use dialectic_e2e::{
    GatewayClient, TestEnv, against_gateway, document_text, stage_documents, upload_documents,
    workspace_binary,
};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, Citation, CitationSourceKind, ConflictKind, ConflictSeverity,
    ContractAnalysis, CreateProjectRequest, DependencyKind, ExportProjectRequest,
    GetContractAnalysisRequest, GetDocumentContentRequest, QueryRequest, StartSessionRequest,
};
use std::collections::BTreeSet;
use std::io::{Cursor, Read};
use tokio_stream::StreamExt;

/// Three sections to resolve, so there are edges to walk and conflicts
/// that touch some sections and not others.
const PROMPT: &str = "Analyse the lease stack. [[simulate:items:sections:3]]";

const STACK: [(&str, &str); 3] = [
    (
        "base.md",
        "Base agreement. Effective 1 March 2021. 4.2: Rent is due on the first.",
    ),
    (
        "amendment-1.md",
        "Amendment 1. Effective 1 January 2023. 4.2: Rent is due on the fifth.",
    ),
    (
        "amendment-2.md",
        "Amendment 2. Effective 1 September 2024. Exhibit B is deleted.",
    ),
];

async fn project(client: &mut GatewayClient, prompt: &str) -> String {
    client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: prompt.into(),
            pipeline: "contract_stack".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id
}

async fn run_to_review(env: &TestEnv, client: &mut GatewayClient, project_id: &str) -> String {
    let session = client
        .start_session(StartSessionRequest {
            project_id: project_id.to_string(),
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
    session
}

async fn analysis(
    client: &mut GatewayClient,
    project_id: &str,
    session_id: &str,
    section: &str,
) -> ContractAnalysis {
    client
        .get_contract_analysis(GetContractAnalysisRequest {
            project_id: project_id.into(),
            session_id: session_id.into(),
            section: section.into(),
        })
        .await
        .expect("analysis")
        .into_inner()
}

/// Every section reachable from `start` by following edges from a section
/// to the one it depends on, in the order reached.
fn walk(analysis: &ContractAnalysis, start: &str) -> Vec<String> {
    let mut reached = vec![start.to_string()];
    let mut next = 0;
    while let Some(at) = reached.get(next).cloned() {
        for edge in analysis.edges.iter().filter(|e| e.from_section == at) {
            if !reached.contains(&edge.to_section) {
                reached.push(edge.to_section.clone());
            }
        }
        next += 1;
    }
    reached
}

fn touching(analysis: &ContractAnalysis, section: &str) -> Vec<ContractAnalysisConflict> {
    analysis
        .conflicts
        .iter()
        .filter(|c| c.sections.iter().any(|s| s == section))
        .cloned()
        .collect()
}

type ContractAnalysisConflict = dialectic_proto::v1::ContractConflict;

async fn export(client: &mut GatewayClient, project_id: &str) -> Vec<(String, Vec<u8>)> {
    let mut stream = client
        .export_project(ExportProjectRequest {
            project_id: project_id.into(),
        })
        .await
        .expect("export")
        .into_inner();
    let mut archive = Vec::new();
    while let Some(chunk) = stream.next().await {
        archive.extend_from_slice(&chunk.expect("chunk").data);
    }
    let mut zip = zip::ZipArchive::new(Cursor::new(archive)).expect("a zip archive");
    (0..zip.len())
        .map(|i| {
            let mut file = zip.by_index(i).expect("entry");
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).expect("read");
            (file.name().expect("a UTF-8 name").to_string(), bytes)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_program_lists_the_conflicts_of_one_section_and_walks_the_dependencies() {
    let binary = workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let project_id = project(&mut client, PROMPT).await;
    upload_documents(&mut client, &project_id, &STACK).await;
    let session = run_to_review(&env, &mut client, &project_id).await;

    let whole = analysis(&mut client, &project_id, "", "").await;
    assert_eq!(whole.session_id, session, "the project's analysis");
    assert_eq!(whole.iteration, 1);
    assert_eq!(analysis(&mut client, "", &session, "").await, whole);

    // Clauses: one per section, typed, dated and attributed.
    let sections: Vec<&str> = whole
        .clauses
        .iter()
        .map(|c| c.section_number.as_str())
        .collect();
    assert_eq!(
        sections.iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(["1", "2", "3"]),
        "{whole:?}"
    );
    for clause in &whole.clauses {
        assert_eq!(
            clause.section_title,
            format!("Section {}", clause.section_number)
        );
        assert_eq!(clause.category, "general");
        // The latest-dated document of the stack, its date read as ISO.
        assert_eq!(
            (
                clause.effective_date.as_str(),
                clause.last_changed_by.as_str()
            ),
            ("2024-09-01", "amendment-2.md"),
            "{clause:?}"
        );
        assert!(clause.confidence > 0.0 && !clause.content.is_empty());
        let shown = document_text(&mut client, &clause.resource_id).await;
        assert!(
            shown.contains(&format!(
                "\n## Section number\n\n{}\n",
                clause.section_number
            )) && shown.contains("\n## Last changed by\n\namendment-2.md\n"),
            "{shown}"
        );
    }

    // Edges a program walks: 3 depends on 2, 2 on 1.
    assert_eq!(whole.edges.len(), 2, "{:?}", whole.edges);
    assert!(
        whole
            .edges
            .iter()
            .all(|e| e.kind != DependencyKind::Unspecified as i32)
    );
    assert_eq!(walk(&whole, "3"), ["3", "2", "1"]);
    assert_eq!(walk(&whole, "1"), ["1"]);

    // Conflicts, typed; the section filter keeps exactly those touching it.
    assert_eq!(whole.conflicts.len(), 3, "{:?}", whole.conflicts);
    for conflict in &whole.conflicts {
        assert_ne!(conflict.kind, ConflictKind::Unspecified as i32);
        assert_ne!(conflict.severity, ConflictSeverity::Unspecified as i32);
        assert!(!conflict.explanation.is_empty() && !conflict.documents.is_empty());
    }
    for section in ["1", "2", "3"] {
        let filtered = analysis(&mut client, &project_id, "", section).await;
        let expected = touching(&whole, section);
        assert!(!expected.is_empty() && expected.len() < whole.conflicts.len());
        assert_eq!(filtered.conflicts, expected, "section {section}");
        assert!(
            filtered
                .edges
                .iter()
                .all(|e| e.from_section == section || e.to_section == section)
        );
        assert_eq!(filtered.clauses.len(), 1);
    }
    let spelled = analysis(&mut client, &project_id, "", "Section 2").await;
    assert_eq!(spelled.conflicts, touching(&whole, "2"));
    assert!(
        analysis(&mut client, &project_id, "", "9")
            .await
            .conflicts
            .is_empty()
    );

    // People read the same data in the rendered documents.
    let map = stage_documents(&mut client, &session, "contract_analysis", "dependency_map").await;
    let map = document_text(&mut client, &map[0].resource_id).await;
    assert!(
        map.contains("\n## Edges\n\n- 2 → 1 (cross_reference)\n"),
        "{map}"
    );
    let report = stage_documents(
        &mut client,
        &session,
        "contract_analysis",
        "conflict_report",
    )
    .await;
    let report = document_text(&mut client, &report[0].resource_id).await;
    assert!(
        report.contains("\n## Conflicts\n\n- high contradiction in 1, 2 ("),
        "{report}"
    );

    // The export carries it as data.
    let exported = export(&mut client, &project_id).await;
    let (_, bytes) = exported
        .iter()
        .find(|(name, _)| name.ends_with("/contract_analysis.json"))
        .expect("the analysis in the export");
    let data: serde_json::Value = serde_json::from_slice(bytes).expect("JSON");
    assert_eq!(data["session_id"], session.as_str());
    assert_eq!(data["conflicts"].as_array().map(Vec::len), Some(3));
    assert_eq!(data["edges"][0]["kind"], "cross_reference");

    // And so does the CLI, the same call.
    let mut command = tokio::process::Command::new(&binary);
    let printed = against_gateway(&mut command, &env)
        .args([
            "-o",
            "json",
            "contract",
            "analysis",
            "--project",
            &project_id,
        ])
        .args(["--section", "3"])
        .output()
        .await
        .expect("dialectic runs");
    assert!(printed.status.success(), "{printed:?}");
    let printed: serde_json::Value = serde_json::from_slice(&printed.stdout).expect("JSON");
    assert_eq!(
        printed["conflicts"].as_array().map(Vec::len),
        Some(touching(&whole, "3").len())
    );
    env.teardown().await;
}

/// A two-page agreement whose page 2 holds section 7 in paragraphs of its
/// own, more than a chunk's worth: the second chunk of its text begins on
/// page 2, inside section 7.
fn long_agreement_pdf() -> Vec<u8> {
    let body = |y: f32, text: &str| placed(72.0, y, 11.0, false, text);
    let first: Vec<Placed> = vec![
        placed(72.0, 780.0, 18.0, true, "Master Services Agreement"),
        body(750.0, "Effective Date: 1 March 2021"),
        placed(72.0, 720.0, 11.0, true, "1. Definitions"),
        body(
            704.0,
            "Services means the clinical work described in Exhibit A.",
        ),
    ];
    let mut second = vec![placed(72.0, 780.0, 11.0, true, "7. Budget")];
    for i in 0..16u8 {
        second.push(body(
            750.0 - 28.0 * f32::from(i),
            &format!(
                "The Sponsor pays site fee number {i} within 45 days of each invoice it receives."
            ),
        ));
    }
    fixtures::pdf(&[first, second]).expect("pdf")
}

/// What a citation of the text should say, read from the text the way a
/// person would: the last numbered heading and page anchor above `start`.
fn expected_place(text: &str, start: usize) -> (String, Option<u32>) {
    let before: String = text.chars().take(start + 1).collect();
    let mut section = String::new();
    let mut page = None;
    for line in before.lines() {
        if let Some(n) = line
            .strip_prefix("<!-- page ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        {
            page = n.parse().ok();
        } else if let Some(heading) = line.trim_start_matches('#').strip_prefix(' ')
            && line.starts_with('#')
        {
            let first = heading.split_whitespace().next().unwrap_or_default();
            section = if first.starts_with(|c: char| c.is_ascii_digit()) {
                first.trim_end_matches('.').to_string()
            } else {
                String::new()
            };
        }
    }
    (section, page)
}

async fn ask(client: &mut GatewayClient, project_id: &str, text: &str) -> Vec<Citation> {
    client
        .query(QueryRequest {
            project_id: project_id.into(),
            text: text.into(),
            ..Default::default()
        })
        .await
        .expect("answer")
        .into_inner()
        .citations
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn citations_name_document_section_effective_date_and_page() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let project_id = project(
        &mut client,
        "Analyse the agreement. [[simulate:items:sections:1]]",
    )
    .await;
    let upload = client
        .add_project_document(AddProjectDocumentRequest {
            project_id: project_id.clone(),
            file_name: "Master Agreement.pdf".into(),
            content: long_agreement_pdf(),
            ..Default::default()
        })
        .await
        .expect("pdf upload")
        .into_inner();
    let text = client
        .get_document_content(GetDocumentContentRequest {
            resource_id: upload.resource_id.clone(),
        })
        .await
        .expect("content")
        .into_inner()
        .content;

    // Before any analysis the upload itself is cited.
    let cited = ask(
        &mut client,
        &project_id,
        "What does the budget say about site fees?",
    )
    .await;
    assert_eq!(cited.len(), 2, "{cited:?}");
    for citation in &cited {
        assert_eq!(
            citation.source_kind,
            CitationSourceKind::UploadedDocument as i32
        );
        assert_eq!(citation.document, "Master Agreement.pdf");
        assert_eq!(citation.effective_date, "2021-03-01", "the date it states");
        let (section, page) = expected_place(&text, citation.start as usize);
        assert_eq!(
            (citation.section.as_str(), citation.page),
            (section.as_str(), page),
            "{citation:?}"
        );
    }
    assert_eq!(cited[0].page, Some(1));
    assert_eq!(
        (
            cited[1].page,
            cited[1].section.as_str(),
            cited[1].section_title.as_str()
        ),
        (Some(2), "7", "Budget"),
        "the second chunk begins inside section 7 on page 2: {:?}",
        cited[1]
    );

    // After the analysis, a resolved clause is cited by its section, its
    // date and the page of its heading in the PDF that last changed it.
    run_to_review(&env, &mut client, &project_id).await;
    let cited = ask(&mut client, &project_id, "Which clause is in force?").await;
    assert!(
        cited
            .iter()
            .any(|c| c.source_kind == CitationSourceKind::Contribution as i32),
        "a resolved clause is cited: {cited:?}"
    );
    for citation in &cited {
        if citation.source_kind == CitationSourceKind::RenderedDocument as i32 {
            // A rendered document has no date or page: its name and heading.
            assert_eq!(citation.document, citation.source_name);
            assert_eq!(citation.page, None);
            assert!(!citation.section_title.is_empty(), "{citation:?}");
        }
        if citation.source_kind == CitationSourceKind::Contribution as i32 {
            assert_eq!(
                (
                    citation.document.as_str(),
                    citation.section.as_str(),
                    citation.effective_date.as_str(),
                    citation.page
                ),
                ("Master Agreement.pdf", "1", "2021-03-01", Some(1)),
                "{citation:?}"
            );
        }
    }
    env.teardown().await;
}
