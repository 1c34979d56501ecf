//! Query history (issue 54 item 7): every question asked of a project is kept
//! with its classification, answer, citations, latency and cost — a cached
//! answer too — listed newest first through `ListQueryHistory` and
//! `dialectic query history`, hidden from other users, and deleted with the
//! project.

use dialectic_e2e::{TestEnv, upload_documents};
use dialectic_proto::v1::{
    CreateProjectRequest, DeleteProjectRequest, ListQueryHistoryRequest, QueryRequest,
};

const STACK: [(&str, &str); 2] = [
    (
        "base.md",
        "Base agreement.\n\n4.2 Rent is due on the first day of each month.\n\n7.1 The tenant maintains the docks.",
    ),
    (
        "amendment-1.md",
        "Amendment 1.\n\n4.2 Rent is due on the fifth day of each month.",
    ),
];

fn question(project: &str, text: &str) -> QueryRequest {
    QueryRequest {
        project_id: project.to_string(),
        text: text.to_string(),
        model: String::new(),
        client_request_id: String::new(),
    }
}

fn history(project: &str, page_size: u32, page_token: &str) -> ListQueryHistoryRequest {
    ListQueryHistoryRequest {
        project_id: project.to_string(),
        page_size,
        page_token: page_token.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_question_is_kept_with_its_answer_latency_and_cost() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: "The lease and its amendments.".into(),
            pipeline: "contract_stack".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner()
        .id;
    upload_documents(&mut client, &project, &STACK).await;

    let rent = "When is the rent due?";
    let docks = "Who maintains the docks?";
    let first = client
        .query(question(&project, rent))
        .await
        .expect("first")
        .into_inner();
    let second = client
        .query(question(&project, docks))
        .await
        .expect("second")
        .into_inner();
    let cached = client
        .query(question(&project, rent))
        .await
        .expect("again")
        .into_inner();
    assert!(!first.cached && first.cost > 0, "{first:?}");
    assert!(cached.cached && cached.cost == 0, "{cached:?}");

    let listed = client
        .list_query_history(history(&project, 0, ""))
        .await
        .expect("history")
        .into_inner();
    assert_eq!(listed.next_page_token, "", "one page holds three");
    let asked: Vec<&str> = listed.entries.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(asked, [rent, docks, rent]);
    // Each entry is the answer the caller got, whole and typed, newest first
    // (the cached one differs from the first by its flag and cost).
    let kept: Vec<_> = listed
        .entries
        .iter()
        .map(|e| e.response.clone().expect("the answer"))
        .collect();
    assert_eq!(kept, [cached.clone(), second.clone(), first.clone()]);
    let oldest = &listed.entries[2];
    assert_eq!(oldest.response.as_ref().map(|r| r.cost), Some(first.cost));
    assert!(!first.query_type.is_empty(), "classified: {first:?}");
    assert!(!first.citations.is_empty(), "cited: {first:?}");
    assert!(
        oldest.latency_ms > 0,
        "a model's answer takes time: {oldest:?}"
    );
    assert!(oldest.asked_at.is_some() && !oldest.query_id.is_empty());
    let ids: std::collections::HashSet<&str> =
        listed.entries.iter().map(|e| e.query_id.as_str()).collect();
    assert_eq!(ids.len(), 3, "one entry per question, the cached one too");

    // Pages: two, then the last one.
    let page = client
        .list_query_history(history(&project, 2, ""))
        .await
        .expect("page 1")
        .into_inner();
    assert_eq!(page.entries.len(), 2);
    let rest = client
        .list_query_history(history(&project, 2, &page.next_page_token))
        .await
        .expect("page 2")
        .into_inner();
    assert_eq!(rest.entries.len(), 1);
    assert_eq!(rest.entries[0].query_id, listed.entries[2].query_id);

    // The CLI prints the same, as a user scripts it.
    let binary = dialectic_e2e::workspace_binary("dialectic-cli", "dialectic");
    let mut command = tokio::process::Command::new(&binary);
    dialectic_e2e::against_gateway(
        command.args([
            "query",
            "history",
            "--project",
            &project,
            "--output",
            "json",
        ]),
        &env,
    );
    let output = command.output().await.expect("dialectic runs");
    assert!(output.status.success(), "{output:?}");
    let printed: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON document");
    let texts: Vec<&str> = printed
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(texts, asked);
    assert_eq!(
        printed[2]["response"]["cost"],
        serde_json::json!(first.cost.to_string())
    );

    // Another user's project is NOT_FOUND.
    let (_, key) = env.new_user("mallory").await;
    let mut mallory = env.gateway_with_key(&key).await;
    let refused = mallory
        .list_query_history(history(&project, 0, ""))
        .await
        .expect_err("another user's project");
    assert_eq!(refused.code(), tonic::Code::NotFound);

    // Deleted with the project.
    client
        .delete_project(DeleteProjectRequest {
            project_id: project.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("delete");
    let left: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_query_history WHERE project_id = $1::uuid",
    )
    .bind(&project)
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    assert_eq!(left, 0);
    env.teardown().await;
}
