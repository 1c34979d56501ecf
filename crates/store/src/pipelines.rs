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
