//! Export: a finished stage's project as a zip in the seed 001 folder
//! structure, streamed and as a presigned URL, unpacked by a stock `unzip`;
//! every file equals its S3 object byte for byte. Then paging and deletion.

use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{
    DeleteProjectRequest, ExportProjectRequest, GetDocumentContentRequest, GetProjectRequest,
    GetSessionRequest, ListProjectsRequest, ListSessionsRequest, ListStageDocumentsRequest,
};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::path::Path;
use tonic::Code;

const PROMPT: &str = "# Tool library\n\nA lending library for power tools, run by neighbours.";

fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).expect("read file"));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn export_unpacks_to_the_seed_layout_byte_for_byte_and_delete_removes_it() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let (project_id, session_id) = env.new_session(PROMPT, &["simulated"], false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let mut client = env.gateway().await;
    let project = client
        .get_project(GetProjectRequest {
            project_id: project_id.clone(),
        })
        .await
        .expect("project")
        .into_inner();

    // Streamed.
    let mut stream = client
        .export_project(ExportProjectRequest {
            project_id: project_id.clone(),
        })
        .await
        .expect("export")
        .into_inner();
    let mut zip = Vec::new();
    let mut file_name = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("chunk");
        if file_name.is_none() {
            file_name = Some(chunk.file_name.clone());
        }
        zip.extend_from_slice(&chunk.data);
    }
    assert_eq!(
        file_name.as_deref(),
        Some(format!("{}.zip", project.slug).as_str())
    );

    let dir = std::env::temp_dir().join(format!("dialectic-export-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let zip_path = dir.join("export.zip");
    std::fs::write(&zip_path, &zip).expect("write zip");
    let unpacked = dir.join("out");
    let status = std::process::Command::new("unzip")
        .arg("-q")
        .arg(&zip_path)
        .arg("-d")
        .arg(&unpacked)
        .status()
        .expect("unzip runs (install unzip)");
    assert!(status.success(), "unzip accepts the archive (CRCs checked)");
    let files = files_under(&unpacked);

    // Exactly the project's objects, under `{slug}/`, byte for byte.
    let prefix = format!("projects/{project_id}/");
    let keys = env.blob.list(&prefix).await.expect("list");
    assert!(!keys.is_empty());
    let mut expected = BTreeMap::new();
    for key in &keys {
        let rest = key.strip_prefix(&prefix).expect("prefix");
        expected.insert(
            format!("{}/{rest}", project.slug),
            env.blob.get(key).await.expect("object"),
        );
    }
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "the archive holds exactly the project's objects"
    );
    for (path, body) in &expected {
        assert!(files[path] == *body, "{path} differs from its S3 object");
    }

    // Seed 001 layout: the prompt at the root, a session folder, iteration,
    // numbered stage folder with raw responses and the rendered documents.
    let short = dialectic_core::ids::SessionId::parse(&session_id)
        .expect("session id")
        .short();
    let stage_dir = format!("{}/session_{short}/iteration_1/1_thesis/", project.slug);
    assert!(files.contains_key(&format!("{}/initial-prompt.md", project.slug)));
    assert_eq!(
        files[&format!("{}/initial-prompt.md", project.slug)],
        PROMPT.as_bytes()
    );
    assert!(
        files
            .keys()
            .any(|p| p.starts_with(&format!("{stage_dir}raw_responses/"))
                && p.ends_with("_raw.json")),
        "raw responses: {:?}",
        files.keys().collect::<Vec<_>>()
    );
    let documents = client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.clone(),
            stage_slug: "thesis".into(),
            iteration: 0,
        })
        .await
        .expect("documents")
        .into_inner()
        .documents;
    assert_eq!(documents.len(), 4, "four thesis documents");
    for document in &documents {
        let path = format!(
            "{}/{}",
            project.slug,
            document
                .storage_key
                .strip_prefix(&prefix)
                .expect("under the project")
        );
        assert!(path.starts_with(&stage_dir), "{path}");
        let content = client
            .get_document_content(GetDocumentContentRequest {
                resource_id: document.resource_id.clone(),
            })
            .await
            .expect("content")
            .into_inner()
            .content;
        assert_eq!(
            files[&path],
            content.as_bytes(),
            "{path} is the rendered document"
        );
    }

    // Presigned: the same archive from S3 with a stock HTTP client.
    let url = client
        .get_export_url(ExportProjectRequest {
            project_id: project_id.clone(),
        })
        .await
        .expect("export url")
        .into_inner();
    assert_eq!(url.size_bytes, zip.len() as u64);
    let fetched = dir.join("fetched.zip");
    let status = std::process::Command::new("curl")
        .args(["-sSf", "-o"])
        .arg(&fetched)
        .arg(&url.url)
        .status()
        .expect("curl runs");
    assert!(status.success(), "GET {}", url.url);
    assert!(
        std::fs::read(&fetched).expect("fetched") == zip,
        "same bytes as the stream"
    );
    let _ = std::fs::remove_dir_all(&dir);

    // Lists.
    let sessions = client
        .list_sessions(ListSessionsRequest {
            project_id: project_id.clone(),
            page_size: 1,
            page_token: String::new(),
        })
        .await
        .expect("sessions")
        .into_inner();
    assert_eq!(sessions.sessions.len(), 1);
    assert_eq!(sessions.sessions[0].id, session_id);
    assert!(
        !sessions.next_page_token.is_empty(),
        "a full page has a next token"
    );
    let after = client
        .list_sessions(ListSessionsRequest {
            project_id: project_id.clone(),
            page_size: 1,
            page_token: sessions.next_page_token,
        })
        .await
        .expect("next page")
        .into_inner();
    assert!(after.sessions.is_empty() && after.next_page_token.is_empty());

    // Delete: gone from every read, and its objects are removed.
    let deleted = client
        .delete_project(DeleteProjectRequest {
            project_id: project_id.clone(),
        })
        .await
        .expect("delete")
        .into_inner();
    assert_eq!(deleted.objects_deleted as usize, keys.len());
    assert!(env.blob.list(&prefix).await.expect("list").is_empty());
    let gone = client
        .get_project(GetProjectRequest {
            project_id: project_id.clone(),
        })
        .await
        .expect_err("deleted");
    assert_eq!(gone.code(), Code::NotFound);
    let gone = client
        .get_session(GetSessionRequest {
            session_id: session_id.clone(),
        })
        .await
        .expect_err("its session too");
    assert_eq!(gone.code(), Code::NotFound);
    assert!(
        client
            .list_projects(ListProjectsRequest::default())
            .await
            .expect("list")
            .into_inner()
            .projects
            .is_empty()
    );
    env.teardown().await;
}
