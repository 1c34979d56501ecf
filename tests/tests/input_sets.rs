//! The input-set table: for every planning and executing job of a two-model
//! session over two iterations, with feedback on every stage and continued
//! documents upstream, the inputs the model was sent are exactly those its
//! recipe step's rules select, computed here from the rules and what the
//! session stored: stage, document key, iteration (`previous` reads the one
//! before), the job's model for its own stage's artifacts and for
//! `multiple: false`, and the planner's fan-out restriction (whose jobs, per
//! source document, cover every match once). Every input's digest is that of
//! the whole stored object: a continued document is read once, assembled,
//! never chunk by chunk. Alone in its binary: it reads the simulated
//! provider's transcript.

use dialectic_core::payload::JobPayload;
use dialectic_core::prompt::{ChatRequest, InputRef, content_digest};
use dialectic_core::recipe::{Granularity, InputRule, RecipeStep};
use dialectic_e2e::TestEnv;
use dialectic_proto::v1::{StageResponse, SubmitStageResponsesRequest};
use sqlx::types::Json;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

const PROMPT: &str = "# Inputs\n\nA tool library for a small town, run by volunteers.";
const MODELS: [&str; 2] = ["simulated", "simulated-b"];
/// Output tokens that cut these documents into several turns.
const CONTINUED: [(&str, &str, u32); 2] = [
    ("parenthesis", "technical_requirements", 150),
    ("synthesis", "synthesis_pairwise", 150),
];

/// (stage reviewed, the status once the stage after it is done).
const REVIEWS: [(&str, &str); 4] = [
    ("thesis", "pending_synthesis"),
    ("antithesis", "pending_parenthesis"),
    ("synthesis", "pending_paralysis"),
    ("parenthesis", "iteration_complete_pending_review"),
];

/// What one input is: kind, stage, document key, object key.
type Input = (String, String, String, Option<String>);

#[derive(sqlx::FromRow)]
struct JobRow {
    id: Uuid,
    parent_job_id: Option<Uuid>,
    stage_slug: String,
    iteration_number: i32,
    model_id: Option<Uuid>,
    target_contribution_id: Option<Uuid>,
    payload: Json<JobPayload>,
}

/// A stored document a rule can match: object key, document key, writer.
#[derive(sqlx::FromRow, Clone)]
struct Stored {
    key: String,
    document_key: String,
    model_id: Option<Uuid>,
}

struct Session<'a> {
    env: &'a TestEnv,
    id: Uuid,
}

impl Session<'_> {
    async fn rendered(&self, stage: &str, iteration: i32, key: &str) -> Vec<Stored> {
        sqlx::query_as(
            "SELECT storage_path || '/' || file_name AS key, COALESCE(document_key, '') AS document_key, model_id
               FROM dialectic_project_resources
              WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3
                AND resource_type = 'rendered_document' AND ($4 = '*' OR document_key = $4)
              ORDER BY document_key, file_name",
        )
        .bind(self.id)
        .bind(stage)
        .bind(iteration)
        .bind(key)
        .fetch_all(self.env.store.pool())
        .await
        .expect("rendered documents")
    }

    /// The project's uploads a `project_document` rule reads: those of its
    /// role (any, when it names none), in upload order.
    async fn uploaded(&self, rule: &InputRule) -> Vec<Stored> {
        sqlx::query_as(
            "SELECT r.storage_path AS key, r.file_name AS document_key, NULL::uuid AS model_id
               FROM dialectic_project_resources r
               JOIN dialectic_sessions s ON s.project_id = r.project_id
              WHERE s.id = $1 AND r.resource_type = 'project_document'
                AND ($2::text IS NULL OR r.resource_description->>'role' = $2)
              ORDER BY r.created_at, r.id",
        )
        .bind(self.id)
        .bind(rule.role.map(|r| r.as_str()))
        .fetch_all(self.env.store.pool())
        .await
        .expect("uploads")
    }

    /// Contributions, one per document: a continued one's last turn, named
    /// by the key its chain assembled.
    async fn contributed(
        &self,
        stage: &str,
        iteration: i32,
        key: &str,
        model: Option<Uuid>,
    ) -> Vec<Stored> {
        let rows: Vec<Stored> = sqlx::query_as(
            "SELECT raw_response_storage_path AS key, document_key, model_id
               FROM dialectic_contributions
              WHERE session_id = $1 AND stage_slug = $2 AND iteration_number = $3
                AND ($4 = '*' OR document_key = $4) AND ($5::uuid IS NULL OR model_id = $5)
                AND is_latest_edit AND NOT is_archived
              ORDER BY document_key, file_name",
        )
        .bind(self.id)
        .bind(stage)
        .bind(iteration)
        .bind(key)
        .bind(model)
        .fetch_all(self.env.store.pool())
        .await
        .expect("contributions");
        rows.into_iter()
            .map(|s| Stored {
                key: assembled_key(&s.key),
                ..s
            })
            .collect()
    }

    async fn feedback(&self, stage: &str, iteration: i32) -> Vec<Stored> {
        sqlx::query_as(
            "SELECT storage_path || '/' || file_name AS key, COALESCE(document_key, '') AS document_key,
                    NULL::uuid AS model_id
               FROM dialectic_feedback WHERE session_id = $1 AND stage_slug = $2 AND iteration_number <= $3",
        )
        .bind(self.id)
        .bind(stage)
        .bind(iteration)
        .fetch_all(self.env.store.pool())
        .await
        .expect("feedback")
    }

    /// Everything `rule` matches for `job`, before any fan-out restriction.
    async fn matches(&self, job: &JobRow, rule: &InputRule) -> Vec<Stored> {
        let stage = rule.stage_slug.as_deref().unwrap_or(&job.stage_slug);
        let key = rule.document_key.as_deref().unwrap_or("*");
        let iteration = match rule.iteration {
            dialectic_core::recipe::InputIteration::Current => job.iteration_number,
            dialectic_core::recipe::InputIteration::Previous => job.iteration_number - 1,
        };
        if iteration < 1 {
            return Vec::new();
        }
        match rule.kind.as_str() {
            "feedback" => self.feedback(stage, iteration).await,
            "header_context" => {
                let mut own = self.contributed(stage, iteration, key, job.model_id).await;
                own.truncate(1);
                own
            }
            "document" if stage == job.stage_slug && iteration == job.iteration_number => {
                self.contributed(stage, iteration, key, job.model_id).await
            }
            "document" => {
                let rendered = self.rendered(stage, iteration, key).await;
                if rendered.is_empty() && key != "*" {
                    self.contributed(stage, iteration, key, None).await
                } else {
                    rendered
                }
            }
            "project_document" => self.uploaded(rule).await,
            other => panic!("no rule of kind {other} in the dialectic recipes"),
        }
    }

    /// The inputs `job`'s step selects for it.
    async fn expected(&self, job: &JobRow, step: &RecipeStep) -> Vec<Input> {
        let mut inputs = Vec::new();
        for (index, rule) in step.inputs_required.iter().enumerate() {
            let stage = rule.stage_slug.clone().unwrap_or(job.stage_slug.clone());
            if rule.kind == "seed_prompt" {
                inputs.push((rule.kind.clone(), stage, "seed_prompt".into(), None));
                continue;
            }
            let mut found = self.matches(job, rule).await;
            if let Some(keys) = job.payload.restriction(index) {
                found.retain(|d| keys.contains(&d.key));
            }
            if !rule.multiple && found.len() > 1 {
                let own = found.iter().position(|d| d.model_id == job.model_id);
                found = vec![found.swap_remove(own.unwrap_or(0))];
            }
            inputs.extend(found.into_iter().map(|d| {
                (
                    rule.kind.clone(),
                    stage.clone(),
                    d.document_key,
                    Some(d.key),
                )
            }));
        }
        inputs.sort();
        inputs
    }
}

/// `…/_work/{name}_continuation_{n}_raw.json` → `…/raw_responses/{name}_raw.json`.
fn assembled_key(key: &str) -> String {
    let Some((dir, file)) = key.split_once("/_work/") else {
        return key.to_string();
    };
    let stem = file.strip_suffix("_raw.json").expect("a raw chunk");
    let (base, _) = stem
        .rsplit_once("_continuation_")
        .expect("a continuation turn");
    format!("{dir}/raw_responses/{base}_raw.json")
}

fn sent(request: &ChatRequest) -> Vec<Input> {
    let mut inputs: Vec<Input> = request
        .inputs
        .iter()
        .map(|i: &InputRef| {
            (
                i.kind.clone(),
                i.stage_slug.clone(),
                i.document_key.clone(),
                i.storage_key.clone(),
            )
        })
        .collect();
    inputs.sort();
    inputs
}

async fn review(env: &TestEnv, session_id: &str, stage: &str, done: &str) {
    let mut client = env.gateway().await;
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session_id.into(),
            stage_slug: stage.into(),
            responses: vec![StageResponse {
                resource_id: String::new(),
                document_key: String::new(),
                feedback: format!("Feedback on {stage}: mind the volunteers' time."),
            }],
            client_request_id: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("submit {stage}: {e}"));
    env.wait_for_session(session_id, done, true).await;
}

/// Two iterations, feedback on every stage.
async fn run_session(env: &TestEnv) -> String {
    let (_, session_id) = env.new_session(PROMPT, &MODELS, false).await;
    env.wait_for_session(&session_id, "pending_antithesis", true)
        .await;
    for (stage, done) in REVIEWS {
        review(env, &session_id, stage, done).await;
    }
    review(env, &session_id, "paralysis", "pending_antithesis").await;
    for (stage, done) in REVIEWS {
        review(env, &session_id, stage, done).await;
    }
    session_id
}

async fn force_continuations(env: &TestEnv) {
    for (stage, output, tokens) in CONTINUED {
        let step_key: String = sqlx::query_scalar(
            "SELECT step_key FROM dialectic_recipe_template_steps WHERE output_type = $1",
        )
        .bind(output)
        .fetch_one(env.store.pool())
        .await
        .expect("the step writing it");
        dialectic_store::recipe_edit::override_step(
            env.store.pool(),
            stage,
            &step_key,
            &serde_json::json!({ "max_tokens": tokens }),
            &serde_json::json!({}),
        )
        .await
        .expect("override");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_job_reads_exactly_what_its_rules_select() {
    let mut env = TestEnv::new().await;
    force_continuations(&env).await;
    env.start_all_recording().await;
    let session_id = run_session(&env).await;
    let session = Session {
        env: &env,
        id: Uuid::parse_str(&session_id).expect("uuid"),
    };
    let jobs: Vec<JobRow> = sqlx::query_as(
        "SELECT id, parent_job_id, stage_slug, iteration_number, model_id, target_contribution_id, payload
           FROM dialectic_generation_jobs
          WHERE session_id = $1 AND job_type IN ('PLAN', 'EXECUTE') AND payload ? 'step'
          ORDER BY created_at",
    )
    .bind(session.id)
    .fetch_all(env.store.pool())
    .await
    .expect("jobs");
    let transcript = dialectic_llm::recorded_requests();
    let mut by_stage: BTreeMap<(i32, String), usize> = BTreeMap::new();
    let mut objects: BTreeMap<String, String> = BTreeMap::new();
    for job in &jobs {
        let step = job.payload.step.as_ref().expect("a step");
        let expected = session.expected(job, step).await;
        let requests: Vec<&ChatRequest> = transcript
            .iter()
            .filter(|r| r.job_id.as_deref() == Some(job.id.to_string().as_str()))
            .collect();
        assert!(
            !requests.is_empty(),
            "{} {}: no request",
            job.stage_slug,
            step.step_key
        );
        for request in requests {
            assert_eq!(
                sent(request),
                expected,
                "iteration {} {} {} (job {})",
                job.iteration_number,
                job.stage_slug,
                step.step_key,
                job.id
            );
            for input in request.inputs.iter() {
                let Some(key) = &input.storage_key else {
                    continue;
                };
                if !objects.contains_key(key) {
                    let text = env.blob.get_string(key).await.expect("input object");
                    objects.insert(key.clone(), content_digest(&text));
                }
                assert_eq!(input.digest, objects[key], "{key} was sent whole");
            }
        }
        *by_stage
            .entry((job.iteration_number, job.stage_slug.clone()))
            .or_default() += 1;
    }
    fan_outs_cover_every_source_once(&session, &jobs).await;
    every_document_has_its_own_object(&session).await;
    continued_documents_were_read_whole(&session, &transcript).await;
    earlier_iterations_are_read(&jobs, &transcript);
    for iteration in [1, 2] {
        for stage in [
            "thesis",
            "antithesis",
            "synthesis",
            "parenthesis",
            "paralysis",
        ] {
            assert!(
                by_stage
                    .get(&(iteration, stage.into()))
                    .copied()
                    .unwrap_or(0)
                    > 0,
                "iteration {iteration} {stage}: no jobs checked"
            );
        }
    }
    env.teardown().await;
}

/// Jobs fanned out per source document, per lineage or per group split the
/// matches of the rule they fan out over: together they read every match,
/// none twice (per source document: one each). A continued document is one
/// source, not one per turn.
async fn fan_outs_cover_every_source_once(session: &Session<'_>, jobs: &[JobRow]) {
    let mut groups: BTreeMap<(Uuid, String), Vec<&JobRow>> = BTreeMap::new();
    for job in jobs.iter().filter(|j| j.target_contribution_id.is_none()) {
        let step = job.payload.step.as_ref().expect("a step");
        if matches!(
            step.granularity,
            Granularity::PerSourceDocument
                | Granularity::PerSourceDocumentByLineage
                | Granularity::PerSourceGroup
        ) && let Some(parent) = job.parent_job_id
        {
            groups
                .entry((parent, step.step_key.clone()))
                .or_default()
                .push(job);
        }
    }
    let fanned: BTreeSet<&str> = groups.keys().map(|(_, step)| step.as_str()).collect();
    assert!(
        fanned.iter().any(|s| s.starts_with("antithesis"))
            && fanned.iter().any(|s| s.starts_with("synthesis")),
        "antithesis and synthesis fan out: {fanned:?}"
    );
    for ((_, step_key), siblings) in &groups {
        let step = siblings[0].payload.step.as_ref().expect("step");
        let selection = &siblings[0].payload.sources[0];
        let rule = &step.inputs_required[selection.rule];
        let all: BTreeSet<String> = session
            .matches(siblings[0], rule)
            .await
            .into_iter()
            .map(|d| d.key)
            .collect();
        let one_each = step.granularity == Granularity::PerSourceDocument;
        let mut covered = BTreeSet::new();
        for job in siblings {
            let keys = job.payload.restriction(selection.rule).expect("restricted");
            assert!(
                !keys.is_empty() && (!one_each || keys.len() == 1),
                "{step_key}: {keys:?}"
            );
            for key in keys {
                assert!(covered.insert(key.clone()), "{step_key}: {key} twice");
            }
        }
        assert_eq!(covered, all, "{step_key}: every source once");
    }
}

/// No two contributions name one object: each job's output has a name of
/// its own (reducing lineages once took the UUIDv7 timestamp prefix of their
/// source, shared by sources minted together, and overwrote each other).
async fn every_document_has_its_own_object(session: &Session<'_>) {
    let shared: Vec<(String, i64)> = sqlx::query_as(
        "SELECT raw_response_storage_path, count(*) FROM dialectic_contributions
          WHERE session_id = $1 GROUP BY raw_response_storage_path HAVING count(*) > 1",
    )
    .bind(session.id)
    .fetch_all(session.env.store.pool())
    .await
    .expect("shared keys");
    assert!(
        shared.is_empty(),
        "objects written by several jobs: {shared:?}"
    );
}

/// The forced documents took several turns, and what read them got the
/// assembled whole (its digest was checked against the object above).
async fn continued_documents_were_read_whole(session: &Session<'_>, transcript: &[ChatRequest]) {
    for (_, output, _) in CONTINUED {
        let turns: i64 = session
            .env
            .count(
                &format!(
                    "SELECT count(*) FROM dialectic_contributions
                      WHERE session_id = $1 AND document_key = '{output}' AND iteration_number = 1
                        AND (document_relationships->>'turn')::int >= 2"
                ),
                session.id,
            )
            .await;
        assert!(
            turns > 0,
            "{output} was continued over at least three turns"
        );
        let read: Vec<&InputRef> = transcript
            .iter()
            .flat_map(|r| r.inputs.iter())
            .filter(|i| i.document_key == output)
            .collect();
        assert!(!read.is_empty(), "{output} is read downstream");
        for input in read {
            let key = input.storage_key.as_deref().unwrap_or_default();
            assert!(!key.contains("/_work/"), "{key}: a chunk, not the document");
        }
    }
}

/// In iteration 2, parenthesis and paralysis read their documents of
/// iteration 1 (the table above checks whose, and that iteration 1 reads none).
fn earlier_iterations_are_read(jobs: &[JobRow], transcript: &[ChatRequest]) {
    let second: BTreeSet<String> = jobs
        .iter()
        .filter(|j| j.iteration_number == 2)
        .map(|j| j.id.to_string())
        .collect();
    let earlier: Vec<&InputRef> = transcript
        .iter()
        .filter(|r| r.job_id.as_ref().is_some_and(|id| second.contains(id)))
        .flat_map(|r| r.inputs.iter())
        .filter(|i| i.stage_slug == "parenthesis" || i.stage_slug == "paralysis")
        .filter(|i| {
            i.storage_key
                .as_deref()
                .is_some_and(|k| k.contains("/iteration_1/"))
        })
        .collect();
    for key in ["master_plan", "actionable_checklist", "updated_master_plan"] {
        assert!(
            earlier.iter().any(|i| i.document_key == key),
            "iteration 2 reads the previous {key}"
        );
    }
}
