//! Pipelines as data (docs/pipelines.md): install a pipeline file as a new
//! version (`dialecticd pipeline install`, InstallPipeline), list the
//! installed versions, and export a version back to a file. The files under
//! `pipelines/` ship with the build and install on `migrate`.

use crate::StoreError;
use crate::recipes::recipe_of_stage;
use dialectic_core::ids::{
    PipelineId, PromptId, RecipeInstanceId, SessionId, StageId, StepId, TemplateId,
};
use dialectic_core::model_role::RoleDef;
use dialectic_core::pipeline::{
    DocumentTemplateDef, PipelineFile, RelevanceDef, StageDef, StepDef,
};
use dialectic_core::recipe::{OutputRule, ProgressBand, Recipe};
use sqlx::PgPool;
use sqlx::types::Json;
use std::collections::BTreeMap;

/// The pipelines that ship with the build, as (file name, text): `migrate`
/// installs each one whose newest installed version differs from it.
pub const SHIPPED: [(&str, &str); 3] = [
    (
        "dialectic.toml",
        include_str!("../../../pipelines/dialectic.toml"),
    ),
    ("essay.toml", include_str!("../../../pipelines/essay.toml")),
    (
        "contract_stack.toml",
        include_str!("../../../pipelines/contract_stack.toml"),
    ),
];

#[derive(sqlx::FromRow)]
struct StageRow {
    id: StageId,
    slug: String,
    display_name: String,
    description: Option<String>,
    system_prompt: Option<String>,
}

/// One installed version of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PipelineVersion {
    pub id: PipelineId,
    pub slug: String,
    pub display_name: String,
    pub version: i32,
    /// Stage slugs in the order sessions run them.
    pub stages: Vec<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Every installed version, by slug and newest version first.
pub async fn list(pool: &PgPool) -> Result<Vec<PipelineVersion>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT t.id, t.slug, t.name AS display_name, t.version, t.created_at,
                ARRAY(SELECT st.slug FROM dialectic_process_template_stages pts
                      JOIN dialectic_stages st ON st.id = pts.stage_id
                      WHERE pts.process_template_id = t.id ORDER BY pts.stage_number) AS stages
         FROM dialectic_process_templates t WHERE t.slug IS NOT NULL
         ORDER BY t.slug, t.version DESC",
    )
    .fetch_all(pool)
    .await?)
}

/// The newest version of the pipeline whose slug is `name`, as a pipeline file.
pub async fn export(pool: &PgPool, name: &str) -> Result<PipelineFile, StoreError> {
    let mut conn = pool.acquire().await?;
    let Some(newest) = newest_version(&mut conn, name).await? else {
        return Err(StoreError::not_found("pipeline", name));
    };
    export_version(&mut conn, newest.id).await
}

async fn export_version(
    conn: &mut sqlx::PgConnection,
    process_id: PipelineId,
) -> Result<PipelineFile, StoreError> {
    let (name, display_name, description, roles): (String, String, Option<String>, Json<_>) =
        sqlx::query_as(
            "SELECT COALESCE(slug, ''), name, description, model_roles
               FROM dialectic_process_templates WHERE id = $1",
        )
        .bind(process_id)
        .fetch_one(&mut *conn)
        .await?;
    let rows: Vec<StageRow> = sqlx::query_as(
        "SELECT s.id, s.slug, s.display_name, s.description, sp.prompt_text AS system_prompt
           FROM dialectic_process_template_stages pts
           JOIN dialectic_stages s ON s.id = pts.stage_id
           LEFT JOIN system_prompts sp ON sp.id = s.default_system_prompt_id
          WHERE pts.process_template_id = $1 ORDER BY pts.stage_number",
    )
    .bind(process_id)
    .fetch_all(&mut *conn)
    .await?;
    let mut stages = Vec::with_capacity(rows.len());
    for row in rows {
        let recipe = recipe_of_stage(conn, row.id, &row.slug).await?;
        stages.push(StageDef {
            steps: steps_of(&row.slug, &recipe)?,
            document_templates: templates(conn, row.id, &row.slug).await?,
            slug: row.slug,
            display_name: row.display_name,
            description: row.description,
            system_prompt: row.system_prompt,
        });
    }
    Ok(PipelineFile {
        name,
        display_name,
        description,
        stages,
        roles: roles.0,
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
                model_role: step.role_name().map(str::to_string),
                filter: step.filter.clone(),
                progress: step.progress,
                skip_only_when: step.skip_only_when,
            })
        })
        .collect()
}

async fn templates(
    conn: &mut sqlx::PgConnection,
    stage_id: StageId,
    stage: &str,
) -> Result<Vec<DocumentTemplateDef>, StoreError> {
    let rows: Vec<(String, String, Option<String>, String)> = sqlx::query_as(
        "SELECT document_key, name, file_name, content FROM dialectic_document_templates
          WHERE stage_id = $1 AND is_active ORDER BY document_key",
    )
    .bind(stage_id)
    .fetch_all(conn)
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

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub name: String,
    pub version: i32,
    pub stages: usize,
    pub steps: usize,
    /// False when the newest installed version already is this file.
    pub created: bool,
}

struct Newest {
    id: PipelineId,
    version: i32,
    digest: Option<String>,
}

async fn newest_version(
    conn: &mut sqlx::PgConnection,
    name: &str,
) -> Result<Option<Newest>, StoreError> {
    let row: Option<(PipelineId, i32, Option<String>)> = sqlx::query_as(
        "SELECT id, version, source_digest FROM dialectic_process_templates
          WHERE slug = $1 ORDER BY version DESC LIMIT 1",
    )
    .bind(name)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|(id, version, digest)| Newest {
        id,
        version,
        digest,
    }))
}

/// Installs a validated pipeline file as the next version of its pipeline
/// (version 1 for a new one), in one transaction: process template, stages
/// and transitions, system and step prompts, recipe templates with their
/// steps and edges, recipe instances and document templates. New sessions
/// run it; sessions already started keep theirs. When the newest version is
/// already this file, nothing is written. A stage slug or display name that
/// belongs to another pipeline is refused (`Invalid`), nothing written.
pub async fn install(pool: &PgPool, file: &PipelineFile) -> Result<Installed, StoreError> {
    install_or_check(pool, file, true).await
}

/// What [`install`] would do, every check included (the rows are written
/// and the transaction rolled back), with nothing kept: a dry run.
pub async fn check_install(pool: &PgPool, file: &PipelineFile) -> Result<Installed, StoreError> {
    install_or_check(pool, file, false).await
}

async fn install_or_check(
    pool: &PgPool,
    file: &PipelineFile,
    keep: bool,
) -> Result<Installed, StoreError> {
    file.validate()
        .map_err(|e| StoreError::Invalid(e.to_string()))?;
    let digest = file
        .digest()
        .map_err(|e| StoreError::Invalid(format!("pipeline {}: {e}", file.name)))?;
    let mut tx = pool.begin().await?;
    // Two installs of one pipeline would both take the same next version.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('pipeline:' || $1))")
        .bind(&file.name)
        .execute(&mut *tx)
        .await?;
    let newest = newest_version(&mut tx, &file.name).await?;
    let installed = Installed {
        name: file.name.clone(),
        version: newest.as_ref().map_or(1, |n| n.version + 1),
        stages: file.stages.len(),
        steps: file.stages.iter().map(|s| s.steps.len()).sum(),
        created: true,
    };
    if let Some(newest) = newest
        && is_same_file(&mut tx, &newest, file, &digest).await?
    {
        // The match may have stored the digest of an old version.
        if keep {
            tx.commit().await?;
        }
        return Ok(Installed {
            version: newest.version,
            created: false,
            ..installed
        });
    }
    refuse_taken_names(&mut tx, file).await?;
    install_version(&mut tx, file, installed.version, &digest).await?;
    if keep {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok(installed)
}

/// Whether the newest version is `file`. A version without a digest (the
/// dialectic pipeline the early migrations seeded) is compared whole once,
/// and gets the digest when it matches.
async fn is_same_file(
    tx: &mut crate::Tx<'_>,
    newest: &Newest,
    file: &PipelineFile,
    digest: &str,
) -> Result<bool, StoreError> {
    if let Some(known) = &newest.digest {
        return Ok(known == digest);
    }
    if export_version(tx, newest.id).await? != *file {
        return Ok(false);
    }
    sqlx::query("UPDATE dialectic_process_templates SET source_digest = $2 WHERE id = $1")
        .bind(newest.id)
        .bind(digest)
        .execute(&mut **tx)
        .await?;
    Ok(true)
}

/// Installs every shipped pipeline file whose newest installed version
/// differs from it (`migrate` runs this after the SQL migrations).
pub async fn install_shipped(pool: &PgPool) -> Result<Vec<Installed>, StoreError> {
    let mut installed = Vec::with_capacity(SHIPPED.len());
    for (file_name, text) in SHIPPED {
        let file = PipelineFile::parse(text)
            .map_err(|e| StoreError::Corrupt(format!("shipped pipeline {file_name}: {e}")))?;
        installed.push(install(pool, &file).await?);
    }
    Ok(installed)
}

async fn refuse_taken_names(tx: &mut crate::Tx<'_>, file: &PipelineFile) -> Result<(), StoreError> {
    let name_taken: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM dialectic_process_templates
                         WHERE name = $2 AND slug IS DISTINCT FROM $1)",
    )
    .bind(&file.name)
    .bind(&file.display_name)
    .fetch_one(&mut **tx)
    .await?;
    if name_taken {
        return Err(StoreError::Invalid(format!(
            "another pipeline is already named {:?}",
            file.display_name
        )));
    }
    let slugs: Vec<String> = file.stages.iter().map(|s| s.slug.clone()).collect();
    let taken: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT s.slug FROM dialectic_stages s
           LEFT JOIN dialectic_process_templates t ON t.id = s.process_template_id
          WHERE s.slug = ANY($1) AND t.slug IS DISTINCT FROM $2 ORDER BY s.slug",
    )
    .bind(&slugs)
    .bind(&file.name)
    .fetch_all(&mut **tx)
    .await?;
    if !taken.is_empty() {
        return Err(StoreError::Invalid(format!(
            "stages {taken:?} already belong to another pipeline; a stage slug belongs to one pipeline"
        )));
    }
    Ok(())
}

/// Writes the version: its stages first (they name it; the reference is
/// checked at commit), then the process template, its order and transitions.
async fn install_version(
    tx: &mut crate::Tx<'_>,
    file: &PipelineFile,
    version: i32,
    digest: &str,
) -> Result<(), StoreError> {
    let process_id = PipelineId::new();
    sqlx::query(
        "UPDATE dialectic_stages SET is_current = false
          WHERE process_template_id IN (SELECT id FROM dialectic_process_templates WHERE slug = $1)",
    )
    .bind(&file.name)
    .execute(&mut **tx)
    .await?;
    let names = VersionNames {
        pipeline: &file.name,
        version,
        process_id,
    };
    let mut stage_ids = Vec::with_capacity(file.stages.len());
    for stage in &file.stages {
        stage_ids.push(install_stage(tx, &names, stage).await?);
    }
    sqlx::query(
        "INSERT INTO dialectic_process_templates
           (id, name, slug, description, starting_stage_id, version, source_digest, model_roles)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(process_id)
    .bind(&file.display_name)
    .bind(&file.name)
    .bind(&file.description)
    .bind(stage_ids[0])
    .bind(version)
    .bind(digest)
    .bind(Json(&file.roles))
    .execute(&mut **tx)
    .await?;
    for (number, stage_id) in stage_ids.iter().enumerate() {
        sqlx::query(
            "INSERT INTO dialectic_process_template_stages (process_template_id, stage_id, stage_number)
             VALUES ($1, $2, $3)",
        )
        .bind(process_id)
        .bind(stage_id)
        .bind(number as i32 + 1)
        .execute(&mut **tx)
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
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// What a version's rows are named by: recipe and prompt names carry the
/// version, so every version keeps its own.
struct VersionNames<'a> {
    pipeline: &'a str,
    version: i32,
    process_id: PipelineId,
}

async fn install_prompt(
    tx: &mut crate::Tx<'_>,
    name: &str,
    text: Option<&str>,
) -> Result<Option<PromptId>, StoreError> {
    let Some(text) = text else {
        return Ok(None);
    };
    let id = PromptId::new();
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
    names: &VersionNames<'_>,
    stage: &StageDef,
) -> Result<StageId, StoreError> {
    let recipe_name = format!("{}_v{}_{}", names.pipeline, names.version, stage.slug);
    let system_prompt = install_prompt(
        tx,
        &format!("{recipe_name}_system"),
        stage.system_prompt.as_deref(),
    )
    .await?;
    let template_id = TemplateId::new();
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
    let (stage_id, instance_id) = (StageId::new(), RecipeInstanceId::new());
    sqlx::query(
        "INSERT INTO dialectic_stages (id, slug, display_name, description, default_system_prompt_id,
                                       recipe_template_id, active_recipe_instance_id, process_template_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(stage_id)
    .bind(&stage.slug)
    .bind(&stage.display_name)
    .bind(&stage.description)
    .bind(system_prompt)
    .bind(template_id)
    .bind(instance_id)
    .bind(names.process_id)
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
            "INSERT INTO dialectic_document_templates (stage_slug, document_key, name, content, file_name, stage_id)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&stage.slug)
        .bind(&template.document_key)
        .bind(&template.name)
        .bind(&template.content)
        .bind(&template.file_name)
        .bind(stage_id)
        .execute(&mut **tx)
        .await?;
    }
    Ok(stage_id)
}

/// A progress band as its column stores it.
pub(crate) fn band_column(band: ProgressBand) -> Vec<i16> {
    vec![i16::from(band.0), i16::from(band.1)]
}

async fn install_step(
    tx: &mut crate::Tx<'_>,
    template_id: TemplateId,
    recipe_name: &str,
    index: usize,
    step: &StepDef,
) -> Result<StepId, StoreError> {
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
    let id = StepId::new();
    sqlx::query(
        "INSERT INTO dialectic_recipe_template_steps
           (id, template_id, step_number, step_key, step_slug, step_name, job_type, prompt_type, prompt_template_id,
            output_type, granularity_strategy, inputs_required, inputs_relevance, outputs_required,
            config_override, object_filter, progress_band, skip_only_when, model_role)
         VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
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
    .bind(step.progress.map(band_column))
    .bind(step.skip_only_when.map(Json))
    .bind(&step.model_role)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}

/// The output rules of a session's pipeline version that its output record
/// draws on (`record`), with their stages, in stage then step order.
pub async fn recorded_outputs(
    pool: &PgPool,
    session_id: SessionId,
) -> Result<Vec<(String, OutputRule)>, StoreError> {
    let rows: Vec<(String, Json<Vec<OutputRule>>)> = sqlx::query_as(
        "SELECT st.slug, rs.outputs_required
           FROM dialectic_sessions s
           JOIN dialectic_process_template_stages pts ON pts.process_template_id = s.process_template_id
           JOIN dialectic_stages st ON st.id = pts.stage_id
           JOIN dialectic_recipe_template_steps rs ON rs.template_id = st.recipe_template_id
          WHERE s.id = $1 AND rs.outputs_required @> '[{\"record\": {}}]'
          ORDER BY pts.stage_number, rs.step_number",
    )
    .bind(session_id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .flat_map(|(stage, outputs)| {
            outputs
                .0
                .into_iter()
                .filter(|o| o.record.is_some())
                .map(move |o| (stage.clone(), o))
        })
        .collect())
}

/// The model roles of the pipeline version a new session of `project_id`
/// runs (the newest version of the project's pipeline, as
/// `sessions::insert_session` picks it), by name.
pub async fn roles_for_new_session(
    pool: &PgPool,
    project_id: dialectic_core::ids::ProjectId,
) -> Result<BTreeMap<String, RoleDef>, StoreError> {
    let roles: Option<Json<BTreeMap<String, RoleDef>>> = sqlx::query_scalar(
        "SELECT t.model_roles
           FROM dialectic_projects p
           JOIN dialectic_process_templates pinned ON pinned.id = p.process_template_id
           JOIN LATERAL (SELECT model_roles FROM dialectic_process_templates v
                          WHERE v.id = pinned.id OR v.slug = pinned.slug
                          ORDER BY v.version DESC LIMIT 1) t ON true
          WHERE p.id = $1",
    )
    .bind(project_id)
    .fetch_optional(pool)
    .await?;
    Ok(roles.map(|r| r.0).unwrap_or_default())
}
