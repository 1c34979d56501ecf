//! A sequential chain over ordered inputs (`sequential`): one job per
//! uploaded document, in upload order, each waiting for the one before it and
//! reading the notes the earlier ones wrote.

use dialectic_core::pipeline::PipelineFile;
use dialectic_core::prompt::Role;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{AddProjectDocumentRequest, CreateProjectRequest, StartSessionRequest};
use dialectic_store::pipelines;

const DOCUMENTS: [(&str, &str); 3] = [
    ("base.md", "Base agreement: rent is due on the first."),
    ("amendment-1.md", "Amendment 1: rent is due on the fifth."),
    ("amendment-2.md", "Amendment 2: section 4.2 is deleted."),
];

/// What tracking the three documents did.
struct Tracked {
    /// The request of each job's first turn, in order: (document digest,
    /// earlier notes read).
    seen: Vec<(String, usize)>,
    /// The chunks of each note, in order.
    chunks: Vec<i64>,
    /// The attempts of every job that wrote a note (first turns and continuations).
    attempts: Vec<i32>,
}

/// Tracks the three documents with the chain pipeline.
async fn track(cut_off_notes: bool) -> Tracked {
    let mut env = TestEnv::new().await;
    let file = PipelineFile::parse(include_str!("../pipelines/chain.toml")).expect("parses");
    pipelines::install(env.store.pool(), &file)
        .await
        .expect("install");
    if cut_off_notes {
        // A few tokens per turn: every note is cut off and continued.
        dialectic_store::recipe_edit::override_step(
            env.store.pool(),
            "track",
            "track_amendment",
            &serde_json::json!({ "max_tokens": 12 }),
            &serde_json::json!({}),
        )
        .await
        .expect("override");
    }
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
                ..Default::default()
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
    let session_id = uuid::Uuid::parse_str(&session.id).expect("uuid");
    // The transcript is the test binary's: both tests' calls are in it.
    let jobs: Vec<String> =
        sqlx::query_scalar("SELECT id::text FROM dialectic_generation_jobs WHERE session_id = $1")
            .bind(session_id)
            .fetch_all(env.store.pool())
            .await
            .expect("jobs");
    let seen = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.job_id.as_ref().is_some_and(|id| jobs.contains(id)))
        .filter(|r| r.output_type == "amendment_notes")
        .filter(|r| !r.messages.iter().any(|m| m.role == Role::Assistant))
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
    let chunks: Vec<i64> = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_contributions
          WHERE session_id = $1 AND document_key = 'amendment_notes'
          GROUP BY document_relationships->>'track'
          ORDER BY min(created_at)",
    )
    .bind(session_id)
    .fetch_all(env.store.pool())
    .await
    .expect("chunks");
    let attempts: Vec<i32> = sqlx::query_scalar(
        "SELECT attempt_count FROM dialectic_generation_jobs
          WHERE session_id = $1 AND step_key = 'track_amendment' ORDER BY created_at",
    )
    .bind(session_id)
    .fetch_all(env.store.pool())
    .await
    .expect("attempts");
    env.teardown().await;
    Tracked {
        seen,
        chunks,
        attempts,
    }
}

/// In order: job k reads document k and the k - 1 notes written before it.
fn in_upload_order() -> Vec<(String, usize)> {
    DOCUMENTS
        .iter()
        .enumerate()
        .map(|(k, (_, text))| (dialectic_core::prompt::content_digest(text), k))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_document_is_tracked_after_the_ones_before_it_and_reads_their_notes() {
    let tracked = track(false).await;
    assert_eq!(tracked.seen, in_upload_order());
    assert_eq!(tracked.chunks, vec![1, 1, 1], "each note in one turn");
    assert_eq!(tracked.attempts, vec![1, 1, 1]);
}

/// A note cut off by the token limit is whole before the next job reads it:
/// the next document waits for the note's last turn, not its first, and a
/// continuation does not read the note it is continuing. Every job succeeds
/// at its first attempt: none met a half-written note.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_note_is_finished_before_the_next_document_reads_it() {
    let tracked = track(true).await;
    assert_eq!(tracked.seen, in_upload_order());
    assert!(
        tracked.chunks.len() == 3 && tracked.chunks.iter().all(|n| *n > 1),
        "every note continued at least once: {:?}",
        tracked.chunks
    );
    let turns: i64 = tracked.chunks.iter().sum();
    assert_eq!(tracked.attempts, vec![1; turns as usize]);
}
