//! Limits per tenant (issue 43): a project holds at most
//! `gateway.max_documents_per_project` uploaded documents and
//! `gateway.max_document_bytes_per_project` bytes of them. Uploads up to each
//! limit pass; the next one is RESOURCE_EXHAUSTED with its ErrorInfo reason,
//! the limit and the project's figure, and leaves no row and no object; a
//! retry of an upload already recorded still answers it; concurrent uploads
//! racing for the last slot let exactly one through.

use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{AddProjectDocumentRequest, CreateProjectRequest};
use tonic::Code;

const MAX_DOCUMENTS: u64 = 3;
const MAX_BYTES: u64 = 100;

fn upload(project: &str, name: &str, text: &str, request: &str) -> AddProjectDocumentRequest {
    AddProjectDocumentRequest {
        project_id: project.into(),
        file_name: name.into(),
        content: text.as_bytes().to_vec(),
        client_request_id: request.into(),
        ..Default::default()
    }
}

/// A gateway (with its indexer) whose projects take `MAX_DOCUMENTS`
/// documents and `MAX_BYTES` bytes.
async fn limited_env() -> (TestEnv, GatewayClient) {
    let mut env = TestEnv::new().await;
    env.settings.gateway.max_documents_per_project = MAX_DOCUMENTS;
    env.settings.gateway.max_document_bytes_per_project = MAX_BYTES;
    env.start(&["indexer", "gateway"]).await;
    env.wait_serving("indexer").await;
    env.wait_serving("gateway").await;
    let client = env.gateway().await;
    (env, client)
}

async fn new_project(client: &mut GatewayClient, name: &str) -> String {
    client
        .create_project(CreateProjectRequest {
            name: name.into(),
            initial_user_prompt: "Notes on a balcony garden.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id
}

/// (rows, objects) a project's uploads left behind.
async fn stored(env: &TestEnv, project: &str) -> (i64, usize) {
    let id = uuid::Uuid::parse_str(project).expect("uuid");
    let rows = env
        .count(
            "SELECT count(*) FROM dialectic_project_resources
              WHERE project_id = $1 AND resource_type = 'project_document'",
            id,
        )
        .await;
    let prefix = format!("projects/{project}/general_resource/");
    let objects = env.blob.list(&prefix).await.expect("list").len();
    (rows, objects)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_upload_past_the_document_limit_is_refused_and_writes_nothing() {
    let (env, mut client) = limited_env().await;
    let project = new_project(&mut client, "Counted").await;
    let mut last = String::new();
    for n in 1..=MAX_DOCUMENTS {
        last = client
            .add_project_document(upload(
                &project,
                &format!("{n}.md"),
                "ten bytes.",
                &n.to_string(),
            ))
            .await
            .unwrap_or_else(|e| panic!("upload {n} of {MAX_DOCUMENTS}: {e:?}"))
            .into_inner()
            .resource_id;
    }
    let refused = client
        .add_project_document(upload(&project, "extra.md", "ten bytes.", "extra"))
        .await
        .expect_err("one past the limit");
    assert_eq!(
        dialectic_e2e::refusal(&refused),
        (
            Code::ResourceExhausted,
            "PROJECT_DOCUMENT_LIMIT_REACHED".into(),
            MAX_DOCUMENTS.to_string(),
            MAX_DOCUMENTS.to_string()
        ),
        "{refused:?}"
    );
    let limit = MAX_DOCUMENTS as i64;
    assert_eq!(
        stored(&env, &project).await,
        (limit, MAX_DOCUMENTS as usize)
    );

    // A retried upload that was recorded is answered, not counted again.
    let retried = client
        .add_project_document(upload(&project, "3.md", "ten bytes.", "3"))
        .await
        .expect("a retry of a recorded upload");
    assert_eq!(retried.into_inner().resource_id, last);
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_upload_past_the_byte_limit_is_refused_and_writes_nothing() {
    let (env, mut client) = limited_env().await;
    let project = new_project(&mut client, "Weighed").await;
    let forty = "x".repeat(40);
    for n in 1..=2 {
        client
            .add_project_document(upload(&project, &format!("{n}.md"), &forty, ""))
            .await
            .unwrap_or_else(|e| panic!("upload {n}: {e:?}"));
    }
    // 80 + 21 would pass 100 bytes.
    let refused = client
        .add_project_document(upload(&project, "over.md", &"y".repeat(21), ""))
        .await
        .expect_err("one byte past the limit");
    assert_eq!(
        dialectic_e2e::refusal(&refused),
        (
            Code::ResourceExhausted,
            "PROJECT_BYTES_LIMIT_REACHED".into(),
            MAX_BYTES.to_string(),
            "80".into()
        ),
        "{refused:?}"
    );
    assert_eq!(stored(&env, &project).await, (2, 2));
    // Exactly up to the limit still fits.
    client
        .add_project_document(upload(&project, "fits.md", &"z".repeat(20), ""))
        .await
        .expect("an upload that fills the project exactly");
    assert_eq!(stored(&env, &project).await, (3, 3));
    env.teardown().await;
}

/// Makes every racer's insert wait inside its transaction (a trigger in this
/// test's database), so all racers are in flight at once: without the
/// project lock each one counts the project below its limit before any
/// other's row commits, and every racer gets through.
async fn slow_racer_inserts(env: &TestEnv) {
    for statement in [
        "CREATE FUNCTION slow_racer() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.file_name LIKE 'racer%' THEN PERFORM pg_sleep(0.5); END IF;
           RETURN NEW;
         END $$",
        "CREATE TRIGGER slow_racer BEFORE INSERT ON dialectic_project_resources
         FOR EACH ROW EXECUTE FUNCTION slow_racer()",
    ] {
        sqlx::query(statement)
            .execute(env.store.pool())
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_uploads_for_the_last_slot_let_one_through() {
    let (env, mut client) = limited_env().await;
    slow_racer_inserts(&env).await;
    let project = new_project(&mut client, "Raced").await;
    for n in 1..MAX_DOCUMENTS {
        client
            .add_project_document(upload(&project, &format!("{n}.md"), "ten bytes.", ""))
            .await
            .unwrap_or_else(|e| panic!("upload {n}: {e:?}"));
    }
    let racing = (0..8).map(|n| {
        let mut client = client.clone();
        let request = upload(&project, &format!("racer{n}.md"), "ten bytes.", "");
        tokio::spawn(async move { client.add_project_document(request).await })
    });
    let mut passed = 0;
    for outcome in futures::future::join_all(racing).await {
        match outcome.expect("racer task") {
            Ok(_) => passed += 1,
            Err(status) => assert_eq!(
                dialectic_e2e::refusal(&status).1,
                "PROJECT_DOCUMENT_LIMIT_REACHED",
                "{status:?}"
            ),
        }
    }
    assert_eq!(passed, 1, "exactly one racer takes the last slot");
    // Racers refused after storing their object removed it again.
    let limit = MAX_DOCUMENTS as i64;
    assert_eq!(
        stored(&env, &project).await,
        (limit, MAX_DOCUMENTS as usize)
    );
    env.teardown().await;
}
