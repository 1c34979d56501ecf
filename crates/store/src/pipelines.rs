//! A process as a pipeline file (`dialecticd pipeline export`): its stages in
//! order, each with its system prompt, its active recipe (a cloned stage's
//! edited copy, else the template) and its document templates.

use crate::StoreError;
use crate::recipes::stage_recipe;
use dialectic_core::pipeline::{
    DocumentTemplateDef, PipelineFile, RelevanceDef, StageDef, StepDef,
};
use dialectic_core::recipe::Recipe;
use sqlx::PgPool;
use sqlx::types::Json;
use std::collections::BTreeMap;

#[derive(sqlx::FromRow)]
struct StageRow {
    slug: String,
    display_name: String,
    description: Option<String>,
    system_prompt: Option<String>,
}

/// The process template whose slug is `name`, as a pipeline file.
pub async fn export(pool: &PgPool, name: &str) -> Result<PipelineFile, StoreError> {
    let header: Option<(String, Option<String>)> =
        sqlx::query_as("SELECT name, description FROM dialectic_process_templates WHERE slug = $1")
            .bind(name)
            .fetch_optional(pool)
            .await?;
    let Some((display_name, description)) = header else {
        return Err(StoreError::NotFound(format!("pipeline {name}")));
    };
    let rows: Vec<StageRow> = sqlx::query_as(
        "SELECT s.slug, s.display_name, s.description, sp.prompt_text AS system_prompt
           FROM dialectic_process_templates p
           JOIN dialectic_process_template_stages pts ON pts.process_template_id = p.id
           JOIN dialectic_stages s ON s.id = pts.stage_id
           LEFT JOIN system_prompts sp ON sp.id = s.default_system_prompt_id
          WHERE p.slug = $1 ORDER BY pts.stage_number",
    )
    .bind(name)
    .fetch_all(pool)
    .await?;
    let mut stages = Vec::with_capacity(rows.len());
    let mut conn = pool.acquire().await?;
    for row in rows {
        let recipe = stage_recipe(&mut conn, &row.slug).await?;
        stages.push(StageDef {
            steps: steps_of(&row.slug, &recipe)?,
            document_templates: templates(pool, &row.slug).await?,
            slug: row.slug,
            display_name: row.display_name,
            description: row.description,
            system_prompt: row.system_prompt,
        });
    }
    Ok(PipelineFile {
        name: name.to_string(),
        display_name,
        description,
        stages,
    })
}

fn steps_of(stage: &str, recipe: &Recipe) -> Result<Vec<StepDef>, StoreError> {
    recipe
        .steps
        .iter()
        .map(|step| {
            let relevance: Vec<RelevanceDef> =
                serde_json::from_value(step.inputs_relevance.clone()).map_err(|e| {
                    StoreError::Corrupt(format!("{stage} {} inputs_relevance: {e}", step.step_key))
                })?;
            Ok(StepDef {
                key: step.step_key.clone(),
                name: step.step_name.clone(),
                job_type: step.job_type.as_str().to_string(),
                prompt_type: step.prompt_type.clone(),
                prompt: step.prompt_template.clone(),
                output_type: step.output_type.clone(),
                granularity: step.granularity.as_str().to_string(),
                after: recipe
                    .predecessors(step.id)
                    .filter_map(|id| recipe.step(id))
                    .map(|s| s.step_key.clone())
                    .collect(),
                inputs: step.inputs_required.clone(),
                relevance,
                outputs: step.outputs_required.clone(),
                config: step.config,
                filter: step.filter.clone(),
            })
        })
        .collect()
}

async fn templates(pool: &PgPool, stage: &str) -> Result<Vec<DocumentTemplateDef>, StoreError> {
    let rows: Vec<(String, String, Option<String>, String)> = sqlx::query_as(
        "SELECT document_key, name, file_name, content FROM dialectic_document_templates
          WHERE stage_slug = $1 AND is_active ORDER BY document_key",
    )
    .bind(stage)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(document_key, name, file_name, content)| DocumentTemplateDef {
                file_name: file_name.unwrap_or_else(|| format!("{stage}_{document_key}.md")),
                document_key,
                name,
                content,
            },
        )
        .collect())
}

/// What `install` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub name: String,
    pub stages: usize,
    pub steps: usize,
}

/// Installs a validated pipeline file as a new pipeline, in one transaction:
/// its process template, stages and transitions, system and step prompts,
/// recipe templates with their steps and edges, recipe instances and
/// document templates. A pipeline or a stage slug that already exists is
/// refused (`Invalid`) and nothing is written: installing a new version of an
/// existing pipeline comes with stages scoped to their pipeline.
pub async fn install(pool: &PgPool, file: &PipelineFile) -> Result<Installed, StoreError> {
    file.validate()
        .map_err(|e| StoreError::Invalid(e.to_string()))?;
    let mut tx = pool.begin().await?;
    refuse_taken_slugs(&mut tx, file).await?;
    let mut stage_ids = Vec::with_capacity(file.stages.len());
    for stage in &file.stages {
        stage_ids.push(install_stage(&mut tx, &file.name, stage).await?);
    }
    let process_id = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO dialectic_process_templates (id, name, slug, description, starting_stage_id)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(process_id)
    .bind(&file.display_name)
    .bind(&file.name)
    .bind(&file.description)
    .bind(stage_ids[0])
    .execute(&mut *tx)
    .await?;
    for (number, stage_id) in stage_ids.iter().enumerate() {
        sqlx::query(
            "INSERT INTO dialectic_process_template_stages (process_template_id, stage_id, stage_number)
             VALUES ($1, $2, $3)",
        )
        .bind(process_id)
        .bind(stage_id)
        .bind(number as i32 + 1)
        .execute(&mut *tx)
        .await?;
    }
    for pair in stage_ids.windows(2) {
        sqlx::query(
            "INSERT INTO dialectic_stage_transitions (process_template_id, source_stage_id, target_stage_id)
             VALUES ($1, $2, $3)",
        )
        .bind(process_id)
        .bind(pair[0])
        .bind(pair[1])
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(Installed {
        name: file.name.clone(),
        stages: file.stages.len(),
        steps: file.stages.iter().map(|s| s.steps.len()).sum(),
    })
}

async fn refuse_taken_slugs(tx: &mut crate::Tx<'_>, file: &PipelineFile) -> Result<(), StoreError> {
    let pipeline_taken: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM dialectic_process_templates WHERE slug = $1 OR name = $2)",
    )
    .bind(&file.name)
    .bind(&file.display_name)
    .fetch_one(&mut **tx)
    .await?;
    if pipeline_taken {
        return Err(StoreError::Invalid(format!(
            "a pipeline named {:?} or {:?} is already installed",
            file.name, file.display_name
        )));
    }
    let slugs: Vec<String> = file.stages.iter().map(|s| s.slug.clone()).collect();
    let taken: Vec<String> =
        sqlx::query_scalar("SELECT slug FROM dialectic_stages WHERE slug = ANY($1) ORDER BY slug")
            .bind(&slugs)
            .fetch_all(&mut **tx)
            .await?;
    if !taken.is_empty() {
        return Err(StoreError::Invalid(format!(
            "stages {taken:?} already belong to another pipeline; stage slugs are unique across pipelines"
        )));
    }
    Ok(())
}

async fn install_prompt(
    tx: &mut crate::Tx<'_>,
    name: &str,
    text: Option<&str>,
) -> Result<Option<uuid::Uuid>, StoreError> {
    let Some(text) = text else {
        return Ok(None);
    };
    let id = uuid::Uuid::now_v7();
    sqlx::query("INSERT INTO system_prompts (id, name, prompt_text) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(name)
        .bind(text)
        .execute(&mut **tx)
        .await?;
    Ok(Some(id))
}

/// One stage: its prompt, recipe template, steps, edges, instance and templates.
async fn install_stage(
    tx: &mut crate::Tx<'_>,
    pipeline: &str,
    stage: &StageDef,
) -> Result<uuid::Uuid, StoreError> {
    let recipe_name = format!("{pipeline}_{}", stage.slug);
    let system_prompt = install_prompt(
        tx,
        &format!("{recipe_name}_system"),
        stage.system_prompt.as_deref(),
    )
    .await?;
    let template_id = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO dialectic_recipe_templates (id, recipe_name, display_name, description)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(template_id)
    .bind(&recipe_name)
    .bind(&stage.display_name)
    .bind(&stage.description)
    .execute(&mut **tx)
    .await?;
    let mut step_ids = BTreeMap::new();
    for (index, step) in stage.steps.iter().enumerate() {
        let id = install_step(tx, template_id, &recipe_name, index, step).await?;
        step_ids.insert(step.key.as_str(), id);
    }
    for step in &stage.steps {
        for before in &step.after {
            sqlx::query(
                "INSERT INTO dialectic_recipe_template_edges (template_id, from_step_id, to_step_id) VALUES ($1, $2, $3)",
            )
            .bind(template_id)
            .bind(step_ids[before.as_str()])
            .bind(step_ids[step.key.as_str()])
            .execute(&mut **tx)
            .await?;
        }
    }
    let (stage_id, instance_id) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    sqlx::query(
        "INSERT INTO dialectic_stages (id, slug, display_name, description, default_system_prompt_id,
                                       recipe_template_id, active_recipe_instance_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(stage_id)
    .bind(&stage.slug)
    .bind(&stage.display_name)
    .bind(&stage.description)
    .bind(system_prompt)
    .bind(template_id)
    .bind(instance_id)
    .execute(&mut **tx)
    .await?;
    sqlx::query("INSERT INTO dialectic_stage_recipe_instances (id, stage_id, template_id) VALUES ($1, $2, $3)")
        .bind(instance_id)
        .bind(stage_id)
        .bind(template_id)
        .execute(&mut **tx)
        .await?;
    for template in &stage.document_templates {
        sqlx::query(
            "INSERT INTO dialectic_document_templates (stage_slug, document_key, name, content, file_name)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&stage.slug)
        .bind(&template.document_key)
        .bind(&template.name)
        .bind(&template.content)
        .bind(&template.file_name)
        .execute(&mut **tx)
        .await?;
    }
    Ok(stage_id)
}

async fn install_step(
    tx: &mut crate::Tx<'_>,
    template_id: uuid::Uuid,
    recipe_name: &str,
    index: usize,
    step: &StepDef,
) -> Result<uuid::Uuid, StoreError> {
    let prompt = install_prompt(
        tx,
        &format!("{recipe_name}_{}", step.key),
        step.prompt.as_deref(),
    )
    .await?;
    let encode = |value: Result<serde_json::Value, serde_json::Error>| {
        value
            .map(Json)
            .map_err(|e| StoreError::Invalid(format!("step {}: {e}", step.key)))
    };
    let id = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO dialectic_recipe_template_steps
           (id, template_id, step_number, step_key, step_slug, step_name, job_type, prompt_type, prompt_template_id,
            output_type, granularity_strategy, inputs_required, inputs_relevance, outputs_required,
            config_override, object_filter)
         VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )
    .bind(id)
    .bind(template_id)
    .bind(index as i32 + 1)
    .bind(&step.key)
    .bind(&step.name)
    .bind(&step.job_type)
    .bind(&step.prompt_type)
    .bind(prompt)
    .bind(&step.output_type)
    .bind(&step.granularity)
    .bind(encode(serde_json::to_value(&step.inputs))?)
    .bind(encode(serde_json::to_value(&step.relevance))?)
    .bind(encode(serde_json::to_value(&step.outputs))?)
    .bind(encode(serde_json::to_value(step.config))?)
    .bind(encode(serde_json::to_value(&step.filter))?)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}
