//! Projects: create, list, show, delete, their uploaded documents, export, ask.

use crate::cli::{ListProjects, ProjectCommand};
use crate::exit::{Failed, Kind};
use crate::gateway::{Gateway, client_request_id};
use crate::output::{Out, Render, lines};
use crate::paging;
use crate::refs;
use crate::upload_progress;
use crate::{format, json};
use anyhow::{Context, Result, bail};
use clap::Args;
use dialectic_core::document_role::DocumentRole;
use dialectic_proto::names::{from_api, to_api};
use dialectic_proto::v1::{
    AddProjectDocumentRequest, CreateProjectRequest, DeleteProjectRequest, DeleteProjectResponse,
    DocumentRole as ApiRole, ExportProjectRequest, ExportUrl, GetProjectRequest,
    ListProjectDocumentsRequest, ListProjectsRequest, Project, ProjectDocument, PromptFile,
    QueryRequest, QueryResponse,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tokio_stream::StreamExt;

/// What a project is created from: its prompt (text or file, exactly one)
/// and the pipeline it runs.
#[derive(Args)]
pub struct PromptSource {
    #[command(flatten)]
    text: PromptText,
    /// The pipeline the project runs (`dialectic pipeline list`); default: dialectic.
    #[arg(long)]
    pub pipeline: Option<String>,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct PromptText {
    /// The initial prompt text.
    #[arg(long)]
    prompt: Option<String>,
    /// Read the initial prompt from a file.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
}

impl PromptSource {
    /// The request's prompt: text as given, or the file uploaded as it is
    /// (the gateway checks it is text and names the project after it).
    pub fn request(&self, name: &str) -> Result<CreateProjectRequest> {
        let mut request = CreateProjectRequest {
            name: name.to_string(),
            client_request_id: client_request_id(),
            pipeline: self.pipeline.clone().unwrap_or_default(),
            ..Default::default()
        };
        match (&self.text.prompt, &self.text.prompt_file) {
            (Some(text), _) => request.initial_user_prompt = text.clone(),
            (None, Some(path)) => {
                request.prompt_file = Some(PromptFile {
                    file_name: path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    content: std::fs::read(path)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                })
            }
            (None, None) => bail!("give --prompt or --prompt-file"),
        }
        Ok(request)
    }
}

impl Render for Project {
    fn text(&self) -> String {
        format!("{}\n", self.id)
    }
    fn json(&self) -> Value {
        json::project(self)
    }
}

impl Render for Vec<Project> {
    fn text(&self) -> String {
        lines(self, "no projects yet", |p| format!("{}  {}", p.id, p.name))
    }
    fn json(&self) -> Value {
        self.iter().map(json::project).collect()
    }
}

impl Render for DeleteProjectResponse {
    fn text(&self) -> String {
        format!(
            "deleted ({} stored objects removed)\n",
            self.objects_deleted
        )
    }
    fn json(&self) -> Value {
        json::deleted(self)
    }
}

pub fn project_document_line(d: &ProjectDocument) -> String {
    let role = match d.role() {
        ApiRole::Unspecified => String::new(),
        role => format!(", {}", role_name(role)),
    };
    format!(
        "{}  {:>2}. {}  ({} bytes, {} chunks indexed{role})",
        d.resource_id, d.position, d.file_name, d.size_bytes, d.chunks
    )
}

/// Roles cross the API by name: `DOCUMENT_ROLE_WRITING_SAMPLE` is `writing_sample`.
const ROLE_PREFIX: &str = "DOCUMENT_ROLE";

fn role_name(role: ApiRole) -> String {
    from_api(ROLE_PREFIX, role.as_str_name())
}

fn api_role(role: Option<DocumentRole>) -> i32 {
    role.map_or(0, |r| {
        to_api(ROLE_PREFIX, r.as_str(), ApiRole::from_str_name)
    })
}

/// A file to upload and the role it has in the project.
#[derive(Debug, Clone)]
pub struct Upload {
    pub role: Option<DocumentRole>,
    pub path: PathBuf,
}

pub fn role_arg(text: &str) -> Result<DocumentRole, String> {
    text.parse()
        .map_err(|e: dialectic_core::document_role::UnknownRole| e.to_string())
}

/// FILE or ROLE=FILE. A prefix that looks like a role name (letters and
/// underscores) must be one, so a typo is refused rather than read as a path.
pub fn upload_arg(text: &str) -> Result<Upload, String> {
    if let Some((prefix, path)) = text.split_once('=')
        && !prefix.is_empty()
        && prefix.chars().all(|c| c.is_ascii_lowercase() || c == '_')
    {
        return Ok(Upload {
            role: Some(role_arg(prefix)?),
            path: path.into(),
        });
    }
    Ok(Upload {
        role: None,
        path: text.into(),
    })
}

impl Render for Vec<ProjectDocument> {
    fn text(&self) -> String {
        lines(self, "no documents uploaded", project_document_line)
    }
    fn json(&self) -> Value {
        self.iter().map(json::project_document).collect()
    }
}

impl Render for ExportUrl {
    fn text(&self) -> String {
        format!("{}\n", self.url)
    }
    fn json(&self) -> Value {
        json::export_url(self)
    }
}

/// A zip written to disk.
struct Exported {
    path: PathBuf,
    size_bytes: usize,
}

impl Render for Exported {
    fn text(&self) -> String {
        format!("{} ({} bytes)\n", self.path.display(), self.size_bytes)
    }
    fn json(&self) -> Value {
        json!({"path": self.path.display().to_string(), "size_bytes": self.size_bytes})
    }
}

impl Render for QueryResponse {
    fn text(&self) -> String {
        format::answer(self)
    }
    fn json(&self) -> Value {
        json::answer(self)
    }
}

pub async fn dispatch(gateway: &Gateway, out: Out, command: ProjectCommand) -> Result<()> {
    match command {
        ProjectCommand::List(a) => list(gateway, out, &a).await,
        ProjectCommand::Create(a) => create(gateway, out, &a.name, &a.prompt).await,
        ProjectCommand::Show(a) => show(gateway, out, &a.id(gateway).await?).await,
        ProjectCommand::Delete(a) => {
            delete(gateway, out, &a.target.id(gateway).await?, a.yes).await
        }
        ProjectCommand::AddDoc(a) => {
            let project = refs::project_id(gateway, &a.project).await?;
            add_docs(gateway, out, &project, a.role, &a.files).await
        }
        ProjectCommand::Docs(a) => docs(gateway, out, &a.id(gateway).await?).await,
        ProjectCommand::Ask(a) => {
            let project = refs::project_id(gateway, &a.project).await?;
            ask(gateway, out, &project, a.model, &a.question).await
        }
        ProjectCommand::Export(a) => {
            let project = a.target.id(gateway).await?;
            export(gateway, out, &project, a.out.as_deref(), a.url).await
        }
    }
}

/// `project show`: the whole project, where `create` prints only its id.
struct Shown(Project);

impl Render for Shown {
    fn text(&self) -> String {
        let p = &self.0;
        // The JSON mapping already writes the timestamp as RFC 3339.
        let created = json::project(p)["created_at"]
            .as_str()
            .unwrap_or("-")
            .to_string();
        format!(
            "project   {}
name      {}
slug      {}
pipeline  {}
created   {created}
prompt    {}
",
            p.id,
            p.name,
            p.slug,
            p.pipeline,
            format::head(&p.initial_user_prompt, 1).next().unwrap_or(""),
        )
    }
    fn json(&self) -> Value {
        json::project(&self.0)
    }
}

pub async fn show(gateway: &Gateway, out: Out, project: &str) -> Result<()> {
    let found = gateway
        .call(|mut c| {
            let request = gateway.request(GetProjectRequest {
                project_id: project.to_string(),
            });
            async move { c.get_project(request).await }
        })
        .await?;
    out.show(&Shown(found));
    Ok(())
}

pub async fn create(gateway: &Gateway, out: Out, name: &str, prompt: &PromptSource) -> Result<()> {
    out.show(&gateway.create_project(prompt.request(name)?).await?);
    Ok(())
}

pub async fn list(gateway: &Gateway, out: Out, a: &ListProjects) -> Result<()> {
    let filter = a.query.filter.clone().unwrap_or_default();
    let order_by = a.query.order_by.clone().unwrap_or_default();
    let listed = paging::collect("projects", &a.page, |page_size, page_token| {
        let (filter, order_by) = (filter.clone(), order_by.clone());
        async move {
            let page = gateway
                .call(|mut c| {
                    let request = gateway.request(ListProjectsRequest {
                        page_size,
                        page_token: page_token.clone(),
                        filter: filter.clone(),
                        order_by: order_by.clone(),
                    });
                    async move { c.list_projects(request).await }
                })
                .await?;
            Ok((page.projects, page.next_page_token))
        }
    })
    .await?;
    listed.show(out);
    Ok(())
}

pub async fn delete(gateway: &Gateway, out: Out, project: &str, yes: bool) -> Result<()> {
    if !yes {
        confirm_deletion(project)?;
    }
    // One id for every attempt: a retry after a lost answer gets the first one.
    let call_id = uuid::Uuid::now_v7();
    let done = gateway
        .call(|mut c| {
            let request = gateway.request(DeleteProjectRequest {
                project_id: project.to_string(),
                client_request_id: call_id.to_string(),
            });
            async move { c.delete_project(request).await }
        })
        .await?;
    out.show(&done);
    Ok(())
}

/// Uploads each file in turn (their order is the order steps read them in);
/// `role` is the role of those that name none.
pub async fn add_docs(
    gateway: &Gateway,
    out: Out,
    project: &str,
    role: Option<DocumentRole>,
    files: &[Upload],
) -> Result<()> {
    let files: Vec<Upload> = files
        .iter()
        .map(|f| Upload {
            role: f.role.or(role),
            path: f.path.clone(),
        })
        .collect();
    out.show(&upload_docs(gateway, project, &files).await?);
    Ok(())
}

/// Uploads `files` to the project in order; each upload carries its own
/// request id, so a retried call is not doubled.
pub async fn upload_docs(
    gateway: &Gateway,
    project: &str,
    files: &[Upload],
) -> Result<Vec<ProjectDocument>> {
    let mut uploaded = Vec::with_capacity(files.len());
    for Upload { role, path: file } in files {
        let content = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let role = api_role(*role);
        let file_name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let request_id = client_request_id();
        let upload = gateway.call(|mut c| {
            let request = gateway.request(AddProjectDocumentRequest {
                project_id: project.to_string(),
                file_name: file_name.clone(),
                content: content.clone(),
                client_request_id: request_id.clone(),
                role,
            });
            async move { c.add_project_document(request).await }
        });
        let document = if upload_progress::is_converted(&file_name) {
            upload_progress::while_uploading(gateway, project, &request_id, upload).await?
        } else {
            upload.await?
        };
        uploaded.push(document);
    }
    Ok(uploaded)
}

pub async fn docs(gateway: &Gateway, out: Out, project: &str) -> Result<()> {
    let all = paging::all("documents", |page_size, page_token| async move {
        let page = gateway
            .call(|mut c| {
                let request = gateway.request(ListProjectDocumentsRequest {
                    project_id: project.to_string(),
                    page_size,
                    page_token: page_token.clone(),
                });
                async move { c.list_project_documents(request).await }
            })
            .await?;
        Ok((page.documents, page.next_page_token))
    })
    .await?;
    out.show(&all);
    Ok(())
}

pub async fn ask(
    gateway: &Gateway,
    out: Out,
    project: &str,
    model: Option<String>,
    question: &[String],
) -> Result<()> {
    // A retried call answers the first one's answer, never asking twice.
    let request_id = client_request_id();
    let text = question.join(" ");
    let answer = gateway
        .call(|mut c| {
            let request = gateway.request(QueryRequest {
                project_id: project.to_string(),
                text: text.clone(),
                model: model.clone().unwrap_or_default(),
                client_request_id: request_id.clone(),
            });
            async move { c.query(request).await }
        })
        .await?;
    out.show(&answer);
    Ok(())
}

pub async fn export(
    gateway: &Gateway,
    out: Out,
    project: &str,
    to: Option<&Path>,
    url: bool,
) -> Result<()> {
    let request = ExportProjectRequest {
        project_id: project.to_string(),
    };
    if url {
        let link = gateway
            .call(|mut c| {
                let request = gateway.request(request.clone());
                async move { c.get_export_url(request).await }
            })
            .await?;
        out.show(&link);
        return Ok(());
    }
    let mut stream = gateway
        .call(|mut c| {
            let request = gateway.request(request.clone());
            async move { c.export_project(request).await }
        })
        .await?;
    let mut zip = Vec::new();
    let mut name = String::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if name.is_empty() {
            name = chunk.file_name;
        }
        zip.extend_from_slice(&chunk.data);
    }
    if name.is_empty() {
        name = "export.zip".into();
    }
    let path = to.map_or_else(|| PathBuf::from(name), Path::to_path_buf);
    std::fs::write(&path, &zip).with_context(|| format!("cannot write {}", path.display()))?;
    out.show(&Exported {
        path,
        size_bytes: zip.len(),
    });
    Ok(())
}

/// Deleting a project cannot be undone: a person confirms it by typing
/// `yes`; a script (stdin not a terminal) must say `--yes`.
fn confirm_deletion(project: &str) -> Result<()> {
    use std::io::{BufRead, IsTerminal, Write};
    let refused =
        |why: &str| Failed::new(Kind::Usage, format!("project {project} not deleted: {why}"));
    if !std::io::stdin().is_terminal() {
        return Err(refused("stdin is not a terminal; add --yes to delete without asking").into());
    }
    eprint!("Delete project {project}, its sessions, documents and stored objects? Type yes: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    match answer.trim() {
        "yes" | "y" => Ok(()),
        _ => Err(refused("not confirmed").into()),
    }
}
