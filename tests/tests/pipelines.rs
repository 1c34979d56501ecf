//! Pipelines as data: the shipped file is what a migrated database runs, an
//! installed file runs end to end, a new version runs new sessions while
//! started ones keep theirs, and the admin RPCs install and list them.

use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{
    CreateProjectRequest, GetDocumentContentRequest, GetSessionRequest, InstallPipelineRequest,
    ListPipelinesRequest, ListRecipesRequest, ListStageDocumentsRequest,
    SubmitStageResponsesRequest,
};
use dialectic_store::{StoreError, pipelines, recipe_edit};
use sqlx::types::JsonValue;

const NOTES: &str = include_str!("../pipelines/notes.toml");
const NOTES_REVIEW_V1: &str = "> Review of a draft note";
const NOTES_REVIEW_V2: &str = "> Second review template";

fn notes() -> PipelineFile {
    PipelineFile::parse(NOTES).expect("notes.toml parses")
}

const REVIEW_PROMPT_V1: &str = "Review the notes above";
const REVIEW_PROMPT_V2: &str = "Critique the notes above";

/// notes.toml with the review step's prompt and the review template changed:
/// a second version (the simulated model quotes the prompt in its reply).
fn notes_v2() -> PipelineFile {
    let text = NOTES
        .replace(NOTES_REVIEW_V1, NOTES_REVIEW_V2)
        .replace(REVIEW_PROMPT_V1, REVIEW_PROMPT_V2);
    PipelineFile::parse(&text).expect("v2 parses")
}

async fn count(env: &TestEnv, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(env.store.pool())
        .await
        .expect("count query")
}

/// Rows an install writes: a refused or repeated install must leave them be.
const INSTALLED_ROWS: &str = "SELECT (SELECT count(*) FROM dialectic_process_templates)
    + (SELECT count(*) FROM dialectic_stages) + (SELECT count(*) FROM system_prompts)
    + (SELECT count(*) FROM dialectic_recipe_template_steps)
    + (SELECT count(*) FROM dialectic_document_templates)";

/// The shipped pipeline files are what a freshly migrated database runs:
/// exporting each gives its file back, field for field, and migrating again
/// installs nothing; an edited stage exports as edited; an unknown pipeline is
/// NotFound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_pipeline_file_is_the_seeded_pipeline() {
    let env = TestEnv::new().await;
    for (file_name, text) in pipelines::SHIPPED {
        let shipped = PipelineFile::parse(text).expect("the shipped file parses");
        let exported = pipelines::export(env.store.pool(), &shipped.name)
            .await
            .expect("export");
        assert_eq!(exported, shipped, "{file_name}");
    }
    let versions = pipelines::list(env.store.pool()).await.expect("list");
    let listed: Vec<(&str, i32)> = versions
        .iter()
        .map(|v| (v.slug.as_str(), v.version))
        .collect();
    // The early migrations seeded the dialectic pipeline as it was before
    // uploads had roles; its headers have read typed uploads since, so the
    // seeded version differs from the file and migrating installed the file
    // as version 2, once.
    assert_eq!(
        listed,
        [
            ("contract_stack", 1),
            ("dialectic", 2),
            ("dialectic", 1),
            ("essay", 1)
        ],
        "migrating installs no second copy"
    );
    let again = env.store.migrate().await.expect("migrate again");
    assert!(again.iter().all(|p| !p.created), "{again:?}");

    recipe_edit::override_step(
        env.store.pool(),
        "thesis",
        "thesis_generate_business_case",
        &serde_json::from_str::<JsonValue>(r#"{"max_tokens": 321}"#).expect("json"),
        &serde_json::from_str::<JsonValue>("{}").expect("json"),
    )
    .await
    .expect("override");
    let edited = pipelines::export(env.store.pool(), "dialectic")
        .await
        .expect("export");
    let step = edited.stages[0]
        .steps
        .iter()
        .find(|s| s.key == "thesis_generate_business_case")
        .expect("the edited step");
    assert_eq!(step.config.max_tokens, Some(321));

    let unknown = pipelines::export(env.store.pool(), "sonnet").await;
    assert!(
        matches!(unknown, Err(StoreError::NotFound { .. })),
        "{unknown:?}"
    );
    env.teardown().await;
}

/// A pipeline installed from a file runs like the shipped one: a project names
/// it, a two-model session drafts and reviews (each model reviewing every
/// draft), and exporting it gives the file back. Installing the same file
/// again answers its version and writes nothing; a pipeline whose stage slugs
/// belong to another is refused with nothing written; a project naming an
/// unknown pipeline is NOT_FOUND.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_installed_pipeline_runs_a_session_end_to_end() {
    let mut env = TestEnv::new().await;
    let file = notes();
    let installed = pipelines::install(env.store.pool(), &file)
        .await
        .expect("install");
    assert_eq!(
        (
            installed.version,
            installed.stages,
            installed.steps,
            installed.created
        ),
        (1, 2, 4, true)
    );
    assert_eq!(
        pipelines::export(env.store.pool(), "notes")
            .await
            .expect("export"),
        file
    );

    let before = count(&env, INSTALLED_ROWS).await;
    let again = pipelines::install(env.store.pool(), &file)
        .await
        .expect("the same file again");
    assert_eq!((again.version, again.created), (1, false));
    let taken = PipelineFile::parse(
        &NOTES
            .replace("\"draft\"", "\"thesis\"")
            .replace("name = \"notes\"", "name = \"notes_two\"")
            .replace("display_name = \"Notes\"", "display_name = \"Notes two\""),
    )
    .expect("parses");
    let refused = pipelines::install(env.store.pool(), &taken).await;
    assert!(
        matches!(&refused, Err(StoreError::Invalid(m)) if m.contains("\"thesis\"")),
        "{refused:?}"
    );
    assert_eq!(count(&env, INSTALLED_ROWS).await, before, "nothing written");

    env.start_all().await;
    let mut client = env.gateway().await;
    let unknown = client
        .create_project(CreateProjectRequest {
            name: "Unknown".into(),
            initial_user_prompt: "A note.".into(),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: "essays".into(),
        })
        .await
        .expect_err("no such pipeline");
    assert_eq!(unknown.code(), tonic::Code::NotFound, "{unknown:?}");
    let (_, session_id) = env
        .new_session_on(
            "notes",
            "Notes on a balcony herb garden.",
            &["simulated", "simulated-b"],
            true,
        )
        .await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let rendered: Vec<(String, String)> = sqlx::query_as(
        "SELECT stage_slug, file_name FROM dialectic_project_resources
          WHERE session_id = $1 AND resource_type = 'rendered_document' ORDER BY stage_slug, file_name",
    )
    .bind(uuid::Uuid::parse_str(&session_id).expect("uuid"))
    .fetch_all(env.store.pool())
    .await
    .expect("documents");
    let stages: Vec<&str> = rendered.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        stages,
        ["draft", "draft", "review", "review", "review", "review"],
        "two notes, and each model's review of each: {rendered:?}"
    );
    env.teardown().await;
}

/// The rendered review documents of a session, as text.
async fn reviews(client: &mut dialectic_e2e::GatewayClient, session_id: &str) -> Vec<String> {
    let documents = client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.into(),
            stage_slug: "review".into(),
            iteration: 1,
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner()
        .documents;
    let mut texts = Vec::with_capacity(documents.len());
    for document in documents {
        let content = client
            .get_document_content(GetDocumentContentRequest {
                resource_id: document.resource_id,
            })
            .await
            .expect("content")
            .into_inner()
            .content;
        texts.push(content);
    }
    texts
}

async fn pipeline_version(client: &mut dialectic_e2e::GatewayClient, session_id: &str) -> u32 {
    client
        .get_session(GetSessionRequest {
            session_id: session_id.into(),
        })
        .await
        .expect("session")
        .into_inner()
        .pipeline_version
}

/// Installing a changed file makes version 2: a session started before keeps
/// version 1 for its later stages (its review renders with v1's template),
/// a session started after runs version 2; ListPipelines shows both, v2
/// current, and ListRecipes shows the current version's stages once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_version_runs_new_sessions_and_started_ones_keep_theirs() {
    let mut env = TestEnv::new().await;
    pipelines::install(env.store.pool(), &notes())
        .await
        .expect("v1");
    env.start_all().await;
    let mut client = env.gateway().await;
    let (_, started) = env
        .new_session_on("notes", "Notes on a rooftop.", &["simulated"], false)
        .await;
    env.wait_for_session(&started, "pending_review", true).await;

    let v2 = pipelines::install(env.store.pool(), &notes_v2())
        .await
        .expect("v2");
    assert_eq!((v2.version, v2.created), (2, true));
    let (_, newer) = env
        .new_session_on("notes", "Notes on a cellar.", &["simulated"], true)
        .await;
    env.wait_for_session(&newer, "iteration_complete_pending_review", true)
        .await;
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: started.clone(),
            stage_slug: "draft".into(),
            responses: vec![],
            client_request_id: String::new(),
        })
        .await
        .expect("submit");
    env.wait_for_session(&started, "iteration_complete_pending_review", true)
        .await;

    assert_eq!(pipeline_version(&mut client, &started).await, 1);
    assert_eq!(pipeline_version(&mut client, &newer).await, 2);
    let old_reviews = reviews(&mut client, &started).await;
    assert_eq!(old_reviews.len(), 1);
    let old = &old_reviews[0];
    assert!(
        old.contains(NOTES_REVIEW_V1) && old.contains(REVIEW_PROMPT_V1),
        "v1's template and prompt: {old}"
    );
    assert!(!old.contains(NOTES_REVIEW_V2) && !old.contains(REVIEW_PROMPT_V2));
    let new_reviews = reviews(&mut client, &newer).await;
    assert_eq!(new_reviews.len(), 1);
    let new = &new_reviews[0];
    assert!(
        new.contains(NOTES_REVIEW_V2) && new.contains(REVIEW_PROMPT_V2),
        "v2's template and prompt: {new}"
    );

    let listed = client
        .list_pipelines(ListPipelinesRequest::default())
        .await
        .expect("list")
        .into_inner()
        .pipelines;
    let notes: Vec<(u32, bool)> = listed
        .iter()
        .filter(|p| p.slug == "notes")
        .map(|p| (p.version, p.current))
        .collect();
    assert_eq!(notes, [(2, true), (1, false)]);
    let dialectic = listed
        .iter()
        .find(|p| p.slug == "dialectic")
        .expect("dialectic listed");
    assert_eq!(
        dialectic.stages,
        [
            "thesis",
            "antithesis",
            "synthesis",
            "parenthesis",
            "paralysis"
        ]
    );
    let recipes = client
        .list_recipes(ListRecipesRequest::default())
        .await
        .expect("recipes")
        .into_inner()
        .recipes;
    let review_rows = recipes.iter().filter(|r| r.stage_slug == "review").count();
    assert_eq!(
        review_rows, 1,
        "only the current version's stage: {recipes:?}"
    );
    env.teardown().await;
}

/// InstallPipeline is for administrators; a broken file is INVALID_ARGUMENT
/// naming the place of each problem (or the line of a syntax error) and
/// writes nothing; a good one installs, and again answers its version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_pipeline_checks_the_caller_and_the_file() {
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    let mut admin = env.gateway().await;
    let (_, key) = env.new_user("someone").await;
    let mut someone = env.gateway_with_key(&key).await;
    let install = |content: &str| InstallPipelineRequest {
        content: content.into(),
        client_request_id: String::new(),
        validate_only: false,
    };
    let before = count(&env, INSTALLED_ROWS).await;

    let denied = someone
        .install_pipeline(install(NOTES))
        .await
        .expect_err("not an administrator");
    assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{denied:?}");
    let broken = NOTES.replace(r#"after = ["draft_plan"]"#, r#"after = ["outline"]"#);
    let refused = admin
        .install_pipeline(install(&broken))
        .await
        .expect_err("an unknown step");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("stages[0] (draft).steps[1] (draft_write).after: no step \"outline\""),
        "{refused:?}"
    );
    let syntax = admin
        .install_pipeline(install("name = \"notes\"\nstages = [[[\n"))
        .await
        .expect_err("not TOML");
    assert_eq!(syntax.code(), tonic::Code::InvalidArgument, "{syntax:?}");
    assert!(syntax.message().starts_with("line 2"), "{syntax:?}");
    assert_eq!(count(&env, INSTALLED_ROWS).await, before, "nothing written");

    let first = admin
        .install_pipeline(install(NOTES))
        .await
        .expect("install")
        .into_inner();
    let pipeline = first.pipeline.expect("pipeline");
    assert_eq!(
        (pipeline.slug.as_str(), pipeline.version, first.created),
        ("notes", 1, true)
    );
    assert_eq!(pipeline.stages, ["draft", "review"]);
    let again = admin
        .install_pipeline(install(NOTES))
        .await
        .expect("install again")
        .into_inner();
    assert_eq!(
        (again.pipeline.expect("pipeline").version, again.created),
        (1, false)
    );
    env.teardown().await;
}
