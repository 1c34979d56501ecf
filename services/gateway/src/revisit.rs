//! RevisitStage: seed 003's change impact applied to a session, by the planner.

use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_core::ids::{ModelId, SessionId, UserId};
use dialectic_core::revisit::Impact;
use dialectic_proto::v1::planner::RevisitStageCommand;
use dialectic_proto::v1::{
    ListSessionRevisionsRequest, ListSessionRevisionsResponse, RevisitImpact, RevisitPreview,
    RevisitStageRequest, RevisitStageResponse, SessionRevision,
};
use dialectic_store::{revisit, sessions};

impl Gateway {
    /// The session's revisit history (another user's session is NOT_FOUND).
    pub(crate) async fn session_revisions(
        &self,
        user: UserId,
        req: ListSessionRevisionsRequest,
    ) -> Result<ListSessionRevisionsResponse, GatewayError> {
        let session_id = SessionId::parse(&req.session_id)?;
        sessions::session_for_user(self.store.pool(), user, session_id).await?;
        let rows = revisit::revisions(self.store.pool(), session_id).await?;
        Ok(ListSessionRevisionsResponse {
            revisions: rows
                .into_iter()
                .map(|r| SessionRevision {
                    revision: u32::try_from(r.revision).unwrap_or(0),
                    stage_slug: r.stage_slug,
                    iteration: u32::try_from(r.iteration_number).unwrap_or(0),
                    impact: r.impact,
                    reason: r.reason.unwrap_or_default(),
                    needs_review: r.needs_review,
                    downstream_archived: r.downstream_archived,
                    created_at: Some(crate::convert::timestamp(r.created_at)),
                })
                .collect(),
        })
    }

    pub(crate) async fn revisit_stage(
        &self,
        user: UserId,
        req: RevisitStageRequest,
    ) -> Result<RevisitStageResponse, GatewayError> {
        let session_id = SessionId::parse(&req.session_id)?;
        // A dry run answers for every impact level: naming one is optional.
        let impact = match impact_of(&req) {
            Ok(impact) => Some(impact),
            Err(_) if req.dry_run && unnamed(&req) => None,
            Err(e) => return Err(e),
        };
        let stage = req.stage_slug.trim();
        if stage.is_empty() {
            return Err(GatewayError::bad(
                "stage_slug",
                "stage_slug names the earlier stage that changed",
            ));
        }
        let session = sessions::session_for_user(self.store.pool(), user, session_id).await?;
        let done = self
            .planner()
            .revisit_stage(tonic::Request::new(RevisitStageCommand {
                session_id: session.id.to_string(),
                stage_slug: stage.to_string(),
                impact: impact.map(Impact::as_str).unwrap_or_default().to_string(),
                reason: req.reason.trim().to_string(),
                dry_run: req.dry_run,
            }))
            .await
            .map_err(GatewayError::Planner)?
            .into_inner();
        if !req.dry_run {
            self.invalidate(session.project_id).await;
        }
        let session = sessions::session_for_user(self.store.pool(), user, session.id).await?;
        let mut previews = done.previews;
        self.name_models(&mut previews).await?;
        Ok(RevisitStageResponse {
            session: Some(self.session_view(session, false).await?),
            needs_review: done.needs_review,
            archived: done.archived,
            revision: done.revision,
            previews,
            diffs: done.diffs,
        })
    }

    /// Fills each previewed document's model name (the planner gives its id).
    async fn name_models(&self, previews: &mut [RevisitPreview]) -> Result<(), GatewayError> {
        let ids: Vec<ModelId> = previews
            .iter()
            .flat_map(|p| &p.archived)
            .filter_map(|d| d.model_id.parse().ok())
            .collect();
        let names = self.model_names(&ids).await?;
        for doc in previews.iter_mut().flat_map(|p| &mut p.archived) {
            if let Some(name) = doc.model_id.parse().ok().and_then(|id| names.get(&id)) {
                doc.model.clone_from(name);
            }
        }
        Ok(())
    }
}

/// Neither `impact_level` nor `impact` names a level.
fn unnamed(req: &RevisitStageRequest) -> bool {
    req.impact_level == i32::from(RevisitImpact::Unspecified) && req.impact.trim().is_empty()
}

/// The typed `impact_level`, or the older `impact` string when it is unspecified.
fn impact_of(req: &RevisitStageRequest) -> Result<Impact, GatewayError> {
    match RevisitImpact::try_from(req.impact_level) {
        Ok(RevisitImpact::Minor) => Ok(Impact::Minor),
        Ok(RevisitImpact::Moderate) => Ok(Impact::Moderate),
        Ok(RevisitImpact::Major) => Ok(Impact::Major),
        Ok(RevisitImpact::Unspecified) => {
            Impact::parse(&req.impact).map_err(|e| GatewayError::bad("impact", e.to_string()))
        }
        Err(_) => Err(GatewayError::bad(
            "impact_level",
            format!("impact_level {} is not a RevisitImpact", req.impact_level),
        )),
    }
}
