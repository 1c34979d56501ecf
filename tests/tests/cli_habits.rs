//! Issue 61, item 6 (part): `-o` is `--output`, and `project delete` asks
//! before it deletes: from a script (stdin not a terminal) it refuses
//! without `--yes` and deletes nothing; with `--yes` it deletes. Through the
//! real binary, against the live stack.

use dialectic_e2e::{TestEnv, against_gateway, workspace_binary};
use dialectic_proto::v1::{CreateProjectRequest, GetProjectRequest};
use std::path::Path;
use tonic::Code;

async fn dialectic(env: &TestEnv, binary: &Path, args: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::new(binary);
    against_gateway(&mut command, env)
        .args(args)
        .output()
        .await
        .expect("dialectic runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_output_flag_and_a_confirmed_project_delete() {
    let binary = workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Kept unless confirmed".into(),
            initial_user_prompt: "A tool library for a small town.".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();

    // -o json: one JSON document, as --output json prints it.
    let shown = dialectic(
        &env,
        &binary,
        &["-o", "json", "project", "show", "--project", &project.id],
    )
    .await;
    assert!(shown.status.success(), "{shown:?}");
    let json: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("JSON");
    assert_eq!(json["id"], project.id.as_str());

    // No terminal and no --yes: refused as a usage error, nothing deleted.
    let refused = dialectic(
        &env,
        &binary,
        &["project", "delete", "--project", &project.id],
    )
    .await;
    assert_eq!(refused.status.code(), Some(64), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--yes"), "{stderr}");
    let still = client
        .get_project(GetProjectRequest {
            project_id: project.id.clone(),
        })
        .await
        .expect("the project is still there");
    assert_eq!(still.into_inner().id, project.id);

    let deleted = dialectic(
        &env,
        &binary,
        &["project", "delete", "--project", &project.id, "--yes"],
    )
    .await;
    assert!(deleted.status.success(), "{deleted:?}");
    let gone = client
        .get_project(GetProjectRequest {
            project_id: project.id.clone(),
        })
        .await
        .expect_err("deleted");
    assert_eq!(gone.code(), Code::NotFound);
    env.teardown().await;
}
