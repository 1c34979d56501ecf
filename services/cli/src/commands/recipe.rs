//! Stage recipes: list them, show one stage's DAG, edit one.

use crate::cli::RecipeCommand;
use crate::gateway::Gateway;
use crate::output::{Out, Render};
use crate::{format, json};
use anyhow::{Result, anyhow};
use dialectic_proto::v1::{
    EditStageRecipeRequest, GetStageRecipeRequest, ListRecipesRequest, RecipeEdge, RecipeSummary,
    StageRecipe,
};
use serde_json::Value;

impl Render for Vec<RecipeSummary> {
    fn text(&self) -> String {
        self.iter()
            .map(|r| {
                let kind = if r.is_cloned { "cloned" } else { "template" };
                format!(
                    "{:<12} {:>3} steps  {kind:<8}  {}\n",
                    r.stage_slug, r.steps, r.display_name
                )
            })
            .collect()
    }
    fn json(&self) -> Value {
        json::recipes(self)
    }
}

impl Render for StageRecipe {
    fn text(&self) -> String {
        format::recipe(self)
    }
    fn json(&self) -> Value {
        json::recipe(self)
    }
}

pub async fn dispatch(gateway: &Gateway, out: Out, command: RecipeCommand) -> Result<()> {
    match command {
        RecipeCommand::List => list(gateway, out).await,
        RecipeCommand::Show { target } => show(gateway, out, target.given()).await,
        RecipeCommand::Edit {
            target,
            skip,
            unskip,
            edges,
            dry_run,
        } => {
            let edit = Edit {
                stage: target.given(),
                skip: &skip,
                unskip: &unskip,
                edges: &edges,
                dry_run,
            };
            edit_recipe(gateway, out, edit).await
        }
    }
}

pub async fn list(gateway: &Gateway, out: Out) -> Result<()> {
    let all = crate::paging::all("recipes", |page_size, page_token| async move {
        let page = gateway
            .call(|mut c| {
                let request = gateway.request(ListRecipesRequest {
                    page_size,
                    page_token: page_token.clone(),
                });
                async move { c.list_recipes(request).await }
            })
            .await?;
        Ok((page.recipes, page.next_page_token))
    })
    .await?;
    out.show(&all);
    Ok(())
}

pub async fn show(gateway: &Gateway, out: Out, stage: &str) -> Result<()> {
    let recipe = gateway
        .call(|mut c| {
            let request = gateway.request(GetStageRecipeRequest {
                stage_slug: stage.to_string(),
            });
            async move { c.get_stage_recipe(request).await }
        })
        .await?;
    out.show(&recipe);
    Ok(())
}

/// `FROM:TO` step keys as an edge.
fn edge(text: &str) -> Result<RecipeEdge> {
    let (from, to) = text
        .split_once(':')
        .ok_or_else(|| anyhow!("--edge {text:?} must be FROM:TO"))?;
    Ok(RecipeEdge {
        from_step_key: from.trim().to_string(),
        to_step_key: to.trim().to_string(),
    })
}

/// `recipe edit`'s flags.
pub struct Edit<'a> {
    pub stage: &'a str,
    pub skip: &'a [String],
    pub unskip: &'a [String],
    pub edges: &'a [String],
    pub dry_run: bool,
}

/// A dry run's answer: the recipe as the edit would leave it.
struct Previewed(StageRecipe);

impl Render for Previewed {
    fn text(&self) -> String {
        format!(
            "dry run: nothing was changed; the recipe would be:\n{}",
            format::recipe(&self.0)
        )
    }
    fn json(&self) -> Value {
        json::recipe(&self.0)
    }
}

pub async fn edit_recipe(gateway: &Gateway, out: Out, edit: Edit<'_>) -> Result<()> {
    let add_edges = edit
        .edges
        .iter()
        .map(|e| edge(e))
        .collect::<Result<Vec<_>>>()?;
    // One id for every attempt: a retry after a lost answer gets the first
    // one. A dry run changes nothing, so it needs none.
    let call_id = if edit.dry_run {
        String::new()
    } else {
        uuid::Uuid::now_v7().to_string()
    };
    let recipe = gateway
        .call(|mut c| {
            let request = gateway.request(EditStageRecipeRequest {
                stage_slug: edit.stage.to_string(),
                skip: edit.skip.to_vec(),
                unskip: edit.unskip.to_vec(),
                add_edges: add_edges.clone(),
                client_request_id: call_id.clone(),
                validate_only: edit.dry_run,
            });
            async move { c.edit_stage_recipe(request).await }
        })
        .await?;
    if edit.dry_run {
        out.show(&Previewed(recipe));
    } else {
        out.show(&recipe);
    }
    Ok(())
}
