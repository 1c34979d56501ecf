//! Reading a stage's recipe (seed 002 "Worker Orchestration"): the cloned
//! instance's steps and edges when `is_cloned`, else the template's.

use crate::StoreError;
use dialectic_core::ids::{RecipeInstanceId, StageId, StepId, TemplateId};
use dialectic_core::model_role::RoleDef;
use dialectic_core::recipe::StepRole;
use dialectic_core::recipe::{
    ObjectFilter, ProgressBand, Recipe, RecipeStep, StepConfig, apply_output_overrides,
};
use dialectic_core::skip_rule::SkipCondition;
use sqlx::types::Json;

#[derive(sqlx::FromRow)]
struct StepRecord {
    id: StepId,
    step_key: String,
    step_name: String,
    job_type: String,
    prompt_type: String,
    prompt_template: Option<String>,
    output_type: String,
    granularity_strategy: String,
    inputs_required: Json<serde_json::Value>,
    inputs_relevance: Json<serde_json::Value>,
    outputs_required: Json<serde_json::Value>,
    step_order: i32,
    is_skipped: bool,
    config_override: Json<serde_json::Value>,
    object_filter: Json<serde_json::Value>,
    progress_band: Option<Vec<i16>>,
    output_overrides: Json<serde_json::Value>,
    skip_only_when: Option<Json<SkipCondition>>,
    model_role: Option<String>,
    /// The role's definition in the stage's pipeline version, when it has one.
    role_def: Option<Json<RoleDef>>,
}

/// Reads a `progress_band` column: none, or `[start, end]` within 0..=100.
fn band_of(column: Option<&[i16]>) -> Result<Option<ProgressBand>, String> {
    let Some(column) = column else {
        return Ok(None);
    };
    let number = |v: i16| u8::try_from(v).map_err(|_| format!("{column:?} is out of range"));
    match column {
        [start, end] => Ok(Some(ProgressBand(number(*start)?, number(*end)?))),
        _ => Err(format!("{column:?} is not [start, end]")),
    }
}

impl StepRecord {
    fn into_step(self) -> Result<RecipeStep, StoreError> {
        let corrupt = |what: &str, e: String| {
            StoreError::Corrupt(format!("recipe step {} {what}: {e}", self.step_key))
        };
        let mut outputs_required: Vec<dialectic_core::recipe::OutputRule> =
            serde_json::from_value(self.outputs_required.0.clone())
                .map_err(|e| corrupt("outputs_required", e.to_string()))?;
        apply_output_overrides(&mut outputs_required, &self.output_overrides.0)
            .map_err(|e| corrupt("output_overrides", e))?;
        Ok(RecipeStep {
            id: self.id,
            job_type: self
                .job_type
                .parse()
                .map_err(|e: dialectic_core::job::UnknownValue| {
                    corrupt("job_type", e.to_string())
                })?,
            granularity: self.granularity_strategy.parse().map_err(
                |e: dialectic_core::job::UnknownValue| corrupt("granularity", e.to_string()),
            )?,
            inputs_required: serde_json::from_value(self.inputs_required.0.clone())
                .map_err(|e| corrupt("inputs_required", e.to_string()))?,
            outputs_required,
            config: StepConfig::from_override(&self.config_override.0)
                .map_err(|e| corrupt("config_override", e))?,
            filter: ObjectFilter::from_value(&self.object_filter.0)
                .map_err(|e| corrupt("object_filter", e))?,
            progress: band_of(self.progress_band.as_deref())
                .map_err(|e| corrupt("progress_band", e))?,
            skip_only_when: self.skip_only_when.map(|c| c.0),
            role: self.model_role.map(|name| StepRole {
                name,
                config: self.role_def.map(|d| d.0.config()).unwrap_or_default(),
            }),
            inputs_relevance: self.inputs_relevance.0,
            step_key: self.step_key,
            step_name: self.step_name,
            prompt_type: self.prompt_type,
            prompt_template: self.prompt_template,
            output_type: self.output_type,
            order: self.step_order,
            is_skipped: self.is_skipped,
        })
    }
}

/// A step's role as its stage's pipeline version declares it (the recipe
/// template, `$2`, belongs to one stage, and the stage to one version).
const ROLE_DEF: &str = "SELECT t.model_roles -> s.model_role
       FROM dialectic_stages st JOIN dialectic_process_templates t ON t.id = st.process_template_id
      WHERE st.recipe_template_id = $2 LIMIT 1";

const ACTIVE_INSTANCE: &str = "SELECT i.id, i.template_id, i.is_cloned
     FROM dialectic_stages s JOIN dialectic_stage_recipe_instances i ON i.id = s.active_recipe_instance_id";

/// The active recipe of the stage in its pipeline's newest version (what new
/// sessions run, admin edits change and ListRecipes shows), validated as a DAG.
pub async fn stage_recipe(
    executor: &mut sqlx::PgConnection,
    stage_slug: &str,
) -> Result<Recipe, StoreError> {
    let instance = sqlx::query_as(&format!(
        "{ACTIVE_INSTANCE} WHERE s.slug = $1 AND s.is_current"
    ))
    .bind(stage_slug)
    .fetch_optional(&mut *executor)
    .await?;
    load_recipe(executor, instance, stage_slug).await
}

/// The active recipe of one stage row: a session's own pipeline version
/// (`stages::stage_in_process`), validated as a DAG.
pub async fn recipe_of_stage(
    executor: &mut sqlx::PgConnection,
    stage_id: StageId,
    stage_slug: &str,
) -> Result<Recipe, StoreError> {
    let instance = sqlx::query_as(&format!("{ACTIVE_INSTANCE} WHERE s.id = $1"))
        .bind(stage_id)
        .fetch_optional(&mut *executor)
        .await?;
    load_recipe(executor, instance, stage_slug).await
}

async fn load_recipe(
    executor: &mut sqlx::PgConnection,
    instance: Option<(RecipeInstanceId, TemplateId, bool)>,
    stage_slug: &str,
) -> Result<Recipe, StoreError> {
    let Some((instance_id, template_id, is_cloned)) = instance else {
        return Err(StoreError::not_found("recipe for stage", stage_slug));
    };
    let (steps, edges): (Vec<StepRecord>, Vec<(StepId, StepId)>) = if is_cloned {
        let steps = sqlx::query_as::<_, StepRecord>(&format!(
            "SELECT s.id, s.step_key, s.step_name, s.job_type, s.prompt_type, sp.prompt_text AS prompt_template, s.output_type,
                    s.granularity_strategy, s.inputs_required, s.inputs_relevance, s.outputs_required,
                    COALESCE(s.execution_order, 0) AS step_order, s.is_skipped, s.config_override, s.object_filter,
                    s.progress_band, s.output_overrides, s.skip_only_when, s.model_role,
                    ({ROLE_DEF}) AS role_def
             FROM dialectic_stage_recipe_steps s LEFT JOIN system_prompts sp ON sp.id = s.prompt_template_id
             WHERE s.instance_id = $1 ORDER BY step_order, s.created_at",
        ))
        .bind(instance_id)
        .bind(template_id)
        .fetch_all(&mut *executor)
        .await?;
        let edges = sqlx::query_as("SELECT from_step_id, to_step_id FROM dialectic_stage_recipe_edges WHERE instance_id = $1")
            .bind(instance_id)
            .fetch_all(&mut *executor)
            .await?;
        (steps, edges)
    } else {
        let steps = sqlx::query_as::<_, StepRecord>(&format!(
            "SELECT s.id, s.step_key, s.step_name, s.job_type, s.prompt_type, sp.prompt_text AS prompt_template, s.output_type,
                    s.granularity_strategy, s.inputs_required, s.inputs_relevance, s.outputs_required,
                    s.step_number AS step_order, false AS is_skipped, s.config_override,
                    s.object_filter, s.progress_band, '{{}}'::jsonb AS output_overrides, s.skip_only_when,
                    s.model_role, ({ROLE_DEF}) AS role_def
             FROM dialectic_recipe_template_steps s LEFT JOIN system_prompts sp ON sp.id = s.prompt_template_id
             WHERE s.template_id = $1 ORDER BY s.step_number, s.step_key",
        ))
        .bind(template_id)
        .bind(template_id)
        .fetch_all(&mut *executor)
        .await?;
        let edges = sqlx::query_as("SELECT from_step_id, to_step_id FROM dialectic_recipe_template_edges WHERE template_id = $1")
            .bind(template_id)
            .fetch_all(&mut *executor)
            .await?;
        (steps, edges)
    };
    let recipe = Recipe {
        steps: steps
            .into_iter()
            .map(StepRecord::into_step)
            .collect::<Result<_, _>>()?,
        edges,
    };
    recipe
        .validate()
        .map_err(|e| StoreError::Corrupt(format!("recipe of stage {stage_slug}: {e}")))?;
    Ok(recipe)
}

/// One line per stage of each pipeline's newest version that has a recipe:
/// (slug, display name, is_cloned, steps).
pub async fn stage_recipes(
    pool: &sqlx::PgPool,
) -> Result<Vec<(String, String, bool, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT s.slug, s.display_name, i.is_cloned,
                CASE WHEN i.is_cloned
                     THEN (SELECT count(*) FROM dialectic_stage_recipe_steps st WHERE st.instance_id = i.id)
                     ELSE (SELECT count(*) FROM dialectic_recipe_template_steps st WHERE st.template_id = i.template_id)
                END
         FROM dialectic_stages s JOIN dialectic_stage_recipe_instances i ON i.id = s.active_recipe_instance_id
         WHERE s.is_current
         ORDER BY (SELECT min(pts.stage_number) FROM dialectic_process_template_stages pts WHERE pts.stage_id = s.id) NULLS LAST, s.slug",
    )
    .fetch_all(pool)
    .await?)
}
