//! Limits per tenant (issue 43): a project holds at most
//! `gateway.max_documents_per_project` uploaded documents and
//! `gateway.max_document_bytes_per_project` bytes of them. Uploads up to each
//! limit pass; the next one is RESOURCE_EXHAUSTED with its ErrorInfo reason,
//! the limit and the project's figure, and leaves no row and no object; a
//! retry of an upload already recorded still answers it; concurrent uploads
//! racing for the last slot let exactly one through.
//!
//! And per user (issue 57): a user holds at most `gateway.max_projects_per_user`
//! projects and `gateway.max_document_bytes_per_user` bytes of uploads across
//! them, deleted projects not counted, with the same refusals and the same
//! race for the last slot.

use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{AddProjectDocumentRequest, CreateProjectRequest, DeleteProjectRequest};
use tonic::Code;

const MAX_DOCUMENTS: u64 = 3;
const MAX_BYTES: u64 = 100;
const MAX_PROJECTS: u64 = 3;
const MAX_USER_BYTES: u64 = 150;

fn upload(project: &str, name: &str, text: &str, request: &str) -> AddProjectDocumentRequest {
    AddProjectDocumentRequest {
        project_id: project.into(),
        file_name: name.into(),
        content: text.as_bytes().to_vec(),
        client_request_id: request.into(),
        ..Default::default()
    }
}

/// A gateway (with its indexer, and the planner that deletes projects)
/// whose projects take `MAX_DOCUMENTS` documents and `MAX_BYTES` bytes, and
/// whose users take `MAX_PROJECTS` projects and `MAX_USER_BYTES` bytes.
async fn limited_env() -> (TestEnv, GatewayClient) {
    let mut env = TestEnv::new().await;
    env.settings.gateway.max_documents_per_project = MAX_DOCUMENTS;
    env.settings.gateway.max_document_bytes_per_project = MAX_BYTES;
    env.settings.gateway.max_projects_per_user = MAX_PROJECTS;
    env.settings.gateway.max_document_bytes_per_user = MAX_USER_BYTES;
    env.start(&["planner", "indexer", "gateway"]).await;
    env.wait_serving("planner").await;
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

/// Makes every insert into `table` whose `column` starts `racer` wait
/// inside its transaction (a trigger in this test's database), so all racers
/// are in flight at once: without the lock each one counts below its limit
/// before any other's row commits, and every racer gets through.
async fn slow_racers(env: &TestEnv, table: &str, column: &str) {
    let function = format!("slow_{table}");
    for statement in [
        format!(
            "CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF NEW.{column} LIKE 'racer%' THEN PERFORM pg_sleep(0.5); END IF;
               RETURN NEW;
             END $$"
        ),
        format!(
            "CREATE TRIGGER {function} BEFORE INSERT ON {table}
             FOR EACH ROW EXECUTE FUNCTION {function}()"
        ),
    ] {
        sqlx::query(&statement)
            .execute(env.store.pool())
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

async fn slow_racer_inserts(env: &TestEnv) {
    slow_racers(env, "dialectic_project_resources", "file_name").await;
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
    let passed = racers_through(racing, "PROJECT_DOCUMENT_LIMIT_REACHED").await;
    assert_eq!(passed, 1, "exactly one racer takes the last slot");
    // Racers refused after storing their object removed it again.
    let limit = MAX_DOCUMENTS as i64;
    assert_eq!(
        stored(&env, &project).await,
        (limit, MAX_DOCUMENTS as usize)
    );
    env.teardown().await;
}

/// A new user's client.
async fn user(env: &TestEnv, name: &str) -> (uuid::Uuid, GatewayClient) {
    let (id, key) = env.new_user(name).await;
    (id, env.gateway_with_key(&key).await)
}

fn project(name: &str, request: &str) -> CreateProjectRequest {
    CreateProjectRequest {
        name: name.into(),
        initial_user_prompt: "Notes on a balcony garden.".into(),
        client_request_id: request.into(),
        ..Default::default()
    }
}

/// The user's projects, deleted ones not counted.
async fn projects_held(env: &TestEnv, user: uuid::Uuid) -> i64 {
    env.count(
        "SELECT count(*) FROM dialectic_projects WHERE user_id = $1 AND deleted_at IS NULL",
        user,
    )
    .await
}

/// Prompt objects in the bucket (`projects/{id}/{prompt}.md`): one per
/// project made and not deleted.
async fn prompt_objects(env: &TestEnv) -> usize {
    let keys = env.blob.list("projects/").await.expect("list");
    keys.iter().filter(|k| k.matches('/').count() == 2).count()
}

async fn delete(client: &mut GatewayClient, project: &str) {
    client
        .delete_project(DeleteProjectRequest {
            project_id: project.into(),
            client_request_id: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("delete {project}: {e:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_project_past_the_users_limit_is_refused_until_one_is_deleted() {
    let (env, _) = limited_env().await;
    let (alice, mut client) = user(&env, "alice").await;
    let mut made = Vec::new();
    for n in 1..=MAX_PROJECTS {
        let created = client
            .create_project(project(&format!("P{n}"), &format!("p{n}")))
            .await
            .unwrap_or_else(|e| panic!("project {n} of {MAX_PROJECTS}: {e:?}"));
        made.push(created.into_inner().id);
    }
    let refused = client
        .create_project(project("Extra", "extra"))
        .await
        .expect_err("one past the limit");
    assert_eq!(
        dialectic_e2e::refusal(&refused),
        (
            Code::ResourceExhausted,
            "USER_PROJECT_LIMIT_REACHED".into(),
            MAX_PROJECTS.to_string(),
            MAX_PROJECTS.to_string()
        ),
        "{refused:?}"
    );
    let limit = MAX_PROJECTS as i64;
    assert_eq!(projects_held(&env, alice).await, limit);
    assert_eq!(prompt_objects(&env).await, MAX_PROJECTS as usize);

    // A retry of a creation that was recorded is answered, not counted.
    let retried = client
        .create_project(project("P3", "p3"))
        .await
        .expect("a retry of a recorded creation at the limit");
    assert_eq!(retried.into_inner().id, made[2]);

    // Another user's projects are their own.
    let (bob, mut theirs) = user(&env, "bob").await;
    theirs
        .create_project(project("Bob's", ""))
        .await
        .expect("another user is not at alice's limit");
    assert_eq!(projects_held(&env, bob).await, 1);

    // A deleted project frees its slot, and only that one.
    delete(&mut client, &made[0]).await;
    client
        .create_project(project("Again", "again"))
        .await
        .expect("the freed slot");
    let refused = client
        .create_project(project("Extra", "extra-2"))
        .await
        .expect_err("full again");
    assert_eq!(
        dialectic_e2e::refusal(&refused).3,
        MAX_PROJECTS.to_string(),
        "{refused:?}"
    );
    assert_eq!(projects_held(&env, alice).await, limit);
    env.teardown().await;
}

/// Projects named `racer…` race for the user's last slot; the user's lock
/// lets one through.
async fn slow_racer_projects(env: &TestEnv) {
    slow_racers(env, "dialectic_projects", "project_name").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creations_for_the_last_project_slot_let_one_through() {
    let (env, _) = limited_env().await;
    slow_racer_projects(&env).await;
    let (alice, mut client) = user(&env, "alice").await;
    for n in 1..MAX_PROJECTS {
        client
            .create_project(project(&format!("P{n}"), ""))
            .await
            .unwrap_or_else(|e| panic!("project {n}: {e:?}"));
    }
    let racing = (0..8).map(|n| {
        let mut client = client.clone();
        let request = project(&format!("racer{n}"), "");
        tokio::spawn(async move { client.create_project(request).await })
    });
    let passed = racers_through(racing, "USER_PROJECT_LIMIT_REACHED").await;
    assert_eq!(passed, 1, "exactly one racer takes the last slot");
    assert_eq!(projects_held(&env, alice).await, MAX_PROJECTS as i64);
    // Racers refused after writing their prompt object removed it again.
    assert_eq!(prompt_objects(&env).await, MAX_PROJECTS as usize);
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_upload_past_the_users_byte_limit_is_refused_across_projects() {
    let (env, _) = limited_env().await;
    let (_, mut client) = user(&env, "alice").await;
    let first = new_project(&mut client, "First").await;
    let second = new_project(&mut client, "Second").await;
    let forty = "x".repeat(40);
    for (n, project) in [&first, &first, &second].into_iter().enumerate() {
        client
            .add_project_document(upload(project, &format!("{n}.md"), &forty, ""))
            .await
            .unwrap_or_else(|e| panic!("upload {n}: {e:?}"));
    }
    // The second project would hold 71 of its 100 bytes, but the user's
    // 120 + 31 would pass 150.
    let refused = client
        .add_project_document(upload(&second, "over.md", &"y".repeat(31), ""))
        .await
        .expect_err("one byte past the user's limit");
    assert_eq!(
        dialectic_e2e::refusal(&refused),
        (
            Code::ResourceExhausted,
            "USER_BYTES_LIMIT_REACHED".into(),
            MAX_USER_BYTES.to_string(),
            "120".into()
        ),
        "{refused:?}"
    );
    assert_eq!(stored(&env, &second).await, (1, 1));
    assert_eq!(stored(&env, &first).await, (2, 2));
    client
        .add_project_document(upload(&second, "fits.md", &"z".repeat(30), ""))
        .await
        .expect("an upload that fills the user exactly");
    assert_eq!(stored(&env, &second).await, (2, 2));

    // A deleted project's bytes no longer count: 70 + 40 fits in 150.
    delete(&mut client, &first).await;
    let third = new_project(&mut client, "Third").await;
    client
        .add_project_document(upload(&third, "after.md", &forty, ""))
        .await
        .expect("the deleted project's bytes are free again");
    assert_eq!(stored(&env, &third).await, (1, 1));
    env.teardown().await;
}

/// How many racers got through; each refused one must carry `reason`.
async fn racers_through<T>(
    racing: impl Iterator<Item = tokio::task::JoinHandle<Result<T, tonic::Status>>>,
    reason: &str,
) -> usize {
    let mut passed = 0;
    for outcome in futures::future::join_all(racing).await {
        match outcome.expect("racer task") {
            Ok(_) => passed += 1,
            Err(status) => assert_eq!(dialectic_e2e::refusal(&status).1, reason, "{status:?}"),
        }
    }
    passed
}
