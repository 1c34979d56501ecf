//! PDF and DOCX uploads are converted by the indexer, not in the gateway's
//! request path (issue 54, item 1): a 200-page PDF's progress is readable
//! with GetUploadProgress under the upload's client_request_id while the
//! upload runs (the gateway answers that call meanwhile) and after it ends;
//! a refused file's progress says why; with the indexer gone, a PDF is not
//! converted by the gateway instead.

use dialectic_convert::fixtures::{self, placed};
use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, CreateProjectRequest, GetUploadProgressRequest,
    ListProjectDocumentsRequest, UploadProgress, UploadStage,
};
use dialectic_runtime::error_status;
use std::time::Duration;
use tonic::Code;

const PAGES: u32 = 200;
const PASSWORD: &[u8] =
    include_bytes!("../../crates/convert/tests/fixtures/pypdf-libreoffice-writer-password.pdf");

fn long_pdf() -> Vec<u8> {
    let pages: Vec<_> = (1..=PAGES)
        .map(|n| {
            vec![
                placed(72.0, 720.0, 16.0, true, &format!("{n}. Clause {n}")),
                placed(
                    72.0,
                    690.0,
                    11.0,
                    false,
                    &format!("The terms of clause {n}."),
                ),
            ]
        })
        .collect();
    fixtures::pdf(&pages).expect("a 200-page pdf")
}

fn upload(project: &str, name: &str, content: Vec<u8>, id: &str) -> AddProjectDocumentRequest {
    AddProjectDocumentRequest {
        project_id: project.into(),
        file_name: name.into(),
        content,
        client_request_id: id.into(),
        ..Default::default()
    }
}

async fn progress(client: &mut GatewayClient, project: &str, id: &str) -> Option<UploadProgress> {
    client
        .get_upload_progress(GetUploadProgressRequest {
            project_id: project.into(),
            client_request_id: id.into(),
        })
        .await
        .ok()
        .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_indexer_converts_uploads_and_their_progress_is_readable() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "A long agreement".into(),
            initial_user_prompt: "Analyse the agreement.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id;

    // Read while the upload runs: every answer is a stage of this upload,
    // pages never go back, and the gateway answers throughout.
    let mut uploader = client.clone();
    let request = upload(&project, "Long Agreement.pdf", long_pdf(), "long-pdf");
    let running = tokio::spawn(async move { uploader.add_project_document(request).await });
    let mut seen = Vec::new();
    while !running.is_finished() {
        if let Some(p) = progress(&mut client, &project, "long-pdf").await {
            seen.push(p);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let document = running
        .await
        .expect("the upload task")
        .expect("the upload")
        .into_inner();
    eprintln!("{} progress notes read while uploading", seen.len());
    let mut last_done = 0;
    for p in &seen {
        assert_eq!(p.file_name, "Long Agreement.pdf");
        assert_eq!(p.pages_total, PAGES, "{p:?}");
        assert!(p.pages_done >= last_done, "pages went back: {seen:?}");
        last_done = p.pages_done;
    }
    let done = progress(&mut client, &project, "long-pdf")
        .await
        .expect("the progress outlives the upload");
    assert_eq!(done.stage(), UploadStage::Stored);
    assert_eq!((done.pages_done, done.pages_total), (PAGES, PAGES));
    assert!(document.storage_key.ends_with(".md"), "{document:?}");

    // A refused file stores nothing; its progress says why.
    let refused = client
        .add_project_document(upload(
            &project,
            "Locked.pdf",
            PASSWORD.to_vec(),
            "locked-pdf",
        ))
        .await
        .expect_err("an encrypted PDF is refused");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(
        refused
            .message()
            .starts_with("file Locked.pdf is refused: ")
            && refused.message().contains("password"),
        "{}",
        refused.message()
    );
    let failed = progress(&mut client, &project, "locked-pdf")
        .await
        .expect("a refusal's progress");
    assert_eq!(failed.stage(), UploadStage::Failed);
    assert!(failed.failure.contains("Locked.pdf"), "{failed:?}");

    // The gateway converts nothing itself: without the indexer a PDF is
    // UNAVAILABLE, named as a conversion, and nothing is stored.
    env.stop("indexer").await;
    let unconverted = client
        .add_project_document(upload(&project, "Again.pdf", long_pdf(), "again"))
        .await
        .expect_err("no indexer, no conversion");
    assert_eq!(unconverted.code(), Code::Unavailable, "{unconverted:?}");
    assert_eq!(
        error_status::reason(&unconverted).as_deref(),
        Some("INDEXER_UNAVAILABLE")
    );
    assert!(
        unconverted
            .message()
            .contains("the indexer could not convert Again.pdf"),
        "{}",
        unconverted.message()
    );
    let listed = client
        .list_project_documents(ListProjectDocumentsRequest {
            project_id: project.clone(),
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner()
        .documents;
    let names: Vec<&str> = listed.iter().map(|d| d.file_name.as_str()).collect();
    assert_eq!(names, ["Long Agreement.pdf"]);

    // An id no upload was sent with is NOT_FOUND.
    let unknown = client
        .get_upload_progress(GetUploadProgressRequest {
            project_id: project,
            client_request_id: "never-sent".into(),
        })
        .await
        .expect_err("no such upload");
    assert_eq!(unknown.code(), Code::NotFound);
    env.teardown().await;
}
