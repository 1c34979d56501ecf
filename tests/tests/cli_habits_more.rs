//! Issue 61, item 6 (the rest): objects named positionally or by a unique
//! name, `session last`, `--jq`, `--fields`, `--no-headers`, `--dry-run`
//! for `pipeline install` and `recipe edit`, and `run --wait` taking a
//! duration. Through the real binary, against the live gateway.

use dialectic_e2e::{GatewayClient, TestEnv, against_gateway, workspace_binary};
use dialectic_proto::v1::{
    CreateProjectRequest, GetStageRecipeRequest, ListPipelinesRequest, StartSessionRequest,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

async fn dialectic(env: &TestEnv, binary: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(binary);
    against_gateway(&mut command, env)
        .args(args)
        .output()
        .await
        .expect("dialectic runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `dialectic -o json args…`, which must succeed, as JSON.
async fn json(env: &TestEnv, binary: &Path, args: &[&str]) -> Value {
    let output = dialectic(env, binary, &[&["-o", "json"], args].concat()).await;
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {}", stdout(&output)))
}

async fn project(client: &mut GatewayClient, name: &str) -> String {
    client
        .create_project(CreateProjectRequest {
            name: name.into(),
            initial_user_prompt: "A tool library for a small town.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id
}

async fn session(client: &mut GatewayClient, project: &str) -> String {
    client
        .start_session(StartSessionRequest {
            project_id: project.into(),
            models: vec!["simulated".into()],
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner()
        .id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn objects_by_position_by_name_and_the_last_session() {
    let binary = workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let unique = project(&mut client, "habits unique").await;
    let twins = [
        project(&mut client, "habits twin").await,
        project(&mut client, "habits twin").await,
    ];
    let empty = project(&mut client, "habits empty").await;

    // A project by position, as an id and as its name; the flag still works.
    for named in [unique.as_str(), "habits unique"] {
        let shown = json(&env, &binary, &["project", "show", named]).await;
        assert_eq!(shown["id"], unique.as_str(), "{named}");
    }
    let flagged = json(
        &env,
        &binary,
        &["project", "show", "--project", "habits unique"],
    )
    .await;
    assert_eq!(flagged["id"], unique.as_str());
    // A name two projects have: refused, both candidates listed by id.
    let ambiguous = dialectic(&env, &binary, &["project", "show", "habits twin"]).await;
    assert_eq!(ambiguous.status.code(), Some(64), "{ambiguous:?}");
    let said = stderr(&ambiguous);
    assert!(said.contains("2 projects are named"), "{said}");
    for id in &twins {
        assert!(said.contains(id.as_str()), "{id} not listed: {said}");
    }
    let unknown = dialectic(&env, &binary, &["project", "show", "habits none"]).await;
    assert_eq!(unknown.status.code(), Some(66), "{unknown:?}");

    // Sessions: the newest overall, the newest of a project, and `last` as a name.
    let first = session(&mut client, &unique).await;
    let second = session(&mut client, &unique).await;
    let newest = session(&mut client, &twins[0]).await;
    let listed = json(&env, &binary, &["session", "list", "habits unique"]).await;
    let ids: Vec<&str> = listed
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, [second.as_str(), first.as_str()], "newest first");
    let last = json(&env, &binary, &["session", "last"]).await;
    assert_eq!(last["id"], newest.as_str(), "the newest of all projects");
    let last_of = json(&env, &binary, &["session", "last", "habits unique"]).await;
    assert_eq!(last_of["id"], second.as_str(), "the newest of one project");
    let status = json(&env, &binary, &["session", "status", "last"]).await;
    assert_eq!(status["id"], newest.as_str(), "`last` names a session");
    let by_position = json(&env, &binary, &["session", "status", &first]).await;
    assert_eq!(by_position["id"], first.as_str());
    let none = dialectic(&env, &binary, &["session", "last", &empty]).await;
    assert_eq!(none.status.code(), Some(66), "{none:?}");
    assert!(stderr(&none).contains("no sessions yet"), "{none:?}");
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jq_fields_and_headerless_tables() {
    let binary = workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let mut ids = Vec::new();
    for name in ["jq alpha", "jq beta", "jq gamma"] {
        ids.push(project(&mut client, name).await);
    }

    // --jq: each result on its line, strings raw.
    let names = dialectic(&env, &binary, &["project", "list", "--jq", ".[].name"]).await;
    assert!(names.status.success(), "{names:?}");
    assert_eq!(stdout(&names), "jq gamma\njq beta\njq alpha\n");
    let counted = dialectic(&env, &binary, &["project", "list", "--jq", "length"]).await;
    assert_eq!(stdout(&counted), "3\n", "{counted:?}");
    let bad = dialectic(&env, &binary, &["project", "list", "--jq", ".["]).await;
    assert_eq!(
        bad.status.code(),
        Some(64),
        "refused before any call: {bad:?}"
    );
    let failing = dialectic(&env, &binary, &["project", "list", "--jq", ".name"]).await;
    assert_eq!(failing.status.code(), Some(64), "{failing:?}");

    // --fields as JSON: exactly those keys; as text, a table.
    let cut = json(&env, &binary, &["project", "list", "--fields", "id,name"]).await;
    for row in cut.as_array().expect("rows") {
        let keys: Vec<&String> = row.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["id", "name"], "{row}");
    }
    let table = dialectic(&env, &binary, &["project", "list", "--fields", "name,id"]).await;
    assert!(table.status.success(), "{table:?}");
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "a header and three rows: {text}");
    assert!(
        lines[0].starts_with("NAME") && lines[0].ends_with("ID"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("jq gamma") && lines[1].ends_with(&ids[2]),
        "{text}"
    );
    let bare = dialectic(
        &env,
        &binary,
        &["project", "list", "--fields", "name", "--no-headers"],
    )
    .await;
    assert_eq!(stdout(&bare), "jq gamma\njq beta\njq alpha\n", "{bare:?}");
    let typo = dialectic(&env, &binary, &["project", "list", "--fields", "nmae"]).await;
    assert_eq!(typo.status.code(), Some(64), "{typo:?}");
    assert!(stderr(&typo).contains("the fields are: "), "{typo:?}");
    // One object, not a list: --fields and --jq work on it too.
    let one = dialectic(
        &env,
        &binary,
        &["project", "show", &ids[0], "--jq", ".name"],
    )
    .await;
    assert_eq!(stdout(&one), "jq alpha\n", "{one:?}");
    env.teardown().await;
}

fn scratch(name: &str, content: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("{}-{name}", uuid::Uuid::now_v7()));
    std::fs::write(&path, content).expect("scratch file");
    path
}

async fn pipeline_versions(client: &mut GatewayClient) -> Vec<(String, u32)> {
    client
        .list_pipelines(ListPipelinesRequest::default())
        .await
        .expect("pipelines")
        .into_inner()
        .pipelines
        .into_iter()
        .map(|p| (p.slug, p.version))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dry_runs_check_on_the_server_and_write_nothing() {
    let binary = workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;

    // pipeline install --dry-run: the version it would be, nothing installed.
    let notes = include_str!("../pipelines/notes.toml");
    let file = scratch("notes.toml", notes);
    let file = file.to_str().expect("utf-8 path");
    let before = pipeline_versions(&mut client).await;
    let checked = dialectic(&env, &binary, &["pipeline", "install", file, "--dry-run"]).await;
    assert!(checked.status.success(), "{checked:?}");
    assert!(stdout(&checked).starts_with("dry run: "), "{checked:?}");
    let as_json = json(&env, &binary, &["pipeline", "install", file, "--dry-run"]).await;
    assert_eq!(as_json["pipeline"]["slug"], "notes");
    assert_eq!(as_json["pipeline"]["version"], 1);
    assert_eq!(as_json["created"], true, "it would be a new version");
    assert_eq!(
        pipeline_versions(&mut client).await,
        before,
        "nothing installed"
    );
    // A dry run is for administrators too: it reads what only they may change.
    let (_, key) = env.new_user("not-an-admin").await;
    let mut theirs = tokio::process::Command::new(&binary);
    let denied = against_gateway(&mut theirs, &env)
        .env("DIALECTIC_API_KEY", &key)
        .args(["pipeline", "install", file, "--dry-run"])
        .output()
        .await
        .expect("dialectic runs");
    assert_eq!(denied.status.code(), Some(77), "{denied:?}");
    // What only the database knows is checked too: a stage slug of another pipeline.
    let taken = scratch("taken.toml", &notes.replace("\"draft\"", "\"thesis\""));
    let refused = dialectic(
        &env,
        &binary,
        &[
            "pipeline",
            "install",
            taken.to_str().expect("path"),
            "--dry-run",
        ],
    )
    .await;
    assert_eq!(refused.status.code(), Some(65), "{refused:?}");
    let installed = dialectic(&env, &binary, &["pipeline", "install", file]).await;
    assert!(installed.status.success(), "{installed:?}");
    assert!(
        pipeline_versions(&mut client)
            .await
            .contains(&("notes".into(), 1)),
        "installed without --dry-run"
    );
    let again = json(&env, &binary, &["pipeline", "install", file, "--dry-run"]).await;
    assert_eq!(again["created"], false, "already this file: {again}");

    // recipe edit --dry-run: the recipe as it would be; the stored one untouched.
    let stored = || GetStageRecipeRequest {
        stage_slug: "paralysis".into(),
    };
    let recipe = client
        .get_stage_recipe(stored())
        .await
        .expect("recipe")
        .into_inner();
    let last = recipe.steps.last().expect("steps").step_key.clone();
    let first = recipe.steps[0].step_key.clone();
    let preview = json(
        &env,
        &binary,
        &["recipe", "edit", "paralysis", "--skip", &last, "--dry-run"],
    )
    .await;
    let skipped = preview["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["step_key"] == last.as_str())
        .expect("the step");
    assert_eq!(skipped["skipped"], true, "{preview}");
    assert_eq!(
        client
            .get_stage_recipe(stored())
            .await
            .expect("recipe")
            .into_inner(),
        recipe,
        "a dry run changes nothing and clones nothing"
    );
    let cycle = format!("{last}:{first}");
    let refused = dialectic(
        &env,
        &binary,
        &["recipe", "edit", "paralysis", "--edge", &cycle, "--dry-run"],
    )
    .await;
    assert_eq!(refused.status.code(), Some(65), "a cycle: {refused:?}");
    let unknown = dialectic(
        &env,
        &binary,
        &[
            "recipe",
            "edit",
            "paralysis",
            "--skip",
            "no-such-step",
            "--dry-run",
        ],
    )
    .await;
    assert_eq!(unknown.status.code(), Some(66), "{unknown:?}");
    env.teardown().await;
}

/// `run --wait` takes a duration (and a bare number of seconds, as
/// `--timeout-secs` did): with no planner the session never moves, so the
/// wait runs out and the run exits 75.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_waits_for_a_duration() {
    let binary = workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    for wait in [["--wait", "1500ms"], ["--timeout-secs", "1"]] {
        let started = std::time::Instant::now();
        let args = [
            &["run", "--name", "waits", "--prompt", "A short plan."][..],
            &["--model", "simulated"],
            &wait,
        ]
        .concat();
        let ran = dialectic(&env, &binary, &args).await;
        assert_eq!(ran.status.code(), Some(75), "{wait:?}: {ran:?}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{wait:?}"
        );
    }
    let bad = dialectic(
        &env,
        &binary,
        &["run", "--name", "x", "--prompt", "y", "--wait", "soon"],
    )
    .await;
    assert_eq!(bad.status.code(), Some(64), "{bad:?}");
    env.teardown().await;
}

/// What a Tab press offers: `COMPLETE=fish dialectic -- WORDS…`, the call
/// the script of `dialectic completion fish` makes; one `value\thelp` a line.
async fn offered(env: &TestEnv, binary: &Path, words: &[&str]) -> Vec<String> {
    let mut command = tokio::process::Command::new(binary);
    let output = against_gateway(&mut command, env)
        .env("COMPLETE", "fish")
        .arg("--")
        .args(words)
        .output()
        .await
        .expect("dialectic runs");
    assert!(output.status.success(), "{words:?}: {output:?}");
    stdout(&output)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn completion_offers_ids_stages_and_models_from_the_gateway() {
    let binary = workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start(&["gateway"]).await;
    env.wait_serving("gateway").await;
    let mut client = env.gateway().await;
    let project = project(&mut client, "completed").await;
    let session = session(&mut client, &project).await;

    let script = dialectic(&env, &binary, &["completion", "bash"]).await;
    assert!(script.status.success(), "{script:?}");
    assert!(
        stdout(&script).contains("COMPLETE"),
        "calls back: {script:?}"
    );

    let projects = offered(&env, &binary, &["dialectic", "project", "show", ""]).await;
    assert!(projects.contains(&project), "{projects:?}");
    let sessions = offered(&env, &binary, &["dialectic", "session", "status", ""]).await;
    assert!(sessions.contains(&"last".to_string()), "{sessions:?}");
    assert!(sessions.contains(&session), "{sessions:?}");
    let flagged = offered(
        &env,
        &binary,
        &["dialectic", "session", "watch", "--session", ""],
    )
    .await;
    assert!(flagged.contains(&session), "{flagged:?}");
    let stages = offered(&env, &binary, &["dialectic", "recipe", "show", ""]).await;
    assert!(stages.contains(&"paralysis".to_string()), "{stages:?}");
    let models = offered(
        &env,
        &binary,
        &["dialectic", "session", "start", &project, "--model", ""],
    )
    .await;
    assert!(models.contains(&"simulated".to_string()), "{models:?}");
    // Commands still complete as before.
    let verbs = offered(&env, &binary, &["dialectic", "session", "la"]).await;
    assert_eq!(verbs, ["last"], "{verbs:?}");
    env.teardown().await;
}
