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
        PipelineCommand::Install { file, dry_run } => install(gateway, out, &file, dry_run).await,
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

pub async fn install(gateway: &Gateway, out: Out, file: &Path, dry_run: bool) -> Result<()> {
    let content = std::fs::read_to_string(file)
        .with_context(|| format!("reading pipeline file {}", file.display()))?;
    // One id for every attempt: a retry after a lost answer gets the first
    // one. A dry run changes nothing, so it needs none.
    let call_id = if dry_run {
        String::new()
    } else {
        uuid::Uuid::now_v7().to_string()
    };
    let installed = gateway
        .call(|mut c| {
            let request = gateway.request(InstallPipelineRequest {
                content: content.clone(),
                client_request_id: call_id.clone(),
                validate_only: dry_run,
            });
            async move { c.install_pipeline(request).await }
        })
        .await?;
    if dry_run {
        out.show(&Checked(installed));
    } else {
        out.show(&installed);
    }
    Ok(())
}

/// A dry run's answer: the file is valid, and what installing it would do.
struct Checked(InstallPipelineResponse);

impl Render for Checked {
    fn text(&self) -> String {
        let verdict = match (&self.0.pipeline, self.0.created) {
            (Some(p), true) => format!("would install {}", line(p)),
            (Some(p), false) => format!(
                "{} v{} already is this file; installing would change nothing",
                p.slug, p.version
            ),
            (None, _) => "the gateway answered without the pipeline".into(),
        };
        format!("dry run: the file is valid; nothing was installed\n{verdict}\n")
    }
    fn json(&self) -> Value {
        json::installed(&self.0)
    }
}
