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
        RecipeCommand::Show { stage } => show(gateway, out, &stage).await,
        RecipeCommand::Edit {
            stage,
            skip,
            unskip,
            edges,
        } => edit(gateway, out, &stage, &skip, &unskip, &edges).await,
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

pub async fn edit(
    gateway: &Gateway,
    out: Out,
    stage: &str,
    skip: &[String],
    unskip: &[String],
    edges: &[String],
) -> Result<()> {
    let add_edges = edges.iter().map(|e| edge(e)).collect::<Result<Vec<_>>>()?;
    // One id for every attempt: a retry after a lost answer gets the first one.
    let call_id = uuid::Uuid::now_v7();
    let recipe = gateway
        .call(|mut c| {
            let request = gateway.request(EditStageRecipeRequest {
                stage_slug: stage.to_string(),
                skip: skip.to_vec(),
                unskip: unskip.to_vec(),
                add_edges: add_edges.clone(),
                client_request_id: call_id.to_string(),
            });
            async move { c.edit_stage_recipe(request).await }
        })
        .await?;
    out.show(&recipe);
    Ok(())
}
