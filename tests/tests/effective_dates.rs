//! Dates are dates (issue 54, item 4): the contract stack tracks amendments
//! in the order of the effective dates the parse extracted, read as dates
//! whatever form the model copied them in, and a date that cannot be read is
//! tracked last and reported on the blackboard, never sorted as text.

use dialectic_e2e::{TestEnv, session_requests, upload_documents};
use dialectic_proto::v1::{CreateProjectRequest, GetBlackboardRequest, StartSessionRequest};

/// Each document makes the simulated parse copy its date as written
/// (`[[simulate:dates-as-written]]`), as a model ignoring "YYYY-MM-DD" would.
/// Uploaded in an order that neither time nor text order follows; as text,
/// "01/12/2022" < "1.9.2024" < "1st March 2021" < "2023-03-15" < "June…".
const STACK: [(&str, &str); 6] = [
    (
        "amendment-4.md",
        "[[simulate:dates-as-written]] Fourth amendment. Effective 1.9.2024. Exhibit B is deleted.",
    ),
    (
        "side-letter.md",
        "[[simulate:dates-as-written]] Side letter. Effective next spring. Parking is free.",
    ),
    (
        "amendment-3.md",
        "[[simulate:dates-as-written]] Third amendment. Effective 2023-03-15. 7.1: See exhibit C.",
    ),
    (
        "amendment-2.md",
        "[[simulate:dates-as-written]] Second amendment. Effective 01/12/2022. 4.2: Rent is due on the tenth.",
    ),
    (
        "base.md",
        "[[simulate:dates-as-written]] Lease. Effective 1st March 2021. 4.2: Rent is due on the first.",
    ),
    (
        "amendment-1.md",
        "[[simulate:dates-as-written]] First amendment. Effective June 30, 2022. 4.2: Rent is due on the fifth.",
    ),
];

/// By time, with the contract pipeline's day-first rule ("01/12/2022" is
/// 1 December, after 30 June; month first it would be 12 January, before),
/// then the document whose date does not parse.
const TRACKED: [&str; 6] = [
    "base.md",
    "amendment-1.md",
    "amendment-2.md",
    "amendment-3.md",
    "amendment-4.md",
    "side-letter.md",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn amendments_are_tracked_by_their_real_dates_and_an_unreadable_one_is_reported() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let project = client
        .create_project(CreateProjectRequest {
            name: "Lease".into(),
            initial_user_prompt: "Analyse the lease stack.".into(),
            pipeline: "contract_stack".into(),
            ..Default::default()
        })
        .await
        .expect("project")
        .into_inner();
    upload_documents(&mut client, &project.id, &STACK).await;
    let session = client
        .start_session(StartSessionRequest {
            project_id: project.id,
            models: vec!["simulated".into()],
            auto_advance: true,
            ..Default::default()
        })
        .await
        .expect("session")
        .into_inner()
        .id;
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
    assert_eq!(tracked, TRACKED);

    let reported = client
        .get_blackboard(GetBlackboardRequest {
            session_id: session.clone(),
            entry_type: "unparsed_date".into(),
        })
        .await
        .expect("blackboard")
        .into_inner()
        .entries;
    assert_eq!(
        reported.len(),
        1,
        "only the side letter's date: {reported:?}"
    );
    let data: serde_json::Value = serde_json::from_str(&reported[0].data_json).expect("entry JSON");
    assert_eq!(data["document"], "side-letter.md");
    assert_eq!(data["key"], "effective_date");
    assert_eq!(data["value"], "next spring");
    let finding = data["finding"].as_str().expect("finding");
    assert!(
        finding.contains("side-letter.md") && finding.contains("not a date"),
        "{finding}"
    );
    env.teardown().await;
}
