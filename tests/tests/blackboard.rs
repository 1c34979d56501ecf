//! The shared blackboard (seed 004 §1): entries a step publishes are kept in
//! Postgres and copied to Redis; a later step reads them through a
//! `blackboard` input rule; GetBlackboard and WatchSession show them; losing
//! the Redis copy mid-session loses nothing; a revisit clears what the
//! re-run stages published, through the tracking set.

use dialectic_cache::Cache;
use dialectic_core::pipeline::PipelineFile;
use dialectic_e2e::{GatewayClient, TestEnv};
use dialectic_proto::v1::{GetBlackboardRequest, RevisitStageRequest, SubmitStageResponsesRequest};
use dialectic_store::pipelines;
use serde_json::Value;

/// (type, stage, step, finding) of every entry, or of one type.
async fn board(client: &mut GatewayClient, session: &str, entry_type: &str) -> Vec<[String; 4]> {
    client
        .get_blackboard(GetBlackboardRequest {
            session_id: session.to_string(),
            entry_type: entry_type.to_string(),
        })
        .await
        .expect("blackboard")
        .into_inner()
        .entries
        .into_iter()
        .map(|e| {
            let data: Value = serde_json::from_str(&e.data_json).expect("data is JSON");
            [
                e.entry_type,
                e.stage_slug,
                e.step_key,
                data["finding"].as_str().expect("finding").to_string(),
            ]
        })
        .collect()
}

/// The text of the user messages of the one recorded request writing `output_type`.
fn prompt_of(output_type: &str) -> String {
    let requests: Vec<_> = dialectic_llm::recorded_requests()
        .into_iter()
        .filter(|r| r.output_type == output_type)
        .collect();
    assert_eq!(requests.len(), 1, "one {output_type} request");
    requests[0]
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn entries_reach_later_steps_survive_a_lost_redis_copy_and_clear_on_revisit() {
    let mut env = TestEnv::new().await;
    let file = PipelineFile::parse(include_str!("../pipelines/findings.toml")).expect("parses");
    pipelines::install(env.store.pool(), &file)
        .await
        .expect("install");
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let (_, session) = env
        .new_session_on(
            "findings",
            "A plan to ship by Friday.",
            &["simulated"],
            false,
        )
        .await;
    env.wait_for_session(&session, "pending_check", true).await;

    let found = board(&mut client, &session, "").await;
    let kinds: Vec<[&str; 3]> = found
        .iter()
        .map(|[t, stage, step, _]| [t.as_str(), stage.as_str(), step.as_str()])
        .collect();
    assert_eq!(
        kinds,
        [
            ["question", "find", "find_write"],
            ["risk", "find", "find_write"]
        ],
        "one entry per declared type, by type"
    );
    let risk = found[1][3].clone();
    let question = found[0][3].clone();
    assert_eq!(
        board(&mut client, &session, "risk").await,
        [found[1].clone()]
    );

    // Redis loses the session's copy (as a restart would) before the check reads it.
    let cache = Cache::connect(&env.settings.redis.url, 60)
        .await
        .expect("redis");
    assert_eq!(cache.board_clear(&session).await.expect("clear"), 2);
    assert!(
        cache
            .board_list(&session, "risk")
            .await
            .expect("list")
            .is_empty()
    );

    let watcher = env
        .watch_events(&session, |kind| kind == "blackboard_entry")
        .await;
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session.clone(),
            stage_slug: "find".into(),
            responses: Vec::new(),
            client_request_id: String::new(),
        })
        .await
        .expect("advance");
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;
    let published: Vec<String> = watcher
        .await
        .expect("watcher")
        .into_iter()
        .map(|e| e.document_key)
        .collect();
    assert_eq!(published, ["verdict"]);

    let prompt = prompt_of("check");
    assert!(
        prompt.contains("--- Risks on the blackboard ---"),
        "{prompt}"
    );
    assert!(
        prompt.contains(&risk),
        "the risk, rebuilt from Postgres: {prompt}"
    );
    assert!(!prompt.contains(&question), "only the type the rule names");
    let all = board(&mut client, &session, "").await;
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all[2][0], "verdict");
    assert_eq!(
        cache
            .board_list(&session, "risk")
            .await
            .expect("list")
            .len(),
        1,
        "the reader rebuilt the Redis copy"
    );

    // A revisit of find re-runs check: what check published goes, find's stays.
    client
        .revisit_stage(RevisitStageRequest {
            session_id: session.clone(),
            stage_slug: "find".into(),
            impact: "moderate".into(),
            reason: "new facts".into(),
            impact_level: 0,
            dry_run: false,
            client_request_id: String::new(),
        })
        .await
        .expect("revisit");
    let after: Vec<String> = board(&mut client, &session, "")
        .await
        .into_iter()
        .map(|[t, ..]| t)
        .collect();
    assert_eq!(after, ["question", "risk"]);
    assert!(
        cache
            .board_list(&session, "verdict")
            .await
            .expect("list")
            .is_empty(),
        "the verdict's Redis copy went with it"
    );
    env.teardown().await;
}
