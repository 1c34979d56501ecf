//! Recipes are data: steps and edges forming a DAG (seed 002). This module
//! validates a DAG before anything is written and answers which steps are ready.

use crate::dates::{self, DateError};
use crate::ids::StepId;
use crate::job::{JobType, UnknownValue};
use crate::shape::{JsonKind, ShapeError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::str::FromStr;

/// How one recipe step fans out into jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// One job per lineage (model) that consumes every input.
    AllToOne,
    /// One job per selected model.
    PerModel,
    /// One job per source document.
    PerSourceDocument,
    /// One job per source document of the job's own lineage.
    PerSourceDocumentByLineage,
    /// One job per pair of source documents that share an origin.
    PairwiseByOrigin,
    /// One job per group of source documents (grouped by their source contribution).
    PerSourceGroup,
    /// One job per item of a JSON array (the anchor rule's `items` key) in
    /// each source document: an outline's sections, a contract's clauses.
    PerItem,
    /// One job per source document, in the anchor's order, each waiting for
    /// the one before it: a chain where every job can read what the earlier
    /// ones wrote (amendments in order).
    Sequential,
}

impl Granularity {
    pub const fn as_str(self) -> &'static str {
        match self {
            Granularity::AllToOne => "all_to_one",
            Granularity::PerModel => "per_model",
            Granularity::PerSourceDocument => "per_source_document",
            Granularity::PerSourceDocumentByLineage => "per_source_document_by_lineage",
            Granularity::PairwiseByOrigin => "pairwise_by_origin",
            Granularity::PerSourceGroup => "per_source_group",
            Granularity::PerItem => "per_item",
            Granularity::Sequential => "sequential",
        }
    }
}

impl FromStr for Granularity {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        [
            Granularity::AllToOne,
            Granularity::PerModel,
            Granularity::PerSourceDocument,
            Granularity::PerSourceDocumentByLineage,
            Granularity::PairwiseByOrigin,
            Granularity::PerSourceGroup,
            Granularity::PerItem,
            Granularity::Sequential,
        ]
        .into_iter()
        .find(|g| g.as_str() == s)
        .ok_or_else(|| UnknownValue::new("granularity strategy", s))
    }
}

impl fmt::Display for Granularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `inputs_required`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRule {
    /// seed_prompt | document | header_context | feedback
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub stage_slug: Option<String>,
    #[serde(default)]
    pub document_key: Option<String>,
    #[serde(default = "default_true")]
    pub required: bool,
    /// false: the job reads one document of those matched (its own model's
    /// when there is one); absent or true: every match.
    #[serde(default = "default_true")]
    pub multiple: bool,
    #[serde(default)]
    pub section_header: Option<String>,
    /// Which iteration's documents the rule reads.
    #[serde(default, skip_serializing_if = "InputIteration::is_current")]
    pub iteration: InputIteration,
    /// A `per_item` step's anchor: the key of the JSON array in each matched
    /// document whose items the step fans out over (each job reads its item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<String>,
    /// A `project_document` anchor fans out in the order of a value an
    /// earlier step of the stage extracted from each document (seed 004 §2:
    /// amendments in effective-date order), not in upload order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_by: Option<OrderBy>,
    /// A `project_document` rule reads only the uploads of this role
    /// (writing samples, sources, ...); none: every upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<crate::document_role::DocumentRole>,
}

/// Orders uploads by the value `key` of the JSON document `document_key`
/// that a step of the same stage wrote from each of them; uploads without
/// one come last, and upload order breaks ties.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderBy {
    pub document_key: String,
    pub key: String,
    /// How the value compares: as text (the default, so files written before
    /// dates were parsed keep their meaning) or as a date.
    #[serde(default, rename = "as", skip_serializing_if = "OrderAs::is_text")]
    pub kind: OrderAs,
    /// With `as = "date"`: "01/03/2021" is 1 March (true) or 3 January
    /// (false, the default). Other forms are unambiguous.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub day_first: bool,
}

/// What an `order_by` value is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderAs {
    /// Compared as strings.
    #[default]
    Text,
    /// Parsed as a calendar date (`dates::parse`) and compared by time.
    Date,
}

impl OrderAs {
    pub fn is_text(&self) -> bool {
        *self == OrderAs::Text
    }
}

/// A value `OrderBy` could not read as a date: the item's position in the
/// sorted slice (it sorts after every dated item), what it said and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unordered {
    pub index: usize,
    pub value: String,
    pub error: DateError,
}

impl Unordered {
    /// The blackboard entry type that reports an unreadable date.
    pub const ENTRY_TYPE: &'static str = "unparsed_date";

    /// The finding that tells the user which upload's value could not be
    /// read, and so where it went: after every dated upload.
    pub fn entry(&self, upload: &str, order: &OrderBy) -> crate::blackboard::BoardEntry {
        crate::blackboard::BoardEntry {
            entry_type: Self::ENTRY_TYPE.to_string(),
            data: serde_json::json!({
                "finding": format!(
                    "{upload}: the {} {:?} is not a date ({}); it is ordered after every dated document",
                    order.key, self.value, self.error
                ),
                "document": upload,
                "key": order.key,
                "value": self.value,
                "reason": self.error.to_string(),
            }),
        }
    }
}

/// Where an item sorts: by its value, after every value when it has none
/// (or, for dates, one that does not parse).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum SortKey {
    Text(String),
    Date(dates::Date),
    Last,
}

impl OrderBy {
    fn numeric_order(&self) -> dates::NumericOrder {
        if self.day_first {
            dates::NumericOrder::DayFirst
        } else {
            dates::NumericOrder::MonthFirst
        }
    }

    /// Where a value sorts, or why a date does not parse.
    fn sort_key(&self, value: Option<String>) -> Result<SortKey, (String, DateError)> {
        match (value, self.kind) {
            (None, _) => Ok(SortKey::Last),
            (Some(v), OrderAs::Text) => Ok(SortKey::Text(v)),
            (Some(v), OrderAs::Date) => dates::parse(&v, self.numeric_order())
                .map(SortKey::Date)
                .map_err(|e| (v, e)),
        }
    }

    /// Sorts `items` (in upload order) by the value each has, if any:
    /// values ascending, then those with none; the sort is stable, so equal
    /// values keep upload order. For dates, a value that does not parse
    /// sorts with the undated and is returned, never compared as text.
    pub fn sort<T>(&self, items: &mut [T], value: impl Fn(&T) -> Option<String>) -> Vec<Unordered> {
        items.sort_by_cached_key(|item| self.sort_key(value(item)).unwrap_or(SortKey::Last));
        items
            .iter()
            .enumerate()
            .filter_map(|(index, item)| match self.sort_key(value(item)) {
                Ok(_) => None,
                Err((value, error)) => Some(Unordered {
                    index,
                    value,
                    error,
                }),
            })
            .collect()
    }
}

/// The iteration an input rule reads from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputIteration {
    /// The job's own iteration.
    #[default]
    Current,
    /// The one before (nothing in iteration 1, so such rules are optional).
    Previous,
}

impl InputIteration {
    pub fn is_current(&self) -> bool {
        *self == InputIteration::Current
    }

    /// The iteration to read for a job in `iteration`; None before the first.
    pub fn of(self, iteration: i32) -> Option<i32> {
        match self {
            InputIteration::Current => Some(iteration),
            InputIteration::Previous => (iteration > 1).then_some(iteration - 1),
        }
    }
}

fn default_true() -> bool {
    true
}

/// One entry of `outputs_required`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputRule {
    pub document_key: String,
    /// markdown | json | header_context
    #[serde(default)]
    pub file_type: Option<String>,
    #[serde(default)]
    pub template_filename: Option<String>,
    /// Keys the model's JSON must contain for the document to count as finished.
    #[serde(default)]
    pub required_keys: Vec<String>,
    /// The JSON type of keys (required or not) wherever they appear.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub key_types: BTreeMap<String, JsonKind>,
    /// Blackboard entry types the reply may publish under `blackboard`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publishes: Vec<String>,
    /// Runs the step again while its reply's `confidence` is below the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_gate: Option<crate::gate::ConfidenceGate>,
    /// The reply's full JSON Schema, when `required_keys` and `key_types`
    /// cannot say enough (nested shapes, enums, lengths); sent to models
    /// that take structured output (`structured::reply_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// The reply's array of claims to check against the session's `source`
    /// uploads before it is stored (`fact_check::check_claims`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_claims: Option<String>,
    /// What of the output the session's output record carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<crate::output_record::RecordRule>,
    /// A figure the engine computes from the reply before it is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<crate::output_record::MeanRule>,
}

impl OutputRule {
    /// Seed 000 function 6: a markdown document is `file_type: markdown`
    /// or a template file name ending in `.md`.
    pub fn is_markdown(&self) -> bool {
        self.file_type.as_deref() == Some("markdown")
            || self
                .template_filename
                .as_deref()
                .is_some_and(|f| f.ends_with(".md"))
    }
}

/// A step's model parameters over its model's own (the step's
/// `config_override`): what the provider request carries for this step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepConfig {
    /// Sampling temperature, 0 to 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output tokens; never more than the model's own limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// How long one model call of the step may take before the attempt
    /// fails as transient (seed 004's per-agent `timeout_seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u32>,
}

impl StepConfig {
    /// Reads a `config_override` object; names the key that is wrong.
    pub fn from_override(value: &serde_json::Value) -> Result<Self, String> {
        let config: StepConfig = serde_json::from_value(value.clone()).map_err(|e| {
            format!("config_override: {e} (known keys: temperature, max_tokens, timeout_seconds)")
        })?;
        match config.problem() {
            Some(problem) => Err(format!("config_override.{problem}")),
            None => Ok(config),
        }
    }

    /// What is out of range, named by its key.
    pub fn problem(&self) -> Option<String> {
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Some(format!("temperature {t} is outside 0 to 2"));
        }
        if self.max_tokens == Some(0) {
            return Some("max_tokens must be at least 1".into());
        }
        if self.timeout_seconds == Some(0) {
            return Some("timeout_seconds must be at least 1".into());
        }
        None
    }

    /// These parameters where set, `under`'s (a role's) where not.
    pub fn over(self, under: StepConfig) -> StepConfig {
        StepConfig {
            temperature: self.temperature.or(under.temperature),
            max_tokens: self.max_tokens.or(under.max_tokens),
            timeout_seconds: self.timeout_seconds.or(under.timeout_seconds),
        }
    }

    /// The longest one model call may take, when the step says.
    pub fn timeout(&self) -> Option<std::time::Duration> {
        self.timeout_seconds
            .map(|s| std::time::Duration::from_secs(u64::from(s)))
    }

    /// The output limit for a model whose own limit is `model_max`.
    pub fn max_tokens(&self, model_max: u32) -> u32 {
        self.max_tokens
            .map_or(model_max, |m| m.min(model_max))
            .max(1)
    }
}

/// Applies a step's `output_overrides` to its output rules: an object keyed
/// by document key, each value setting `file_type` (markdown | json |
/// header_context), `template_filename` (null removes it), `required_keys` or
/// `key_types`.
/// Names what is wrong: an output the step does not have, an unknown field.
pub fn apply_output_overrides(
    outputs: &mut [OutputRule],
    overrides: &serde_json::Value,
) -> Result<(), String> {
    let Some(overrides) = overrides.as_object() else {
        return Err("output_overrides must be an object keyed by document key".into());
    };
    for (document_key, change) in overrides {
        let known: Vec<String> = outputs.iter().map(|o| o.document_key.clone()).collect();
        let place = format!("output_overrides.{document_key}");
        let Some(rule) = outputs.iter_mut().find(|o| &o.document_key == document_key) else {
            return Err(format!(
                "{place}: the step has no such output (it has {known:?})"
            ));
        };
        let Some(change) = change.as_object() else {
            return Err(format!("{place} must be an object"));
        };
        for (field, value) in change {
            let place = format!("{place}.{field}");
            match field.as_str() {
                "file_type" => {
                    let file_type = optional_string(&place, value)?;
                    if let Some(t) = &file_type
                        && !matches!(t.as_str(), "markdown" | "json" | "header_context")
                    {
                        return Err(format!(
                            "{place} {t:?} is not markdown, json or header_context"
                        ));
                    }
                    rule.file_type = file_type;
                }
                "template_filename" => rule.template_filename = optional_string(&place, value)?,
                "required_keys" => {
                    rule.required_keys = serde_json::from_value(value.clone())
                        .map_err(|e| format!("{place}: {e} (a list of key names)"))?;
                }
                "key_types" => {
                    rule.key_types = serde_json::from_value(value.clone()).map_err(|e| {
                        format!("{place}: {e} (an object of key: string | number | boolean | array | object)")
                    })?;
                }
                _ => {
                    return Err(format!(
                        "{place} is not a known field (file_type, template_filename, required_keys, key_types)"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn optional_string(place: &str, value: &serde_json::Value) -> Result<Option<String>, String> {
    match value {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s.clone())),
        other => Err(format!("{place} must be a string or null, not {other}")),
    }
}

/// A step's `object_filter`: narrows the documents its input rules match
/// (every `document` rule, of any stage). Unset fields admit everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectFilter {
    /// Only documents under these keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_keys: Option<Vec<String>>,
    /// Only documents these models wrote (model slugs, as in file names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
}

impl ObjectFilter {
    /// Reads an `object_filter` object; names the key that is wrong.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, String> {
        let filter: ObjectFilter = serde_json::from_value(value.clone())
            .map_err(|e| format!("object_filter: {e} (known keys: document_keys, models)"))?;
        for (name, list) in [
            ("document_keys", &filter.document_keys),
            ("models", &filter.models),
        ] {
            if list.as_ref().is_some_and(Vec::is_empty) {
                return Err(format!(
                    "object_filter.{name} is empty: it would admit nothing"
                ));
            }
        }
        Ok(filter)
    }

    /// Whether a document under `document_key` written by `author` passes.
    pub fn admits(&self, document_key: &str, author: &str) -> bool {
        let within = |list: &Option<Vec<String>>, value: &str| {
            list.as_ref().is_none_or(|l| l.iter().any(|v| v == value))
        };
        within(&self.document_keys, document_key) && within(&self.models, author)
    }
}

/// The part of its stage's percent a step covers (`progress = [30, 50]` in a
/// pipeline file): the stage stands at the first number when the step's jobs
/// start and at the second when they are all done (seed 004's bands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressBand(pub u8, pub u8);

impl ProgressBand {
    /// Why the band cannot work, if it cannot.
    pub fn problem(&self) -> Option<String> {
        (self.0 > self.1 || self.1 > 100)
            .then(|| format!("[{}, {}] is not a range within 0..=100", self.0, self.1))
    }

    /// Where the stage stands when `done` of the step's `total` jobs are done.
    pub fn at(&self, done: u64, total: u64) -> u32 {
        let (start, end) = (u64::from(self.0), u64::from(self.1));
        let within = (end.saturating_sub(start) * done.min(total))
            .checked_div(total)
            .unwrap_or(0);
        (start + within) as u32
    }
}

/// A stage's percent from its banded steps' (band, done jobs, jobs): the
/// furthest any of them has got. A step a plan skipped has no jobs and the
/// steps after it start further on, so skipping never holds the figure back.
pub fn banded_percent(steps: &[(ProgressBand, u64, u64)]) -> u32 {
    steps
        .iter()
        .map(|(band, done, total)| band.at(*done, *total))
        .max()
        .unwrap_or(0)
        .min(100)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecipeStep {
    pub id: StepId,
    pub step_key: String,
    pub step_name: String,
    pub job_type: JobType,
    pub prompt_type: String,
    pub prompt_template: Option<String>,
    pub output_type: String,
    pub granularity: Granularity,
    pub inputs_required: Vec<InputRule>,
    pub inputs_relevance: serde_json::Value,
    pub outputs_required: Vec<OutputRule>,
    pub order: i32,
    pub is_skipped: bool,
    /// Model parameters for this step (`config_override`).
    #[serde(default)]
    pub config: StepConfig,
    /// The model role the step runs as, with that role's parameters, when
    /// its pipeline names one (`model_role`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<StepRole>,
    /// What its document rules may match (`object_filter`).
    #[serde(default)]
    pub filter: ObjectFilter,
    /// Its band of the stage's percent, when the pipeline gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressBand>,
    /// When a plan may skip it, when the pipeline says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_only_when: Option<crate::skip_rule::SkipCondition>,
}

/// A step's model role: the session maps it to the model the step runs on,
/// and its parameters stand where the step's own say nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRole {
    pub name: String,
    #[serde(default)]
    pub config: StepConfig,
}

impl RecipeStep {
    /// The parameters a call of this step carries: its own, then its role's.
    pub fn effective_config(&self) -> StepConfig {
        match &self.role {
            Some(role) => self.config.over(role.config),
            None => self.config,
        }
    }

    /// The role the step runs as, when it has one.
    pub fn role_name(&self) -> Option<&str> {
        self.role.as_ref().map(|r| r.name.as_str())
    }

    pub fn renders_markdown(&self) -> bool {
        self.own_output().is_some_and(OutputRule::is_markdown)
    }

    /// The output rule of what this step itself writes (others name the
    /// documents a plan covers).
    pub fn own_output(&self) -> Option<&OutputRule> {
        self.outputs_required
            .iter()
            .find(|o| o.document_key == self.output_type)
    }

    /// Checks a reply against the step's own output rule.
    pub fn check_reply(&self, value: &serde_json::Value) -> Result<(), ShapeError> {
        match self.own_output() {
            Some(rule) => crate::shape::check(value, &rule.required_keys, &rule.key_types),
            None => Ok(()),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    pub steps: Vec<RecipeStep>,
    pub edges: Vec<(StepId, StepId)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecipeError {
    #[error("recipe step {0:?} appears twice")]
    DuplicateStepKey(String),
    #[error("edge refers to step {0} which is not in this recipe")]
    EdgeOutsideRecipe(StepId),
    #[error("edge from step {0} to itself")]
    SelfLoop(StepId),
    #[error("edges form a cycle through steps {0:?}")]
    Cycle(Vec<String>),
    #[error("recipe has no steps")]
    Empty,
}

impl Recipe {
    pub fn step(&self, id: StepId) -> Option<&RecipeStep> {
        self.steps.iter().find(|s| s.id == id)
    }

    pub fn step_by_key(&self, key: &str) -> Option<&RecipeStep> {
        self.steps.iter().find(|s| s.step_key == key)
    }

    /// Checks the invariants of seed 002 "DAG Invariants" before any edge is written.
    pub fn validate(&self) -> Result<(), RecipeError> {
        if self.steps.is_empty() {
            return Err(RecipeError::Empty);
        }
        let mut keys = HashSet::new();
        for step in &self.steps {
            if !keys.insert(step.step_key.as_str()) {
                return Err(RecipeError::DuplicateStepKey(step.step_key.clone()));
            }
        }
        let ids: HashSet<StepId> = self.steps.iter().map(|s| s.id).collect();
        for (from, to) in &self.edges {
            for id in [from, to] {
                if !ids.contains(id) {
                    return Err(RecipeError::EdgeOutsideRecipe(*id));
                }
            }
            if from == to {
                return Err(RecipeError::SelfLoop(*from));
            }
        }
        self.topological_order().map(|_| ())
    }

    /// Kahn's algorithm; on a cycle, names the steps of one cycle in edge order.
    pub fn topological_order(&self) -> Result<Vec<StepId>, RecipeError> {
        let mut indegree: BTreeMap<StepId, usize> = self.steps.iter().map(|s| (s.id, 0)).collect();
        let mut successors: HashMap<StepId, Vec<StepId>> = HashMap::new();
        for (from, to) in &self.edges {
            *indegree.entry(*to).or_default() += 1;
            successors.entry(*from).or_default().push(*to);
        }
        let mut queue: VecDeque<StepId> = indegree
            .iter()
            .filter(|(_, d)| **d == 0)
            .map(|(id, _)| *id)
            .collect();
        let mut order = Vec::with_capacity(self.steps.len());
        while let Some(id) = queue.pop_front() {
            order.push(id);
            for next in successors.get(&id).into_iter().flatten() {
                if let Some(d) = indegree.get_mut(next) {
                    *d -= 1;
                    if *d == 0 {
                        queue.push_back(*next);
                    }
                }
            }
        }
        if order.len() == indegree.len() {
            return Ok(order);
        }
        Err(RecipeError::Cycle(self.cycle_path(&order)))
    }

    /// One cycle among the steps Kahn's algorithm could not order, as step keys
    /// `[a, b, …, a]`. The unordered set also holds steps merely downstream of a
    /// cycle, so naming it whole would blame steps that are not on any cycle.
    fn cycle_path(&self, ordered: &[StepId]) -> Vec<String> {
        let ordered: HashSet<StepId> = ordered.iter().copied().collect();
        let unordered: BTreeMap<StepId, &str> = self
            .steps
            .iter()
            .filter(|s| !ordered.contains(&s.id))
            .map(|s| (s.id, s.step_key.as_str()))
            .collect();
        // Every unordered step keeps an unordered predecessor, so walking
        // backwards through them must revisit a step: that loop is a cycle.
        let Some(mut current) = unordered.keys().next().copied() else {
            return Vec::new();
        };
        let mut walk: Vec<StepId> = Vec::new();
        let start = loop {
            if let Some(pos) = walk.iter().position(|id| *id == current) {
                break pos;
            }
            walk.push(current);
            match self
                .predecessors(current)
                .find(|p| unordered.contains_key(p))
            {
                Some(p) => current = p,
                None => return unordered.values().map(|k| k.to_string()).collect(),
            }
        };
        let mut cycle: Vec<&str> = walk[start..]
            .iter()
            .rev()
            .filter_map(|id| unordered.get(id).copied())
            .collect();
        // Start at the smallest key so the same cycle is always reported the same way.
        if let Some(min) = (0..cycle.len()).min_by_key(|i| cycle[*i]) {
            cycle.rotate_left(min);
        }
        let mut path: Vec<String> = cycle.iter().map(|k| k.to_string()).collect();
        if let Some(first) = path.first().cloned() {
            path.push(first);
        }
        path
    }

    /// Would adding `edge` keep the recipe acyclic? Used before writing a new edge.
    pub fn with_edge(&self, edge: (StepId, StepId)) -> Result<Recipe, RecipeError> {
        let mut next = self.clone();
        next.edges.push(edge);
        next.validate()?;
        Ok(next)
    }

    pub fn predecessors(&self, id: StepId) -> impl Iterator<Item = StepId> + '_ {
        self.edges
            .iter()
            .filter(move |(_, to)| *to == id)
            .map(|(from, _)| *from)
    }

    /// Every step downstream of `id` (not `id` itself), nearest first.
    pub fn descendants(&self, id: StepId) -> Vec<StepId> {
        let mut found: Vec<StepId> = Vec::new();
        let mut frontier = vec![id];
        while let Some(current) = frontier.pop() {
            for (from, to) in &self.edges {
                if *from == current && *to != id && !found.contains(to) {
                    found.push(*to);
                    frontier.push(*to);
                }
            }
        }
        found
    }

    /// This recipe with the steps whose keys a plan skipped marked skipped,
    /// those that had started already aside.
    pub fn with_skipped(
        &self,
        keys: &std::collections::BTreeSet<String>,
        started: &HashSet<StepId>,
    ) -> Recipe {
        let mut recipe = self.clone();
        for step in &mut recipe.steps {
            if keys.contains(&step.step_key) && !started.contains(&step.id) {
                step.is_skipped = true;
            }
        }
        recipe
    }

    /// Seed 002 "Worker Orchestration": steps not yet started whose every
    /// predecessor is done. Skipped steps count as done once their own
    /// predecessors are (so `a → skipped → c` still runs `c` after `a`), and are
    /// never returned.
    pub fn ready_steps(
        &self,
        done: &HashSet<StepId>,
        started: &HashSet<StepId>,
    ) -> Vec<&RecipeStep> {
        let mut satisfied: HashSet<StepId> = done.clone();
        loop {
            let newly: Vec<StepId> = self
                .steps
                .iter()
                .filter(|s| s.is_skipped && !satisfied.contains(&s.id))
                .filter(|s| self.predecessors(s.id).all(|p| satisfied.contains(&p)))
                .map(|s| s.id)
                .collect();
            if newly.is_empty() {
                break;
            }
            satisfied.extend(newly);
        }
        let mut ready: Vec<&RecipeStep> = self
            .steps
            .iter()
            .filter(|s| !s.is_skipped && !started.contains(&s.id) && !done.contains(&s.id))
            .filter(|s| self.predecessors(s.id).all(|p| satisfied.contains(&p)))
            .collect();
        ready.sort_by_key(|s| (s.order, s.step_key.clone()));
        ready
    }

    /// The steps a stage starts with: no predecessors.
    pub fn entry_steps(&self) -> Vec<&RecipeStep> {
        self.ready_steps(&HashSet::new(), &HashSet::new())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_step_a_plan_skipped_lets_the_next_run_only_after_what_it_waited_for() {
        let (plan, parse, track, sequence) = (
            step("plan", JobType::Plan, 1),
            step("parse", JobType::Execute, 2),
            step("track", JobType::Execute, 3),
            step("sequence", JobType::Execute, 4),
        );
        let recipe = Recipe {
            edges: vec![
                (plan.id, parse.id),
                (parse.id, track.id),
                (track.id, sequence.id),
            ],
            steps: vec![plan.clone(), parse.clone(), track.clone(), sequence.clone()],
        };
        let skipped = std::collections::BTreeSet::from(["track".to_string()]);
        let keys = |done: &[&RecipeStep], started: &[&RecipeStep]| -> Vec<String> {
            let done: HashSet<StepId> = done.iter().map(|s| s.id).collect();
            let started: HashSet<StepId> = started.iter().map(|s| s.id).collect();
            recipe
                .with_skipped(&skipped, &started)
                .ready_steps(&done, &started)
                .into_iter()
                .map(|s| s.step_key.clone())
                .collect()
        };
        assert_eq!(keys(&[&plan], &[&plan]), ["parse"]);
        assert_eq!(keys(&[&plan, &parse], &[&plan, &parse]), ["sequence"]);
        // Started before the plan skipped it: it runs its course.
        assert!(keys(&[&plan, &parse], &[&plan, &parse, &track]).is_empty());
    }

    #[test]
    fn banded_progress_follows_the_furthest_step_and_skipping_does_not_hold_it_back() {
        let band = |a, b| ProgressBand(a, b);
        assert_eq!(banded_percent(&[]), 0);
        assert_eq!(banded_percent(&[(band(0, 30), 0, 6)]), 0);
        assert_eq!(banded_percent(&[(band(0, 30), 3, 6)]), 15);
        let parsed_and_tracking = [(band(0, 30), 6, 6), (band(30, 50), 1, 2)];
        assert_eq!(banded_percent(&parsed_and_tracking), 40);
        // Tracking skipped: sequencing done puts the stage at 55.
        assert_eq!(
            banded_percent(&[(band(0, 30), 1, 1), (band(50, 55), 1, 1)]),
            55
        );
        assert_eq!(banded_percent(&[(band(90, 100), 1, 1)]), 100);
        assert!(band(50, 30).problem().is_some());
        assert!(band(90, 101).problem().is_some());
        assert!(band(30, 50).problem().is_none());
    }

    pub fn step(key: &str, job_type: JobType, order: i32) -> RecipeStep {
        RecipeStep {
            progress: None,
            skip_only_when: None,
            id: StepId::new(),
            step_key: key.to_string(),
            step_name: key.to_string(),
            job_type,
            prompt_type: "Turn".into(),
            prompt_template: None,
            output_type: key.to_string(),
            granularity: Granularity::AllToOne,
            inputs_required: vec![],
            inputs_relevance: serde_json::json!([]),
            outputs_required: vec![],
            order,
            is_skipped: false,
            config: StepConfig::default(),
            role: None,
            filter: ObjectFilter::default(),
        }
    }

    #[test]
    fn an_object_filter_narrows_by_key_and_model_and_names_what_is_wrong() {
        let filter =
            ObjectFilter::from_value(&serde_json::json!({"document_keys": ["business_case"]}))
                .unwrap();
        assert!(filter.admits("business_case", "a"));
        assert!(!filter.admits("feature_spec", "a"));
        let both = ObjectFilter::from_value(
            &serde_json::json!({"document_keys": ["business_case"], "models": ["b"]}),
        )
        .unwrap();
        assert!(!both.admits("business_case", "a"));
        assert!(both.admits("business_case", "b"));
        assert!(ObjectFilter::default().admits("anything", "anyone"));
        let unknown = ObjectFilter::from_value(&serde_json::json!({"k": 1})).unwrap_err();
        assert!(unknown.contains("unknown field `k`"), "{unknown}");
        let empty = ObjectFilter::from_value(&serde_json::json!({"models": []})).unwrap_err();
        assert!(empty.contains("object_filter.models is empty"), "{empty}");
    }

    #[test]
    fn output_overrides_change_the_named_output_and_name_what_is_wrong() {
        let mut outputs = vec![OutputRule {
            document_key: "business_case".into(),
            file_type: Some("markdown".into()),
            template_filename: Some("thesis_business_case.md".into()),
            required_keys: vec![],
            key_types: Default::default(),
            publishes: vec![],
            confidence_gate: None,
            schema: None,
            verify_claims: None,
            record: None,
            mean: None,
        }];
        apply_output_overrides(
            &mut outputs,
            &serde_json::json!({"business_case": {"file_type": "json", "template_filename": null, "required_keys": ["content"], "key_types": {"content": "string"}}}),
        )
        .unwrap();
        assert_eq!(outputs[0].key_types.get("content"), Some(&JsonKind::String));
        assert_eq!(outputs[0].file_type.as_deref(), Some("json"));
        assert_eq!(outputs[0].template_filename, None);
        assert_eq!(outputs[0].required_keys, ["content"]);
        assert!(!outputs[0].is_markdown());
        let cases = [
            (
                serde_json::json!({"risk": {}}),
                "output_overrides.risk: the step has no such output",
            ),
            (
                serde_json::json!({"business_case": {"colour": 1}}),
                "output_overrides.business_case.colour is not a known field",
            ),
            (
                serde_json::json!({"business_case": {"file_type": "pdf"}}),
                "\"pdf\" is not markdown",
            ),
            (
                serde_json::json!([]),
                "must be an object keyed by document key",
            ),
            (
                serde_json::json!({"business_case": {"key_types": {"content": "text"}}}),
                "output_overrides.business_case.key_types: unknown variant `text`",
            ),
        ];
        for (overrides, expected) in cases {
            let err = apply_output_overrides(&mut outputs, &overrides).unwrap_err();
            assert!(err.contains(expected), "{err}");
        }
    }

    #[test]
    fn input_rules_read_every_match_of_this_iteration_unless_told_otherwise() {
        let rule = |value: serde_json::Value| -> InputRule {
            serde_json::from_value(value).expect("rule")
        };
        let plain = rule(serde_json::json!({"type": "document", "document_key": "master_plan"}));
        assert!(plain.multiple);
        assert_eq!(plain.iteration.of(2), Some(2));
        let earlier = rule(
            serde_json::json!({"type": "document", "multiple": false, "iteration": "previous"}),
        );
        assert!(!earlier.multiple);
        assert_eq!(earlier.iteration.of(1), None);
        assert_eq!(earlier.iteration.of(3), Some(2));
    }

    #[test]
    fn a_steps_own_parameters_stand_over_its_roles() {
        let role = StepConfig {
            temperature: Some(0.0),
            max_tokens: Some(4096),
            timeout_seconds: Some(180),
        };
        let mut step = step("resolve", JobType::Execute, 1);
        step.config.temperature = Some(0.2);
        assert_eq!(step.effective_config(), step.config, "no role, its own");
        step.role = Some(StepRole {
            name: "reasoning".into(),
            config: role,
        });
        let effective = step.effective_config();
        assert_eq!(
            (
                effective.temperature,
                effective.max_tokens,
                effective.timeout()
            ),
            (
                Some(0.2),
                Some(4096),
                Some(std::time::Duration::from_secs(180))
            )
        );
        assert_eq!(step.role_name(), Some("reasoning"));
        let zero = StepConfig::from_override(&serde_json::json!({"timeout_seconds": 0}));
        assert!(zero.unwrap_err().contains("timeout_seconds"));
    }

    #[test]
    fn a_config_override_names_what_is_wrong() {
        let ok =
            StepConfig::from_override(&serde_json::json!({"temperature": 0.2, "max_tokens": 300}))
                .expect("valid");
        assert_eq!(
            (ok.temperature, ok.max_tokens(4096), ok.max_tokens(100)),
            (Some(0.2), 300, 100)
        );
        assert_eq!(
            StepConfig::from_override(&serde_json::json!({})),
            Ok(StepConfig::default())
        );
        for (bad, names) in [
            (serde_json::json!({"temprature": 1}), "temprature"),
            (serde_json::json!({"temperature": 3.5}), "temperature"),
            (serde_json::json!({"max_tokens": 0}), "max_tokens"),
            (serde_json::json!({"max_tokens": "many"}), "many"),
        ] {
            let e = StepConfig::from_override(&bad).expect_err("refused");
            assert!(e.contains(names), "{e}");
        }
    }

    fn thesis() -> Recipe {
        let plan = step("header", JobType::Plan, 1);
        let docs: Vec<RecipeStep> = [
            "business_case",
            "feature_spec",
            "technical_approach",
            "success_metrics",
        ]
        .iter()
        .map(|k| step(k, JobType::Execute, 2))
        .collect();
        let edges = docs.iter().map(|d| (plan.id, d.id)).collect();
        let mut steps = vec![plan];
        steps.extend(docs);
        Recipe { steps, edges }
    }

    #[test]
    fn thesis_dag_is_valid_and_fans_out_after_the_plan() {
        let recipe = thesis();
        recipe.validate().unwrap();
        let entry = recipe.entry_steps();
        assert_eq!(entry.len(), 1);
        assert_eq!(entry[0].step_key, "header");
        let done: HashSet<StepId> = [entry[0].id].into();
        let ready = recipe.ready_steps(&done, &HashSet::new());
        assert_eq!(ready.len(), 4);
    }

    #[test]
    fn cycles_are_rejected_with_the_steps_named() {
        let recipe = thesis();
        let a = recipe.steps[1].id;
        let plan = recipe.steps[0].id;
        let err = recipe.with_edge((a, plan)).unwrap_err();
        match err {
            RecipeError::Cycle(keys) => assert!(keys.contains(&"header".to_string())),
            other => panic!("expected a cycle, got {other:?}"),
        }
        assert!(matches!(
            recipe.with_edge((a, a)),
            Err(RecipeError::SelfLoop(_))
        ));
        assert!(matches!(
            recipe.with_edge((a, StepId::new())),
            Err(RecipeError::EdgeOutsideRecipe(_))
        ));
    }

    #[test]
    fn skipped_steps_count_as_done() {
        let mut a = step("a", JobType::Plan, 1);
        let mut b = step("b", JobType::Execute, 2);
        let c = step("c", JobType::Execute, 3);
        b.is_skipped = true;
        a.order = 1;
        let recipe = Recipe {
            edges: vec![(a.id, b.id), (b.id, c.id)],
            steps: vec![a.clone(), b, c.clone()],
        };
        let done: HashSet<StepId> = [a.id].into();
        let ready = recipe.ready_steps(&done, &HashSet::new());
        assert_eq!(
            ready
                .iter()
                .map(|s| s.step_key.as_str())
                .collect::<Vec<_>>(),
            vec!["c"]
        );
    }

    fn ids(recipe: &Recipe, keys: &[&str]) -> HashSet<StepId> {
        keys.iter()
            .map(|k| recipe.step_by_key(k).unwrap().id)
            .collect()
    }

    fn keys(steps: &[&RecipeStep]) -> Vec<String> {
        steps.iter().map(|s| s.step_key.clone()).collect()
    }

    /// EXECUTE steps ordered as listed, with edges given by key.
    fn chain(keys: &[&str], edges: &[(&str, &str)]) -> Recipe {
        let steps: Vec<RecipeStep> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| step(k, JobType::Execute, i as i32 + 1))
            .collect();
        let id = |k: &str| steps.iter().find(|s| s.step_key == k).unwrap().id;
        let edges = edges.iter().map(|(a, b)| (id(a), id(b))).collect();
        Recipe { steps, edges }
    }

    #[test]
    fn cycle_error_names_only_the_cycle_in_edge_order() {
        // header → {business_case, …}; business_case → header closes a cycle;
        // the other three documents are downstream of it but not on it.
        let recipe = thesis();
        let header = recipe.step_by_key("header").unwrap().id;
        let business = recipe.step_by_key("business_case").unwrap().id;
        match recipe.with_edge((business, header)) {
            Err(RecipeError::Cycle(path)) => {
                assert_eq!(path, vec!["business_case", "header", "business_case"])
            }
            other => panic!("expected a cycle, got {other:?}"),
        }
        // A longer loop far from the entry step, with a tail hanging off it.
        let recipe = chain(
            &["a", "b", "c", "d", "e", "tail"],
            &[
                ("a", "b"),
                ("b", "c"),
                ("c", "d"),
                ("d", "e"),
                ("e", "c"),
                ("e", "tail"),
            ],
        );
        match recipe.validate() {
            Err(RecipeError::Cycle(path)) => assert_eq!(path, vec!["c", "d", "e", "c"]),
            other => panic!("expected a cycle, got {other:?}"),
        }
        let err = recipe.validate().unwrap_err().to_string();
        assert!(err.contains("cycle") && err.contains("\"d\""), "{err}");
    }

    #[test]
    fn validate_rejects_what_the_store_must_never_write() {
        assert_eq!(Recipe::default().validate(), Err(RecipeError::Empty));
        let mut recipe = thesis();
        recipe
            .steps
            .push(step("business_case", JobType::Execute, 3));
        assert_eq!(
            recipe.validate(),
            Err(RecipeError::DuplicateStepKey("business_case".into()))
        );
        let recipe = thesis();
        let outsider = StepId::new();
        let mut with_outsider = recipe.clone();
        with_outsider.edges.push((outsider, recipe.steps[0].id));
        assert_eq!(
            with_outsider.validate(),
            Err(RecipeError::EdgeOutsideRecipe(outsider))
        );
        // Diamonds and repeated edges are still DAGs.
        let diamond = chain(
            &["a", "b", "c", "d"],
            &[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("c", "d")],
        );
        diamond.validate().unwrap();
        let order = diamond.topological_order().unwrap();
        let position = |k: &str| {
            let id = diamond.step_by_key(k).unwrap().id;
            order.iter().position(|x| *x == id).unwrap()
        };
        assert!(position("a") < position("b") && position("c") < position("d"));
        // with_edge leaves the original alone whether it accepts or rejects.
        let extended = diamond
            .with_edge((diamond.steps[1].id, diamond.steps[2].id))
            .unwrap();
        assert_eq!(extended.edges.len(), diamond.edges.len() + 1);
        assert!(
            diamond
                .with_edge((diamond.steps[3].id, diamond.steps[0].id))
                .is_err()
        );
        assert_eq!(diamond.edges.len(), 5);
    }

    #[test]
    fn skipped_step_waits_for_its_own_predecessors() {
        // a → b (skipped) → c: c must not start before a is done.
        let mut recipe = chain(&["a", "b", "c"], &[("a", "b"), ("b", "c")]);
        recipe.steps[1].is_skipped = true;
        let none = HashSet::new();
        assert_eq!(keys(&recipe.entry_steps()), vec!["a"]);
        assert_eq!(
            keys(&recipe.ready_steps(&none, &ids(&recipe, &["a"]))),
            Vec::<String>::new()
        );
        assert_eq!(
            keys(&recipe.ready_steps(&ids(&recipe, &["a"]), &ids(&recipe, &["a"]))),
            vec!["c"]
        );
    }

    #[test]
    fn ready_steps_with_skips_table() {
        // header → {x, y}; x → z; y → z; z → last. Skips chain through.
        let base = chain(
            &["header", "x", "y", "z", "last"],
            &[
                ("header", "x"),
                ("header", "y"),
                ("x", "z"),
                ("y", "z"),
                ("z", "last"),
            ],
        );
        let cases: &[[&[&str]; 4]] = &[
            // (skipped, done, started, ready)
            [&[], &[], &[], &["header"]],
            [&[], &["header"], &[], &["x", "y"]],
            [&[], &["header", "x"], &["y"], &[]],
            [&["y"], &["header"], &[], &["x"]],
            [&["y"], &["header", "x"], &[], &["z"]],
            [&["x", "y"], &["header"], &[], &["z"]],
            [&["x", "y", "z"], &["header"], &[], &["last"]],
            [&["x", "y", "z"], &[], &[], &["header"]],
            // A skipped entry step lets its successors start at once.
            [&["header"], &[], &[], &["x", "y"]],
            [&["header", "x", "y", "z", "last"], &[], &[], &[]],
            [&["last"], &["header", "x", "y", "z"], &[], &[]],
        ];
        for [skipped, done, started, want] in cases {
            let mut recipe = base.clone();
            for step in &mut recipe.steps {
                step.is_skipped = skipped.contains(&step.step_key.as_str());
            }
            let ready = recipe.ready_steps(&ids(&recipe, done), &ids(&recipe, started));
            assert_eq!(
                keys(&ready),
                want.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
                "skipped {skipped:?}, done {done:?}, started {started:?}"
            );
        }
    }

    #[test]
    fn ready_steps_are_ordered_by_order_then_key() {
        let mut recipe = chain(&["h", "b", "a", "c"], &[("h", "a"), ("h", "b"), ("h", "c")]);
        recipe.steps[3].order = 2;
        for s in &mut recipe.steps[1..3] {
            s.order = 5;
        }
        let ready = recipe.ready_steps(&ids(&recipe, &["h"]), &HashSet::new());
        assert_eq!(keys(&ready), vec!["c", "a", "b"]);
    }

    #[test]
    fn granularity_names_parse() {
        for g in [
            "all_to_one",
            "per_model",
            "per_source_document",
            "per_source_document_by_lineage",
            "pairwise_by_origin",
            "per_source_group",
        ] {
            assert_eq!(g.parse::<Granularity>().unwrap().as_str(), g);
        }
        assert!("sideways".parse::<Granularity>().is_err());
    }

    #[test]
    fn markdown_outputs_are_detected() {
        let md = OutputRule {
            document_key: "x".into(),
            file_type: Some("markdown".into()),
            template_filename: None,
            required_keys: vec![],
            key_types: Default::default(),
            publishes: vec![],
            confidence_gate: None,
            schema: None,
            verify_claims: None,
            record: None,
            mean: None,
        };
        let by_name = OutputRule {
            document_key: "x".into(),
            file_type: None,
            template_filename: Some("x.md".into()),
            required_keys: vec![],
            key_types: Default::default(),
            publishes: vec![],
            confidence_gate: None,
            schema: None,
            verify_claims: None,
            record: None,
            mean: None,
        };
        let json = OutputRule {
            document_key: "x".into(),
            file_type: Some("json".into()),
            template_filename: None,
            required_keys: vec![],
            key_types: Default::default(),
            publishes: vec![],
            confidence_gate: None,
            schema: None,
            verify_claims: None,
            record: None,
            mean: None,
        };
        assert!(md.is_markdown() && by_name.is_markdown() && !json.is_markdown());
    }

    fn order_by(toml_text: &str) -> OrderBy {
        toml::from_str(toml_text).expect("order_by parses")
    }

    /// (upload name, extracted value) in upload order, sorted by `order`.
    fn sorted(order: &OrderBy, uploads: &[(&str, Option<&str>)]) -> (Vec<String>, Vec<Unordered>) {
        let mut items: Vec<(String, Option<String>)> = uploads
            .iter()
            .map(|(n, v)| (n.to_string(), v.map(str::to_string)))
            .collect();
        let unordered = order.sort(&mut items, |(_, v)| v.clone());
        (items.into_iter().map(|(n, _)| n).collect(), unordered)
    }

    #[test]
    fn order_by_dates_follows_time_whatever_the_form_and_reports_what_does_not_parse() {
        let order = order_by(
            r#"document_key = "parsed_document"
               key = "effective_date"
               as = "date"
               day_first = true"#,
        );
        assert_eq!((order.kind, order.day_first), (OrderAs::Date, true));
        let (names, unordered) = sorted(
            &order,
            &[
                ("base", Some("1 March 2021")),
                ("undated", None),
                ("vague", Some("next spring")),
                ("third", Some("01/09/2024")),
                ("first", Some("2020-06-01")),
                ("second", Some("March 1, 2021")),
                ("impossible", Some("31 February 2022")),
            ],
        );
        // "1 March 2021" and "March 1, 2021" are one day: upload order.
        assert_eq!(
            names,
            [
                "first",
                "base",
                "second",
                "third",
                "undated",
                "vague",
                "impossible"
            ]
        );
        assert_eq!(
            unordered,
            [
                Unordered {
                    index: 5,
                    value: "next spring".into(),
                    error: DateError::Unrecognised,
                },
                Unordered {
                    index: 6,
                    value: "31 February 2022".into(),
                    error: DateError::NoSuchDay {
                        year: 2022,
                        month: 2,
                        day: 31
                    },
                },
            ]
        );
        // Month first, the same numeric date is 9 January 2024.
        let month_first = OrderBy {
            day_first: false,
            ..order
        };
        let (names, _) = sorted(
            &month_first,
            &[("a", Some("01/09/2024")), ("b", Some("2 February 2024"))],
        );
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn order_by_without_as_compares_text_and_writes_back_as_read() {
        let order = order_by(
            r#"document_key = "parsed_document"
                               key = "effective_date""#,
        );
        assert_eq!((order.kind, order.day_first), (OrderAs::Text, false));
        let (names, unordered) = sorted(
            &order,
            &[
                ("b", Some("b")),
                ("none", None),
                ("a", Some("a")),
                ("a2", Some("a")),
            ],
        );
        assert_eq!(names, ["a", "a2", "b", "none"]);
        assert!(unordered.is_empty());
        // Defaults stay out of what is written, so exported files match.
        let written = toml::to_string(&order).expect("toml");
        assert!(
            !written.contains("as") && !written.contains("day_first"),
            "{written}"
        );
        let dated = OrderBy {
            kind: OrderAs::Date,
            day_first: true,
            ..order
        };
        assert_eq!(order_by(&toml::to_string(&dated).expect("toml")), dated);
        assert!(
            toml::from_str::<OrderBy>("document_key = \"p\"\nkey = \"k\"\nas = \"number\"")
                .is_err()
        );
    }
}
