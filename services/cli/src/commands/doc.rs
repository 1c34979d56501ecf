//! A session's rendered documents: list, show, edit, chunks, regenerate.

use crate::cli::DocCommand;
use crate::gateway::{Gateway, client_request_id};
use crate::output::{Out, Render};
use crate::{format, json};
use anyhow::{Context, Result};
use clap::Args;
use dialectic_proto::v1::{
    DocumentChunk, DocumentContent, GetDocumentContentRequest, OverrideClaimRequest,
    RegenerateDocumentRequest, RegenerateDocumentResponse, SaveDocumentEditRequest, StageDocument,
};
use serde_json::Value;
use std::path::Path;

/// A session's documents, with their first lines when a person reads them.
pub struct Listed {
    pub documents: Vec<StageDocument>,
    /// Each document's first lines (text output only; empty otherwise).
    previews: Vec<String>,
}

impl Listed {
    pub async fn read(
        gateway: &Gateway,
        out: Out,
        session: &str,
        stage: Option<&str>,
    ) -> Result<Self> {
        let documents = gateway.docs(session, stage.unwrap_or("")).await?;
        let mut previews = Vec::new();
        // Scripts get the list only: no call per document they did not ask for.
        if out.is_text() {
            for doc in &documents {
                let content = content(gateway, &doc.resource_id).await?;
                previews.push(
                    format::head(&content.content, 6)
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
            }
        }
        Ok(Self {
            documents,
            previews,
        })
    }
}

impl Render for Listed {
    fn text(&self) -> String {
        if self.documents.is_empty() {
            return "no documents yet\n".into();
        }
        let mut text = String::new();
        for (i, doc) in self.documents.iter().enumerate() {
            let note = if doc.incomplete {
                ", incomplete: continuation limit reached"
            } else {
                ""
            };
            text.push_str(&format!(
                "{} ({} bytes{note})\n",
                doc.storage_key, doc.size_bytes
            ));
            for line in self.previews.get(i).into_iter().flat_map(|p| p.lines()) {
                text.push_str(&format!("    {line}\n"));
            }
        }
        text
    }
    fn json(&self) -> Value {
        self.documents.iter().map(json::document).collect()
    }
}

impl Render for DocumentContent {
    fn text(&self) -> String {
        self.content.clone()
    }
    fn json(&self) -> Value {
        let mut value = self
            .document
            .as_ref()
            .map(json::document)
            .unwrap_or_default();
        value["content"] = self.content.clone().into();
        value["mime_type"] = self.mime_type.clone().into();
        value
    }
}

impl Render for Vec<DocumentChunk> {
    fn text(&self) -> String {
        let mut text = String::new();
        for c in self {
            text.push_str(&format!(
                "{} {} (edit version {}, finish {})\n",
                c.contribution_type, c.storage_key, c.edit_version, c.finish_reason
            ));
            for line in format::head(&c.raw, 4) {
                text.push_str(&format!("    {line}\n"));
            }
        }
        text
    }
    fn json(&self) -> Value {
        self.iter().map(json::chunk).collect()
    }
}

/// An edit saved.
struct Saved(StageDocument);

impl Render for Saved {
    fn text(&self) -> String {
        format!("saved; re-rendering {}\n", self.0.storage_key)
    }
    fn json(&self) -> Value {
        json::document(&self.0)
    }
}

/// A regeneration started (or found already under way).
struct Regenerating {
    done: RegenerateDocumentResponse,
    document: String,
}

impl Render for Regenerating {
    fn text(&self) -> String {
        let verb = if self.done.created {
            "regenerating"
        } else {
            "already regenerating"
        };
        format!(
            "{verb} {} as job {} ({} earlier job(s) superseded)\n",
            self.document,
            self.done.job_id,
            self.done.superseded_job_ids.len()
        )
    }
    fn json(&self) -> Value {
        json::regeneration(&self.done)
    }
}

#[derive(Args)]
pub struct RegenerateArgs {
    /// The session's id, or `last` for your newest session.
    #[arg(long)]
    session: String,
    /// The stage the session just finished (its slug).
    #[arg(long)]
    stage: String,
    /// The model that wrote it (api identifier or id).
    #[arg(long)]
    model: String,
    /// The document key (e.g. business_case).
    #[arg(long)]
    document: String,
    /// Which document, when the model wrote several under that key.
    #[arg(long)]
    resource: Option<String>,
    /// Idempotency key: repeating the command with it starts nothing new
    /// (default: a fresh one per invocation).
    #[arg(long)]
    request_id: Option<String>,
}

pub async fn dispatch(gateway: &Gateway, out: Out, command: DocCommand) -> Result<()> {
    match command {
        DocCommand::List { target, stage } => {
            let session = target.id(gateway).await?;
            list(gateway, out, &session, stage.as_deref()).await
        }
        DocCommand::Show { target } => show(gateway, out, target.given()).await,
        DocCommand::Chunks { target } => chunks(gateway, out, target.given()).await,
        DocCommand::Edit { target, file } => edit(gateway, out, target.given(), &file).await,
        DocCommand::Override {
            target,
            claim,
            rationale,
        } => override_claim(gateway, out, target.given(), claim, &rationale).await,
        DocCommand::Regenerate(args) => regenerate(gateway, out, args).await,
    }
}

async fn content(gateway: &Gateway, resource: &str) -> Result<DocumentContent> {
    Ok(gateway
        .call(|mut c| {
            let request = gateway.request(GetDocumentContentRequest {
                resource_id: resource.to_string(),
            });
            async move { c.get_document_content(request).await }
        })
        .await?)
}

pub async fn list(gateway: &Gateway, out: Out, session: &str, stage: Option<&str>) -> Result<()> {
    out.show(&Listed::read(gateway, out, session, stage).await?);
    Ok(())
}

pub async fn show(gateway: &Gateway, out: Out, resource: &str) -> Result<()> {
    out.show(&content(gateway, resource).await?);
    Ok(())
}

pub async fn chunks(gateway: &Gateway, out: Out, resource: &str) -> Result<()> {
    let found = gateway
        .call(|mut c| {
            let request = gateway.request(GetDocumentContentRequest {
                resource_id: resource.to_string(),
            });
            async move { c.get_document_chunks(request).await }
        })
        .await?;
    out.show(&found.chunks);
    Ok(())
}

pub async fn edit(gateway: &Gateway, out: Out, resource: &str, file: &Path) -> Result<()> {
    let body =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    // One id for every attempt: a retry after a lost answer gets the first one.
    let call_id = uuid::Uuid::now_v7();
    let document = gateway
        .call(|mut c| {
            let request = gateway.request(SaveDocumentEditRequest {
                resource_id: resource.to_string(),
                content: body.clone(),
                client_request_id: call_id.to_string(),
            });
            async move { c.save_document_edit(request).await }
        })
        .await?;
    out.show(&Saved(document));
    Ok(())
}

pub async fn override_claim(
    gateway: &Gateway,
    out: Out,
    resource: &str,
    claim: u32,
    rationale: &str,
) -> Result<()> {
    // One id for every attempt: a retry after a lost answer gets the first one.
    let call_id = uuid::Uuid::now_v7();
    let document = gateway
        .call(|mut c| {
            let request = gateway.request(OverrideClaimRequest {
                resource_id: resource.to_string(),
                claim,
                rationale: rationale.to_string(),
                client_request_id: call_id.to_string(),
            });
            async move { c.override_claim(request).await }
        })
        .await?;
    out.show(&Saved(document));
    Ok(())
}

pub async fn regenerate(gateway: &Gateway, out: Out, args: RegenerateArgs) -> Result<()> {
    let RegenerateArgs {
        session,
        stage,
        model,
        document,
        resource,
        request_id,
    } = args;
    // One id for every retry of this invocation, so a retried call after
    // an unavailable gateway cannot start a second regeneration.
    let request_id = request_id.unwrap_or_else(client_request_id);
    let session = crate::refs::session_id(gateway, &session).await?;
    let done = gateway
        .call(|mut c| {
            let request = gateway.request(RegenerateDocumentRequest {
                session_id: session.clone(),
                stage_slug: stage.clone(),
                model: model.clone(),
                document_key: document.clone(),
                resource_id: resource.clone().unwrap_or_default(),
                client_request_id: request_id.clone(),
            });
            async move { c.regenerate_document(request).await }
        })
        .await?;
    out.show(&Regenerating { done, document });
    Ok(())
}
