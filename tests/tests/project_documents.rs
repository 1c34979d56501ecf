//! Project documents: AddProjectDocument stores a text file under the
//! project, indexes it and records it once per client request id; bad files
//! and other users' projects are refused with nothing written; a step whose
//! input rule takes `project_document` reads every upload, in upload order,
//! and a `per_source_document` step over them runs one job per upload.

use dialectic_core::digest::sha256_hex;
use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, CreateProjectRequest, ListProjectDocumentsRequest,
    StartSessionRequest,
};
use dialectic_store::pipelines;

const FIRST: (&str, &str) = ("zoning brief.md", "# Zoning\n\nThe balcony faces north.");
const SECOND: (&str, &str) = ("appendix.txt", "Water the basil twice a week.");
const SEED: &str = "Notes on a north-facing balcony garden.";

/// A step that digests each uploaded document in a job of its own.
const DIGEST_STEP: &str = r#"[[stages.steps]]
key = "draft_digest"
name = "Digest one uploaded document"
job_type = "EXECUTE"
prompt_type = "Turn"
prompt = 'Digest the project document above. Reply with {"content": "<markdown>"}.'
output_type = "digest"
granularity = "per_source_document"
after = ["draft_plan"]
inputs = [{ type = "project_document", section_header = "--- Project document ---" }]
outputs = [{ document_key = "digest", file_type = "markdown", required_keys = ["content"] }]

[[stages.document_templates]]"#;

/// notes.toml whose writing step also reads the project's documents, with a
/// digest step fanned out per uploaded document.
fn briefed_notes() -> PipelineFile {
    let text = include_str!("../pipelines/notes.toml")
        .replace(
            r#"    { type = "header_context", stage_slug = "draft", document_key = "header_context", section_header = "--- Header context ---" },"#,
            r#"    { type = "header_context", stage_slug = "draft", document_key = "header_context", section_header = "--- Header context ---" },
    { type = "project_document", section_header = "--- Project document ---" },"#,
        )
        .replacen("[[stages.document_templates]]", DIGEST_STEP, 1);
    assert!(
        text.contains("draft_digest") && text.contains("{ type = \"project_document\", section")
    );
    PipelineFile::parse(&text).expect("parses")
}

fn upload(project: &str, (name, text): (&str, &str), request: &str) -> AddProjectDocumentRequest {
    AddProjectDocumentRequest {
        project_id: project.into(),
        file_name: name.into(),
        content: text.as_bytes().to_vec(),
        client_request_id: request.into(),
        ..Default::default()
    }
}

async fn uploaded(client: &mut GatewayClient, project: &str) -> Vec<(u32, String)> {
    client
        .list_project_documents(ListProjectDocumentsRequest {
            project_id: project.into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .documents
        .into_iter()
        .map(|d| (d.position, d.file_name))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uploaded_documents_are_stored_indexed_and_read_in_upload_order() {
    let mut env = TestEnv::new().await;
    pipelines::install(env.store.pool(), &briefed_notes())
        .await
        .expect("install");
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Balcony".into(),
            initial_user_prompt: SEED.into(),
            pipeline: "notes".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();

    let first = client
        .add_project_document(upload(&project.id, FIRST, "upload-1"))
        .await
        .expect("first upload")
        .into_inner();
    assert_eq!((first.position, first.file_name.as_str()), (1, FIRST.0));
    assert_eq!(first.content_hash, sha256_hex(FIRST.1.as_bytes()));
    assert!(first.chunks >= 1, "indexed: {first:?}");
    let retried = client
        .add_project_document(upload(&project.id, FIRST, "upload-1"))
        .await
        .expect("retried upload")
        .into_inner();
    assert_eq!(retried.resource_id, first.resource_id);
    let second = client
        .add_project_document(upload(&project.id, SECOND, ""))
        .await
        .expect("second upload")
        .into_inner();
    assert_eq!(second.position, 2);
    let stored = env
        .blob
        .get_string(&first.storage_key)
        .await
        .expect("stored object");
    assert_eq!(stored, FIRST.1);
    let prefix = format!("projects/{}/general_resource/", project.id);
    assert_eq!(
        env.blob.list(&prefix).await.expect("list").len(),
        2,
        "one object per upload"
    );

    refused_uploads_write_nothing(&mut env, &mut client, &project.id, &prefix).await;
    assert_eq!(
        uploaded(&mut client, &project.id).await,
        [(1, FIRST.0.to_string()), (2, SECOND.0.to_string())]
    );

    let session = client
        .start_session(StartSessionRequest {
            project_id: project.id.clone(),
            models: vec!["simulated".into()],
            auto_advance: false,
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner();
    env.wait_for_session(&session.id, "pending_review", true)
        .await;
    let notes: Vec<_> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.output_type == "note")
        .collect();
    assert_eq!(notes.len(), 1, "one note written");
    let read: Vec<(&str, &str)> = notes[0]
        .inputs
        .iter()
        .filter(|i| i.kind == "project_document")
        .map(|i| (i.document_key.as_str(), i.digest.as_str()))
        .collect();
    let digest = |text: &str| dialectic_core::prompt::content_digest(text);
    assert_eq!(
        read,
        [
            (FIRST.0, digest(FIRST.1).as_str()),
            (SECOND.0, digest(SECOND.1).as_str())
        ],
        "both uploads, in upload order, whole"
    );
    let prompt: String = notes[0]
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert!(prompt.contains("The balcony faces north.") && prompt.contains("twice a week"));

    // One digest job per upload, each reading only its own document.
    let mut digested: Vec<Vec<String>> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.output_type == "digest")
        .map(|r| r.inputs.into_iter().map(|i| i.document_key).collect())
        .collect();
    digested.sort();
    assert_eq!(
        digested,
        [vec![SECOND.0.to_string()], vec![FIRST.0.to_string()]],
        "each upload digested alone"
    );
    let digests: Vec<String> = sqlx::query_scalar(
        "SELECT storage_path || '/' || file_name FROM dialectic_project_resources
          WHERE session_id = $1 AND document_key = 'digest' AND resource_type = 'rendered_document'",
    )
    .bind(uuid::Uuid::parse_str(&session.id).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("digests");
    let distinct: std::collections::BTreeSet<&String> = digests.iter().collect();
    assert_eq!((digests.len(), distinct.len()), (2, 2), "{digests:?}");
    env.teardown().await;
}

/// A non-text file, an oversized one, one that is not UTF-8, an empty name,
/// another user's project and an unknown one: each refused, nothing stored.
async fn refused_uploads_write_nothing(
    env: &mut TestEnv,
    client: &mut GatewayClient,
    project: &str,
    prefix: &str,
) {
    let limit = env.settings.gateway.max_prompt_bytes;
    let oversized = "a".repeat(limit + 1);
    let bad = [
        ("slides.pdf", b"%PDF-1.7".to_vec()),
        ("big.md", oversized.into_bytes()),
        ("latin1.txt", b"caf\xe9".to_vec()),
        ("", b"no name".to_vec()),
        ("blank.md", b"  \n".to_vec()),
    ];
    for (name, content) in bad {
        let refused = client
            .add_project_document(AddProjectDocumentRequest {
                project_id: project.into(),
                file_name: name.into(),
                content,
                client_request_id: String::new(),
                ..Default::default()
            })
            .await
            .expect_err("refused");
        assert_eq!(
            refused.code(),
            tonic::Code::InvalidArgument,
            "{name}: {refused:?}"
        );
    }
    let (_, key) = env.new_user("someone").await;
    let mut someone = env.gateway_with_key(&key).await;
    let theirs = someone
        .add_project_document(upload(project, SECOND, ""))
        .await
        .expect_err("not their project");
    assert_eq!(theirs.code(), tonic::Code::NotFound, "{theirs:?}");
    let listed = someone
        .list_project_documents(ListProjectDocumentsRequest {
            project_id: project.into(),
            ..Default::default()
        })
        .await
        .expect_err("not their project");
    assert_eq!(listed.code(), tonic::Code::NotFound, "{listed:?}");
    let unknown = client
        .add_project_document(upload(&uuid::Uuid::now_v7().to_string(), SECOND, ""))
        .await
        .expect_err("no such project");
    assert_eq!(unknown.code(), tonic::Code::NotFound, "{unknown:?}");
    assert_eq!(env.blob.list(prefix).await.expect("list").len(), 2);
}
