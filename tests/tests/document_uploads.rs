//! PDF and DOCX uploads: AddProjectDocument converts each once to markdown
//! that keeps page anchors, numbered headings and tables; steps read (and
//! the indexer indexes) that markdown; the original bytes are kept beside it
//! and exported with it. A file that cannot be read is refused naming the
//! file and the reason, and stores nothing.

use dialectic_convert::fixtures;
use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, CreateProjectRequest, ExportProjectRequest,
    ListProjectDocumentsRequest,
};
use std::io::{Cursor, Read, Write};
use tokio_stream::StreamExt;

const IMAGES_ONLY: &[u8] =
    include_bytes!("../../crates/convert/tests/fixtures/pypdf-imagemagick-images.pdf");
const PASSWORD: &[u8] =
    include_bytes!("../../crates/convert/tests/fixtures/pypdf-libreoffice-writer-password.pdf");
const KNOWN_STYLES: &[u8] =
    include_bytes!("../../crates/convert/tests/fixtures/python-docx-par-known-styles.docx");

const BUDGET_TABLE: &str = "| Item | Amount (USD) |\n| --- | --- |\n| Personnel | $120,000 |";

fn upload(project: &str, name: &str, content: Vec<u8>) -> AddProjectDocumentRequest {
    AddProjectDocumentRequest {
        project_id: project.into(),
        file_name: name.into(),
        content,
        client_request_id: String::new(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pdf_and_docx_uploads_are_converted_kept_and_exported() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Contract stack".into(),
            initial_user_prompt: "Analyse the agreement and its amendment.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();

    let pdf = fixtures::base_agreement_pdf().expect("pdf fixture");
    let base = client
        .add_project_document(upload(&project.id, "Base Agreement.pdf", pdf.clone()))
        .await
        .expect("pdf upload")
        .into_inner();
    assert_eq!(
        (base.position, base.file_name.as_str()),
        (1, "Base Agreement.pdf")
    );
    assert!(base.storage_key.ends_with(".md"), "{base:?}");
    let text = env
        .blob
        .get_string(&base.storage_key)
        .await
        .expect("markdown");
    assert!(
        text.starts_with("<!-- page 1 -->\n\n# Master Services Agreement"),
        "{text}"
    );
    assert!(text.contains("<!-- page 2 -->\n\n## 7. Budget"), "{text}");
    assert!(text.contains(BUDGET_TABLE), "{text}");
    assert_eq!(
        base.content_hash,
        dialectic_core::digest::sha256_hex(text.as_bytes())
    );
    assert!(base.chunks >= 1, "indexed: {base:?}");
    let original_key = base.storage_key.replace(".md", ".pdf");
    assert_eq!(env.blob.get(&original_key).await.expect("original"), pdf);

    let docx = fixtures::amendment_docx().expect("docx fixture");
    let amendment = client
        .add_project_document(upload(&project.id, "Amendment 1.docx", docx))
        .await
        .expect("docx upload")
        .into_inner();
    let text = env
        .blob
        .get_string(&amendment.storage_key)
        .await
        .expect("markdown");
    assert!(
        text.contains("# 2. Budget\n\n## 2.1 Revised Exhibit B\n\n| Item |"),
        "{text}"
    );
    let theirs = client
        .add_project_document(upload(
            &project.id,
            "known-styles.DOCX",
            KNOWN_STYLES.to_vec(),
        ))
        .await
        .expect("a DOCX Word wrote")
        .into_inner();
    let text = env
        .blob
        .get_string(&theirs.storage_key)
        .await
        .expect("markdown");
    assert!(text.contains("# Heading 1\n"), "{text}");

    let prefix = format!("projects/{}/general_resource/", project.id);
    assert_eq!(
        env.blob.list(&prefix).await.expect("list").len(),
        6,
        "text and original each"
    );
    refused_files_store_nothing(&env, &mut client, &project.id, &prefix).await;

    let exported = export(&mut client, &project.id).await;
    let original = exported
        .iter()
        .find(|(name, _)| name.ends_with(".pdf"))
        .unwrap_or_else(|| panic!("original in the export: {:?}", names(&exported)));
    assert_eq!(original.1, pdf);
    let converted = original.0.replace(".pdf", ".md");
    assert!(
        exported.iter().any(|(name, _)| *name == converted),
        "the markdown beside it: {:?}",
        names(&exported)
    );
    env.teardown().await;
}

/// The conversion limits are the operator's (`gateway.max_upload_pages`,
/// `gateway.max_upload_unpacked_bytes`): files the defaults take are refused
/// past tighter ones, naming the file and the limit, with nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conversion_limits_come_from_the_configuration() {
    let mut env = TestEnv::new().await;
    env.start_all_with(|s| {
        s.gateway.max_upload_pages = 1;
        s.gateway.max_upload_unpacked_bytes = 4096;
    })
    .await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Limits".into(),
            initial_user_prompt: "Analyse the agreement.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id;
    let pdf = fixtures::base_agreement_pdf().expect("pdf fixture");
    let cases: [(&str, Vec<u8>, &str); 2] = [
        ("two pages.pdf", pdf, "it has 2 pages; the limit is 1"),
        (
            "styles.docx",
            KNOWN_STYLES.to_vec(),
            "expands past the limit",
        ),
    ];
    for (name, content, reason) in cases {
        let refused = client
            .add_project_document(upload(&project, name, content))
            .await
            .expect_err("over the configured limit");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        assert!(
            refused.message().contains(name) && refused.message().contains(reason),
            "{name}: {}",
            refused.message()
        );
    }
    let listed = client
        .list_project_documents(ListProjectDocumentsRequest {
            project_id: project.clone(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .documents;
    assert!(listed.is_empty(), "nothing stored: {listed:?}");
    env.teardown().await;
}

/// Each hostile or unreadable file: INVALID_ARGUMENT naming the file and
/// the reason, in well under 2 s, with no object and no row left.
async fn refused_files_store_nothing(
    env: &TestEnv,
    client: &mut GatewayClient,
    project: &str,
    prefix: &str,
) {
    let pdf = fixtures::base_agreement_pdf().expect("pdf fixture");
    let cases: [(&str, Vec<u8>, &str); 6] = [
        ("scan.pdf", IMAGES_ONLY.to_vec(), "no text layer"),
        ("locked.pdf", PASSWORD.to_vec(), "password-protected"),
        (
            "cut.pdf",
            pdf[..pdf.len() / 2].to_vec(),
            "truncated or damaged",
        ),
        ("bomb.docx", zip_bomb(), "expands past the limit"),
        ("renamed.docx", pdf.clone(), "not a DOCX file"),
        ("sheet.xlsx", b"PK\x03\x04".to_vec(), ".xlsx is not taken"),
    ];
    for (name, content, reason) in cases {
        let started = std::time::Instant::now();
        let refused = client
            .add_project_document(upload(project, name, content))
            .await
            .expect_err("refused");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{name} took {:?}",
            started.elapsed()
        );
        assert_eq!(
            refused.code(),
            tonic::Code::InvalidArgument,
            "{name}: {refused:?}"
        );
        assert!(
            refused.message().contains(name) && refused.message().contains(reason),
            "{name}: {}",
            refused.message()
        );
    }
    assert_eq!(env.blob.list(prefix).await.expect("list").len(), 6);
    let listed = client
        .list_project_documents(ListProjectDocumentsRequest {
            project_id: project.into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .documents;
    assert_eq!(listed.len(), 3, "no row for a refused file");
}

/// A DOCX-looking zip whose document part inflates to 72 MiB of one letter
/// (past the gateway's 64 MiB) from well under 1 MiB.
fn zip_bomb() -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file(
        "word/document.xml",
        zip::write::SimpleFileOptions::default().compression_level(Some(1)),
    )
    .expect("entry");
    let chunk = vec![b'a'; 1024 * 1024];
    for _ in 0..72 {
        zip.write_all(&chunk).expect("write");
    }
    zip.finish().expect("zip").into_inner()
}

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

fn names(entries: &[(String, Vec<u8>)]) -> Vec<&str> {
    entries.iter().map(|(name, _)| name.as_str()).collect()
}
