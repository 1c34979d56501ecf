//! Pipelines: the installed versions, and installing a pipeline file.

use crate::cli::PipelineCommand;
use crate::gateway::Gateway;
use crate::json;
use crate::output::{Out, Render, lines};
use anyhow::{Context, Result};
use dialectic_proto::v1::{
    InstallPipelineRequest, InstallPipelineResponse, ListPipelinesRequest, Pipeline,
};
use serde_json::Value;
use std::path::Path;

fn line(p: &Pipeline) -> String {
    let current = if p.current { "*" } else { " " };
    format!(
        "{current} {:<16} v{:<3} {}  ({})",
        p.slug,
        p.version,
        p.stages.join(" → "),
        p.name
    )
}

impl Render for Vec<Pipeline> {
    fn text(&self) -> String {
        lines(self, "no pipelines installed", line)
    }
    fn json(&self) -> Value {
        self.iter().map(json::pipeline).collect()
    }
}

impl Render for InstallPipelineResponse {
    fn text(&self) -> String {
        match (&self.pipeline, self.created) {
            (Some(p), true) => format!("installed {}\n", line(p)),
            (Some(p), false) => format!(
                "{} v{} already is this file; nothing installed\n",
                p.slug, p.version
            ),
            (None, _) => "the gateway answered without the pipeline\n".into(),
        }
    }
    fn json(&self) -> Value {
        json::installed(self)
    }
}

pub async fn dispatch(gateway: &Gateway, out: Out, command: PipelineCommand) -> Result<()> {
    match command {
        PipelineCommand::List => list(gateway, out).await,
        PipelineCommand::Install { file } => install(gateway, out, &file).await,
    }
}

pub async fn list(gateway: &Gateway, out: Out) -> Result<()> {
    let all = crate::paging::all("pipelines", |page_size, page_token| async move {
        let page = gateway
            .call(|mut c| {
                let request = gateway.request(ListPipelinesRequest {
                    page_size,
                    page_token: page_token.clone(),
                });
                async move { c.list_pipelines(request).await }
            })
            .await?;
        Ok((page.pipelines, page.next_page_token))
    })
    .await?;
    out.show(&all);
    Ok(())
}

pub async fn install(gateway: &Gateway, out: Out, file: &Path) -> Result<()> {
    let content = std::fs::read_to_string(file)
        .with_context(|| format!("reading pipeline file {}", file.display()))?;
    // One id for every attempt: a retry after a lost answer gets the first one.
    let call_id = uuid::Uuid::now_v7();
    let installed = gateway
        .call(|mut c| {
            let request = gateway.request(InstallPipelineRequest {
                content: content.clone(),
                client_request_id: call_id.to_string(),
            });
            async move { c.install_pipeline(request).await }
        })
        .await?;
    out.show(&installed);
    Ok(())
}
