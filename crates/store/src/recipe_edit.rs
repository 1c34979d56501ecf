//! Editing a stage's recipe by clone-on-write (seed 002 "Clone-on-Write
//! Workflow"). Templates are immutable: the first edit of a stage copies its
//! template's steps and edges into the stage's instance and flips `is_cloned`,
//! and every edit after that changes only the instance. Each public function
//! is one transaction that either applies the whole edit or writes nothing;
//! DAG checks happen in core before any row is inserted.

pub use crate::error::RecipeEditError;
use crate::{StoreError, Tx, recipes};
use dialectic_core::ids::{RecipeInstanceId, StepId, TemplateId};
use dialectic_core::job::JobType;
use dialectic_core::recipe::{Granularity, InputRule, OutputRule, Recipe, RecipeError, RecipeStep};
use dialectic_core::slug::slugify;
use sqlx::PgPool;
use sqlx::types::Json;

/// Prompt types the step tables accept (their CHECK constraint), checked here
/// so a bad value is named instead of surfacing as a constraint violation.
const PROMPT_TYPES: [&str; 4] = ["Seed", "Planner", "Turn", "Continuation"];

impl From<sqlx::Error> for RecipeEditError {
    fn from(e: sqlx::Error) -> Self {
        RecipeEditError::Store(StoreError::Database(e))
    }
}

impl RecipeEditError {
    /// Worth retrying: the database was unreachable or the transaction lost a race.
    pub fn is_transient(&self) -> bool {
        matches!(self, RecipeEditError::Store(e) if e.is_transient())
    }
}

/// A step that exists in no template (`template_step_id` stays NULL).
#[derive(Debug, Clone, PartialEq)]
pub struct CustomStep {
    pub step_key: String,
    pub step_name: String,
    /// `PLAN`, `EXECUTE` or `RENDER`.
    pub job_type: String,
    /// `Seed`, `Planner`, `Turn` or `Continuation`.
    pub prompt_type: String,
    pub output_type: String,
    /// A `dialectic_core::recipe::Granularity` name, e.g. `all_to_one`.
    pub granularity: String,
    pub inputs_required: Vec<InputRule>,
    /// A JSON array (seed 002 "Inputs relevance schema").
    pub inputs_relevance: serde_json::Value,
    pub outputs_required: Vec<OutputRule>,
    /// Keys of the steps that must finish before this one.
    pub after: Vec<String>,
    /// Keys of the steps that must wait for this one.
    pub before: Vec<String>,
}

#[derive(sqlx::FromRow)]
struct Instance {
    id: RecipeInstanceId,
    template_id: TemplateId,
    is_cloned: bool,
}

/// The stage's active instance, locked so concurrent edits of one stage
/// serialise (two first edits would otherwise both clone the template).
async fn lock_instance(tx: &mut Tx<'_>, stage_slug: &str) -> Result<Instance, RecipeEditError> {
    sqlx::query_as(
        "SELECT i.id, i.template_id, i.is_cloned
         FROM dialectic_stages s
         JOIN dialectic_stage_recipe_instances i ON i.id = s.active_recipe_instance_id
         WHERE s.slug = $1 AND s.is_current
         FOR UPDATE OF i",
    )
    .bind(stage_slug)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| RecipeEditError::UnknownStage(stage_slug.to_string()))
}

/// Materialises the stage's template into its instance unless that happened
/// already; returns the instance id. Runs inside the caller's transaction so
/// the clone commits or rolls back together with the edit that needed it.
pub async fn clone_stage_recipe(
    tx: &mut Tx<'_>,
    stage_slug: &str,
) -> Result<RecipeInstanceId, RecipeEditError> {
    let instance = lock_instance(tx, stage_slug).await?;
    if instance.is_cloned {
        return Ok(instance.id);
    }
    sqlx::query(
        "INSERT INTO dialectic_stage_recipe_steps
           (instance_id, template_step_id, step_key, step_slug, step_name, job_type, prompt_type,
            prompt_template_id, output_type, granularity_strategy, inputs_required, inputs_relevance,
            outputs_required, execution_order, parallel_group, branch_key, config_override, object_filter,
            progress_band, skip_only_when, model_role)
         SELECT $1, ts.id, ts.step_key, ts.step_slug, ts.step_name, ts.job_type, ts.prompt_type,
                ts.prompt_template_id, ts.output_type, ts.granularity_strategy, ts.inputs_required,
                ts.inputs_relevance, ts.outputs_required, ts.step_number, ts.parallel_group, ts.branch_key,
                ts.config_override, ts.object_filter, ts.progress_band, ts.skip_only_when, ts.model_role
         FROM dialectic_recipe_template_steps ts
         WHERE ts.template_id = $2",
    )
    .bind(instance.id)
    .bind(instance.template_id)
    .execute(&mut **tx)
    .await?;
    // Joins (not scalar subqueries) so an edge whose step did not copy makes
    // the counts differ below instead of inserting a NULL.
    let copied = sqlx::query(
        "INSERT INTO dialectic_stage_recipe_edges (instance_id, from_step_id, to_step_id)
         SELECT $1, f.id, t.id
         FROM dialectic_recipe_template_edges te
         JOIN dialectic_stage_recipe_steps f ON f.instance_id = $1 AND f.template_step_id = te.from_step_id
         JOIN dialectic_stage_recipe_steps t ON t.instance_id = $1 AND t.template_step_id = te.to_step_id
         WHERE te.template_id = $2",
    )
    .bind(instance.id)
    .bind(instance.template_id)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    let template_edges: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialectic_recipe_template_edges WHERE template_id = $1",
    )
    .bind(instance.template_id)
    .fetch_one(&mut **tx)
    .await?;
    if copied != template_edges.max(0) as u64 {
        return Err(StoreError::Corrupt(format!(
            "template {} has edges between steps of another template",
            instance.template_id
        ))
        .into());
    }
    sqlx::query(
        "UPDATE dialectic_stage_recipe_instances
         SET is_cloned = true, cloned_at = now(), updated_at = now()
         WHERE id = $1",
    )
    .bind(instance.id)
    .execute(&mut **tx)
    .await?;
    Ok(instance.id)
}

/// One change to an existing instance step.
enum StepChange<'a> {
    Skipped(bool),
    Overrides {
        config_override: &'a serde_json::Value,
        output_overrides: &'a serde_json::Value,
    },
    ObjectFilter(&'a serde_json::Value),
}

/// Clones the stage's recipe if needed and applies `change` to one of its
/// steps, in one transaction.
async fn update_step(
    pool: &PgPool,
    stage_slug: &str,
    step_key: &str,
    change: StepChange<'_>,
) -> Result<(), RecipeEditError> {
    let mut tx = pool.begin().await?;
    let instance_id = clone_stage_recipe(&mut tx, stage_slug).await?;
    let set = match change {
        StepChange::Skipped(_) => "is_skipped = $3",
        StepChange::Overrides { .. } => "config_override = $3, output_overrides = $4",
        StepChange::ObjectFilter(_) => "object_filter = $3",
    };
    let sql = format!(
        "UPDATE dialectic_stage_recipe_steps SET {set}, updated_at = now()
         WHERE instance_id = $1 AND step_key = $2"
    );
    let query = sqlx::query(&sql).bind(instance_id).bind(step_key);
    let query = match change {
        StepChange::Skipped(skipped) => query.bind(skipped),
        StepChange::Overrides {
            config_override,
            output_overrides,
        } => query
            .bind(Json(config_override))
            .bind(Json(output_overrides)),
        StepChange::ObjectFilter(filter) => query.bind(Json(filter)),
    };
    let updated = query.execute(&mut *tx).await?.rows_affected();
    if updated == 0 {
        // Returning drops the transaction, which rolls back the clone as well.
        return Err(RecipeEditError::UnknownStepKey {
            stage: stage_slug.to_string(),
            step_key: step_key.to_string(),
        });
    }
    // The edited recipe must still load (an override naming an output the
    // step does not have, say); otherwise nothing is written.
    match recipes::stage_recipe(&mut tx, stage_slug).await {
        Ok(_) => {}
        Err(StoreError::Corrupt(reason)) => {
            return Err(RecipeEditError::InvalidStep {
                step_key: step_key.to_string(),
                reason,
            });
        }
        Err(e) => return Err(e.into()),
    }
    tx.commit().await?;
    Ok(())
}

fn require_object(
    step_key: &str,
    what: &str,
    value: &serde_json::Value,
) -> Result<(), RecipeEditError> {
    if value.is_object() {
        Ok(())
    } else {
        Err(RecipeEditError::InvalidStep {
            step_key: step_key.to_string(),
            reason: format!("{what} must be a JSON object"),
        })
    }
}

/// Marks a step skipped (or not). The planner treats a skipped step as done
/// once its own predecessors are, and never runs it.
pub async fn set_step_skipped(
    pool: &PgPool,
    stage_slug: &str,
    step_key: &str,
    skipped: bool,
) -> Result<(), RecipeEditError> {
    update_step(pool, stage_slug, step_key, StepChange::Skipped(skipped)).await
}

/// Replaces a step's `config_override` and `output_overrides` (JSON objects).
pub async fn override_step(
    pool: &PgPool,
    stage_slug: &str,
    step_key: &str,
    config_override: &serde_json::Value,
    output_overrides: &serde_json::Value,
) -> Result<(), RecipeEditError> {
    require_object(step_key, "config_override", config_override)?;
    dialectic_core::recipe::StepConfig::from_override(config_override).map_err(|reason| {
        RecipeEditError::InvalidStep {
            step_key: step_key.to_string(),
            reason,
        }
    })?;
    require_object(step_key, "output_overrides", output_overrides)?;
    update_step(
        pool,
        stage_slug,
        step_key,
        StepChange::Overrides {
            config_override,
            output_overrides,
        },
    )
    .await
}

/// Replaces a step's `object_filter` (a JSON object).
pub async fn set_object_filter(
    pool: &PgPool,
    stage_slug: &str,
    step_key: &str,
    filter: &serde_json::Value,
) -> Result<(), RecipeEditError> {
    require_object(step_key, "object_filter", filter)?;
    dialectic_core::recipe::ObjectFilter::from_value(filter).map_err(|reason| {
        RecipeEditError::InvalidStep {
            step_key: step_key.to_string(),
            reason,
        }
    })?;
    update_step(pool, stage_slug, step_key, StepChange::ObjectFilter(filter)).await
}

/// Maps core's DAG verdict onto this module's errors, with step keys instead of ids.
fn dag_error(stage_slug: &str, recipe: &Recipe, e: RecipeError) -> RecipeEditError {
    let key = |id: StepId| {
        recipe
            .step(id)
            .map_or_else(|| id.to_string(), |s| s.step_key.clone())
    };
    match e {
        RecipeError::Cycle(path) => RecipeEditError::Cycle {
            stage: stage_slug.to_string(),
            path,
        },
        RecipeError::SelfLoop(id) => RecipeEditError::Cycle {
            stage: stage_slug.to_string(),
            path: vec![key(id), key(id)],
        },
        RecipeError::DuplicateStepKey(step_key) => RecipeEditError::DuplicateStepKey {
            stage: stage_slug.to_string(),
            step_key,
        },
        RecipeError::EdgeOutsideRecipe(id) => RecipeEditError::EdgeOutsideRecipe {
            stage: stage_slug.to_string(),
            from: key(id),
            to: key(id),
        },
        RecipeError::Empty => RecipeEditError::Store(StoreError::Corrupt(format!(
            "recipe of stage {stage_slug} has no steps"
        ))),
    }
}

/// The ids of `from` and `to` in `recipe`, or the error naming the edge.
fn edge_ids(
    stage_slug: &str,
    recipe: &Recipe,
    from: &str,
    to: &str,
) -> Result<(StepId, StepId), RecipeEditError> {
    match (recipe.step_by_key(from), recipe.step_by_key(to)) {
        (Some(a), Some(b)) => Ok((a.id, b.id)),
        _ => Err(RecipeEditError::EdgeOutsideRecipe {
            stage: stage_slug.to_string(),
            from: from.to_string(),
            to: to.to_string(),
        }),
    }
}

async fn insert_edge(
    tx: &mut Tx<'_>,
    instance_id: RecipeInstanceId,
    (from, to): (StepId, StepId),
) -> Result<(), RecipeEditError> {
    // An edge that already exists is already what the caller asked for.
    sqlx::query(
        "INSERT INTO dialectic_stage_recipe_edges (instance_id, from_step_id, to_step_id)
         VALUES ($1, $2, $3)
         ON CONFLICT (instance_id, from_step_id, to_step_id) DO NOTHING",
    )
    .bind(instance_id)
    .bind(from)
    .bind(to)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Adds the dependency `from_key → to_key` unless it would close a cycle.
pub async fn add_edge(
    pool: &PgPool,
    stage_slug: &str,
    from_key: &str,
    to_key: &str,
) -> Result<(), RecipeEditError> {
    let mut tx = pool.begin().await?;
    let instance_id = clone_stage_recipe(&mut tx, stage_slug).await?;
    let recipe = recipes::stage_recipe(&mut tx, stage_slug).await?;
    let edge = edge_ids(stage_slug, &recipe, from_key, to_key)?;
    recipe
        .with_edge(edge)
        .map_err(|e| dag_error(stage_slug, &recipe, e))?;
    insert_edge(&mut tx, instance_id, edge).await?;
    tx.commit().await?;
    Ok(())
}

/// Checks what can be checked without the database, so a bad step is named
/// before anything is cloned.
fn validate_custom_step(step: &CustomStep) -> Result<(JobType, Granularity), RecipeEditError> {
    let invalid = |reason: String| RecipeEditError::InvalidStep {
        step_key: step.step_key.clone(),
        reason,
    };
    let key_ok = (1..=100).contains(&step.step_key.len())
        && step
            .step_key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !key_ok {
        // The key becomes part of job keys, so it stays a plain identifier.
        return Err(invalid(
            "the step key must be 1–100 ASCII letters, digits, '_' or '-'".into(),
        ));
    }
    if step.job_type.trim().is_empty() {
        return Err(RecipeEditError::MissingJobType {
            step_key: step.step_key.clone(),
        });
    }
    let job_type: JobType = step
        .job_type
        .parse()
        .map_err(|_| RecipeEditError::InvalidJobType {
            step_key: step.step_key.clone(),
            value: step.job_type.clone(),
        })?;
    let granularity: Granularity =
        step.granularity
            .parse()
            .map_err(|_| RecipeEditError::InvalidGranularity {
                step_key: step.step_key.clone(),
                value: step.granularity.clone(),
            })?;
    if !PROMPT_TYPES.contains(&step.prompt_type.as_str()) {
        return Err(invalid(format!(
            "prompt type {:?} is not one of {PROMPT_TYPES:?}",
            step.prompt_type
        )));
    }
    if step.step_name.trim().is_empty() || step.output_type.trim().is_empty() {
        return Err(invalid(
            "step name and output type must not be empty".into(),
        ));
    }
    if !step.inputs_relevance.is_array() {
        return Err(invalid("inputs_relevance must be a JSON array".into()));
    }
    Ok((job_type, granularity))
}

/// Adds a step of the user's own to the stage's recipe, wired after the steps
/// in `after` and before those in `before`; returns the new step's id.
pub async fn add_custom_step(
    pool: &PgPool,
    stage_slug: &str,
    step: &CustomStep,
) -> Result<StepId, RecipeEditError> {
    let (job_type, granularity) = validate_custom_step(step)?;
    let inputs_required = serde_json::to_value(&step.inputs_required)
        .map_err(|e| StoreError::Invalid(format!("inputs_required: {e}")))?;
    let outputs_required = serde_json::to_value(&step.outputs_required)
        .map_err(|e| StoreError::Invalid(format!("outputs_required: {e}")))?;

    let mut tx = pool.begin().await?;
    let instance_id = clone_stage_recipe(&mut tx, stage_slug).await?;
    let recipe = recipes::stage_recipe(&mut tx, stage_slug).await?;
    if recipe.step_by_key(&step.step_key).is_some() {
        return Err(RecipeEditError::DuplicateStepKey {
            stage: stage_slug.to_string(),
            step_key: step.step_key.clone(),
        });
    }
    // Place it just after its latest predecessor, which is where the planner
    // would reach it anyway; the order only breaks ties among ready steps.
    let order = step
        .after
        .iter()
        .filter_map(|k| recipe.step_by_key(k))
        .map(|s| s.order + 1)
        .max()
        .unwrap_or(1);
    let new_step = RecipeStep {
        progress: None,
        skip_only_when: None,
        id: StepId::new(),
        step_key: step.step_key.clone(),
        step_name: step.step_name.clone(),
        job_type,
        prompt_type: step.prompt_type.clone(),
        prompt_template: None,
        output_type: step.output_type.clone(),
        granularity,
        inputs_required: step.inputs_required.clone(),
        inputs_relevance: step.inputs_relevance.clone(),
        outputs_required: step.outputs_required.clone(),
        order,
        is_skipped: false,
        config: Default::default(),
        role: None,
        filter: Default::default(),
    };
    let mut next = recipe.clone();
    next.steps.push(new_step.clone());
    let mut edges = Vec::with_capacity(step.after.len() + step.before.len());
    for from in &step.after {
        edges.push(edge_ids(stage_slug, &next, from, &step.step_key)?);
    }
    for to in &step.before {
        edges.push(edge_ids(stage_slug, &next, &step.step_key, to)?);
    }
    next.edges.extend(edges.iter().copied());
    next.validate()
        .map_err(|e| dag_error(stage_slug, &next, e))?;

    sqlx::query(
        "INSERT INTO dialectic_stage_recipe_steps
           (id, instance_id, template_step_id, step_key, step_slug, step_name, job_type, prompt_type,
            output_type, granularity_strategy, inputs_required, inputs_relevance, outputs_required,
            execution_order)
         VALUES ($1, $2, NULL, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(new_step.id)
    .bind(instance_id)
    .bind(&new_step.step_key)
    .bind(slugify(&new_step.step_key, 100, "custom-step"))
    .bind(&new_step.step_name)
    .bind(job_type.as_str())
    .bind(&new_step.prompt_type)
    .bind(&new_step.output_type)
    .bind(granularity.as_str())
    .bind(Json(&inputs_required))
    .bind(Json(&step.inputs_relevance))
    .bind(Json(&outputs_required))
    .bind(order)
    .execute(&mut *tx)
    .await?;
    for edge in edges {
        insert_edge(&mut tx, instance_id, edge).await?;
    }
    tx.commit().await?;
    Ok(new_step.id)
}
