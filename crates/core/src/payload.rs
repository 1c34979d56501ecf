//! What a job row's `payload` holds: the definition of the work, fixed when the
//! planner created the job (a snapshot of its recipe step), never live state.

use crate::clarify::Clarification;
use crate::ids::ModelId;
use crate::paths::Lineage;
use crate::recipe::{Recipe, RecipeStep};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct JobPayload {
    /// The recipe step this PLAN/EXECUTE job runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<RecipeStep>,
    #[serde(default)]
    pub model_api_identifier: String,
    /// Model slug used in storage names (no underscores).
    #[serde(default)]
    pub model_slug: String,
    /// Position of the stage in the process (`1_thesis`).
    #[serde(default)]
    pub stage_number: u32,
    /// For PLAN steps: the documents the header context must plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planned_documents: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<RenderPayload>,
    /// Root jobs only: the stage's recipe as it was when the stage started, so
    /// a recipe edited mid-run never changes work already planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<Recipe>,
    /// Fan-out jobs: the documents this job covers, per restricted input rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceSelection>,
    /// How the job's output is named (`critiquing`, `from`, `reducing`); Plain when None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<Lineage>,
    /// A job run on another model than its root's (a confidence gate's
    /// `rerun_model`) still works in its root's lineage: this is the model
    /// whose header context and own documents it reads. None: the job's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage_model_id: Option<ModelId>,
    /// A job a clarification round re-runs: the question its prompt ends with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clarification: Option<Clarification>,
}

/// Input rule `rule` (an index into the step's `inputs_required`) sees only these storage keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSelection {
    pub rule: usize,
    pub keys: Vec<String>,
    /// A `per_item` job: the index of its item in the anchor's `items` array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
}

impl JobPayload {
    /// The item of rule `rule`'s document this job reads, for a `per_item` job.
    pub fn item(&self, rule: usize) -> Option<usize> {
        self.sources
            .iter()
            .find(|s| s.rule == rule)
            .and_then(|s| s.item)
    }

    /// The keys rule `rule` is restricted to, or None when it sees every match.
    pub fn restriction(&self, rule: usize) -> Option<&[String]> {
        self.sources
            .iter()
            .find(|s| s.rule == rule)
            .map(|s| s.keys.as_slice())
    }
}

/// Seed 000 function 7: `document_identity` groups the chain (the root chunk's id);
/// `source_contribution_id` is the chunk that triggered this render.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderPayload {
    pub document_identity: String,
    pub source_contribution_id: String,
    pub document_key: String,
}
