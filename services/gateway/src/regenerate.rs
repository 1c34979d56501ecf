//! RegenerateDocument: write one document of a finished stage again. The
//! gateway finds the document and checks the caller owns it; the planner
//! supersedes the jobs that wrote it and dispatches the new one (its
//! `commands::regenerate`); the renderer archives the old document when the
//! new one renders (see `dialectic_store::regenerate`).

use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_core::error::Reason;
use dialectic_core::ids::{ContributionId, JobId, ModelId, ResourceId, SessionId, UserId};
use dialectic_core::job::JobType;
use dialectic_core::session::{SessionStatus, waits_right_after};
use dialectic_proto::v1::planner::RegenerateDocumentCommand;
use dialectic_proto::v1::{RegenerateDocumentRequest, RegenerateDocumentResponse};
use dialectic_store::regenerate::{self, RegenerationRow};
use dialectic_store::resources::ResourceRow;
use dialectic_store::sessions::{self, SessionRow};
use dialectic_store::{contributions, jobs, stages};
use std::collections::HashMap;

/// Longest client request id accepted (it is stored and compared, never parsed).
const MAX_REQUEST_ID: usize = 200;

fn required<'a>(value: &'a str, field: &'static str) -> Result<&'a str, GatewayError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(GatewayError::bad(field, format!("{field} is required")));
    }
    Ok(value)
}

/// A stage's documents are regenerated while the session waits for the user
/// right after that stage: at `pending_<next stage>`, or at review after the
/// last. Checked here for a clear early answer; the planner checks it again
/// under the session's lock.
fn waits_after(
    session: &SessionRow,
    stage: &str,
    next_stage: Option<&str>,
) -> Result<(), GatewayError> {
    let next = next_stage.map(str::to_string);
    if waits_right_after(&session.session_status()?, &next) {
        return Ok(());
    }
    let when = match next_stage {
        Some(next) => SessionStatus::Pending(next.to_string()),
        None => SessionStatus::IterationCompletePendingReview,
    };
    Err(GatewayError::refused(
        Reason::SessionNotAtReview,
        format!(
            "session is {}; a document of {stage} is regenerated while the session waits for you right after that stage ({when})",
            session.status
        ),
    ))
}

/// The document a call names, to compare with an earlier call's.
struct Asked<'a> {
    session_id: SessionId,
    stage: &'a str,
    model_id: ModelId,
    document_key: &'a str,
}

/// A request's fields, checked before anything is read.
struct Checked<'a> {
    session_id: SessionId,
    stage: &'a str,
    model: &'a str,
    document_key: &'a str,
    request_id: Option<&'a str>,
    resource: Option<ResourceId>,
}

fn checked(req: &RegenerateDocumentRequest) -> Result<Checked<'_>, GatewayError> {
    let request_id = Some(req.client_request_id.trim()).filter(|r| !r.is_empty());
    if request_id.is_some_and(|r| r.len() > MAX_REQUEST_ID) {
        return Err(GatewayError::bad(
            "client_request_id",
            format!("client_request_id may hold at most {MAX_REQUEST_ID} bytes"),
        ));
    }
    let resource = match req.resource_id.trim() {
        "" => None,
        id => Some(ResourceId::parse(id)?),
    };
    Ok(Checked {
        session_id: SessionId::parse(&req.session_id)?,
        stage: required(&req.stage_slug, "stage_slug")?,
        model: required(&req.model, "model")?,
        document_key: required(&req.document_key, "document_key")?,
        request_id,
        resource,
    })
}

/// The session's model the request names, by id or by name.
fn session_model(
    session: &SessionRow,
    names: &HashMap<ModelId, String>,
    model: &str,
) -> Result<ModelId, GatewayError> {
    session
        .selected_model_ids
        .iter()
        .copied()
        .find(|id| id.to_string() == model || names.get(id).is_some_and(|n| n == model))
        .ok_or_else(|| GatewayError::not_found("model", format!("{model} in this session")))
}

impl Gateway {
    pub(crate) async fn regenerate_document(
        &self,
        user: UserId,
        req: RegenerateDocumentRequest,
    ) -> Result<RegenerateDocumentResponse, GatewayError> {
        let ask = checked(&req)?;
        let pool = self.store.pool();
        let session = sessions::session_for_user(pool, user, ask.session_id).await?;
        let names = self.model_names(&session.selected_model_ids).await?;
        let model_id = session_model(&session, &names, ask.model)?;
        let asked = Asked {
            session_id: session.id,
            stage: ask.stage,
            model_id,
            document_key: ask.document_key,
        };
        if let Some(request_id) = ask.request_id
            && let Some(earlier) = regenerate::by_request(pool, user, request_id).await?
        {
            return self.earlier_answer(user, earlier, &asked).await;
        }
        let stage_row = stages::stage_in_process(pool, session.id, ask.stage).await?;
        // Checked first for a clear answer, and again under the session's lock.
        waits_after(&session, ask.stage, stage_row.next_stage_slug.as_deref())?;
        let doc = self.named_document(&session, &ask, model_id).await?;
        let (identity, template) = self.writer_of(&doc, ask.document_key).await?;
        let done = self
            .planner()
            .regenerate_document(tonic::Request::new(RegenerateDocumentCommand {
                session_id: session.id.to_string(),
                user_id: user.to_string(),
                stage_slug: ask.stage.to_string(),
                model_id: model_id.to_string(),
                document_key: ask.document_key.to_string(),
                resource_id: doc.id.to_string(),
                document_identity: identity.to_string(),
                template_job_id: template.to_string(),
                client_request_id: ask.request_id.unwrap_or_default().to_string(),
                model_name: names.get(&model_id).cloned().unwrap_or_default(),
            }))
            .await
            .map_err(GatewayError::Planner)?
            .into_inner();
        if !done.created {
            return self.lost_race(user, ask.request_id, &asked).await;
        }
        self.invalidate(session.project_id).await;
        let row = sessions::session_for_user(pool, user, session.id).await?;
        Ok(RegenerateDocumentResponse {
            regeneration_id: done.regeneration_id,
            job_id: done.job_id,
            superseded_job_ids: done.superseded_job_ids,
            session: Some(self.session_view(row, false).await?),
            created: true,
        })
    }

    /// The one current document the request names in this iteration (by
    /// `resource_id` when the model wrote several of that key).
    async fn named_document(
        &self,
        session: &SessionRow,
        ask: &Checked<'_>,
        model_id: ModelId,
    ) -> Result<ResourceRow, GatewayError> {
        let (stage, document_key, model) = (ask.stage, ask.document_key, ask.model);
        let iteration = session.iteration_count.max(1);
        let mut documents = regenerate::current_documents(
            self.store.pool(),
            session.id,
            stage,
            iteration,
            model_id,
            document_key,
        )
        .await?;
        if let Some(resource) = ask.resource {
            documents.retain(|d| d.id == resource);
        }
        match documents.len() {
            0 => Err(GatewayError::not_found(
                "document",
                format!("{document_key} of model {model} in stage {stage} (iteration {iteration})"),
            )),
            1 => Ok(documents.remove(0)),
            n => Err(GatewayError::bad(
                "resource_id",
                format!(
                    "model {model} wrote {n} {document_key} documents in {stage}; name one with resource_id (see ListStageDocuments)"
                ),
            )),
        }
    }

    /// The document's first chunk and the recipe step's EXECUTE job that
    /// wrote it: what the planner runs again. Anything else is refused.
    async fn writer_of(
        &self,
        doc: &ResourceRow,
        document_key: &str,
    ) -> Result<(ContributionId, JobId), GatewayError> {
        let not_regenerable = || {
            GatewayError::refused(
                Reason::DocumentNotRegenerable,
                format!(
                    "document {document_key} was not written by a recipe step's EXECUTE job, so there is nothing to run again"
                ),
            )
        };
        let pool = self.store.pool();
        let identity = doc.source_contribution_id.ok_or_else(not_regenerable)?;
        let root = contributions::contribution(pool, identity).await?;
        let template = jobs::get(pool, root.job_id.ok_or_else(not_regenerable)?).await?;
        if template.job_type()? != JobType::Execute || template.parent_job_id.is_none() {
            return Err(not_regenerable());
        }
        Ok((identity, template.id))
    }

    /// The planner created nothing: a concurrent call with the same request
    /// id won the race, and its answer is this call's too.
    async fn lost_race(
        &self,
        user: UserId,
        request_id: Option<&str>,
        asked: &Asked<'_>,
    ) -> Result<RegenerateDocumentResponse, GatewayError> {
        let earlier = match request_id {
            Some(r) => regenerate::by_request(self.store.pool(), user, r).await?,
            None => None,
        };
        match earlier {
            Some(earlier) => self.earlier_answer(user, earlier, asked).await,
            None => Err(GatewayError::unavailable(
                Reason::ConcurrentRegeneration,
                "a concurrent regeneration won; try again",
            )),
        }
    }

    /// The answer of an earlier call with the same client request id, which
    /// must have asked for the same document.
    async fn earlier_answer(
        &self,
        user: UserId,
        earlier: RegenerationRow,
        asked: &Asked<'_>,
    ) -> Result<RegenerateDocumentResponse, GatewayError> {
        let session_id = asked.session_id;
        if earlier.session_id != session_id
            || earlier.stage_slug != asked.stage
            || earlier.model_id != Some(asked.model_id)
            || earlier.document_key != asked.document_key
        {
            return Err(GatewayError::bad(
                "client_request_id",
                format!(
                    "client_request_id {} was used for another regeneration",
                    earlier.client_request_id.unwrap_or_default()
                ),
            ));
        }
        let row = sessions::session_for_user(self.store.pool(), user, session_id).await?;
        Ok(RegenerateDocumentResponse {
            regeneration_id: earlier.id.to_string(),
            job_id: earlier.new_job_id.to_string(),
            superseded_job_ids: earlier
                .superseded_job_ids
                .iter()
                .map(ToString::to_string)
                .collect(),
            session: Some(self.session_view(row, false).await?),
            created: false,
        })
    }
}
