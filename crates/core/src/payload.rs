//! What a job row's `payload` holds: the definition of the work, fixed when the
//! planner created the job (a snapshot of its recipe step), never live state.

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
}

/// Seed 000 function 7: `document_identity` groups the chain (the root chunk's id);
/// `source_contribution_id` is the chunk that triggered this render.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderPayload {
    pub document_identity: String,
    pub source_contribution_id: String,
    pub document_key: String,
}
