//! gatherInputsForStage (DESIGN §8) for one job: every input rule of its
//! step, restricted to the job's own sources where the planner fanned it
//! out and to what its `object_filter` admits, read from S3 into the
//! prompt's resource documents.

use crate::{Executor, permanent, retryable};
use dialectic_core::blackboard;
use dialectic_core::document_role::DocumentRole;
use dialectic_core::fanout::SourceDoc;
use dialectic_core::ids::{ModelId, SessionId};
use dialectic_core::payload::JobPayload;
use dialectic_core::prompt::ResourceDocument;
use dialectic_core::recipe::{InputRule, ObjectFilter, RecipeStep};
use dialectic_runtime::worker::AttemptError;
use dialectic_store::StoreError;
use dialectic_store::inputs::{self, DocumentQuery, InputDoc};
use dialectic_store::jobs::JobRow;
use dialectic_store::project_documents;
use sqlx::PgConnection;

/// How much a rule's documents matter to the prompt (`inputs_relevance`; 1 when unnamed).
pub(crate) fn relevance_of(step: &RecipeStep, rule: &InputRule) -> f64 {
    step.inputs_relevance
        .as_array()
        .and_then(|all| {
            all.iter().find(|r| {
                r.get("document_key").and_then(|k| k.as_str()) == rule.document_key.as_deref()
                    && r.get("type")
                        .and_then(|t| t.as_str())
                        .is_none_or(|t| t == rule.kind)
            })
        })
        .and_then(|r| r.get("relevance"))
        .and_then(|r| r.as_f64())
        .unwrap_or(1.0)
}

fn describe(rule: &InputRule, index: usize) -> String {
    format!(
        "input rule {index} ({} {}/{})",
        rule.kind,
        rule.stage_slug.as_deref().unwrap_or("this stage"),
        rule.document_key.as_deref().unwrap_or("*")
    )
}

/// One rule of one job: which rule, and where it looks.
struct Lookup<'a> {
    job: &'a JobRow,
    /// The model whose header context and own documents the job reads (its
    /// root's, also when a confidence rerun runs it on another model).
    lineage_model: Option<ModelId>,
    rule: &'a InputRule,
    index: usize,
    stage: &'a str,
    /// The iteration the rule reads (`iteration: previous` reads the one before).
    iteration: i32,
}

impl Executor {
    pub(crate) async fn gather_inputs(
        &self,
        job: &JobRow,
        payload: &JobPayload,
        step: &RecipeStep,
        seed_prompt: &str,
        continued: &[String],
    ) -> Result<Vec<ResourceDocument>, AttemptError> {
        let mut conn = self
            .store
            .pool()
            .acquire()
            .await
            .map_err(StoreError::from)?;
        let mut resources = Vec::new();
        for (index, rule) in step.inputs_required.iter().enumerate() {
            let relevance = relevance_of(step, rule);
            if rule.kind == "seed_prompt" {
                resources.push(seed(job, rule, seed_prompt, relevance));
                continue;
            }
            // Iteration 1 has no earlier iteration to read.
            let Some(iteration) = rule.iteration.of(job.iteration_number) else {
                continue;
            };
            let lookup = Lookup {
                job,
                lineage_model: payload.lineage_model_id.or(job.model_id),
                rule,
                index,
                stage: rule.stage_slug.as_deref().unwrap_or(&job.stage_slug),
                iteration,
            };
            if rule.kind == blackboard::INPUT_KIND {
                match self.board(&lookup, relevance).await? {
                    Some(doc) => resources.push(doc),
                    None if rule.required => {
                        return Err(permanent(
                            "missing_input",
                            format!("{} found no blackboard entries", describe(rule, index)),
                        ));
                    }
                    None => {}
                }
                continue;
            }
            let Some(found) = matching(&mut conn, &lookup).await? else {
                continue;
            };
            let found = restricted(found, payload.restriction(index));
            let found = without(found, continued);
            let found = admitted(found, rule, &step.filter);
            let found = if rule.multiple {
                found
            } else {
                the_one(found, lookup.lineage_model)
            };
            if found.is_empty() {
                if rule.required {
                    return Err(permanent(
                        "missing_input",
                        format!("{} matched nothing", describe(rule, index)),
                    ));
                }
                continue;
            }
            let item = payload.item(index);
            for doc in found {
                resources.push(self.read(&lookup, doc, relevance, item).await?);
            }
        }
        Ok(resources)
    }

    /// A `blackboard` rule: the session's entries of the named type (`*` or
    /// none: every type) in this iteration, from the named stage if any, one
    /// JSON line each; None when there are none.
    async fn board(
        &self,
        lookup: &Lookup<'_>,
        relevance: f64,
    ) -> Result<Option<ResourceDocument>, AttemptError> {
        let rule = lookup.rule;
        let wanted = rule.document_key.as_deref().filter(|k| *k != "*");
        let entries = dialectic_runtime::blackboard::entries(
            &self.store,
            self.cache.get(),
            lookup.job.session_id,
            wanted,
        )
        .await?;
        let lines: Vec<String> = entries
            .into_iter()
            .filter(|e| e.iteration == lookup.iteration)
            .filter(|e| rule.stage_slug.as_deref().is_none_or(|s| s == e.stage_slug))
            .map(|e| {
                serde_json::json!({"type": e.entry_type, "from": format!("{}/{}", e.step_key, e.model), "data": e.data})
                    .to_string()
            })
            .collect();
        if lines.is_empty() {
            return Ok(None);
        }
        Ok(Some(ResourceDocument {
            id: format!("blackboard:{}", lookup.job.session_id),
            kind: blackboard::INPUT_KIND.to_string(),
            stage_slug: lookup.stage.to_string(),
            document_key: wanted.unwrap_or("*").to_string(),
            model: None,
            content: lines.join("\n"),
            section_header: rule.section_header.clone(),
            relevance,
            storage_key: None,
        }))
    }

    async fn read(
        &self,
        lookup: &Lookup<'_>,
        doc: InputDoc,
        relevance: f64,
        item: Option<usize>,
    ) -> Result<ResourceDocument, AttemptError> {
        let content = self
            .blob
            .get_string(&doc.storage_key)
            .await
            .map_err(|e| retryable("storage", e))?;
        let content = match (item, lookup.rule.items.as_deref()) {
            (Some(index), Some(key)) => item_of(&content, key, index).ok_or_else(|| {
                permanent(
                    "missing_input",
                    format!("{}: no item {index} of `{key}`", doc.storage_key),
                )
            })?,
            _ => content,
        };
        let source = SourceDoc::from_key(doc.id.to_string(), &doc.storage_key, &doc.document_key);
        Ok(ResourceDocument {
            id: doc.id.to_string(),
            kind: lookup.rule.kind.clone(),
            stage_slug: lookup.stage.to_string(),
            document_key: doc.document_key,
            model: (!source.author.is_empty()).then_some(source.author),
            content,
            section_header: lookup.rule.section_header.clone(),
            relevance,
            storage_key: Some(doc.storage_key),
        })
    }
}

impl Executor {
    /// The session's `source` uploads as (file name, text): what a claim
    /// check (`verify_claims`) holds quotes against.
    pub(crate) async fn source_texts(
        &self,
        session_id: SessionId,
    ) -> Result<Vec<(String, String)>, AttemptError> {
        let selector = project_documents::UploadSelector {
            document_key: None,
            role: Some(DocumentRole::Source),
        };
        let uploads = project_documents::for_rule(self.store.pool(), session_id, selector).await?;
        let mut texts = Vec::with_capacity(uploads.len());
        for upload in uploads {
            let text = self
                .blob
                .get_string(&upload.storage_key)
                .await
                .map_err(|e| retryable("storage", e))?;
            texts.push((upload.document_key, text));
        }
        Ok(texts)
    }
}

/// A `per_item` job's item: entry `index` of the JSON array `key`, as JSON.
fn item_of(content: &str, key: &str, index: usize) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(content).ok()?;
    let item = value.get(key)?.as_array()?.get(index)?;
    Some(match item {
        serde_json::Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).ok()?,
    })
}

fn seed(job: &JobRow, rule: &InputRule, seed_prompt: &str, relevance: f64) -> ResourceDocument {
    ResourceDocument {
        id: job.session_id.to_string(),
        kind: "seed_prompt".into(),
        stage_slug: job.stage_slug.clone(),
        document_key: "seed_prompt".into(),
        model: None,
        content: seed_prompt.to_string(),
        section_header: rule.section_header.clone(),
        relevance,
        storage_key: None,
    }
}

/// Only the documents the planner gave this job, where it fanned the step out.
fn restricted(found: Vec<InputDoc>, keys: Option<&[String]>) -> Vec<InputDoc> {
    match keys {
        Some(keys) => found
            .into_iter()
            .filter(|d| keys.contains(&d.storage_key))
            .collect(),
        None => found,
    }
}

/// All but the document a continuation is continuing (`Chain::document_keys`).
fn without(found: Vec<InputDoc>, continued: &[String]) -> Vec<InputDoc> {
    found
        .into_iter()
        .filter(|d| !continued.contains(&d.storage_key))
        .collect()
}

/// A `multiple: false` rule reads one document: the job's own model's when
/// it wrote one of those matched, else the first.
fn the_one(found: Vec<InputDoc>, own_model: Option<ModelId>) -> Vec<InputDoc> {
    let own = found
        .iter()
        .position(|d| own_model.is_some() && d.model_id == own_model)
        .unwrap_or(0);
    found.into_iter().nth(own).into_iter().collect()
}

/// What a step's `object_filter` lets through of a `document` rule's matches.
fn admitted(found: Vec<InputDoc>, rule: &InputRule, filter: &ObjectFilter) -> Vec<InputDoc> {
    if rule.kind != "document" {
        return found;
    }
    found
        .into_iter()
        .filter(|d| {
            let source = SourceDoc::from_key(d.id.to_string(), &d.storage_key, &d.document_key);
            filter.admits(&d.document_key, &source.author)
        })
        .collect()
}

/// The documents a rule matches; None for an optional rule of a kind this
/// executor does not know (skipped), an error for a required one.
async fn matching(
    conn: &mut PgConnection,
    lookup: &Lookup<'_>,
) -> Result<Option<Vec<InputDoc>>, AttemptError> {
    let job = lookup.job;
    let own_model = || {
        lookup
            .lineage_model
            .ok_or_else(|| permanent("bad_payload", "job has no model"))
    };
    let found = match lookup.rule.kind.as_str() {
        "header_context" => {
            let mut all = own_artifacts(conn, lookup, own_model()?).await?;
            // The most recent header context of this root is the one in force.
            all.truncate(1);
            all
        }
        "document" => {
            let query = DocumentQuery::for_rule(
                job.session_id,
                &job.stage_slug,
                lookup.lineage_model,
                job.iteration_number,
                lookup.rule,
            );
            match query {
                Some(query) => inputs::rule_documents(conn, &query).await?,
                None => Vec::new(),
            }
        }
        "feedback" => {
            inputs::feedback(conn, job.session_id, lookup.stage, lookup.iteration).await?
        }
        "project_document" => {
            project_documents::for_rule(conn, job.session_id, lookup.rule.into()).await?
        }
        other if lookup.rule.required => {
            return Err(permanent(
                "unsupported_input",
                format!(
                    "{}: unknown input type {other:?}",
                    describe(lookup.rule, lookup.index)
                ),
            ));
        }
        _ => return Ok(None),
    };
    Ok(Some(found))
}

async fn own_artifacts(
    conn: &mut PgConnection,
    lookup: &Lookup<'_>,
    model: ModelId,
) -> Result<Vec<InputDoc>, AttemptError> {
    let job = lookup.job;
    Ok(inputs::own_stage_artifacts(
        conn,
        job.session_id,
        lookup.stage,
        lookup.iteration,
        lookup.rule.document_key.as_deref().unwrap_or("*"),
        model,
    )
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn doc(key: &str) -> InputDoc {
        InputDoc {
            id: Uuid::now_v7(),
            storage_key: key.into(),
            document_key: "d".into(),
            model_id: None,
            from_resource: true,
        }
    }

    #[test]
    fn a_fanned_out_job_reads_only_its_sources() {
        let found = vec![doc("a"), doc("b"), doc("c")];
        let keys = ["b".to_string()];
        let kept: Vec<String> = restricted(found.clone(), Some(&keys))
            .into_iter()
            .map(|d| d.storage_key)
            .collect();
        assert_eq!(kept, vec!["b"]);
        assert_eq!(restricted(found, None).len(), 3);
    }

    #[test]
    fn a_single_document_rule_reads_the_jobs_own_models_document() {
        let mine = ModelId::from_u128(2);
        let by = |key: &str, model: u128| InputDoc {
            model_id: Some(ModelId::from_u128(model)),
            ..doc(key)
        };
        let found = vec![by("a", 1), by("b", 2), by("c", 2)];
        let keys =
            |docs: Vec<InputDoc>| docs.into_iter().map(|d| d.storage_key).collect::<Vec<_>>();
        assert_eq!(keys(the_one(found.clone(), Some(mine))), ["b"]);
        assert_eq!(keys(the_one(found, None)), ["a"]);
        assert!(the_one(Vec::new(), Some(mine)).is_empty());
    }

    #[test]
    fn relevance_comes_from_the_matching_entry() {
        let step: RecipeStep = serde_json::from_value(serde_json::json!({
            "id": Uuid::nil(), "step_key": "s", "step_name": "s", "job_type": "EXECUTE",
            "prompt_type": "Turn", "prompt_template": null, "output_type": "o",
            "granularity": "all_to_one", "inputs_required": [],
            "inputs_relevance": [{"document_key": "business_case", "type": "document", "relevance": 0.4}],
            "outputs_required": [], "order": 1, "is_skipped": false
        }))
        .expect("step");
        let rule = |kind: &str, key: &str| -> InputRule {
            serde_json::from_value(serde_json::json!({"type": kind, "document_key": key}))
                .expect("rule")
        };
        assert_eq!(relevance_of(&step, &rule("document", "business_case")), 0.4);
        assert_eq!(relevance_of(&step, &rule("feedback", "business_case")), 1.0);
        assert_eq!(relevance_of(&step, &rule("document", "other")), 1.0);
    }
}
