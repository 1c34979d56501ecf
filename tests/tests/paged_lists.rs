//! Every list paged and filterable (issue 61, item 1). With 250 projects and
//! 120 sessions, the `dialectic` binary lists every one by default (following
//! `next_page_token` past the 200-row page), exactly N with `--limit N` (and
//! keeps the token in JSON, which `--page-token` continues from), and exactly
//! the matching set with `--filter`; `--order-by` orders across pages. A
//! malformed filter is INVALID_ARGUMENT naming `filter`. The lists that paged
//! not at all before (models, pipelines, recipes, stage and project
//! documents) return every row once when read a row per page.

use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{
    CreateProjectRequest, ListModelsRequest, ListPipelinesRequest, ListProjectDocumentsRequest,
    ListProjectsRequest, ListRecipesRequest, ListStageDocumentsRequest, StartSessionRequest,
};
use dialectic_runtime::error_status::StatusExt;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;
use tonic::Code;

const PROJECTS: usize = 250;
const SESSIONS: usize = 120;
const PAUSED: usize = 30;

/// `dialectic args…` against `env`'s gateway, stdout and stderr piped.
async fn dialectic(env: &TestEnv, binary: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(binary);
    command.args(args);
    dialectic_e2e::against_gateway(&mut command, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::time::timeout(
        Duration::from_secs(120),
        command
            .spawn()
            .expect("dialectic starts")
            .wait_with_output(),
    )
    .await
    .expect("dialectic finished in time")
    .expect("dialectic ran")
}

/// What a terminal shows of `dialectic args…` whose stdout goes to
/// /dev/null and whose stderr is the terminal (util-linux `script`).
async fn on_a_terminal(env: &TestEnv, binary: &Path, args: &[&str]) -> String {
    let line = std::iter::once(binary.to_str().expect("utf-8 path"))
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let mut script = tokio::process::Command::new("script");
    script
        .arg("-qfec")
        .arg(format!("exec {line} > /dev/null"))
        .arg("/dev/null")
        .env("TERM", "xterm-256color");
    dialectic_e2e::against_gateway(&mut script, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = script.output().await.expect("script runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The stderr of a piped `project list`.
async fn listed_stderr(env: &TestEnv, binary: &Path) -> Vec<u8> {
    let output = dialectic(env, binary, &["project", "list"]).await;
    assert!(output.status.success());
    output.stderr
}

/// `dialectic --output json args…`, which must succeed, as JSON.
async fn json(env: &TestEnv, binary: &Path, args: &[&str]) -> Value {
    let args = [&["--output", "json"], args].concat();
    let output = dialectic(env, binary, &args).await;
    assert!(
        output.status.success(),
        "dialectic {args:?} failed: {}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn field<'v>(rows: &'v Value, name: &str) -> Vec<&'v str> {
    rows.as_array()
        .unwrap_or_else(|| panic!("a JSON array: {rows}"))
        .iter()
        .map(|r| r[name].as_str().unwrap_or_else(|| panic!("{name} in {r}")))
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    let unique: BTreeSet<String> = items.iter().map(|s| s.to_string()).collect();
    assert_eq!(unique.len(), items.len(), "a row listed twice");
    unique
}

fn name(i: usize) -> String {
    format!("paged-{i:03}")
}

/// 250 projects named paged-000…; 120 sessions on the first, 30 of them
/// paused. Returns (project ids, session ids, paused session ids), oldest first.
async fn seed(
    env: &TestEnv,
    client: &mut GatewayClient,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut projects = Vec::with_capacity(PROJECTS);
    for i in 0..PROJECTS {
        let project = client
            .create_project(CreateProjectRequest {
                name: name(i),
                initial_user_prompt: "A tool library for a street.".into(),
                ..Default::default()
            })
            .await
            .expect("project")
            .into_inner();
        projects.push(project.id);
    }
    let mut sessions = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        let session = client
            .start_session(StartSessionRequest {
                project_id: projects[0].clone(),
                models: vec!["simulated".into()],
                ..Default::default()
            })
            .await
            .expect("session")
            .into_inner();
        sessions.push(session.id);
    }
    // No planner runs: the sessions stay pending, except these, paused here.
    let paused: Vec<String> = sessions.iter().step_by(4).cloned().collect();
    assert_eq!(paused.len(), PAUSED);
    let ids: Vec<uuid::Uuid> = paused.iter().map(|s| s.parse().expect("uuid")).collect();
    sqlx::query("UPDATE dialectic_sessions SET status = 'paused' WHERE id = ANY($1)")
        .bind(&ids)
        .execute(env.store.pool())
        .await
        .expect("pause");
    (projects, sessions, paused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cli_lists_every_row_exactly_n_or_the_matching_set() {
    let binary = dialectic_e2e::workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let (projects, sessions, paused) = seed(&env, &mut client).await;
    let home = projects[0].as_str();
    let all_projects = set(&projects.iter().map(String::as_str).collect::<Vec<_>>());

    // Default: every project, past the 200-row page, newest first.
    let listed = json(&env, &binary, &["project", "list"]).await;
    assert_eq!(
        field(&listed, "id").len(),
        PROJECTS,
        "every project, not a page"
    );
    assert_eq!(set(&field(&listed, "id")), all_projects);
    let newest_first: Vec<String> = projects.iter().rev().cloned().collect();
    assert_eq!(field(&listed, "id"), newest_first);

    // Many pages at a terminal: a count on stderr (and none when piped).
    assert!(!String::from_utf8_lossy(&listed_stderr(&env, &binary).await).contains("read"));
    let drawn = on_a_terminal(&env, &binary, &["project", "list"]).await;
    assert!(drawn.contains("250 projects read"), "{drawn}");

    // --limit N: exactly N, and the token to go on from, which --page-token takes.
    for n in [1usize, 7, 200, 210] {
        let limited = json(
            &env,
            &binary,
            &["project", "list", "--limit", &n.to_string()],
        )
        .await;
        assert_eq!(
            field(&limited["projects"], "id"),
            newest_first[..n],
            "--limit {n}"
        );
        assert!(!limited["next_page_token"].as_str().unwrap_or("").is_empty());
    }
    let first = json(&env, &binary, &["project", "list", "--limit", "7"]).await;
    let token = first["next_page_token"]
        .as_str()
        .expect("token")
        .to_string();
    let rest = json(
        &env,
        &binary,
        &["project", "list", "--limit", "1000", "--page-token", &token],
    )
    .await;
    assert_eq!(field(&rest["projects"], "id"), newest_first[7..]);
    assert_eq!(
        rest["next_page_token"], "",
        "nothing is left after the last row"
    );
    // As text: the rows on stdout, and on stderr how to go on.
    let text = dialectic(&env, &binary, &["project", "list", "--limit", "3"]).await;
    assert!(text.status.success());
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(stderr.contains("--page-token "), "{stderr}");

    // --filter: exactly the matching set, across pages.
    let prefixed = json(
        &env,
        &binary,
        &["project", "list", "--filter", r#"name:"paged-01*""#],
    )
    .await;
    let want: Vec<String> = (10..20).map(name).collect();
    assert_eq!(
        set(&field(&prefixed, "name")),
        set(&want.iter().map(String::as_str).collect::<Vec<_>>())
    );
    let exact = json(
        &env,
        &binary,
        &["project", "list", "--filter", r#"name = "paged-042""#],
    )
    .await;
    assert_eq!(field(&exact, "name"), ["paged-042"]);
    // A bare word is a substring: paged-200 … paged-249.
    let contained = json(&env, &binary, &["project", "list", "--filter", "D-2"]).await;
    assert_eq!(field(&contained, "name").len(), 50);

    // --order-by name: every project in name order, across the page boundary.
    let by_name = json(&env, &binary, &["project", "list", "--order-by", "name"]).await;
    let names: Vec<String> = (0..PROJECTS).map(name).collect();
    assert_eq!(field(&by_name, "name"), names);
    let by_name_desc = json(
        &env,
        &binary,
        &["project", "list", "--order-by", "name desc", "--limit", "3"],
    )
    .await;
    assert_eq!(
        field(&by_name_desc["projects"], "name"),
        ["paged-249", "paged-248", "paged-247"]
    );

    // Sessions: all by default, exactly N, by state, oldest first on request.
    let all = json(&env, &binary, &["session", "list", "--project", home]).await;
    assert_eq!(
        field(&all, "id").len(),
        SESSIONS,
        "every session, not a page"
    );
    let session_ids = set(&sessions.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(set(&field(&all, "id")), session_ids);
    let five = json(
        &env,
        &binary,
        &["session", "list", "--project", home, "--limit", "5"],
    )
    .await;
    assert_eq!(field(&five["sessions"], "id").len(), 5);
    let by_state = json(
        &env,
        &binary,
        &[
            "session",
            "list",
            "--project",
            home,
            "--filter",
            "state = PAUSED",
        ],
    )
    .await;
    assert_eq!(
        set(&field(&by_state, "id")),
        set(&paused.iter().map(String::as_str).collect::<Vec<_>>())
    );
    let pending = json(
        &env,
        &binary,
        &[
            "session",
            "list",
            "--project",
            home,
            "--filter",
            "state = PENDING",
        ],
    )
    .await;
    assert_eq!(field(&pending, "id").len(), SESSIONS - PAUSED);
    let oldest_first = json(
        &env,
        &binary,
        &[
            "session",
            "list",
            "--project",
            home,
            "--order-by",
            "created_at",
        ],
    )
    .await;
    assert_eq!(field(&oldest_first, "id"), sessions);

    // A malformed filter: INVALID_ARGUMENT naming `filter`, from the CLI and the API.
    let refused = dialectic(
        &env,
        &binary,
        &["project", "list", "--filter", r#"name = "open"#],
    )
    .await;
    assert_eq!(
        refused.status.code(),
        Some(65),
        "usage errors of the data exit 65"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("filter"), "{stderr}");
    let status = client
        .list_projects(ListProjectsRequest {
            filter: "created_at > yesterday".into(),
            ..Default::default()
        })
        .await
        .expect_err("a time that is not RFC 3339");
    assert_eq!(status.code(), Code::InvalidArgument);
    let bad = status
        .get_details_bad_request()
        .expect("a BadRequest detail");
    assert_eq!(bad.field_violations[0].field, "filter", "{status:?}");

    env.teardown().await;
}

/// Reads a list a row per page; every row once, as the whole list has them.
async fn one_by_one<F, Fut>(mut page: F) -> Vec<String>
where
    F: FnMut(u32, String) -> Fut,
    Fut: std::future::Future<Output = (Vec<String>, String)>,
{
    let mut rows = Vec::new();
    let mut token = String::new();
    loop {
        let (got, next) = page(1, token).await;
        assert!(got.len() <= 1, "page_size 1 returned {}", got.len());
        rows.extend(got);
        if next.is_empty() {
            return rows;
        }
        assert!(rows.len() < 1000, "the list never ends");
        token = next;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lists_that_never_paged_return_every_row_once_a_page_at_a_time() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let (project_id, session_id) = env
        .new_session("A repair café with a tool library.", &["simulated"], false)
        .await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    let mut client = env.gateway().await;
    dialectic_e2e::upload_documents(
        &mut client,
        &project_id,
        &[
            ("a.md", "# A\nfirst"),
            ("b.md", "# B\nsecond"),
            ("c.md", "# C\nthird"),
        ],
    )
    .await;

    let c = client.clone();
    let whole = c
        .clone()
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.clone(),
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner();
    assert_eq!(
        whole.next_page_token, "",
        "page_size 0 is every row up to 200"
    );
    let paged = one_by_one(|page_size, page_token| {
        let (mut c, session_id) = (c.clone(), session_id.clone());
        async move {
            let page = c
                .list_stage_documents(ListStageDocumentsRequest {
                    session_id,
                    page_size,
                    page_token,
                    ..Default::default()
                })
                .await
                .expect("page")
                .into_inner();
            (
                page.documents.into_iter().map(|d| d.resource_id).collect(),
                page.next_page_token,
            )
        }
    })
    .await;
    let want: Vec<String> = whole.documents.into_iter().map(|d| d.resource_id).collect();
    assert_eq!(want.len(), 4, "the thesis stage's documents");
    assert_eq!(paged, want);

    let paged = one_by_one(|page_size, page_token| {
        let (mut c, project_id) = (c.clone(), project_id.clone());
        async move {
            let page = c
                .list_project_documents(ListProjectDocumentsRequest {
                    project_id,
                    page_size,
                    page_token,
                })
                .await
                .expect("page")
                .into_inner();
            let names = page.documents.into_iter().map(|d| d.file_name).collect();
            (names, page.next_page_token)
        }
    })
    .await;
    assert_eq!(paged, ["a.md", "b.md", "c.md"]);

    let models = one_by_one(|page_size, page_token| {
        let mut c = c.clone();
        async move {
            let page = c
                .list_models(ListModelsRequest {
                    page_size,
                    page_token,
                })
                .await
                .expect("page")
                .into_inner();
            let ids = page.models.into_iter().map(|m| m.id).collect();
            (ids, page.next_page_token)
        }
    })
    .await;
    let all_models = c
        .clone()
        .list_models(ListModelsRequest::default())
        .await
        .expect("models")
        .into_inner();
    assert_eq!(
        models,
        all_models
            .models
            .into_iter()
            .map(|m| m.id)
            .collect::<Vec<_>>()
    );
    assert!(models.len() > 1, "more than one page: {models:?}");

    let pipelines = one_by_one(|page_size, page_token| {
        let mut c = c.clone();
        async move {
            let page = c
                .list_pipelines(ListPipelinesRequest {
                    page_size,
                    page_token,
                })
                .await
                .expect("page")
                .into_inner();
            let keys = page
                .pipelines
                .into_iter()
                .map(|p| format!("{}@{}", p.slug, p.version))
                .collect();
            (keys, page.next_page_token)
        }
    })
    .await;
    set(&pipelines.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!pipelines.is_empty());

    let recipes = one_by_one(|page_size, page_token| {
        let mut c = c.clone();
        async move {
            let page = c
                .list_recipes(ListRecipesRequest {
                    page_size,
                    page_token,
                })
                .await
                .expect("page")
                .into_inner();
            let slugs = page.recipes.into_iter().map(|r| r.stage_slug).collect();
            (slugs, page.next_page_token)
        }
    })
    .await;
    let all_recipes = c
        .clone()
        .list_recipes(ListRecipesRequest::default())
        .await
        .expect("recipes")
        .into_inner();
    assert_eq!(
        recipes,
        all_recipes
            .recipes
            .into_iter()
            .map(|r| r.stage_slug)
            .collect::<Vec<_>>()
    );
    assert!(recipes.len() > 1, "more than one page: {recipes:?}");

    env.teardown().await;
}
