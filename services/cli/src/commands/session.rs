//! Sessions: start, review, pause/resume/cancel, revisit, retry, status,
//! watch, the blackboard, and `run` (create, start, watch, list documents).

use super::doc::Listed;
use super::project::{PromptSource, upload_docs};
use crate::cli::Revisit;
use crate::cli::{RunArgs, SessionCommand, SessionRef, StartSession};
use crate::exit::{Failed, Kind};
use crate::gateway::Gateway;
use crate::output::{Out, Render, lines};
use crate::refs;
use crate::{format, json, progress};
use anyhow::Result;
use dialectic_proto::v1::{
    BlackboardEntry, CancelSessionRequest, CompleteSessionRequest, GetBlackboardRequest,
    ListSessionRevisionsRequest, ListSessionsRequest, PauseSessionRequest, Project,
    ProjectDocument, ResumeSessionRequest, RetryStageRequest, RetryStageResponse,
    RevisitStageRequest, RevisitStageResponse, Session, SessionRevision, StageResponse,
    SubmitStageResponsesRequest,
};
use dialectic_proto::v1::{RevisitImpact, RevisitPreview};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub async fn dispatch(gateway: &Gateway, out: Out, command: SessionCommand) -> Result<()> {
    match command {
        SessionCommand::List(a) => list(gateway, out, &a).await,
        SessionCommand::Last(a) => {
            let project = a.project_arg.as_deref().or(a.project.as_deref());
            out.show(&refs::last_session(gateway, project).await?);
            Ok(())
        }
        SessionCommand::Start(a) => start(gateway, out, a).await,
        SessionCommand::Status(a) => status(gateway, out, &a.id(gateway).await?).await,
        SessionCommand::Watch(a) => {
            let session = a.target.id(gateway).await?;
            watch(gateway, out, &session, a.until.as_deref()).await
        }
        SessionCommand::Submit(a) => {
            let session = a.target.id(gateway).await?;
            submit(gateway, out, &session, &a.stage, a.feedback, a.document).await
        }
        SessionCommand::Pause(a) => lifecycle(gateway, out, &a, Lifecycle::Pause).await,
        SessionCommand::Resume(a) => lifecycle(gateway, out, &a, Lifecycle::Resume).await,
        SessionCommand::Cancel(a) => lifecycle(gateway, out, &a, Lifecycle::Cancel).await,
        SessionCommand::Complete(a) => lifecycle(gateway, out, &a, Lifecycle::Complete).await,
        SessionCommand::Retry(a) => {
            let session = a.target.id(gateway).await?;
            retry(gateway, out, &session, a.stage, a.model).await
        }
        SessionCommand::Revisit(a) => revisit(gateway, out, a).await,
        SessionCommand::Blackboard(a) => {
            let session = a.target.id(gateway).await?;
            blackboard(gateway, out, &session, a.entry_type).await
        }
        SessionCommand::History(a) => history(gateway, out, &a.id(gateway).await?).await,
    }
}

async fn lifecycle(gateway: &Gateway, out: Out, a: &SessionRef, to: Lifecycle) -> Result<()> {
    change(gateway, out, &a.id(gateway).await?, to).await
}

/// `dialectic run`: its flags as a plan.
pub async fn run_args(gateway: &Gateway, out: Out, args: RunArgs) -> Result<()> {
    let plan = RunPlan {
        name: &args.name,
        prompt: &args.prompt,
        models: &args.models,
        model_roles: &args.model_roles,
        until: &args.until,
        auto_advance: !args.no_auto_advance,
        timeout: args.wait,
        docs: &args.docs,
        pushback: args.pushback,
    };
    run(gateway, out, plan).await
}

/// A session in full (`status`).
impl Render for Session {
    fn text(&self) -> String {
        format::session(self)
    }
    fn json(&self) -> Value {
        json::session(self)
    }
}

/// A session in one line: what a command that moved it answers.
pub struct Moved(pub Session);

impl Render for Moved {
    fn text(&self) -> String {
        let s = &self.0;
        format!("{} {} (iteration {})\n", s.id, s.status, s.iteration)
    }
    fn json(&self) -> Value {
        json::session(&self.0)
    }
}

impl Render for Vec<Session> {
    fn text(&self) -> String {
        lines(self, "no sessions yet", |s| {
            format!("{}  {}  iteration {}", s.id, s.status, s.iteration)
        })
    }
    fn json(&self) -> Value {
        self.iter().map(json::session).collect()
    }
}

impl Render for RevisitStageResponse {
    fn text(&self) -> String {
        let mut text = self.session.as_ref().map_or(String::new(), |s| {
            format!("{} {} (revision {})\n", s.id, s.status, self.revision)
        });
        if !self.previews.is_empty() {
            text.push_str(&revisit_preview(self));
        }
        for stage in &self.needs_review {
            text.push_str(&format!("needs review: {stage}\n"));
        }
        for key in &self.archived {
            text.push_str(&format!("archived: {key}\n"));
        }
        text
    }
    fn json(&self) -> Value {
        json::revisit(self)
    }
}

/// A retried stage and the model it was moved to, if any.
struct Retried {
    done: RetryStageResponse,
    model: Option<String>,
}

impl Render for Retried {
    fn text(&self) -> String {
        let done = &self.done;
        let mut text = done
            .session
            .clone()
            .map_or(String::new(), |s| Moved(s).text());
        let on = self
            .model
            .as_ref()
            .map_or(String::new(), |m| format!(" on {m}"));
        text.push_str(&format!(
            "stage {}: {} failed job(s) run again{on}; {} job(s) wait for them\n",
            done.stage_slug,
            done.retried_job_ids.len(),
            done.reopened_jobs
        ));
        for job in &done.retried_job_ids {
            text.push_str(&format!("retried: {job}\n"));
        }
        text
    }
    fn json(&self) -> Value {
        json::retry(&self.done)
    }
}

impl Render for Vec<BlackboardEntry> {
    fn text(&self) -> String {
        lines(self, "the blackboard is empty", |e| {
            format!(
                "{} #{} ({}, {}/{}): {}",
                e.entry_type, e.seq, e.stage_slug, e.step_key, e.model, e.data_json
            )
        })
    }
    fn json(&self) -> Value {
        self.iter().map(json::board_entry).collect()
    }
}

impl Render for Vec<SessionRevision> {
    fn text(&self) -> String {
        lines(self, "no revisits", format::revision)
    }
    fn json(&self) -> Value {
        self.iter().map(json::revision).collect()
    }
}

/// What `run` made and where it ended.
struct RunSummary {
    project: Project,
    uploaded: Vec<ProjectDocument>,
    session: Session,
    documents: Listed,
}

impl Render for RunSummary {
    fn text(&self) -> String {
        format!(
            "{}\n{}",
            self.documents.text(),
            format::summary(&self.session, &self.documents.documents)
        )
    }
    fn json(&self) -> Value {
        json!({
            "project": json::project(&self.project),
            "uploaded": self.uploaded.iter().map(json::project_document).collect::<Vec<_>>(),
            "session": json::session(&self.session),
            "documents": self.documents.documents.iter().map(json::document).collect::<Vec<_>>(),
        })
    }
}

pub async fn start(gateway: &Gateway, out: Out, a: StartSession) -> Result<()> {
    let project = a.target.id(gateway).await?;
    let session = gateway
        .start_session(
            &project,
            &a.models,
            &a.model_roles,
            a.auto_advance,
            a.pushback,
        )
        .await?;
    out.show(&Moved(session));
    Ok(())
}

pub async fn list(gateway: &Gateway, out: Out, a: &crate::cli::ListSessions) -> Result<()> {
    let filter = a.query.filter.clone().unwrap_or_default();
    let order_by = a.query.order_by.clone().unwrap_or_default();
    let project = a.target.id(gateway).await?;
    let listed = crate::paging::collect("sessions", &a.page, |page_size, page_token| {
        let (filter, order_by, project) = (filter.clone(), order_by.clone(), project.clone());
        async move {
            let page = gateway
                .call(|mut c| {
                    let request = gateway.request(ListSessionsRequest {
                        project_id: project.clone(),
                        page_size,
                        page_token: page_token.clone(),
                        filter: filter.clone(),
                        order_by: order_by.clone(),
                    });
                    async move { c.list_sessions(request).await }
                })
                .await?;
            Ok((page.sessions, page.next_page_token))
        }
    })
    .await?;
    listed.show(out);
    Ok(())
}

pub async fn submit(
    gateway: &Gateway,
    out: Out,
    session: &str,
    stage: &str,
    feedback: Option<String>,
    document: Option<String>,
) -> Result<()> {
    let responses: Vec<StageResponse> = feedback
        .map(|text| StageResponse {
            resource_id: String::new(),
            document_key: document.unwrap_or_default(),
            feedback: text,
        })
        .into_iter()
        .collect();
    // One id for every attempt: a retry after a lost answer gets the first one.
    let call_id = uuid::Uuid::now_v7();
    let s = gateway
        .call(|mut c| {
            let request = gateway.request(SubmitStageResponsesRequest {
                session_id: session.to_string(),
                stage_slug: stage.to_string(),
                responses: responses.clone(),
                client_request_id: call_id.to_string(),
            });
            async move { c.submit_stage_responses(request).await }
        })
        .await?;
    out.show(&Moved(s));
    Ok(())
}

/// Pause, resume, cancel or complete: the same call shape, a different RPC.
#[derive(Clone, Copy)]
pub enum Lifecycle {
    Pause,
    Resume,
    Cancel,
    Complete,
}

pub async fn change(gateway: &Gateway, out: Out, session: &str, change: Lifecycle) -> Result<()> {
    // One id for every attempt: a retry after a lost answer gets the first one.
    let call_id = uuid::Uuid::now_v7();
    let s = gateway
        .call(|mut c| {
            let session_id = session.to_string();
            async move {
                match change {
                    Lifecycle::Pause => {
                        let request = gateway.request(PauseSessionRequest {
                            session_id,
                            client_request_id: call_id.to_string(),
                        });
                        c.pause_session(request).await
                    }
                    Lifecycle::Resume => {
                        let request = gateway.request(ResumeSessionRequest {
                            session_id,
                            client_request_id: call_id.to_string(),
                        });
                        c.resume_session(request).await
                    }
                    Lifecycle::Cancel => {
                        let request = gateway.request(CancelSessionRequest {
                            session_id,
                            client_request_id: call_id.to_string(),
                        });
                        c.cancel_session(request).await
                    }
                    Lifecycle::Complete => {
                        let request = gateway.request(CompleteSessionRequest {
                            session_id,
                            client_request_id: call_id.to_string(),
                        });
                        c.complete_session(request).await
                    }
                }
            }
        })
        .await?;
    out.show(&Moved(s));
    Ok(())
}

/// `--dry-run`'s answer: what each impact level would do, then the diffs.
fn revisit_preview(r: &RevisitStageResponse) -> String {
    let mut text = String::from("dry run: nothing was changed\n");
    for p in &r.previews {
        text.push_str(&preview_lines(p));
    }
    for d in &r.diffs {
        text.push_str(&format!(
            "\nedited {} {} ({}) since the later stages read it:\n{}",
            d.stage_slug,
            d.document_key,
            dash(&d.model),
            d.unified_diff
        ));
    }
    if r.diffs.is_empty() {
        text.push_str("\nno edit of the stage since the later stages read it\n");
    }
    text
}

fn preview_lines(p: &RevisitPreview) -> String {
    let level = match RevisitImpact::try_from(p.impact_level) {
        Ok(RevisitImpact::Minor) => "minor",
        Ok(RevisitImpact::Moderate) => "moderate",
        Ok(RevisitImpact::Major) => "major",
        _ => "unspecified",
    };
    if !p.refused.is_empty() {
        return format!("{level}: refused: {}\n", p.refused);
    }
    let mut text = format!(
        "{level}: session {} (revision {})\n",
        p.session_status, p.revision
    );
    if !p.needs_review.is_empty() {
        text.push_str(&format!(
            "  flags for review: {}\n",
            p.needs_review.join(", ")
        ));
    }
    if !p.reruns.is_empty() {
        text.push_str(&format!("  re-runs at once: {}\n", p.reruns.join(", ")));
    }
    if p.archived.is_empty() && p.needs_review.is_empty() {
        text.push_str("  archives nothing\n");
    }
    for d in &p.archived {
        text.push_str(&format!(
            "  archives {} {} ({}): {} -> {}\n",
            d.stage_slug,
            d.document_key,
            dash(&d.model),
            d.storage_key,
            // Beside the current one: its name says where.
            d.archived_key.rsplit('/').next().unwrap_or_default()
        ));
    }
    text
}

fn dash(value: &str) -> &str {
    if value.is_empty() { "-" } else { value }
}

pub async fn revisit(gateway: &Gateway, out: Out, args: Revisit) -> Result<()> {
    let session = args.target.id(gateway).await?;
    // One id for every attempt: a retry after a lost answer gets the first one.
    let call_id = uuid::Uuid::now_v7();
    let done = gateway
        .call(|mut c| {
            let request = gateway.request(RevisitStageRequest {
                session_id: session.clone(),
                stage_slug: args.stage.clone(),
                impact: args.impact.clone().unwrap_or_default(),
                reason: args.reason.clone(),
                impact_level: 0,
                dry_run: args.dry_run,
                client_request_id: call_id.to_string(),
            });
            async move { c.revisit_stage(request).await }
        })
        .await?;
    out.show(&done);
    Ok(())
}

pub async fn retry(
    gateway: &Gateway,
    out: Out,
    session: &str,
    stage: Option<String>,
    model: Option<String>,
) -> Result<()> {
    // One id for every attempt: a retry after a lost answer gets the first one.
    let call_id = uuid::Uuid::now_v7();
    let done = gateway
        .call(|mut c| {
            let request = gateway.request(RetryStageRequest {
                session_id: session.to_string(),
                stage_slug: stage.clone().unwrap_or_default(),
                model: model.clone().unwrap_or_default(),
                client_request_id: call_id.to_string(),
            });
            async move { c.retry_stage(request).await }
        })
        .await?;
    out.show(&Retried { done, model });
    Ok(())
}

pub async fn status(gateway: &Gateway, out: Out, session: &str) -> Result<()> {
    out.show(&gateway.session(session).await?);
    Ok(())
}

pub async fn blackboard(
    gateway: &Gateway,
    out: Out,
    session: &str,
    entry_type: Option<String>,
) -> Result<()> {
    let board = gateway
        .call(|mut c| {
            let request = gateway.request(GetBlackboardRequest {
                session_id: session.to_string(),
                entry_type: entry_type.clone().unwrap_or_default(),
            });
            async move { c.get_blackboard(request).await }
        })
        .await?;
    out.show(&board.entries);
    Ok(())
}

/// `session history` / `history`: the session's revisits, oldest first.
pub async fn history(gateway: &Gateway, out: Out, session: &str) -> Result<()> {
    let history = gateway
        .call(|mut c| {
            let request = gateway.request(ListSessionRevisionsRequest {
                session_id: session.to_string(),
            });
            async move { c.list_session_revisions(request).await }
        })
        .await?;
    out.show(&history.revisions);
    Ok(())
}

fn usage(message: String) -> Failed {
    Failed::new(Kind::Usage, message)
}

pub async fn watch(gateway: &Gateway, out: Out, session: &str, until: Option<&str>) -> Result<()> {
    if let Some(until) = until {
        let watched = gateway.session(session).await?;
        if let Some(stages) = gateway.session_stages(&watched).await? {
            format::check_until(until, &stages).map_err(usage)?;
        }
    }
    let mut view = progress::View::new(out, session);
    gateway.watch(session, until, None, &mut view).await?;
    view.finish();
    Ok(())
}

/// `run`'s flags, less the ones every command has.
pub struct RunPlan<'a> {
    pub name: &'a str,
    pub prompt: &'a PromptSource,
    pub models: &'a [String],
    pub model_roles: &'a [(String, String)],
    pub until: &'a str,
    pub auto_advance: bool,
    pub timeout: Duration,
    pub docs: &'a [super::project::Upload],
    pub pushback: Option<dialectic_core::pushback::Pushback>,
}

/// Create, start, watch to `until`, then list the documents.
pub async fn run(gateway: &Gateway, out: Out, plan: RunPlan<'_>) -> Result<()> {
    let pipeline = plan.prompt.pipeline.as_deref().unwrap_or("dialectic");
    // An unknown pipeline is CreateProject's NOT_FOUND, said below.
    if let Some(stages) = gateway.pipeline_stages(pipeline, None).await? {
        format::check_until(plan.until, &stages).map_err(usage)?;
    }
    let project = gateway
        .create_project(plan.prompt.request(plan.name)?)
        .await?;
    out.step(format!("project {}", project.id));
    let uploaded = upload_docs(gateway, &project.id, plan.docs).await?;
    for document in &uploaded {
        out.step(super::project::project_document_line(document));
    }
    let session = gateway
        .start_session(
            &project.id,
            plan.models,
            plan.model_roles,
            plan.auto_advance,
            plan.pushback,
        )
        .await?;
    out.step(format!("session {} {}", session.id, session.status));
    let deadline = Instant::now() + plan.timeout;
    let mut view = progress::View::new(out, &session.id);
    gateway
        .watch(&session.id, Some(plan.until), Some(deadline), &mut view)
        .await?;
    gateway
        .wait_for_renders(&session.id, deadline, &mut view)
        .await?;
    view.finish();
    let documents = Listed::read(gateway, out, &session.id, None).await?;
    let session = gateway.session(&session.id).await?;
    out.show(&RunSummary {
        project,
        uploaded,
        session,
        documents,
    });
    Ok(())
}
