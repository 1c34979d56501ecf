//! Export: a finished stage's project as a zip in the seed 001 folder
//! structure, streamed and as a presigned URL, unpacked by a stock `unzip`;
//! every file equals its S3 object byte for byte. Then paging and deletion.
//! And the size cap (issue 43): an export one byte past
//! `gateway.max_export_bytes` is RESOURCE_EXHAUSTED before any byte is sent,
//! one at the cap or under it streams whole.

use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{
    CreateProjectRequest, DeleteProjectRequest, ExportProjectRequest, GetDocumentContentRequest,
    GetProjectRequest, GetSessionRequest, ListProjectsRequest, ListSessionsRequest,
    ListStageDocumentsRequest,
};
use dialectic_runtime::error_status::StatusExt;
use futures::StreamExt;
use std::collections::BTreeMap;
use std::io::Read;
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
            ..Default::default()
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
            ..Default::default()
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
            ..Default::default()
        })
        .await
        .expect("next page")
        .into_inner();
    assert!(after.sessions.is_empty() && after.next_page_token.is_empty());

    // Delete: gone from every read, and its objects are removed.
    let deleted = client
        .delete_project(DeleteProjectRequest {
            project_id: project_id.clone(),
            client_request_id: String::new(),
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

/// The streamed archive and the size of each message, in order.
async fn export(
    client: &mut GatewayClient,
    project_id: &str,
) -> Result<(Vec<u8>, Vec<usize>), tonic::Status> {
    let mut stream = client
        .export_project(ExportProjectRequest {
            project_id: project_id.into(),
        })
        .await?
        .into_inner();
    let mut zip = Vec::new();
    let mut messages = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        messages.push(chunk.data.len());
        zip.extend_from_slice(&chunk.data);
    }
    Ok((zip, messages))
}

/// Every entry of `archive`, in archive order, read by the `zip` crate
/// (which checks each entry's CRC).
fn entries(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(archive)).expect("a zip archive");
    (0..zip.len())
        .map(|i| {
            let mut file = zip.by_index(i).expect("entry");
            assert_eq!(file.compression(), zip::CompressionMethod::Stored);
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).expect("read (CRC checked)");
            (file.name().expect("a UTF-8 name").to_string(), bytes)
        })
        .collect()
}

/// (code, reason, limit, current) of a refusal.
fn refusal(status: &tonic::Status) -> (Code, String, String, String) {
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("ErrorInfo in {status:?}"));
    let meta = |key: &str| info.metadata.get(key).cloned().unwrap_or_default();
    (status.code(), info.reason, meta("limit"), meta("current"))
}

/// Restarts the gateway with `max_export_bytes`; a client of the new one.
async fn gateway_capped_at(env: &mut TestEnv, max_export_bytes: u64) -> GatewayClient {
    env.stop("gateway").await;
    let mut settings = env.settings.clone();
    settings.gateway.max_export_bytes = max_export_bytes;
    env.start_with("gateway", settings).await;
    env.wait_serving("gateway").await;
    env.gateway().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_export_past_its_cap_is_refused_before_any_byte_and_one_within_streams_whole() {
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Capped export".into(),
            initial_user_prompt: PROMPT.into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();

    // Beside the prompt: nested, UTF-8 named, empty and binary objects, and
    // one of 9 MiB, which comes from S3 in many pieces, goes out in several
    // messages and uploads in two parts (8 MiB each at most).
    let prefix = format!("projects/{}/", project.id);
    let big: Vec<u8> = (0..9 * 1024 * 1024 + 123u32)
        .map(|i| (i.wrapping_mul(7) % 251) as u8)
        .collect();
    let objects: [(&str, Vec<u8>); 4] = [
        (
            "session_0000abcd/iteration_1/1_thesis/raw_responses/m_0_thesis_raw.json",
            b"{\"content\": \"raw\"}\n".to_vec(),
        ),
        (
            "session_0000abcd/iteration_1/1_thesis/\u{dc}berblick \u{4e16}\u{754c}.md",
            "Grüße — ünïcødé\r\n".as_bytes().to_vec(),
        ),
        ("session_0000abcd/empty.txt", Vec::new()),
        ("session_0000abcd/blob.bin", big),
    ];
    for (rest, body) in &objects {
        env.blob
            .put(
                &format!("{prefix}{rest}"),
                body.clone(),
                "application/octet-stream",
            )
            .await
            .expect("put");
    }
    let mut expected = Vec::new();
    let mut keys = env.blob.list(&prefix).await.expect("list");
    keys.sort();
    for key in &keys {
        let rest = key.strip_prefix(&prefix).expect("under the project");
        expected.push((
            format!("{}/{rest}", project.slug),
            env.blob.get(key).await.expect("object"),
        ));
    }
    assert_eq!(
        expected.len(),
        objects.len() + 1,
        "the prompt and the objects"
    );

    // Under the default cap: the archive, and so its size.
    let (archive, _) = export(&mut client, &project.id).await.expect("export");
    let size = archive.len() as u64;
    assert!(
        entries(&archive) == expected,
        "the archive holds exactly the project's objects"
    );

    // One byte under it: refused with the reason, the cap and the size, as
    // the call's status (no message at all), and no upload is made.
    let mut client = gateway_capped_at(&mut env, size - 1).await;
    let refused = client
        .export_project(ExportProjectRequest {
            project_id: project.id.clone(),
        })
        .await
        .expect_err("one byte past the cap: no stream");
    let expected_refusal = (
        Code::ResourceExhausted,
        "EXPORT_TOO_LARGE".to_string(),
        (size - 1).to_string(),
        size.to_string(),
    );
    assert_eq!(refusal(&refused), expected_refusal, "{refused:?}");
    let refused = client
        .get_export_url(ExportProjectRequest {
            project_id: project.id.clone(),
        })
        .await
        .expect_err("the URL too");
    assert_eq!(refusal(&refused), expected_refusal, "{refused:?}");
    let exports = format!("exports/{}/", project.id);
    assert!(
        env.blob.list(&exports).await.expect("list").is_empty(),
        "a refused export stores nothing"
    );

    // At the cap and above it: the same archive, byte for byte.
    for cap in [size, size + 1] {
        let mut client = gateway_capped_at(&mut env, cap).await;
        let (again, messages) = export(&mut client, &project.id)
            .await
            .unwrap_or_else(|e| panic!("export under a cap of {cap}: {e:?}"));
        assert!(again == archive, "cap {cap}: the same bytes");
        assert!(entries(&again) == expected, "cap {cap}: the same entries");
        assert!(
            messages.len() > 1 && messages.iter().all(|n| *n > 0 && *n <= 1024 * 1024),
            "streamed in messages of at most 1 MiB: {messages:?}"
        );
    }

    // The presigned URL at the cap: uploaded in parts, the same archive.
    let mut client = gateway_capped_at(&mut env, size).await;
    let url = client
        .get_export_url(ExportProjectRequest {
            project_id: project.id.clone(),
        })
        .await
        .expect("export url at the cap")
        .into_inner();
    assert_eq!(url.size_bytes, size);
    let fetched = reqwest::get(&url.url)
        .await
        .and_then(|r| r.error_for_status())
        .expect("GET the presigned URL")
        .bytes()
        .await
        .expect("body");
    assert!(
        fetched.as_ref() == archive.as_slice(),
        "the uploaded archive is the streamed one"
    );
    env.teardown().await;
}
