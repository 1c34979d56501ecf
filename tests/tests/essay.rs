//! The essay pipeline (seed 003), shipped as `pipelines/essay.toml`, run to
//! the end on six service processes: thesis → outline → one argument map per
//! outline section → one paragraph per planned paragraph in order, each
//! reading the draft so far → the final essay. GetSession says where it is
//! ("stage 4 of 4 (Paragraph writing): …, section 2 of 3, paragraph 1 of 2"), and a
//! major revisit of the outline runs the later stages again. The outline and the
//! argument maps are documents, and an edit of the outline steers what follows.

use dialectic_e2e::{
    GatewayClient, TestEnv, document_text, eventually, session_requests, stage_documents,
};
use dialectic_proto::v1::{
    GetSessionRequest, PauseSessionRequest, ResumeSessionRequest, RevisitStageRequest,
    SaveDocumentEditRequest, SessionPosition, SubmitStageResponsesRequest,
};
use futures::StreamExt;
use std::collections::BTreeMap;

const PROMPT: &str = "An essay arguing that small towns should own their broadband. \
    [[simulate:items:sections:3]] [[simulate:items:paragraphs:2]]";

async fn position(client: &mut GatewayClient, session_id: &str) -> SessionPosition {
    client
        .get_session(GetSessionRequest {
            session_id: session_id.to_string(),
        })
        .await
        .expect("session")
        .into_inner()
        .position
        .expect("a position")
}

/// Pauses the session once its first paragraph is written, and waits until
/// nothing runs.
async fn pause_after_first_paragraph(env: &TestEnv, client: &mut GatewayClient, session_id: &str) {
    let mut events = client
        .watch_session(dialectic_proto::v1::WatchSessionRequest {
            session_id: session_id.to_string(),
            after_sequence: None,
        })
        .await
        .expect("watch")
        .into_inner();
    while let Some(event) = events.next().await {
        let event = event.expect("event");
        if event.kind == "job_status"
            && event.message == "completed"
            && event.document_key == "paragraph"
        {
            break;
        }
    }
    client
        .pause_session(PauseSessionRequest {
            session_id: session_id.to_string(),
            client_request_id: String::new(),
        })
        .await
        .expect("pause");
    let session = uuid::Uuid::parse_str(session_id).expect("uuid");
    eventually(60, "the running paragraph to finish", || async {
        let running = env
            .count(
                "SELECT count(*) FROM dialectic_generation_jobs WHERE session_id = $1 AND status IN ('processing', 'retrying')",
                session,
            )
            .await;
        (running == 0).then_some(())
    })
    .await;
}

/// Storage keys of the inputs under `document_key` of each recorded request
/// writing `output_type`, in the order the requests were made.
fn inputs_of(session_id: &str, output_type: &str, document_key: &str) -> Vec<Vec<String>> {
    session_requests(session_id, output_type)
        .into_iter()
        .map(|r| {
            r.inputs
                .iter()
                .filter(|i| i.document_key == document_key)
                .map(|i| i.storage_key.clone().unwrap_or_default())
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_essay_runs_section_by_section_paragraph_by_paragraph_and_revisits() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let (_, session_id) = env
        .new_session_on("essay", PROMPT, &["simulated"], true)
        .await;

    pause_after_first_paragraph(&env, &mut client, &session_id).await;
    let paused = position(&mut client, &session_id).await;
    assert_eq!(
        (
            paused.stage_number,
            paused.stage_count,
            paused.step_key.as_str()
        ),
        (4, 4, "paragraph_writing_paragraph")
    );
    // Three sections of two paragraphs: the paragraph is counted within its
    // section (seed 003 "Stage N, Section M, Paragraph P"), not across all six.
    assert_eq!(
        (
            paused.within_unit.as_str(),
            paused.within_count,
            paused.unit.as_str(),
            paused.count
        ),
        ("section", 3, "paragraph", 2),
        "{paused:?}"
    );
    // Paragraphs that started before the pause took finish; nothing new starts.
    let ordinal = (paused.within_index - 1) * 2 + paused.index;
    assert!(
        (2..=6).contains(&ordinal),
        "at least the first paragraph written: {paused:?}"
    );
    assert_eq!(
        paused.summary,
        format!(
            "stage 4 of 4 (Paragraph writing): Write one paragraph, section {} of 3, paragraph {} of 2",
            paused.within_index, paused.index
        )
    );
    client
        .resume_session(ResumeSessionRequest {
            session_id: session_id.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect("resume");
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;

    // One argument map per outline section, each reading only its own.
    let sections = sections_asked(&session_id);
    assert_eq!(sections.len(), 3, "{sections:?}");
    for n in 1..=3 {
        assert_eq!(
            sections
                .iter()
                .filter(|s| s.contains(&format!("sections item {n} of 3")))
                .count(),
            1,
            "section {n}: {sections:?}"
        );
    }
    // Six paragraphs in order: the k-th reads the k - 1 before it, in chain order.
    let drafts = inputs_of(&session_id, "paragraph", "paragraph");
    let seen: Vec<usize> = drafts.iter().map(Vec::len).collect();
    assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
    let places = |keys: &[String]| -> Vec<String> {
        keys.iter()
            .map(|k| {
                let name = k.rsplit('/').next().unwrap_or_default();
                name.split('_').nth(2).unwrap_or_default()[..3].to_string()
            })
            .collect()
    };
    assert_eq!(places(&drafts[5]), ["001", "002", "003", "004", "005"]);
    let assembled = inputs_of(&session_id, "final_essay", "paragraph");
    assert_eq!(assembled.len(), 1);
    assert_eq!(
        places(&assembled[0]),
        ["001", "002", "003", "004", "005", "006"]
    );

    let done = position(&mut client, &session_id).await;
    assert_eq!(
        done.summary,
        "stage 4 of 4 (Paragraph writing): Check the voice"
    );
    assert_eq!(done.stage_percent, 100);
    let essays =
        stage_documents(&mut client, &session_id, "paragraph_writing", "final_essay").await;
    let essay = essays.first().expect("the final essay");
    let content = document_text(&mut client, &essay.resource_id).await;
    assert!(content.starts_with("# Final Essay"), "{content}");

    // A major change to the outline runs argument development and paragraph
    // writing again; the thesis stays.
    client
        .revisit_stage(RevisitStageRequest {
            session_id: session_id.clone(),
            stage_slug: "essay_structuring".into(),
            impact: "major".into(),
            reason: "two sections merge".into(),
            impact_level: 0,
            dry_run: false,
            client_request_id: String::new(),
        })
        .await
        .expect("revisit");
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let roots: Vec<(String, i64)> = sqlx::query_as(
        "SELECT stage_slug, count(*) FROM dialectic_generation_jobs
         WHERE session_id = $1 AND job_type = 'PLAN' AND parent_job_id IS NULL GROUP BY 1",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("roots");
    let roots: BTreeMap<String, i64> = roots.into_iter().collect();
    assert_eq!(
        roots,
        BTreeMap::from([
            ("thesis_development".to_string(), 1),
            ("essay_structuring".to_string(), 1),
            ("argument_development".to_string(), 2),
            ("paragraph_writing".to_string(), 2),
        ])
    );
    assert_eq!(inputs_of(&session_id, "final_essay", "paragraph").len(), 2);
    env.teardown().await;
}

const STEERED_PROMPT: &str = "An essay arguing that libraries should lend tools. \
    [[simulate:items:sections:3]] [[simulate:items:paragraphs:1]]";

async fn submit(client: &mut GatewayClient, session_id: &str, stage: &str) {
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.to_string(),
            stage_slug: stage.into(),
            responses: Vec::new(),
            client_request_id: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("submit {stage}: {e}"));
}

/// `markdown` without its lines that contain any of `needles`.
fn without_lines(markdown: &str, needles: &[&str]) -> String {
    markdown
        .lines()
        .filter(|line| !needles.iter().any(|n| line.contains(n)))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The list under `## Sections`, one line per section.
fn listed_sections(markdown: &str) -> Vec<String> {
    markdown
        .split_once("## Sections\n\n")
        .map(|(_, rest)| {
            rest.lines()
                .take_while(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Issue 40: the outline and each section's argument map are documents a
/// person reads (listed, shown), while their JSON stays what later steps
/// read; an edit of the outline that removes a section is parsed back into
/// that JSON, so argument development fans out to one job fewer, and an edit
/// that leaves the outline one section is refused naming `sections`. The
/// paragraphs make one draft document, in order, not edited as a whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn essay_documents_are_readable_and_an_outline_edit_steers_the_fan_out() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let (_, session_id) = env
        .new_session_on("essay", STEERED_PROMPT, &["simulated"], false)
        .await;
    env.wait_for_session(&session_id, "pending_essay_structuring", true)
        .await;
    submit(&mut client, &session_id, "thesis_development").await;
    env.wait_for_session(&session_id, "pending_argument_development", true)
        .await;

    let outlines = stage_documents(&mut client, &session_id, "essay_structuring", "outline").await;
    assert_eq!(outlines.len(), 1, "{outlines:?}");
    let outline = outlines[0].resource_id.clone();
    let markdown = document_text(&mut client, &outline).await;
    assert!(markdown.starts_with("# Outline\n"), "{markdown}");
    let sections = listed_sections(&markdown);
    assert_eq!(sections.len(), 3, "{markdown}");
    for (line, n) in sections.iter().zip(1..) {
        assert!(
            line.starts_with(&format!("{n}. "))
                && line.ends_with(&format!("sections item {n} of 3")),
            "{markdown}"
        );
    }

    // One section is fewer than the outline's schema allows: refused, nothing stored.
    let one = without_lines(&markdown, &["sections item 2 of 3", "sections item 3 of 3"]);
    let refused = client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: outline.clone(),
            content: one,
            client_request_id: String::new(),
        })
        .await
        .expect_err("an outline of one section");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("`sections`"), "{refused:?}");

    let edited = without_lines(&markdown, &["sections item 2 of 3"]);
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: outline.clone(),
            content: edited,
            client_request_id: String::new(),
        })
        .await
        .expect("edit");
    eventually(60, "the edited outline rendered", || {
        let mut client = client.clone();
        let outline = outline.clone();
        async move {
            let now = listed_sections(&document_text(&mut client, &outline).await);
            let renumbered = now.len() == 2
                && now[0].starts_with("1. ")
                && now[0].ends_with("item 1 of 3")
                && now[1].starts_with("2. ")
                && now[1].ends_with("item 3 of 3");
            renumbered.then_some(())
        }
    })
    .await;

    submit(&mut client, &session_id, "essay_structuring").await;
    env.wait_for_session(&session_id, "pending_paragraph_writing", true)
        .await;
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let jobs = env
        .count(
            "SELECT count(*) FROM dialectic_generation_jobs
              WHERE session_id = $1 AND step_key = 'argument_development_section'",
            session,
        )
        .await;
    assert_eq!(jobs, 2, "one argument map job per section the edit left");
    let mut read = sections_asked(&session_id);
    read.sort_unstable();
    assert!(
        read.len() == 2
            && read[0].ends_with("sections item 1 of 3")
            && read[1].ends_with("sections item 3 of 3"),
        "each section job reads its section of the edited outline: {read:?}"
    );
    let maps = stage_documents(
        &mut client,
        &session_id,
        "argument_development",
        "argument_map",
    )
    .await;
    assert_eq!(
        maps.len(),
        2,
        "one argument map document per section: {maps:?}"
    );
    for map in &maps {
        let markdown = document_text(&mut client, &map.resource_id).await;
        assert!(
            markdown.contains("## Paragraphs\n\n1. ")
                && markdown.contains("paragraphs item 1 of 1\n"),
            "{markdown}"
        );
    }
    // The draft: one document of every paragraph written so far, in order.
    submit(&mut client, &session_id, "argument_development").await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let drafts = stage_documents(&mut client, &session_id, "paragraph_writing", "draft").await;
    assert_eq!(drafts.len(), 1, "{drafts:?}");
    let draft = document_text(&mut client, &drafts[0].resource_id).await;
    assert!(draft.starts_with("# Draft\n"), "{draft}");
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT raw_response_storage_path FROM dialectic_contributions
          WHERE session_id = $1 AND document_key = 'paragraph' ORDER BY file_name",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("paragraphs");
    assert_eq!(keys.len(), 2, "one paragraph per section: {keys:?}");
    let mut at = 0;
    for key in &keys {
        let reply: serde_json::Value =
            serde_json::from_str(&env.blob.get_string(key).await.expect("paragraph"))
                .expect("JSON");
        let text = reply["content"].as_str().expect("content").trim();
        let found = draft[at..]
            .find(text)
            .unwrap_or_else(|| panic!("{key} not in the draft after byte {at}: {draft}"));
        at += found + text.len();
    }
    let refused = client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: drafts[0].resource_id.clone(),
            content: draft.clone(),
            client_request_id: String::new(),
        })
        .await
        .expect_err("the draft is not edited as a whole");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    edit_the_first_paragraph(&mut client, &session_id, &draft).await;
    env.teardown().await;
}

/// Issue 55 item 5: each paragraph is a document of its own; the writer's
/// edit of the first assembles the draft again from it and flags the second,
/// which continued the text it replaced, for review.
async fn edit_the_first_paragraph(client: &mut GatewayClient, session_id: &str, draft: &str) {
    let mut paragraphs =
        stage_documents(client, session_id, "paragraph_writing", "paragraph").await;
    paragraphs.sort_by(|a, b| a.storage_key.cmp(&b.storage_key));
    assert_eq!(
        paragraphs.len(),
        2,
        "a document per paragraph: {paragraphs:?}"
    );
    assert!(paragraphs.iter().all(|p| !p.needs_review), "{paragraphs:?}");
    let first = document_text(client, &paragraphs[0].resource_id).await;
    let second = document_text(client, &paragraphs[1].resource_id).await;
    assert!(first.starts_with("# Paragraph 1\n\n"), "{first}");
    assert!(second.starts_with("# Paragraph 2\n\n"), "{second}");
    let old_text = first.trim_start_matches("# Paragraph 1").trim();
    assert!(draft.contains(old_text), "{old_text:?} not in {draft}");
    const REWRITTEN: &str = "The writer rewrote this opening paragraph by hand.";
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: paragraphs[0].resource_id.clone(),
            content: format!("# Paragraph 1\n\n{REWRITTEN}\n"),
            client_request_id: String::new(),
        })
        .await
        .expect("a paragraph is edited on its own");
    let drafts = stage_documents(client, session_id, "paragraph_writing", "draft").await;
    let draft_id = drafts[0].resource_id.clone();
    let reassembled = eventually(60, "the draft assembled from the edit", || {
        let mut client = client.clone();
        let draft_id = draft_id.clone();
        async move {
            let now = document_text(&mut client, &draft_id).await;
            now.contains(REWRITTEN).then_some(now)
        }
    })
    .await;
    let second_text = second.trim_start_matches("# Paragraph 2").trim();
    assert!(
        !reassembled.contains(old_text)
            && reassembled.find(REWRITTEN) < reassembled.find(second_text),
        "the edit replaces the first paragraph, before the second: {reassembled}"
    );
    let now = stage_documents(client, session_id, "paragraph_writing", "paragraph").await;
    let flagged: Vec<(String, bool)> = paragraphs
        .iter()
        .map(|p| {
            let listed = now.iter().find(|n| n.resource_id == p.resource_id);
            (
                p.resource_id.clone(),
                listed.is_some_and(|n| n.needs_review),
            )
        })
        .collect();
    assert_eq!(
        flagged,
        [
            (paragraphs[0].resource_id.clone(), false),
            (paragraphs[1].resource_id.clone(), true)
        ],
        "only the paragraph after the edited one is flagged"
    );
    assert_eq!(
        document_text(client, &paragraphs[0].resource_id).await,
        format!("# Paragraph 1\n\n{REWRITTEN}\n")
    );
    let session = client
        .get_session(GetSessionRequest {
            session_id: session_id.to_string(),
        })
        .await
        .expect("session")
        .into_inner();
    assert_eq!(session.needs_review_stages, ["paragraph_writing"]);
}

/// Issue 40: a moderate revisit archives only what depends on the change,
/// by lineage. The outline loses its second of three sections; the map of
/// section 1 read an item the edit left as it was, and the paragraph of
/// section 1 read only that map, so both are kept (not archived, not run
/// again: the re-run adopts them). The maps whose item changed or went, the
/// paragraphs after the first changed link, the draft holding them and the
/// final essay are archived, and the re-run writes them again. A second
/// moderate revisit with no new edit is about the outline as a whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_moderate_revisit_of_the_outline_reruns_only_what_the_edit_changed() {
    let mut env = TestEnv::new().await;
    env.start_all_recording().await;
    let mut client = env.gateway().await;
    let (_, session_id) = env
        .new_session_on("essay", STEERED_PROMPT, &["simulated"], true)
        .await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    let session = uuid::Uuid::parse_str(&session_id).expect("uuid");
    let maps = stage_documents(
        &mut client,
        &session_id,
        "argument_development",
        "argument_map",
    )
    .await;
    assert_eq!(maps.len(), 3, "{maps:?}");
    let firsts: Vec<_> = maps
        .iter()
        .filter(|m| file_name(&m.storage_key).contains("-01"))
        .collect();
    assert_eq!(firsts.len(), 1, "section 1's map: {maps:?}");
    let first_map = firsts[0].clone();
    let first_map_bytes = env.blob.get(&first_map.storage_key).await.expect("map");
    let paragraphs_before = paragraph_keys(&env, session).await;
    assert_eq!(paragraphs_before.len(), 3, "{paragraphs_before:?}");
    let essays =
        stage_documents(&mut client, &session_id, "paragraph_writing", "final_essay").await;
    assert_eq!(essays.len(), 1, "{essays:?}");
    let drafts = stage_documents(&mut client, &session_id, "paragraph_writing", "draft").await;
    assert_eq!(drafts.len(), 1, "{drafts:?}");
    let fact_checks =
        stage_documents(&mut client, &session_id, "paragraph_writing", "fact_check").await;
    assert_eq!(fact_checks.len(), 1, "{fact_checks:?}");
    let voice_checks =
        stage_documents(&mut client, &session_id, "paragraph_writing", "voice_check").await;
    assert_eq!(voice_checks.len(), 1, "{voice_checks:?}");
    // Each paragraph is a document too: the first, which read only the kept
    // map, stays; those after the first changed link go.
    let mut paragraphs =
        stage_documents(&mut client, &session_id, "paragraph_writing", "paragraph").await;
    paragraphs.sort_by(|a, b| a.storage_key.cmp(&b.storage_key));
    assert_eq!(paragraphs.len(), 3, "{paragraphs:?}");
    let later_paragraphs = &paragraphs[1..];

    let outline = stage_documents(&mut client, &session_id, "essay_structuring", "outline").await;
    let outline = outline[0].resource_id.clone();
    let markdown = document_text(&mut client, &outline).await;
    client
        .save_document_edit(SaveDocumentEditRequest {
            resource_id: outline.clone(),
            content: without_lines(&markdown, &["sections item 2 of 3"]),
            client_request_id: String::new(),
        })
        .await
        .expect("edit");
    eventually(60, "the edited outline rendered and nothing runs", || {
        let mut client = client.clone();
        let outline = outline.clone();
        let env = &env;
        async move {
            let sections = listed_sections(&document_text(&mut client, &outline).await);
            let idle = env
                .count(
                    "SELECT count(*) FROM dialectic_generation_jobs
                      WHERE session_id = $1 AND status NOT IN ('completed', 'failed', 'retry_loop_failed', 'superseded')",
                    session,
                )
                .await
                == 0;
            (sections.len() == 2 && idle).then_some(())
        }
    })
    .await;

    let revisit = client
        .revisit_stage(RevisitStageRequest {
            session_id: session_id.clone(),
            stage_slug: "essay_structuring".into(),
            impact: "moderate".into(),
            reason: "section 2 goes".into(),
            impact_level: 0,
            dry_run: false,
            client_request_id: String::new(),
        })
        .await
        .expect("moderate")
        .into_inner();
    let mut archived: Vec<String> = revisit
        .archived
        .iter()
        .map(|k| file_name(k).to_string())
        .collect();
    archived.sort();
    let mut expected: Vec<String> = maps
        .iter()
        .chain(&essays)
        .chain(&drafts)
        .chain(&fact_checks)
        .chain(&voice_checks)
        .chain(later_paragraphs)
        .filter(|d| d.resource_id != first_map.resource_id)
        .map(|d| dialectic_core::revisit::archived_name(file_name(&d.storage_key), 1))
        .collect();
    expected.sort();
    assert_eq!(
        archived, expected,
        "the changed maps, the paragraphs after the first changed link, the draft holding them, the essay and the fact and voice checks of the draft, not section 1's map or paragraph"
    );
    let current = stage_documents(
        &mut client,
        &session_id,
        "argument_development",
        "argument_map",
    )
    .await;
    let current: Vec<&str> = current.iter().map(|d| d.resource_id.as_str()).collect();
    assert_eq!(
        current,
        [first_map.resource_id.as_str()],
        "section 1's map stays current"
    );
    assert_eq!(
        paragraph_keys(&env, session).await,
        paragraphs_before[..1],
        "section 1's paragraph stays current, the two after it are archived"
    );

    submit(&mut client, &session_id, "essay_structuring").await;
    env.wait_for_session(&session_id, "iteration_complete_pending_review", true)
        .await;
    // Section 1's map and paragraph were not asked for again: one new map
    // (section 3, now second), one new paragraph, one new essay.
    let asked = sections_asked(&session_id);
    assert_eq!(asked.len(), 4, "{asked:?}");
    assert!(asked[3].ends_with("sections item 3 of 3"), "{asked:?}");
    let drafts_read = inputs_of(&session_id, "paragraph", "paragraph");
    assert_eq!(drafts_read.len(), 4, "{drafts_read:?}");
    assert_eq!(
        drafts_read[3],
        paragraphs_before[..1],
        "the new paragraph reads the kept one as the draft so far"
    );
    assert_eq!(inputs_of(&session_id, "final_essay", "paragraph").len(), 2);
    let now = stage_documents(
        &mut client,
        &session_id,
        "argument_development",
        "argument_map",
    )
    .await;
    assert_eq!(now.len(), 2, "{now:?}");
    let kept = now
        .iter()
        .find(|m| m.resource_id == first_map.resource_id)
        .expect("the kept map is still current");
    assert_eq!(kept.storage_key, first_map.storage_key);
    assert_eq!(
        env.blob.get(&kept.storage_key).await.expect("map"),
        first_map_bytes,
        "byte for byte"
    );
    let after = paragraph_keys(&env, session).await;
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(
        after[0], paragraphs_before[0],
        "the kept paragraph leads the draft"
    );
    let draft = stage_documents(&mut client, &session_id, "paragraph_writing", "draft").await;
    assert_eq!(
        draft.len(),
        1,
        "the re-run assembled the draft again: {draft:?}"
    );
    let draft = document_text(&mut client, &draft[0].resource_id).await;
    let mut at = 0;
    for key in &after {
        let reply: serde_json::Value =
            serde_json::from_str(&env.blob.get_string(key).await.expect("paragraph"))
                .expect("JSON");
        let text = reply["content"].as_str().expect("content").trim();
        at += draft[at..]
            .find(text)
            .unwrap_or_else(|| panic!("{key} not in the draft after byte {at}: {draft}"))
            + text.len();
    }
    let adopted = env
        .count(
            "SELECT count(*) FROM dialectic_generation_jobs j
               JOIN dialectic_generation_jobs root ON root.id = j.parent_job_id
              WHERE j.session_id = $1 AND root.job_key LIKE '%:r1'
                AND j.created_at < root.created_at",
            session,
        )
        .await;
    assert_eq!(
        adopted, 2,
        "the re-run roots adopted the kept map and paragraph"
    );

    // A second moderate revisit with no edit since the first: the outline as
    // a whole changed, so every later document goes, the kept map too.
    let again = client
        .revisit_stage(RevisitStageRequest {
            session_id: session_id.clone(),
            stage_slug: "essay_structuring".into(),
            impact: "moderate".into(),
            reason: "rethink the whole outline".into(),
            impact_level: 0,
            dry_run: false,
            client_request_id: String::new(),
        })
        .await
        .expect("second moderate")
        .into_inner();
    assert_eq!(again.revision, 2);
    assert_eq!(
        again.archived.len(),
        8,
        "both maps, both paragraphs, the draft, the essay and the fact and voice checks: {:?}",
        again.archived
    );
    assert!(
        stage_documents(
            &mut client,
            &session_id,
            "argument_development",
            "argument_map"
        )
        .await
        .is_empty()
    );
    env.teardown().await;
}

/// The outline section each argument-map request read, in request order.
fn sections_asked(session_id: &str) -> Vec<String> {
    session_requests(session_id, "argument_map")
        .into_iter()
        .filter_map(|r| {
            let prompt = &r.messages[0].content;
            let start = prompt.find("--- Outline section ---")?;
            prompt[start..].lines().nth(1).map(str::to_string)
        })
        .collect()
}

fn file_name(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or_default()
}

/// The current paragraphs' raw replies, in draft order.
async fn paragraph_keys(env: &TestEnv, session: uuid::Uuid) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT raw_response_storage_path FROM dialectic_contributions
          WHERE session_id = $1 AND document_key = 'paragraph' AND NOT is_archived ORDER BY file_name",
    )
    .bind(session)
    .fetch_all(env.store.pool())
    .await
    .expect("paragraphs")
}
