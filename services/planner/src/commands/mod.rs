//! Commands: every change to a session or its jobs that does not come from a
//! job outcome. The gateway validates a request, checks that the caller owns
//! what it names and sends one of these (over the planner's gRPC service when
//! it needs the answer, over the command queue otherwise). Each command is one
//! transaction that moves the session through core's machine.

mod delete_project;
mod lineage;
pub(crate) mod regenerate;
mod render_edit;
mod retry;
mod revisit;
mod revisit_preview;
mod session;
mod submit;

pub(crate) use render_edit::render_edit;

use crate::engine::{Engine, PlannerError, parse_id};
use dialectic_core::ids::SessionId;
use dialectic_core::session::SessionEvent;
use dialectic_proto::v1::planner::planner_service_server::PlannerService;
use dialectic_proto::v1::planner::{
    DeleteProjectCommand, DeleteProjectResult, RegenerateDocumentCommand, RegenerateDocumentResult,
    RetryStageCommand, RetryStageResult, RevisitStageCommand, RevisitStageResult, SessionCommand,
    SessionCommandResult, SubmitStageResponsesCommand, SweepNowRequest, SweepNowResponse,
};
use dialectic_store::sessions::SessionRow;
use std::sync::Arc;
use tonic::{Request, Response, Status};
use tracing::Instrument;

pub(crate) struct Api {
    pub(crate) engine: Arc<Engine>,
}

fn answer(session: SessionRow) -> Response<SessionCommandResult> {
    Response::new(SessionCommandResult {
        session_id: session.id.to_string(),
        status: session.status,
    })
}

/// The span of one command, joined to the caller's trace.
fn command_span<T>(name: &'static str, request: &Request<T>, session_id: &str) -> tracing::Span {
    let span = tracing::info_span!("command", command = name, session_id = %session_id, trace_id = tracing::field::Empty);
    let traceparent = request
        .metadata()
        .get(dialectic_queue::TRACEPARENT_HEADER)
        .and_then(|v| v.to_str().ok());
    dialectic_telemetry::adopt_traceparent(&span, traceparent);
    span
}

#[tonic::async_trait]
impl PlannerService for Api {
    async fn sweep_now(
        &self,
        _request: Request<SweepNowRequest>,
    ) -> Result<Response<SweepNowResponse>, Status> {
        let report = self.engine.sweep().await?;
        Ok(Response::new(SweepNowResponse {
            expired_leases: report.expired_leases,
            retries_dispatched: report.retries_dispatched,
        }))
    }

    async fn pause(
        &self,
        request: Request<SessionCommand>,
    ) -> Result<Response<SessionCommandResult>, Status> {
        self.session_event(request, SessionEvent::Pause).await
    }

    async fn resume(
        &self,
        request: Request<SessionCommand>,
    ) -> Result<Response<SessionCommandResult>, Status> {
        self.session_event(request, SessionEvent::Resume).await
    }

    async fn cancel(
        &self,
        request: Request<SessionCommand>,
    ) -> Result<Response<SessionCommandResult>, Status> {
        self.session_event(request, SessionEvent::Cancel).await
    }

    async fn complete(
        &self,
        request: Request<SessionCommand>,
    ) -> Result<Response<SessionCommandResult>, Status> {
        self.session_event(request, SessionEvent::Complete).await
    }

    async fn submit_stage_responses(
        &self,
        request: Request<SubmitStageResponsesCommand>,
    ) -> Result<Response<SessionCommandResult>, Status> {
        let span = command_span(
            "submit_stage_responses",
            &request,
            &request.get_ref().session_id,
        );
        let session = submit::submit(&self.engine, request.into_inner())
            .instrument(span)
            .await?;
        Ok(answer(session))
    }

    async fn revisit_stage(
        &self,
        request: Request<RevisitStageCommand>,
    ) -> Result<Response<RevisitStageResult>, Status> {
        let span = command_span("revisit_stage", &request, &request.get_ref().session_id);
        let result = revisit::revisit(&self.engine, request.into_inner())
            .instrument(span)
            .await?;
        Ok(Response::new(result))
    }

    async fn regenerate_document(
        &self,
        request: Request<RegenerateDocumentCommand>,
    ) -> Result<Response<RegenerateDocumentResult>, Status> {
        let span = command_span(
            "regenerate_document",
            &request,
            &request.get_ref().session_id,
        );
        let result = regenerate::regenerate(&self.engine, request.into_inner())
            .instrument(span)
            .await?;
        Ok(Response::new(result))
    }

    async fn retry_stage(
        &self,
        request: Request<RetryStageCommand>,
    ) -> Result<Response<RetryStageResult>, Status> {
        let span = command_span("retry_stage", &request, &request.get_ref().session_id);
        let result = retry::retry(&self.engine, request.into_inner())
            .instrument(span)
            .await?;
        Ok(Response::new(result))
    }

    async fn delete_project(
        &self,
        request: Request<DeleteProjectCommand>,
    ) -> Result<Response<DeleteProjectResult>, Status> {
        let span = tracing::info_span!("command", command = "delete_project", project_id = %request.get_ref().project_id);
        let result = delete_project::delete(&self.engine, request.into_inner())
            .instrument(span)
            .await?;
        Ok(Response::new(result))
    }
}

impl Api {
    async fn session_event(
        &self,
        request: Request<SessionCommand>,
        event: SessionEvent,
    ) -> Result<Response<SessionCommandResult>, Status> {
        let session_id = request.get_ref().session_id.clone();
        let span = command_span(session::name(&event), &request, &session_id);
        let id = parse_id::<SessionId>(&session_id)?;
        let session = session::apply(&self.engine, id, event)
            .instrument(span)
            .await?;
        Ok(answer(session))
    }
}

/// A command's session, locked; NOT_FOUND when it does not exist.
pub(crate) async fn lock_session(
    unit: &mut crate::engine::Unit,
    id: SessionId,
) -> Result<SessionRow, PlannerError> {
    Ok(dialectic_store::sessions::lock_session(&mut unit.tx, id).await?)
}
