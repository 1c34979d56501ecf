//! RegenerateDocument: write one document of a finished stage again. The jobs
//! that wrote it are superseded in the same transaction that inserts and
//! dispatches the new job; the renderer archives the old document when the new
//! one renders (see `dialectic_store::regenerate`).

use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_cache::ProgressEvent;
use dialectic_core::ids::{ResourceId, SessionId};
use dialectic_core::job::{JobEvent, JobStatus, JobType, REGENERATION_KEY_MARK, transition};
use dialectic_core::session::SessionStatus;
use dialectic_proto::v1::{RegenerateDocumentRequest, RegenerateDocumentResponse};
use dialectic_store::records::SessionRow;
use dialectic_store::regenerate::{self, NewRegeneration, RegenerationRow};
use dialectic_store::{StoreError, jobs, outbox, records};
use uuid::Uuid;

/// Longest client request id accepted (it is stored and compared, never parsed).
const MAX_REQUEST_ID: usize = 200;

/// Attempts a regeneration gets when the original job's budget cannot be read.
const DEFAULT_ATTEMPTS: i32 = 3;

fn required<'a>(value: &'a str, what: &str) -> Result<&'a str, GatewayError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(GatewayError::InvalidArgument(format!("{what} is required")));
    }
    Ok(value)
}

/// A stage's documents are regenerated while the session waits for the user
/// right after that stage: at `pending_<next stage>`, or at review after the last.
fn waits_after(
    session: &SessionRow,
    stage: &str,
    next_stage: Option<&str>,
) -> Result<(), GatewayError> {
    let waits = match (session.session_status()?, next_stage) {
        (SessionStatus::Pending(next), Some(after)) => next == after,
        (SessionStatus::IterationCompletePendingReview, None) => true,
        _ => false,
    };
    if waits {
        return Ok(());
    }
    let when = match next_stage {
        Some(next) => format!("pending_{next}"),
        None => "iteration_complete_pending_review".into(),
    };
    Err(GatewayError::FailedPrecondition(format!(
        "session is {}; a document of {stage} is regenerated while the session waits for you right after that stage ({when})",
        session.status
    )))
}

/// The document a call names, to compare with an earlier call's.
struct Asked<'a> {
    session_id: Uuid,
    stage: &'a str,
    model_id: Uuid,
    document_key: &'a str,
}

impl Gateway {
    pub(crate) async fn regenerate_document(
        &self,
        user: Uuid,
        req: RegenerateDocumentRequest,
    ) -> Result<RegenerateDocumentResponse, GatewayError> {
        let session_id = SessionId::parse(&req.session_id)?;
        let stage = required(&req.stage_slug, "stage_slug")?;
        let model = required(&req.model, "model (api_identifier or id)")?;
        let document_key = required(&req.document_key, "document_key")?;
        let request_id = Some(req.client_request_id.trim()).filter(|r| !r.is_empty());
        if request_id.is_some_and(|r| r.len() > MAX_REQUEST_ID) {
            return Err(GatewayError::InvalidArgument(format!(
                "client_request_id may hold at most {MAX_REQUEST_ID} bytes"
            )));
        }
        let resource = match req.resource_id.trim() {
            "" => None,
            id => Some(ResourceId::parse(id)?.as_uuid()),
        };
        let pool = self.store.pool();
        let session = records::session_for_user(pool, user, session_id.as_uuid()).await?;
        let names = self.model_names(&session.selected_model_ids).await?;
        let model_id = session
            .selected_model_ids
            .iter()
            .copied()
            .find(|id| id.to_string() == model || names.get(id).is_some_and(|n| n == model))
            .ok_or_else(|| GatewayError::NotFound(format!("model {model} in this session")))?;
        let asked = Asked {
            session_id: session.id,
            stage,
            model_id,
            document_key,
        };
        if let Some(request_id) = request_id
            && let Some(earlier) = regenerate::by_request(pool, user, request_id).await?
        {
            return self.earlier_answer(user, earlier, &asked).await;
        }
        let stage_row = records::stage_in_process(pool, session.id, stage).await?;
        // Checked first for a clear answer, and again under the session's lock.
        waits_after(&session, stage, stage_row.next_stage_slug.as_deref())?;
        let iteration = session.iteration_count.max(1);
        let mut documents = regenerate::current_documents(
            pool,
            session.id,
            stage,
            iteration,
            model_id,
            document_key,
        )
        .await?;
        if let Some(resource) = resource {
            documents.retain(|d| d.id == resource);
        }
        let doc = match documents.len() {
            0 => {
                return Err(GatewayError::NotFound(format!(
                    "document {document_key} of model {model} in stage {stage} (iteration {iteration})"
                )));
            }
            1 => documents.remove(0),
            n => {
                return Err(GatewayError::InvalidArgument(format!(
                    "model {model} wrote {n} {document_key} documents in {stage}; name one with resource_id (see ListStageDocuments)"
                )));
            }
        };
        let not_regenerable = || {
            GatewayError::FailedPrecondition(format!(
                "document {document_key} was not written by a recipe step's EXECUTE job, so there is nothing to run again"
            ))
        };
        let identity = doc.source_contribution_id.ok_or_else(not_regenerable)?;
        let root = records::contribution(pool, identity).await?;
        let template = jobs::get(pool, root.job_id.ok_or_else(not_regenerable)?).await?;
        if template.job_type()? != JobType::Execute || template.parent_job_id.is_none() {
            return Err(not_regenerable());
        }

        let mut tx = self.store.begin().await?;
        // Jobs before the session: the planner locks a job, then its parent, then
        // the session, and so does this.
        let slot = match regenerate::lock_slot(&mut tx, template.id, identity).await {
            // The planner kept adding jobs to the document: a retry will see them settle.
            Err(StoreError::Invalid(reason)) => return Err(GatewayError::Unavailable(reason)),
            other => other?,
        };
        let row = records::lock_session(&mut tx, session.id).await?;
        waits_after(&row, stage, stage_row.next_stage_slug.as_deref())?;
        if row.iteration_count != session.iteration_count {
            return Err(GatewayError::FailedPrecondition(
                "the session began another iteration meanwhile".into(),
            ));
        }
        let started = regenerate::live_root_jobs(&mut tx, row.id).await?;
        if !started.is_empty() {
            return Err(GatewayError::FailedPrecondition(format!(
                "stage {} has already started (its responses were submitted); the documents it reads can no longer be regenerated",
                started.join(", ")
            )));
        }
        // A concurrent call with the same request id may have committed while
        // this one waited for the locks.
        if let Some(request_id) = request_id
            && let Some(earlier) = regenerate::by_request(&mut *tx, user, request_id).await?
        {
            drop(tx);
            return self.earlier_answer(user, earlier, &asked).await;
        }
        // A render that committed before the locks may have replaced the document.
        let still_current = regenerate::current_documents(
            &mut *tx,
            session.id,
            stage,
            iteration,
            model_id,
            document_key,
        )
        .await?
        .iter()
        .any(|d| d.id == doc.id);
        if !still_current {
            return Err(GatewayError::FailedPrecondition(format!(
                "document {document_key} changed while this call waited; list the stage's documents and try again"
            )));
        }

        // Jobs to supersede now, and every job of the document that is (or is
        // about to be) superseded: an earlier regeneration may have superseded
        // the writer of the document still current, which this one replaces too.
        let mut superseding = Vec::new();
        let mut superseded = Vec::new();
        for job in &slot {
            let status = job.status()?;
            if transition(status, JobEvent::Superseded).is_ok() {
                superseding.push(job.id);
                superseded.push(job.id);
            } else if status == JobStatus::Superseded {
                superseded.push(job.id);
            }
        }
        let writers = slot.iter().filter(|j| {
            j.job_type == JobType::Execute.as_str() && j.target_contribution_id.is_none()
        });
        // Files are named by attempt: the new job's attempts continue after every
        // earlier writer's, so it never writes (or, losing, deletes) their paths.
        let attempt_base = writers.map(|j| j.attempt_count).max().unwrap_or(0);
        let base_key = template
            .job_key
            .split(REGENERATION_KEY_MARK)
            .next()
            .unwrap_or(&template.job_key)
            .to_string();
        let budget = slot
            .iter()
            .find(|j| j.job_key == base_key)
            .map_or(DEFAULT_ATTEMPTS, |j| j.max_retries.max(1));
        let regeneration_id = Uuid::now_v7();
        let job_id = Uuid::now_v7();
        regenerate::insert_job(
            &mut tx,
            template.id,
            job_id,
            &format!("{base_key}{REGENERATION_KEY_MARK}{regeneration_id}"),
            attempt_base,
            budget,
        )
        .await?;
        regenerate::supersede(&mut tx, &superseding, regeneration_id).await?;
        let inserted = regenerate::insert(
            &mut tx,
            &NewRegeneration {
                id: regeneration_id,
                session_id: row.id,
                user_id: user,
                client_request_id: request_id,
                stage_slug: stage,
                iteration,
                model_id,
                document_key,
                resource_id: doc.id,
                new_job_id: job_id,
                superseded: &superseded,
            },
        )
        .await?;
        if !inserted {
            // The unique request id lost a race to a concurrent identical call.
            drop(tx);
            let earlier = match request_id {
                Some(r) => regenerate::by_request(pool, user, r).await?,
                None => None,
            };
            return match earlier {
                Some(earlier) => self.earlier_answer(user, earlier, &asked).await,
                None => Err(GatewayError::Unavailable(
                    "a concurrent regeneration won; try again".into(),
                )),
            };
        }
        outbox::enqueue(
            &mut tx,
            JobType::Execute.dispatch_routing_key(),
            &dialectic_queue::job_dispatch(&job_id.to_string()),
            dialectic_telemetry::current_traceparent().as_deref(),
        )
        .await?;
        tx.commit().await.map_err(StoreError::from)?;
        tracing::info!(%regeneration_id, %job_id, superseded = superseding.len(), document_key, stage, "document regeneration started");
        if let Some(cache) = self.cache.get() {
            let event = ProgressEvent {
                session_id: row.id.to_string(),
                kind: "document_regeneration_started".into(),
                session_status: row.status.clone(),
                stage_slug: stage.to_string(),
                job_id: job_id.to_string(),
                job_type: JobType::Execute.as_str().into(),
                document_key: document_key.to_string(),
                model: names.get(&model_id).cloned().unwrap_or_default(),
                message: format!(
                    "regenerating {document_key}; {} earlier job(s) superseded",
                    superseding.len()
                ),
                at_ms: chrono::Utc::now().timestamp_millis(),
                ..Default::default()
            };
            if let Err(e) = cache.publish(&event).await {
                tracing::warn!(error = %e, "could not publish progress");
            }
        }
        self.invalidate(row.project_id).await;
        Ok(RegenerateDocumentResponse {
            regeneration_id: regeneration_id.to_string(),
            job_id: job_id.to_string(),
            superseded_job_ids: superseded.iter().map(Uuid::to_string).collect(),
            session: Some(self.session_view(row, false).await?),
            created: true,
        })
    }

    /// The answer of an earlier call with the same client request id, which
    /// must have asked for the same document.
    async fn earlier_answer(
        &self,
        user: Uuid,
        earlier: RegenerationRow,
        asked: &Asked<'_>,
    ) -> Result<RegenerateDocumentResponse, GatewayError> {
        let session_id = asked.session_id;
        if earlier.session_id != session_id
            || earlier.stage_slug != asked.stage
            || earlier.model_id != Some(asked.model_id)
            || earlier.document_key != asked.document_key
        {
            return Err(GatewayError::InvalidArgument(format!(
                "client_request_id {} was used for another regeneration",
                earlier.client_request_id.unwrap_or_default()
            )));
        }
        let row = records::session_for_user(self.store.pool(), user, session_id).await?;
        Ok(RegenerateDocumentResponse {
            regeneration_id: earlier.id.to_string(),
            job_id: earlier.new_job_id.to_string(),
            superseded_job_ids: earlier
                .superseded_job_ids
                .iter()
                .map(Uuid::to_string)
                .collect(),
            session: Some(self.session_view(row, false).await?),
            created: false,
        })
    }
}
