//! A sequential chain over ordered inputs (`sequential`): one job per
//! uploaded document, in upload order, each waiting for the one before it and
//! reading the notes the earlier ones wrote.

use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{AddProjectDocumentRequest, CreateProjectRequest, StartSessionRequest};
use dialectic_store::pipelines;

const DOCUMENTS: [(&str, &str); 3] = [
    ("base.md", "Base agreement: rent is due on the first."),
    ("amendment-1.md", "Amendment 1: rent is due on the fifth."),
    ("amendment-2.md", "Amendment 2: section 4.2 is deleted."),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_document_is_tracked_after_the_ones_before_it_and_reads_their_notes() {
    let mut env = TestEnv::new().await;
    let file = PipelineFile::parse(include_str!("../pipelines/chain.toml")).expect("parses");
    pipelines::install(env.store.pool(), &file)
        .await
        .expect("install");
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: "The lease and its amendments.".into(),
            pipeline: "chain".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    for (name, text) in DOCUMENTS {
        client
            .add_project_document(AddProjectDocumentRequest {
                project_id: project.id.clone(),
                file_name: name.into(),
                content: text.as_bytes().to_vec(),
                client_request_id: String::new(),
            })
            .await
            .expect("upload");
    }
    let session = client
        .start_session(StartSessionRequest {
            project_id: project.id.clone(),
            models: vec!["simulated".into()],
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner();
    env.wait_for_session(&session.id, "iteration_complete_pending_review", true)
        .await;

    // In order: job k reads document k and the k - 1 notes written before it.
    let digest = dialectic_core::prompt::content_digest;
    let seen: Vec<(String, usize)> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.output_type == "amendment_notes")
        .map(|r| {
            let document = r
                .inputs
                .iter()
                .filter(|i| i.kind == "project_document")
                .map(|i| i.digest.clone())
                .collect::<Vec<_>>()
                .join(",");
            let earlier = r
                .inputs
                .iter()
                .filter(|i| i.document_key == "amendment_notes")
                .count();
            (document, earlier)
        })
        .collect();
    let expected: Vec<(String, usize)> = DOCUMENTS
        .iter()
        .enumerate()
        .map(|(k, (_, text))| (digest(text), k))
        .collect();
    assert_eq!(seen, expected);
    env.teardown().await;
}
