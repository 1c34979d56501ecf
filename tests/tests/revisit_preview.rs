//! Issue 55 item 6: a revisit preview (RevisitStage `dry_run`). After the
//! essay ran to review and the user took section 2 out of the outline, a dry
//! run changes nothing and says what each impact level would do; the real
//! moderate revisit then archives exactly what the preview named, and the
//! preview's diff shows the edit.

use dialectic_e2e::{GatewayClient, TestEnv, document_text, eventually, stage_documents};
use dialectic_proto::v1::{
    GetSessionRequest, ListSessionRevisionsRequest, ListStageDocumentsRequest, RevisitImpact,
    RevisitPreview, RevisitStageRequest, RevisitStageResponse, SaveDocumentEditRequest,
};
use std::collections::BTreeSet;

const PROMPT: &str = "An essay arguing that libraries should lend tools. \
    [[simulate:items:sections:3]] [[simulate:items:paragraphs:1]]";
const REVISED: &str = "essay_structuring";
const LATER: [&str; 2] = ["argument_development", "paragraph_writing"];

/// What a dry run must leave as it was: the session, its revisions, its
/// documents (with their flags) and their objects.
#[derive(Debug, PartialEq)]
struct Snapshot {
    status: String,
    revision: i64,
    revisions: usize,
    /// Revision rows and archived documents of the session, in the database.
    rows: (i64, i64),
    /// (resource id, stage, storage key, flagged for review)
    documents: Vec<(String, String, String, bool)>,
    objects: Vec<Vec<u8>>,
}

async fn snapshot(env: &TestEnv, client: &mut GatewayClient, session_id: &str) -> Snapshot {
    let session = client
        .get_session(GetSessionRequest {
            session_id: session_id.to_string(),
        })
        .await
        .expect("session")
        .into_inner();
    let revisions = client
        .list_session_revisions(ListSessionRevisionsRequest {
            session_id: session_id.to_string(),
        })
        .await
        .expect("revisions")
        .into_inner()
        .revisions
        .len();
    let listed = client
        .list_stage_documents(ListStageDocumentsRequest {
            session_id: session_id.to_string(),
            stage_slug: String::new(),
            iteration: 0,
            ..Default::default()
        })
        .await
        .expect("documents")
        .into_inner()
        .documents;
    let mut objects = Vec::with_capacity(listed.len());
    for doc in &listed {
        objects.push(
            env.blob
                .get(&doc.storage_key)
                .await
                .expect("object")
                .to_vec(),
        );
    }
    let id = uuid::Uuid::parse_str(session_id).expect("uuid");
    let rows = (
        env.count(
            "SELECT count(*) FROM dialectic_session_revisions WHERE session_id = $1",
            id,
        )
        .await,
        env.count(
            "SELECT count(*) FROM dialectic_project_resources
              WHERE session_id = $1 AND resource_type = 'archived_document'",
            id,
        )
        .await,
    );
    Snapshot {
        status: session.status,
        revision: env
            .count(
                "SELECT revision::bigint FROM dialectic_sessions WHERE id = $1",
                id,
            )
            .await,
        revisions,
        rows,
        documents: listed
            .into_iter()
            .map(|d| (d.resource_id, d.stage_slug, d.storage_key, d.needs_review))
            .collect(),
        objects,
    }
}

fn request(session_id: &str, impact: RevisitImpact, dry_run: bool) -> RevisitStageRequest {
    RevisitStageRequest {
        session_id: session_id.to_string(),
        stage_slug: REVISED.into(),
        impact: String::new(),
        reason: "section 2 goes".into(),
        impact_level: impact.into(),
        dry_run,
        client_request_id: String::new(),
    }
}

fn archived_keys(preview: &RevisitPreview) -> BTreeSet<String> {
    preview
        .archived
        .iter()
        .map(|d| d.archived_key.clone())
        .collect()
}

/// Takes section 2 out of the outline and waits until its render is done
/// and nothing runs.
async fn edit_outline(env: &TestEnv, client: &mut GatewayClient, session_id: &str) {
    let outline = stage_documents(client, session_id, REVISED, "outline").await;
    let outline = outline[0].resource_id.clone();
    let markdown = document_text(client, &outline).await;
    let edited: String = markdown
        .lines()
        .filter(|line| !line.contains("sections item 2 of 3"))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_ne!(edited, markdown, "the outline lists section 2");
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: outline.clone(),
            content: edited,
            client_request_id: String::new(),
        })
        .await
        .expect("edit");
    let session = uuid::Uuid::parse_str(session_id).expect("uuid");
    eventually(60, "the edited outline rendered and nothing runs", || {
        let mut client = client.clone();
        let outline = outline.clone();
        async move {
            let text = document_text(&mut client, &outline).await;
            let idle = env
                .count(
                    "SELECT count(*) FROM dialectic_generation_jobs
                      WHERE session_id = $1 AND status NOT IN ('completed', 'failed', 'retry_loop_failed', 'superseded')",
                    session,
                )
                .await
                == 0;
            (!text.contains("sections item 2 of 3") && idle).then_some(())
        }
    })
    .await;
}

/// The three previews say what seed 003 says each level does.
fn check_previews(done: &RevisitStageResponse, later_keys: &BTreeSet<String>) {
    let levels: Vec<i32> = done.previews.iter().map(|p| p.impact_level).collect();
    let expected = [
        RevisitImpact::Minor,
        RevisitImpact::Moderate,
        RevisitImpact::Major,
    ];
    assert_eq!(levels, expected.map(i32::from), "{:?}", done.previews);
    let [minor, moderate, major] = &done.previews[..] else {
        unreachable!("three previews");
    };
    assert!(
        [minor, moderate, major]
            .iter()
            .all(|p| p.refused.is_empty())
    );
    assert_eq!(minor.needs_review, LATER);
    assert!(minor.archived.is_empty() && minor.reruns.is_empty());
    assert_eq!(
        (minor.session_status.as_str(), minor.revision),
        ("iteration_complete_pending_review", 0)
    );
    let major_current: BTreeSet<String> = major
        .archived
        .iter()
        .map(|d| d.storage_key.clone())
        .collect();
    assert_eq!(
        &major_current, later_keys,
        "major archives every later document"
    );
    assert_eq!(major.reruns, LATER);
    assert!(moderate.reruns.is_empty() && moderate.needs_review.is_empty());
    for p in [moderate, major] {
        assert_eq!(
            (p.session_status.as_str(), p.revision),
            ("pending_argument_development", 1)
        );
        for d in &p.archived {
            assert!(LATER.contains(&d.stage_slug.as_str()), "{d:?}");
            assert!(
                !d.document_key.is_empty() && d.model == "simulated",
                "{d:?}"
            );
            let expected = d
                .storage_key
                .strip_suffix(".md")
                .map(|s| format!("{s}.v1.md"));
            assert_eq!(Some(&d.archived_key), expected.as_ref(), "{d:?}");
        }
    }
    let moderate_set = archived_keys(moderate);
    assert!(
        !moderate_set.is_empty() && moderate_set.is_subset(&archived_keys(major)),
        "{moderate_set:?}"
    );
    assert!(
        moderate.archived.len() < major.archived.len(),
        "by lineage, section 1's map is kept: {moderate_set:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dry_run_changes_nothing_and_predicts_the_moderate_revisit_exactly() {
    let mut env = TestEnv::new().await;
    env.start_all().await;
    let mut client = env.gateway().await;
    let (_, session_id) = env
        .new_session_on("essay", PROMPT, &["simulated"], true)
        .await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    edit_outline(&env, &mut client, &session_id).await;
    let before = snapshot(&env, &mut client, &session_id).await;
    let later_keys: BTreeSet<String> = before
        .documents
        .iter()
        .filter(|(_, stage, _, _)| LATER.contains(&stage.as_str()))
        .map(|(_, _, key, _)| key.clone())
        .collect();
    assert!(later_keys.len() >= 4, "{later_keys:?}");

    let done = client
        .revisit_stage(request(&session_id, RevisitImpact::Moderate, true))
        .await
        .expect("dry run")
        .into_inner();
    check_previews(&done, &later_keys);
    assert!(done.archived.is_empty() && done.needs_review.is_empty());
    assert_eq!(
        done.diffs.len(),
        1,
        "the outline was edited: {:?}",
        done.diffs
    );
    let diff = &done.diffs[0];
    assert_eq!(
        (diff.stage_slug.as_str(), diff.document_key.as_str()),
        (REVISED, "outline")
    );
    assert!(
        diff.unified_diff
            .lines()
            .any(|l| l.starts_with('-') && l.contains("item 2 of 3")),
        "the diff shows section 2 going: {}",
        diff.unified_diff
    );
    let moderate = done.previews[1].clone();
    for key in archived_keys(&moderate) {
        assert!(env.blob.get(&key).await.is_err(), "{key} was not written");
    }
    assert_eq!(
        snapshot(&env, &mut client, &session_id).await,
        before,
        "a dry run changes nothing"
    );

    // The CLI prints the same preview, and in JSON mode the message itself.
    let printed = cli(
        &env,
        &[
            "session",
            "revisit",
            "--session",
            &session_id,
            "--stage",
            REVISED,
            "--dry-run",
        ],
    )
    .await;
    assert!(
        printed.contains("dry run: nothing was changed"),
        "{printed}"
    );
    for d in &moderate.archived {
        let line = format!(
            "archives {} {} (simulated): {} -> ",
            d.stage_slug, d.document_key, d.storage_key
        );
        assert!(printed.contains(&line), "{printed}");
    }
    assert!(
        printed.contains("moderate: session pending_argument_development (revision 1)\n"),
        "{printed}"
    );
    assert!(
        printed
            .lines()
            .any(|l| l.starts_with('-') && l.contains("item 2 of 3")),
        "{printed}"
    );
    let json = cli(
        &env,
        &[
            "--output",
            "json",
            "session",
            "revisit",
            "--session",
            &session_id,
            "--stage",
            REVISED,
            "--dry-run",
        ],
    )
    .await;
    let json: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        json["previews"][1]["impact_level"],
        "REVISIT_IMPACT_MODERATE"
    );
    assert_eq!(
        snapshot(&env, &mut client, &session_id).await,
        before,
        "the CLI's dry runs change nothing"
    );

    // The real moderate revisit archives exactly what the preview named.
    let real = client
        .revisit_stage(request(&session_id, RevisitImpact::Moderate, false))
        .await
        .expect("moderate")
        .into_inner();
    let archived: BTreeSet<String> = real.archived.iter().cloned().collect();
    assert_eq!(archived, archived_keys(&moderate));
    assert_eq!(real.revision, moderate.revision);
    assert_eq!(
        real.session.expect("session").status,
        moderate.session_status
    );
    env.teardown().await;
}

/// `dialectic ARGS` against the env's gateway; its stdout (it must succeed).
async fn cli(env: &TestEnv, args: &[&str]) -> String {
    let binary = dialectic_e2e::workspace_binary("dialectic-cli", "dialectic");
    let out = dialectic_e2e::against_gateway(&mut tokio::process::Command::new(binary), env)
        .args(args)
        .output()
        .await
        .expect("dialectic");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
