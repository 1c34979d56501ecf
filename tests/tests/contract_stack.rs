//! The contract-stack pipeline (seed 004 §2), shipped as
//! `pipelines/contract_stack.toml`, run to the end on six service processes
//! over a base agreement and its amendments: what amendment tracking puts on
//! the blackboard reaches conflict detection's prompt, also after Redis lost
//! its copy mid-session; the stage's percent follows the seed's bands; a
//! stack of one document skips amendment tracking through its plan, and a
//! plan asking that over three is overruled by the step's `skip_only_when`;
//! a finding of a type its step does not declare is refused and retried; and
//! amendments are tracked in effective-date order, not upload order; and the
//! analysis's JSON outputs read as documents, whose edits are parsed back.

use dialectic_cache::Cache;
use dialectic_e2e::{
    GatewayClient, TestEnv, document_text, eventually, session_requests, stage_documents,
    upload_documents,
};
use dialectic_proto::v1::{
    CreateProjectRequest, GetBlackboardRequest, GetSessionRequest, PauseSessionRequest,
    ResumeSessionRequest, SaveDocumentEditRequest, SessionEvent, StartSessionRequest,
    WatchSessionRequest,
};
use futures::StreamExt;

/// The plan skips amendment tracking when it reads a single document, and the
/// override resolution fans out over three sections.
const PROMPT: &str = "Analyse the lease stack. \
    [[simulate:skip-single:contract_track_amendments]] [[simulate:items:sections:3]]";

const STACK: [(&str, &str); 3] = [
    (
        "base.md",
        "Base agreement. 4.2: Rent is due on the first. 7.1: See exhibit B.",
    ),
    (
        "amendment-1.md",
        "Amendment 1. 4.2: Rent is due on the fifth.",
    ),
    ("amendment-2.md", "Amendment 2. Exhibit B is deleted."),
];

/// Creates a project on the pipeline, uploads `documents` in order and
/// starts an auto-advancing session; returns its id.
async fn start(client: &mut GatewayClient, documents: &[(&str, &str)]) -> String {
    start_with(client, PROMPT, documents).await
}

/// `start` with the project's prompt `prompt`.
async fn start_with(
    client: &mut GatewayClient,
    prompt: &str,
    documents: &[(&str, &str)],
) -> String {
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: prompt.into(),
            pipeline: "contract_stack".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    upload_documents(client, &project.id, documents).await;
    client
        .start_session(StartSessionRequest {
            project_id: project.id,
            models: vec!["simulated".into()],
            auto_advance: true,
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner()
        .id
}

/// The findings of the session's entries of one type, as GetBlackboard reads them.
async fn findings(client: &mut GatewayClient, session: &str, entry_type: &str) -> Vec<String> {
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
            let data: serde_json::Value = serde_json::from_str(&e.data_json).expect("JSON");
            data["finding"].as_str().expect("finding").to_string()
        })
        .collect()
}

async fn step_jobs(env: &TestEnv, session: &str, step_key: &str) -> i64 {
    let session = uuid::Uuid::parse_str(session).expect("uuid");
    let jobs: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND step_key = $2",
    )
    .bind(session)
    .bind(step_key)
    .fetch_one(env.store.pool())
    .await
    .expect("count");
    jobs
}

/// The stage's percent on the first event about a job writing `output_type`:
/// its step has just been planned, so every step before it is done. (The
/// completions of parallel jobs commit concurrently, each blind to the
/// others', so the last one in event order need not carry the step's end.)
fn percent_when_planned(events: &[SessionEvent], output_type: &str) -> u32 {
    events
        .iter()
        .find(|e| e.document_key == output_type)
        .map(|e| e.stage_percent)
        .unwrap_or_else(|| panic!("no {output_type} event"))
}

/// The stage's percent when its last job, the single conflict detection, completed.
fn percent_at_the_end(events: &[SessionEvent]) -> u32 {
    events
        .iter()
        .rev()
        .find(|e| {
            e.kind == "job_status"
                && e.message == "completed"
                && e.document_key == "conflict_report"
        })
        .map(|e| e.stage_percent)
        .unwrap_or_else(|| panic!("conflict detection never completed"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn amendments_reach_conflict_detection_through_the_blackboard_despite_a_lost_redis_copy() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let session = start(&mut client, &STACK).await;
    let mut stream = client
        .watch_session(WatchSessionRequest {
            session_id: session.clone(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();

    // At the first buried change: pause, lose the Redis copy, resume.
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.expect("event");
        let buried = event.kind == "blackboard_entry" && event.document_key == "buried_change";
        events.push(event);
        if buried {
            break;
        }
    }
    client
        .pause_session(PauseSessionRequest {
            session_id: session.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("pause");
    let cache = Cache::connect(&env.settings.redis.url, 60)
        .await
        .expect("redis");
    assert!(cache.board_clear(&session).await.expect("clear") > 0);
    assert_eq!(
        step_jobs(&env, &session, "contract_conflicts").await,
        0,
        "conflict detection has not been planned yet"
    );
    client
        .resume_session(ResumeSessionRequest {
            session_id: session.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("resume");
    while let Some(Ok(event)) = stream.next().await {
        events.push(event);
    }
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;

    assert_eq!(step_jobs(&env, &session, "contract_parse").await, 3);
    assert_eq!(
        step_jobs(&env, &session, "contract_track_amendments").await,
        3
    );
    assert_eq!(step_jobs(&env, &session, "contract_resolve").await, 3);
    let buried = findings(&mut client, &session, "buried_change").await;
    assert_eq!(buried.len(), 3, "one per tracked document: {buried:?}");
    let conflicts: Vec<String> = session_requests(&session, "conflict_report")
        .into_iter()
        .map(|r| r.messages[0].content.clone())
        .collect();
    assert_eq!(conflicts.len(), 1);
    for finding in &buried {
        assert!(
            conflicts[0].contains(finding),
            "{finding} in conflict detection's prompt"
        );
    }
    for entry_type in [
        "amendment_context",
        "low_confidence_clause",
        "high_risk_dependency",
    ] {
        assert!(
            conflicts[0].contains(&findings(&mut client, &session, entry_type).await[0]),
            "a {entry_type} entry in conflict detection's prompt"
        );
    }
    assert_eq!(
        findings(&mut client, &session, "stale_reference")
            .await
            .len(),
        1
    );
    assert_eq!(
        cache
            .board_list(&session, "buried_change")
            .await
            .expect("list")
            .len(),
        3,
        "the Redis copy was rebuilt"
    );

    // The seed's bands: 30 parsed, 50 tracked, 55 sequenced, 80 resolved, 90 mapped, 100.
    let mut bands: Vec<u32> = [
        "amendment_tracking",
        "timeline",
        "resolved_clause",
        "dependency_map",
        "conflict_report",
    ]
    .iter()
    .map(|output| percent_when_planned(&events, output))
    .collect();
    bands.push(percent_at_the_end(&events));
    assert_eq!(bands, [30, 50, 55, 80, 90, 100]);
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_single_document_skips_amendment_tracking() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let session = start(&mut client, &STACK[..1]).await;
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;
    let done = client
        .get_session(GetSessionRequest {
            session_id: session.clone(),
        })
        .await
        .expect("session")
        .into_inner();
    let skipped: Vec<(&str, &str)> = done
        .skipped_steps
        .iter()
        .map(|s| (s.step_key.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        [(
            "contract_track_amendments",
            "the stack holds a single document"
        )]
    );
    assert_eq!(
        step_jobs(&env, &session, "contract_track_amendments").await,
        0
    );
    assert_eq!(step_jobs(&env, &session, "contract_parse").await, 1);
    assert_eq!(step_jobs(&env, &session, "contract_conflicts").await, 1);
    let position = done.position.expect("position");
    assert_eq!(
        (position.summary.as_str(), position.stage_percent),
        ("stage 1 of 1 (Contract analysis): Detect conflicts", 100)
    );
    assert!(
        findings(&mut client, &session, "buried_change")
            .await
            .is_empty()
    );
    env.teardown().await;
}

/// The pipeline file allows skipping amendment tracking only for a stack of
/// one document: a plan that asks for it over three is overruled, the step
/// runs once per document, and watchers are told which condition failed.
/// The executor starts only once the watcher listens, so the plan's events
/// cannot pass before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plan_skipping_amendment_tracking_over_three_documents_is_overruled() {
    let mut env = TestEnv::new().await;
    let without_executor = ["wallet", "indexer", "planner", "renderer", "gateway"];
    env.start(&without_executor).await;
    for name in without_executor {
        env.wait_serving(name).await;
    }
    let mut client = env.gateway().await;
    let prompt = "Analyse the lease stack. [[simulate:skip:contract_track_amendments]]";
    let session = start_with(&mut client, prompt, &STACK).await;
    let watcher = env
        .watch_events(&session, |kind| {
            kind.starts_with("skip") || kind == "step_skipped"
        })
        .await;
    env.start(&["executor"]).await;
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;
    let seen: Vec<(String, String)> = watcher
        .await
        .expect("watcher")
        .into_iter()
        .map(|e| (e.kind, e.message))
        .collect();
    assert_eq!(
        seen,
        [(
            "skip_ignored".to_string(),
            "contract_track_amendments: the plan's skip is overruled: skip_only_when max_documents = 1 does not hold (the session has 3 documents); the step runs".to_string()
        )]
    );
    assert!(env.session(&session).await.skipped_steps.is_empty());
    assert_eq!(
        step_jobs(&env, &session, "contract_track_amendments").await,
        3
    );
    env.teardown().await;
}

/// (status, attempts) of each job of a step.
async fn attempts(env: &TestEnv, session: &str, step_key: &str) -> Vec<(String, i32)> {
    sqlx::query_as(
        "SELECT status, attempt_count FROM dialectic_generation_jobs
          WHERE session_id = $1 AND step_key = $2 ORDER BY created_at, id",
    )
    .bind(uuid::Uuid::parse_str(session).expect("uuid"))
    .bind(step_key)
    .fetch_all(env.store.pool())
    .await
    .expect("jobs")
}

/// A finding of a type its step does not declare is refused like a missing
/// key: each publishing job's first reply (which adds a `low_confidence`
/// finding beside its declared ones) is retried with the reason, and only the
/// retry's declared findings reach the blackboard.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finding_of_an_undeclared_type_is_refused_and_the_attempt_retried() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let prompt = format!(
        "Analyse the lease stack. {}",
        dialectic_llm::STRAY_FINDING_DIRECTIVE
    );
    let session = start_with(&mut client, &prompt, &STACK[..2]).await;
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;
    assert_eq!(
        attempts(&env, &session, "contract_track_amendments").await,
        vec![("completed".to_string(), 2); 2],
        "each tracking job: one refused reply, one kept"
    );
    assert_eq!(
        attempts(&env, &session, "contract_parse").await,
        vec![("completed".to_string(), 1); 2],
        "a step that publishes nothing is not asked to"
    );
    let retries: Vec<String> = session_requests(&session, "amendment_tracking")
        .iter()
        .filter_map(|r| r.messages.last().map(|m| m.content.clone()))
        .filter(|p| p.contains(dialectic_core::prompt::REJECTED_REPLY))
        .collect();
    assert_eq!(retries.len(), 2, "{retries:?}");
    let reason = format!(
        "has type \"{}\"; this step publishes only [\"buried_change\", \"amendment_context\"]",
        dialectic_llm::STRAY_FINDING_TYPE
    );
    for retry in &retries {
        assert!(retry.contains(&reason), "the retry says why: {retry}");
    }
    assert!(
        findings(&mut client, &session, dialectic_llm::STRAY_FINDING_TYPE)
            .await
            .is_empty()
    );
    assert_eq!(
        findings(&mut client, &session, "buried_change").await.len(),
        2,
        "the kept replies' declared findings"
    );
    env.teardown().await;
}

/// Conflict detection may ask override resolution to look again: one
/// round re-runs resolution with the question in its prompt, and the steps
/// after it; the asking reply's jobs are superseded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conflict_detection_asks_override_resolution_to_look_again() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let prompt = "Analyse the lease stack. [[simulate:clarify:conflict_report>contract_resolve]]";
    let session = start_with(&mut client, prompt, &STACK[..2]).await;
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;
    let statuses = |step: &'static str| {
        let env = &env;
        let session = session.clone();
        async move {
            let mut seen: Vec<String> = attempts(env, &session, step)
                .await
                .into_iter()
                .map(|(status, _)| status)
                .collect();
            seen.sort();
            seen
        }
    };
    let rerun = ["completed".to_string(), "superseded".to_string()];
    assert_eq!(statuses("contract_resolve").await, rerun);
    assert_eq!(statuses("contract_conflicts").await, rerun);
    let asked: Vec<bool> = session_requests(&session, "resolved_clause")
        .iter()
        .map(|r| {
            r.messages
                .iter()
                .any(|m| m.content.contains(dialectic_llm::CLARIFY_QUESTION))
        })
        .collect();
    assert_eq!(
        asked,
        [false, true],
        "the second resolution reads the question"
    );
    env.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn amendments_are_tracked_in_effective_date_order_whatever_the_upload_order() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    // Uploaded base, second amendment, first amendment: the dates the parse
    // extracts put the first amendment before the second.
    let stack = [
        (
            "base.md",
            "Lease. Effective 1 March 2021. 4.2: Rent is due on the first.",
        ),
        (
            "amendment-2.md",
            "Second amendment. Effective 1 September 2024. Exhibit B is deleted.",
        ),
        (
            "amendment-1.md",
            "First amendment. Effective 1 January 2023. 4.2: Rent is due on the fifth.",
        ),
    ];
    let session = start(&mut client, &stack).await;
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;
    let tracked: Vec<String> = session_requests(&session, "amendment_tracking")
        .into_iter()
        .flat_map(|r| {
            r.inputs
                .into_iter()
                .filter(|i| i.kind == "project_document")
                .map(|i| i.document_key)
        })
        .collect();
    assert_eq!(tracked, ["base.md", "amendment-1.md", "amendment-2.md"]);
    env.teardown().await;
}

/// The one document listed under `document_key` in the analysis, as shown.
async fn only_document(client: &mut GatewayClient, session: &str, document_key: &str) -> String {
    let listed = stage_documents(client, session, "contract_analysis", document_key).await;
    assert_eq!(listed.len(), 1, "one {document_key}: {listed:?}");
    document_text(client, &listed[0].resource_id).await
}

/// Issue 40: the timeline, each resolved clause, the dependency map and the
/// amendments' tracking are documents a person reads (listed, shown), while
/// their JSON stays what later steps read; an edit of a resolved clause is
/// parsed back into that JSON, and one that no longer fits is refused
/// naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_analysis_reads_as_documents_and_a_clause_edit_is_parsed_back() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let session = start(&mut client, &STACK).await;
    env.wait_for_session(&session, "iteration_complete_pending_review", true)
        .await;

    let timeline = only_document(&mut client, &session, "timeline").await;
    let sections: Vec<&str> = timeline
        .split_once("## Sections\n\n")
        .map(|(_, list)| list.lines().filter(|l| l.starts_with("- ")).collect())
        .unwrap_or_default();
    assert!(timeline.starts_with("# Timeline\n"), "{timeline}");
    assert_eq!(sections.len(), 3, "{timeline}");
    let map = only_document(&mut client, &session, "dependency_map").await;
    assert!(map.starts_with("# Dependency Map\n"), "{map}");
    let amendments = only_document(&mut client, &session, "amendments").await;
    assert!(amendments.starts_with("# Amendments\n"), "{amendments}");
    let clauses = stage_documents(
        &mut client,
        &session,
        "contract_analysis",
        "resolved_clause",
    )
    .await;
    assert_eq!(clauses.len(), 3, "one per section: {clauses:?}");
    for clause in &clauses {
        let shown = document_text(&mut client, &clause.resource_id).await;
        assert!(
            shown.starts_with("# Resolved Clause\n") && shown.contains("\n## Confidence\n\n"),
            "{shown}"
        );
    }

    // A confidence that is not a number is refused, naming the field.
    let clause = clauses[0].resource_id.clone();
    let refused = client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: clause.clone(),
            content:
                "# Resolved Clause\n\nRent is due on the fifth.\n\n## Confidence\n\nvery high\n"
                    .into(),
            client_request_id: String::new(),
        })
        .await
        .expect_err("a confidence in words");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("`confidence`"), "{refused:?}");

    let amended = "4.2 as amended by Amendment 1: rent is due on the fifth day of each month.";
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: clause.clone(),
            content: format!("# Resolved Clause\n\n{amended}\n"),
            client_request_id: String::new(),
        })
        .await
        .expect("edit");
    eventually(60, "the edited clause rendered", || {
        let mut client = client.clone();
        let clause = clause.clone();
        async move {
            document_text(&mut client, &clause)
                .await
                .contains(amended)
                .then_some(())
        }
    })
    .await;
    // What later steps read: the edit's JSON, its content replaced and its
    // confidence (left out of the edit) kept.
    let edits: Vec<String> = sqlx::query_scalar(
        "SELECT raw_response_storage_path FROM dialectic_contributions
          WHERE session_id = $1::uuid AND document_key = 'resolved_clause'
            AND contribution_type = 'user_edit' AND is_latest_edit",
    )
    .bind(&session)
    .fetch_all(env.store.pool())
    .await
    .expect("edits");
    assert_eq!(edits.len(), 1, "{edits:?}");
    let data: serde_json::Value =
        serde_json::from_str(&env.blob.get_string(&edits[0]).await.expect("edit body"))
            .expect("the edit is JSON");
    assert_eq!(data["content"], amended, "{data}");
    assert!(data["confidence"].is_number(), "{data}");
    env.teardown().await;
}
