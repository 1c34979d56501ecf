//! RetryStage: a stage's failed jobs run again. The gateway checks the
//! caller owns the session and names a model that exists; the planner puts
//! the jobs back (it owns job state) and the session goes on by itself.

use crate::convert;
use crate::error::GatewayError;
use crate::service::{Gateway, optional};
use dialectic_core::ids::{SessionId, UserId};
use dialectic_proto::v1::planner::RetryStageCommand;
use dialectic_proto::v1::{RetryStageRequest, RetryStageResponse};
use dialectic_store::{models, sessions};

impl Gateway {
    pub(crate) async fn retry_stage(
        &self,
        user: UserId,
        req: RetryStageRequest,
    ) -> Result<RetryStageResponse, GatewayError> {
        let session_id = SessionId::parse(&req.session_id)?;
        let session = sessions::session_for_user(self.store.pool(), user, session_id).await?;
        let model = match optional(&req.model) {
            Some(name) => self.active_model(name).await?,
            None => String::new(),
        };
        let done = self
            .planner()
            .retry_stage(tonic::Request::new(RetryStageCommand {
                session_id: session.id.to_string(),
                stage_slug: optional(&req.stage_slug).unwrap_or_default().to_string(),
                user_id: user.to_string(),
                model,
            }))
            .await
            .map_err(GatewayError::Planner)?
            .into_inner();
        self.invalidate(session.project_id).await;
        let session = sessions::session_for_user(self.store.pool(), user, session.id).await?;
        Ok(RetryStageResponse {
            session: Some(self.session_view(session, true).await?),
            stage_slug: done.stage_slug,
            retried_job_ids: done.retried_job_ids,
            reopened_jobs: done.reopened_jobs,
        })
    }

    /// The api identifier of the active model `name` names (by identifier or
    /// id), as StartSession resolves its models.
    async fn active_model(&self, name: &str) -> Result<String, GatewayError> {
        let active: Vec<_> = models::active_models(self.store.pool())
            .await?
            .into_iter()
            .map(|m| (m.id, m.api_identifier))
            .collect();
        let unknown = |name: String| {
            GatewayError::bad(
                "model",
                format!("unknown model {name:?}; see ListModels for the available ones"),
            )
        };
        let id = convert::resolve_models(&[name.to_string()], &active)
            .map_err(unknown)?
            .into_iter()
            .next()
            .ok_or_else(|| unknown(name.to_string()))?;
        active
            .into_iter()
            .find(|(m, _)| *m == id)
            .map(|(_, api)| api)
            .ok_or_else(|| unknown(name.to_string()))
    }
}
