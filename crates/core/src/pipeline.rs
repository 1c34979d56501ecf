//! Pipelines as data: one TOML file holds a process's stages in order, each
//! stage's system prompt, recipe (steps, the steps each waits for, input and
//! output rules, prompts) and document templates. [`PipelineFile::parse`]
//! reads one and [`PipelineFile::validate`] checks it whole before anything is
//! written, naming the place in the file of every problem it finds.

use crate::fact_check;
use crate::gate::{CONFIDENCE, ConfidenceGate};
use crate::ids::StepId;
use crate::job::JobType;
use crate::model_role::{RoleDef, is_role_name};
use crate::output_record::{MeanRule, RecordRule};
use crate::recipe::{
    Granularity, InputIteration, InputRule, ObjectFilter, OutputRule, ProgressBand, Recipe,
    RecipeStep, StepConfig, StepRole,
};
use crate::shape::JsonKind;
use crate::skip_rule::SkipCondition;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineFile {
    /// The pipeline's slug (`dialectic`, `essay`); projects name it.
    pub name: String,
    pub display_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// In the order a session runs them; each stage leads to the next.
    pub stages: Vec<StageDef>,
    /// The model roles its steps name (`model_role`), by name; a session
    /// maps each to a model when it starts (docs/models.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub roles: BTreeMap<String, RoleDef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageDef {
    pub slug: String,
    pub display_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The system instruction of every call in the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    pub steps: Vec<StepDef>,
    /// Markdown templates the renderer fills, by output document key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub document_templates: Vec<DocumentTemplateDef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDef {
    pub key: String,
    pub name: String,
    /// PLAN | EXECUTE
    pub job_type: String,
    /// Seed | Planner | Turn | Continuation
    pub prompt_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    pub output_type: String,
    pub granularity: String,
    /// Steps of this stage that must finish first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relevance: Vec<RelevanceDef>,
    pub outputs: Vec<OutputRule>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub config: StepConfig,
    /// The role it runs as: one of the pipeline's `roles`. A session that
    /// maps the role runs the step on that model only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_role: Option<String>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub filter: ObjectFilter,
    /// Its band of the stage's percent, e.g. `[30, 50]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressBand>,
    /// When a plan may skip it (`{ max_documents = 1 }`); absent: whenever
    /// a plan asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_only_when: Option<SkipCondition>,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// How much one input rule's documents matter when a prompt must shrink.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelevanceDef {
    pub document_key: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub relevance: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentTemplateDef {
    pub document_key: String,
    pub name: String,
    /// The file name output rules refer to (`thesis_business_case.md`).
    pub file_name: String,
    pub content: String,
}

/// One problem in a pipeline file, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineProblem {
    /// `stages[1].steps[2].inputs[0].stage_slug`, with slugs and keys shown.
    pub place: String,
    pub reason: String,
}

impl fmt::Display for PipelineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.reason)
    }
}

/// Everything wrong with a pipeline file; nothing is installed while any remains.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PipelineErrors(pub Vec<PipelineProblem>);

impl fmt::Display for PipelineErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("; "))
    }
}

const INPUT_KINDS: [&str; 6] = [
    "seed_prompt",
    "header_context",
    "document",
    "feedback",
    "project_document",
    crate::blackboard::INPUT_KIND,
];
const PROMPT_TYPES: [&str; 4] = ["Seed", "Planner", "Turn", "Continuation"];

impl PipelineFile {
    /// Reads a TOML pipeline file; a syntax or shape error names its line.
    pub fn parse(text: &str) -> Result<PipelineFile, PipelineErrors> {
        toml::from_str(text).map_err(|e| {
            PipelineErrors(vec![PipelineProblem {
                place: e
                    .span()
                    .map(|s| format!("line {}", line_of(text, s.start)))
                    .unwrap_or_else(|| "file".into()),
                reason: e.message().to_string(),
            }])
        })
    }

    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string_pretty(self)
    }

    /// SHA-256 of the file's canonical TOML: comments and layout do not
    /// change it, any change to what installs does.
    pub fn digest(&self) -> Result<String, toml::ser::Error> {
        Ok(crate::digest::sha256_hex(self.to_toml()?.as_bytes()))
    }

    /// Checks the whole file: names, references between stages and steps,
    /// step cycles, granularities, job and prompt types, input kinds, that
    /// every template an output names is defined, and that every document
    /// template parses and renders (`prompt::check_template`).
    pub fn validate(&self) -> Result<(), PipelineErrors> {
        let mut problems = Problems::default();
        if !is_slug(&self.name) {
            problems.add(
                "name",
                format!("{:?} is not a slug (a-z, 0-9, _)", self.name),
            );
        }
        if self.stages.is_empty() {
            problems.add("stages", "a pipeline needs at least one stage");
        }
        self.check_roles(&mut problems);
        let mut earlier: BTreeSet<&str> = BTreeSet::new();
        for (index, stage) in self.stages.iter().enumerate() {
            let place = format!("stages[{index}] ({})", stage.slug);
            if !earlier.insert(&stage.slug) {
                problems.add(&place, "a second stage with this slug");
            }
            check_stage(stage, &earlier, &place, &mut problems);
        }
        let record_documents = self
            .stages
            .iter()
            .flat_map(|stage| &stage.steps)
            .flat_map(|step| &step.outputs)
            .filter(|o| o.record.as_ref().is_some_and(|r| r.document))
            .count();
        if record_documents > 1 {
            problems.add(
                "stages",
                format!("{record_documents} outputs say record.document; an output record has one document"),
            );
        }
        problems.into_result()
    }

    /// Role names and parameters, and that every step's role is declared.
    fn check_roles(&self, problems: &mut Problems) {
        for (name, role) in &self.roles {
            if !is_role_name(name) {
                problems.add(
                    &format!("roles.{name}"),
                    "a role name is lower case letters, digits and _ (at most 64)",
                );
            }
            if let Some(problem) = role.config().problem() {
                problems.add(&format!("roles.{name}"), problem);
            }
        }
        for (s, stage) in self.stages.iter().enumerate() {
            for (index, step) in stage.steps.iter().enumerate() {
                if let Some(role) = &step.model_role
                    && !self.roles.contains_key(role)
                {
                    problems.add(
                        &format!("stages[{s}] ({}).steps[{index}] ({}).model_role", stage.slug, step.key),
                        format!("{role:?} is not one of the pipeline's roles (declare it under [roles.{role}])"),
                    );
                }
            }
        }
    }

    /// A stage's recipe as the planner runs it (ids fresh, edges from `after`).
    pub fn recipe(stage: &StageDef) -> Result<Recipe, PipelineErrors> {
        let ids: BTreeMap<&str, StepId> = stage
            .steps
            .iter()
            .map(|s| (s.key.as_str(), StepId::new()))
            .collect();
        let mut steps = Vec::new();
        let mut edges = Vec::new();
        let mut problems = Problems::default();
        for (order, def) in stage.steps.iter().enumerate() {
            let place = format!("{} steps[{order}] ({})", stage.slug, def.key);
            match recipe_step(def, ids[def.key.as_str()], order as i32 + 1) {
                Ok(step) => steps.push(step),
                Err(reason) => problems.add(&place, reason),
            }
            for before in &def.after {
                match ids.get(before.as_str()) {
                    Some(from) => edges.push((*from, ids[def.key.as_str()])),
                    None => problems.add(
                        &format!("{place}.after"),
                        format!("no step {before:?} in this stage"),
                    ),
                }
            }
        }
        problems.into_result()?;
        Ok(Recipe { steps, edges })
    }
}

/// Stage and pipeline slugs appear in storage keys and file names.
fn is_slug(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[derive(Default)]
struct Problems(Vec<PipelineProblem>);

impl Problems {
    fn add(&mut self, place: &str, reason: impl Into<String>) {
        self.0.push(PipelineProblem {
            place: place.to_string(),
            reason: reason.into(),
        });
    }

    fn into_result(self) -> Result<(), PipelineErrors> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(PipelineErrors(self.0))
        }
    }
}

fn check_stage(
    stage: &StageDef,
    known_stages: &BTreeSet<&str>,
    place: &str,
    problems: &mut Problems,
) {
    if !is_slug(&stage.slug) {
        problems.add(
            &format!("{place}.slug"),
            "a stage slug is lower case letters, digits and _",
        );
    }
    if stage.steps.is_empty() {
        problems.add(&format!("{place}.steps"), "a stage needs at least one step");
    }
    let templates: BTreeSet<&str> = stage
        .document_templates
        .iter()
        .map(|t| t.file_name.as_str())
        .collect();
    for (index, template) in stage.document_templates.iter().enumerate() {
        if let Err(e) = crate::prompt::check_template(&template.content) {
            problems.add(
                &format!(
                    "{place}.document_templates[{index}] ({}).content",
                    template.document_key
                ),
                format!("the template does not render: {e}"),
            );
        }
    }
    let keys: BTreeSet<&str> = stage.steps.iter().map(|s| s.key.as_str()).collect();
    for (index, step) in stage.steps.iter().enumerate() {
        let place = format!("{place}.steps[{index}] ({})", step.key);
        check_step(step, &keys, known_stages, &templates, &place, problems);
    }
    if let Ok(recipe) = PipelineFile::recipe(stage)
        && let Err(e) = recipe.validate()
    {
        problems.add(&format!("{place}.steps"), e.to_string());
    }
}

fn check_step(
    step: &StepDef,
    keys: &BTreeSet<&str>,
    known_stages: &BTreeSet<&str>,
    templates: &BTreeSet<&str>,
    place: &str,
    problems: &mut Problems,
) {
    match Granularity::from_str(&step.granularity) {
        Err(e) => problems.add(&format!("{place}.granularity"), e.to_string()),
        Ok(Granularity::PerItem) if !anchor_has_items(step) => problems.add(
            &format!("{place}.inputs"),
            "per_item fans out over the items of its first document rule: give that rule `items` (the JSON array's key)",
        ),
        Ok(_) => {}
    }
    if let Some(problem) = step.config.problem() {
        problems.add(&format!("{place}.config"), problem);
    }
    if let Some(problem) = step.progress.and_then(|band| band.problem()) {
        problems.add(&format!("{place}.progress"), problem);
    }
    if let Some(problem) = step.skip_only_when.and_then(|c| c.problem()) {
        problems.add(&format!("{place}.skip_only_when"), problem);
    }
    if let Some(prompt) = &step.prompt
        && let Err(e) = crate::prompt::check_template(prompt)
    {
        problems.add(&format!("{place}.prompt"), e.to_string());
    }
    if !matches!(step.job_type.as_str(), "PLAN" | "EXECUTE") {
        problems.add(
            &format!("{place}.job_type"),
            format!("{:?} is not PLAN or EXECUTE", step.job_type),
        );
    }
    if !PROMPT_TYPES.contains(&step.prompt_type.as_str()) {
        problems.add(
            &format!("{place}.prompt_type"),
            format!("{:?} is not one of {PROMPT_TYPES:?}", step.prompt_type),
        );
    }
    for before in step.after.iter().filter(|b| !keys.contains(b.as_str())) {
        problems.add(
            &format!("{place}.after"),
            format!("no step {before:?} in this stage"),
        );
    }
    for (index, rule) in step.inputs.iter().enumerate() {
        check_input(
            rule,
            known_stages,
            &format!("{place}.inputs[{index}]"),
            problems,
        );
    }
    if !step
        .outputs
        .iter()
        .any(|o| o.document_key == step.output_type)
    {
        problems.add(
            &format!("{place}.outputs"),
            format!("no output rule for its own output {:?}", step.output_type),
        );
    }
    for (index, output) in step.outputs.iter().enumerate() {
        if let Some(gate) = &output.confidence_gate {
            check_gate(gate, output, &format!("{place}.outputs[{index}]"), problems);
        }
        if let Some(items) = &output.verify_claims
            && !output.required_keys.contains(items)
        {
            problems.add(
                &format!("{place}.outputs[{index}].verify_claims"),
                format!("{items:?} must be among the required keys (the reply's array of claims)"),
            );
        }
        if let Some(mean) = &output.mean {
            check_mean(
                mean,
                output,
                &format!("{place}.outputs[{index}].mean"),
                problems,
            );
        }
        if let Some(record) = &output.record {
            check_record(
                record,
                output,
                &format!("{place}.outputs[{index}].record"),
                problems,
            );
        }
        for entry_type in output.publishes.iter().filter(|t| !is_slug(t)) {
            problems.add(
                &format!("{place}.outputs[{index}].publishes"),
                format!("{entry_type:?} is not an entry type (a-z, 0-9, _)"),
            );
        }
        if let Some(schema) = &output.schema {
            for problem in crate::structured::schema_problems(schema, output) {
                problems.add(&format!("{place}.outputs[{index}].schema"), problem);
            }
        }
        if let Some(file) = &output.template_filename
            && !templates.contains(file.as_str())
        {
            problems.add(
                &format!("{place}.outputs[{index}].template_filename"),
                format!("no document template {file:?} in this stage"),
            );
        }
    }
}

/// A `per_item` step's anchor (its first `document` or `project_document`
/// rule) names the array it fans out over.
fn anchor_has_items(step: &StepDef) -> bool {
    step.inputs
        .iter()
        .find(|r| r.kind == "document" || r.kind == "project_document")
        .is_some_and(|r| r.items.is_some())
}

fn check_gate(gate: &ConfidenceGate, output: &OutputRule, place: &str, problems: &mut Problems) {
    if let Some(problem) = gate.problem() {
        problems.add(&format!("{place}.confidence_gate"), problem);
    }
    if !output.required_keys.iter().any(|k| k == CONFIDENCE) {
        problems.add(
            &format!("{place}.required_keys"),
            format!("a confidence_gate needs {CONFIDENCE:?} among the required keys"),
        );
    }
}

/// A mean is taken over an array the reply always has.
fn check_mean(mean: &MeanRule, output: &OutputRule, place: &str, problems: &mut Problems) {
    let array = output.required_keys.contains(&mean.of)
        && output.key_types.get(&mean.of) == Some(&JsonKind::Array);
    if !array {
        problems.add(
            &format!("{place}.of"),
            format!(
                "{:?} must be a required key typed an array (key_types)",
                mean.of
            ),
        );
    }
    if !is_slug(&mean.into) {
        problems.add(
            &format!("{place}.into"),
            format!("{:?} is not a key (a-z, 0-9, _)", mean.into),
        );
    }
}

/// A record field must be a number the output always has: a required key
/// typed a number, or a count the engine's claim check writes.
fn check_record(record: &RecordRule, output: &OutputRule, place: &str, problems: &mut Problems) {
    let counted = |field: &str| {
        output.verify_claims.is_some()
            && [fact_check::SOURCES_VERIFIED, fact_check::CLAIMS_DEFERRED].contains(&field)
            || output.mean.as_ref().is_some_and(|m| m.into == field)
    };
    for field in &record.fields {
        let required = output.required_keys.contains(field)
            && output.key_types.get(field) == Some(&JsonKind::Number);
        if !required && !counted(field) {
            problems.add(
                &format!("{place}.fields"),
                format!("{field:?} must be a required key typed a number (key_types), or a count of verify_claims or a mean"),
            );
        }
    }
    if !record.document && record.fields.is_empty() {
        problems.add(place, "a record rule names the document or a field");
    }
}

fn check_input(
    rule: &InputRule,
    known_stages: &BTreeSet<&str>,
    place: &str,
    problems: &mut Problems,
) {
    if !INPUT_KINDS.contains(&rule.kind.as_str()) {
        problems.add(
            &format!("{place}.type"),
            format!("{:?} is not one of {INPUT_KINDS:?}", rule.kind),
        );
    }
    if rule.order_by.is_some() && rule.kind != "project_document" {
        problems.add(
            &format!("{place}.order_by"),
            "only a project_document rule can be ordered by what a step extracted from each upload",
        );
    }
    if rule.role.is_some() && rule.kind != "project_document" {
        problems.add(
            &format!("{place}.role"),
            "only a project_document rule reads uploads by their role",
        );
    }
    // A stage reads itself or stages before it; the iteration before may be any.
    if let Some(stage) = &rule.stage_slug
        && !known_stages.contains(stage.as_str())
        && rule.iteration == InputIteration::Current
    {
        problems.add(
            &format!("{place}.stage_slug"),
            format!("{stage:?} is not this stage or one before it"),
        );
    }
}

fn recipe_step(def: &StepDef, id: StepId, order: i32) -> Result<RecipeStep, String> {
    let relevance = serde_json::to_value(&def.relevance).map_err(|e| e.to_string())?;
    Ok(RecipeStep {
        id,
        step_key: def.key.clone(),
        step_name: def.name.clone(),
        job_type: JobType::from_str(&def.job_type).map_err(|e| e.to_string())?,
        prompt_type: def.prompt_type.clone(),
        prompt_template: def.prompt.clone(),
        output_type: def.output_type.clone(),
        granularity: Granularity::from_str(&def.granularity).map_err(|e| e.to_string())?,
        inputs_required: def.inputs.clone(),
        inputs_relevance: relevance,
        outputs_required: def.outputs.clone(),
        order,
        is_skipped: false,
        config: def.config,
        role: def.model_role.as_ref().map(|name| StepRole {
            name: name.clone(),
            config: StepConfig::default(),
        }),
        filter: def.filter.clone(),
        progress: def.progress,
        skip_only_when: def.skip_only_when,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = include_str!("../../../pipelines/dialectic.toml");

    const MINIMAL: &str = r##"
name = "notes"
display_name = "Notes"

[[stages]]
slug = "draft"
display_name = "Draft"

[[stages.steps]]
key = "plan"
name = "Plan"
job_type = "PLAN"
prompt_type = "Planner"
output_type = "header_context"
granularity = "all_to_one"
inputs = [{ type = "seed_prompt", document_key = "seed_prompt" }]
outputs = [{ document_key = "header_context", file_type = "header_context" }]

[[stages.steps]]
key = "write"
name = "Write"
job_type = "EXECUTE"
prompt_type = "Turn"
prompt = "Write the note."
output_type = "note"
granularity = "all_to_one"
after = ["plan"]
inputs = [{ type = "header_context", document_key = "header_context" }]
outputs = [{ document_key = "note", file_type = "markdown", template_filename = "draft_note.md", required_keys = ["content"] }]

[[stages.document_templates]]
document_key = "note"
name = "Note"
file_name = "draft_note.md"
content = "# {{title}}\n\n{{content}}\n"
"##;

    fn problems(text: &str) -> Vec<String> {
        let file = PipelineFile::parse(text).expect("parses");
        match file.validate() {
            Ok(()) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }

    /// The documented minimal example (docs/pipeline-files.md) and the shipped files are valid pipelines.
    #[test]
    fn the_readme_example_and_every_shipped_file_are_valid() {
        let section = include_str!("../../../docs/pipeline-files.md");
        let start = section.find("```toml\n").expect("example") + "```toml\n".len();
        let example = &section[start..start + section[start..].find("```").expect("end")];
        let file = PipelineFile::parse(example).expect("the README example parses");
        assert_eq!(file.validate(), Ok(()));
        for text in [
            include_str!("../../../pipelines/essay.toml"),
            include_str!("../../../pipelines/contract_stack.toml"),
        ] {
            let file = PipelineFile::parse(text).expect("parses");
            assert_eq!(file.validate(), Ok(()), "{}", file.name);
        }
    }

    #[test]
    fn the_shipped_dialectic_pipeline_is_valid() {
        let file = PipelineFile::parse(SHIPPED).expect("parses");
        assert_eq!(file.validate(), Ok(()));
        let slugs: Vec<&str> = file.stages.iter().map(|s| s.slug.as_str()).collect();
        assert_eq!(
            slugs,
            [
                "thesis",
                "antithesis",
                "synthesis",
                "parenthesis",
                "paralysis"
            ]
        );
        let recipe = PipelineFile::recipe(&file.stages[2]).expect("synthesis recipe");
        assert_eq!(recipe.validate(), Ok(()));
        assert_eq!(
            recipe.entry_steps().len(),
            1,
            "synthesis opens with one plan"
        );
    }

    #[test]
    fn a_minimal_pipeline_is_valid_and_round_trips() {
        assert!(problems(MINIMAL).is_empty());
        let file = PipelineFile::parse(MINIMAL).expect("parses");
        let again = PipelineFile::parse(&file.to_toml().expect("writes")).expect("reads back");
        assert_eq!(again, file);
    }

    #[test]
    fn steps_name_declared_roles_and_a_file_without_roles_still_reads() {
        let with_roles = MINIMAL.replace(
            "prompt = \"Write the note.\"",
            "prompt = \"Write the note.\"\nmodel_role = \"writer\"",
        ) + "\n[roles.writer]\ndescription = \"Writes the note\"\ntemperature = 0.2\ntimeout_seconds = 60\n";
        assert_eq!(problems(&with_roles), Vec::<String>::new());
        let file = PipelineFile::parse(&with_roles).expect("parses");
        assert_eq!(file.roles["writer"].config().timeout_seconds, Some(60));
        let again = PipelineFile::parse(&file.to_toml().expect("writes")).expect("reads back");
        assert_eq!(again, file, "roles round-trip");
        let recipe = PipelineFile::recipe(&file.stages[0]).expect("recipe");
        let roles: Vec<Option<&str>> = recipe.steps.iter().map(|s| s.role_name()).collect();
        assert_eq!(roles, [None, Some("writer")]);

        let undeclared = with_roles.replace("[roles.writer]", "[roles.editor]");
        let found = problems(&undeclared);
        assert!(
            found
                .iter()
                .any(|p| p.contains("steps[1] (write).model_role") && p.contains("\"writer\"")),
            "{found:?}"
        );
        let hot = with_roles.replace("temperature = 0.2", "temperature = 9.0");
        assert!(
            problems(&hot)
                .iter()
                .any(|p| p.starts_with("roles.writer: temperature")),
            "{:?}",
            problems(&hot)
        );
        assert!(
            PipelineFile::parse(MINIMAL)
                .expect("parses")
                .roles
                .is_empty()
        );
    }

    #[test]
    fn every_problem_is_named_with_its_place() {
        let broken = MINIMAL
            .replace(r#"after = ["plan"]"#, r#"after = ["outline"]"#)
            .replace(
                "granularity = \"all_to_one\"\ninputs = [{ type = \"seed",
                "granularity = \"everything\"\ninputs = [{ type = \"seed",
            )
            .replace(
                r#"template_filename = "draft_note.md""#,
                r#"template_filename = "note.md""#,
            )
            .replace(
                r#"{ type = "header_context", document_key"#,
                r#"{ type = "header_context", stage_slug = "review", document_key"#,
            );
        assert_eq!(
            problems(&broken),
            [
                "stages[0] (draft).steps[0] (plan).granularity: unknown granularity strategy \"everything\"",
                "stages[0] (draft).steps[1] (write).after: no step \"outline\" in this stage",
                "stages[0] (draft).steps[1] (write).inputs[0].stage_slug: \"review\" is not this stage or one before it",
                "stages[0] (draft).steps[1] (write).outputs[0].template_filename: no document template \"note.md\" in this stage",
            ]
        );
    }

    #[test]
    fn a_record_names_numbers_the_output_always_has_and_one_document() {
        let note = r#"required_keys = ["content"] }]"#;
        let recorded = MINIMAL.replace(
            note,
            r#"required_keys = ["content", "score"], key_types = { score = "number" }, record = { document = true, fields = ["score"] } }]"#,
        );
        assert!(problems(&recorded).is_empty(), "{:?}", problems(&recorded));
        let untyped = MINIMAL.replace(
            note,
            r#"required_keys = ["content", "score"], record = { fields = ["score", "words"] } }]"#,
        );
        assert_eq!(
            problems(&untyped),
            [
                "stages[0] (draft).steps[1] (write).outputs[0].record.fields: \"score\" must be a required key typed a number (key_types), or a count of verify_claims or a mean",
                "stages[0] (draft).steps[1] (write).outputs[0].record.fields: \"words\" must be a required key typed a number (key_types), or a count of verify_claims or a mean",
            ]
        );
        let meant = MINIMAL.replace(
            note,
            r#"required_keys = ["content", "checks"], key_types = { checks = "array" }, mean = { of = "checks", key = "score", into = "mean_score" }, record = { fields = ["mean_score"] } }]"#,
        );
        assert!(problems(&meant).is_empty(), "{:?}", problems(&meant));
        let unarrayed = MINIMAL.replace(
            note,
            r#"required_keys = ["content"], mean = { of = "checks", key = "score", into = "Mean Score" } }]"#,
        );
        assert_eq!(
            problems(&unarrayed),
            [
                "stages[0] (draft).steps[1] (write).outputs[0].mean.of: \"checks\" must be a required key typed an array (key_types)",
                "stages[0] (draft).steps[1] (write).outputs[0].mean.into: \"Mean Score\" is not a key (a-z, 0-9, _)",
            ]
        );
        let empty = MINIMAL.replace(note, r#"required_keys = ["content"], record = {} }]"#);
        assert_eq!(
            problems(&empty),
            [
                "stages[0] (draft).steps[1] (write).outputs[0].record: a record rule names the document or a field"
            ]
        );
    }

    #[test]
    fn blackboard_rules_are_known_and_published_types_are_slugs() {
        let board = MINIMAL
            .replace(
                r#"inputs = [{ type = "header_context", document_key = "header_context" }]"#,
                r#"inputs = [{ type = "blackboard", document_key = "risk" }]"#,
            )
            .replace(
                r#"required_keys = ["content"] }]"#,
                r#"required_keys = ["content"], publishes = ["risk", "Open Question"] }]"#,
            );
        assert_eq!(
            problems(&board),
            [
                "stages[0] (draft).steps[1] (write).outputs[0].publishes: \"Open Question\" is not an entry type (a-z, 0-9, _)"
            ]
        );
    }

    #[test]
    fn a_confidence_gate_needs_a_confidence_key_and_a_threshold_in_range() {
        let gated = MINIMAL.replace(
            r#"required_keys = ["content"] }]"#,
            r#"required_keys = ["content"], confidence_gate = { min_confidence = 70 } }]"#,
        );
        assert_eq!(
            problems(&gated),
            [
                "stages[0] (draft).steps[1] (write).outputs[0].confidence_gate: min_confidence 70 is not between 0 and 1",
                "stages[0] (draft).steps[1] (write).outputs[0].required_keys: a confidence_gate needs \"confidence\" among the required keys",
            ]
        );
        let fine = MINIMAL.replace(
            r#"required_keys = ["content"] }]"#,
            r#"required_keys = ["content", "confidence"], confidence_gate = { min_confidence = 0.7, max_reruns = 2 } }]"#,
        );
        assert!(problems(&fine).is_empty());
    }

    #[test]
    fn a_per_item_step_names_the_array_it_fans_out_over() {
        let per_item = |rule: &str| {
            MINIMAL
                .replace(
                    "granularity = \"all_to_one\"\nafter = [\"plan\"]",
                    "granularity = \"per_item\"\nafter = [\"plan\"]",
                )
                .replace(
                    r#"inputs = [{ type = "header_context", document_key = "header_context" }]"#,
                    rule,
                )
        };
        let without = per_item(r#"inputs = [{ type = "document", document_key = "outline" }]"#);
        assert_eq!(
            problems(&without),
            [
                "stages[0] (draft).steps[1] (write).inputs: per_item fans out over the items of its first document rule: give that rule `items` (the JSON array's key)"
            ]
        );
        let with = per_item(
            r#"inputs = [{ type = "document", document_key = "outline", items = "sections" }]"#,
        );
        assert!(problems(&with).is_empty(), "{:?}", problems(&with));
    }

    #[test]
    fn cycles_duplicates_and_bad_names_are_refused() {
        let cycle = MINIMAL.replace(
            "key = \"plan\"\nname = \"Plan\"",
            "key = \"plan\"\nname = \"Plan\"\nafter = [\"write\"]",
        );
        let found = problems(&cycle);
        assert!(
            found.len() == 1 && found[0].starts_with("stages[0] (draft).steps: edges form a cycle"),
            "{found:?}"
        );
        let twice = format!(
            "{MINIMAL}\n{}",
            &MINIMAL[MINIMAL.find("[[stages]]").expect("a stage")..]
        )
        .replace("name = \"notes\"", "name = \"Notes!\"");
        let found = problems(&twice);
        assert!(
            found.contains(&"name: \"Notes!\" is not a slug (a-z, 0-9, _)".to_string()),
            "{found:?}"
        );
        assert!(
            found.contains(&"stages[1] (draft): a second stage with this slug".to_string()),
            "{found:?}"
        );
    }

    #[test]
    fn a_document_template_that_does_not_render_is_refused() {
        let broken = MINIMAL.replace(
            r##"content = "# {{title}}\n\n{{content}}\n""##,
            r##"content = "# {{title}}\n\n{% if model %}{{content}}\n""##,
        );
        let found = problems(&broken);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "stages[0] (draft).document_templates[0] (note).content: the template does not render: line 3 of the template: "
            ),
            "{found:?}"
        );
        let jinja = MINIMAL.replace(
            r##"content = "# {{title}}\n\n{{content}}\n""##,
            r##"content = "# {{ title }}\n{# by #}{% if model %}_{{ model }}_{% endif %}\n\n{{content}}\n""##,
        );
        assert_ne!(jinja, MINIMAL);
        assert!(problems(&jinja).is_empty(), "{:?}", problems(&jinja));
    }

    /// Amendment tracking may be skipped only for a stack of one document;
    /// a condition with an unknown key, or none, is refused at install.
    #[test]
    fn a_skip_condition_is_read_and_checked() {
        let shipped = PipelineFile::parse(include_str!("../../../pipelines/contract_stack.toml"))
            .expect("parses");
        let conditions: Vec<(&str, String)> = shipped.stages[0]
            .steps
            .iter()
            .filter_map(|s| s.skip_only_when.map(|c| (s.key.as_str(), c.to_string())))
            .collect();
        assert_eq!(
            conditions,
            [("contract_track_amendments", "max_documents = 1".to_string())]
        );
        let recipe = PipelineFile::recipe(&shipped.stages[0]).expect("recipe");
        let track = recipe
            .step_by_key("contract_track_amendments")
            .expect("step");
        assert_eq!(track.skip_only_when.and_then(|c| c.max_documents), Some(1));
        let with = |condition: &str| {
            MINIMAL.replace(
                "after = [\"plan\"]",
                &format!("after = [\"plan\"]\nskip_only_when = {condition}"),
            )
        };
        let unknown = PipelineFile::parse(&with("{ max_pages = 3 }")).expect_err("refused");
        assert_eq!(unknown.0[0].place, "line 28");
        assert!(
            unknown.0[0]
                .reason
                .contains("unknown field `max_pages`, expected `max_documents`"),
            "{unknown}"
        );
        assert_eq!(
            problems(&with("{}")),
            [
                "stages[0] (draft).steps[1] (write).skip_only_when: names no condition (known keys: max_documents)"
            ]
        );
        assert!(problems(&with("{ max_documents = 1 }")).is_empty());
    }

    #[test]
    fn a_file_that_does_not_parse_names_the_line() {
        let err = PipelineFile::parse("name = \"x\"\ndisplay_name = \"X\"\nstages = 3\n")
            .expect_err("bad");
        assert_eq!(err.0[0].place, "line 3");
        let unknown =
            PipelineFile::parse(&MINIMAL.replace("name = \"Plan\"", "name = \"Plan\"\ncolour = 1"))
                .expect_err("unknown field");
        assert!(
            unknown.0[0].reason.contains("unknown field `colour`"),
            "{unknown}"
        );
    }
}
