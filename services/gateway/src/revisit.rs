//! RevisitStage: seed 003's change impact applied to a session.

use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_core::ids::SessionId;
use dialectic_core::revisit::{Impact, archived_name};
use dialectic_core::session::SessionStatus;
use dialectic_proto::v1::{RevisitStageRequest, RevisitStageResponse};
use dialectic_store::revisit::{self, NewRevision};
use dialectic_store::{StoreError, outbox, records};
use uuid::Uuid;

impl Gateway {
    pub(crate) async fn revisit_stage(
        &self,
        user: Uuid,
        req: RevisitStageRequest,
    ) -> Result<RevisitStageResponse, GatewayError> {
        let session_id = SessionId::parse(&req.session_id)?;
        let impact =
            Impact::parse(&req.impact).map_err(|e| GatewayError::InvalidArgument(e.to_string()))?;
        let stage = req.stage_slug.trim();
        if stage.is_empty() {
            return Err(GatewayError::InvalidArgument(
                "stage_slug names the earlier stage that changed".into(),
            ));
        }
        let reason = req.reason.trim();
        records::session_for_user(self.store.pool(), user, session_id.as_uuid()).await?;
        let mut tx = self.store.begin().await?;
        let row = records::lock_session(&mut tx, session_id.as_uuid()).await?;
        let stage_row = records::stage_in_process(&mut *tx, row.id, stage).await?;
        let after = revisit::stages_after(&mut tx, row.id, stage).await?;
        // The later stages this iteration has already run: up to where the
        // session waits now (all of them at review).
        let reached: Vec<String> = match row.session_status()? {
            SessionStatus::IterationCompletePendingReview => after.clone(),
            SessionStatus::Pending(next) if after.contains(&next) => {
                after.iter().take_while(|s| **s != next).cloned().collect()
            }
            SessionStatus::Pending(_) => {
                return Err(GatewayError::FailedPrecondition(format!(
                    "stage {stage} has not completed in this iteration yet (session is {})",
                    row.status
                )));
            }
            _ => {
                return Err(GatewayError::FailedPrecondition(format!(
                    "session is {}; a stage is revisited while the session waits for you (pending_<stage> or review)",
                    row.status
                )));
            }
        };
        let unfinished = revisit::unfinished_jobs(&mut tx, row.id).await?;
        if unfinished > 0 {
            return Err(GatewayError::FailedPrecondition(format!(
                "{unfinished} job(s) of this session are not finished (e.g. still rendering); revisit once they are"
            )));
        }
        let iteration = row.iteration_count.max(1);
        if !impact.rewinds() {
            revisit::record(
                &mut tx,
                &NewRevision {
                    session_id: row.id,
                    revision: row.revision,
                    stage_slug: stage,
                    iteration,
                    impact: impact.as_str(),
                    reason: (!reason.is_empty()).then_some(reason),
                    needs_review: &reached,
                    archived: &[],
                },
            )
            .await?;
            tx.commit().await.map_err(StoreError::from)?;
            return Ok(RevisitStageResponse {
                session: Some(self.session_view(row.clone(), false).await?),
                needs_review: reached,
                archived: Vec::new(),
                revision: u32::try_from(row.revision).unwrap_or(0),
            });
        }
        let Some(next) = stage_row.next_stage_slug.clone() else {
            return Err(GatewayError::FailedPrecondition(format!(
                "{stage} is the last stage; nothing after it depends on it"
            )));
        };
        let version = row.revision + 1;
        let documents = revisit::documents(&mut tx, row.id, iteration, &reached).await?;
        // Copies first: if the transaction then fails, an extra copy is harmless.
        let mut renamed = Vec::with_capacity(documents.len());
        let mut archived = Vec::with_capacity(documents.len());
        for doc in &documents {
            let name = archived_name(&doc.file_name, u32::try_from(version).unwrap_or(1));
            let key = format!("{}/{name}", doc.storage_path);
            let body = self.blob.get(&doc.key()).await?;
            self.blob.put(&key, body, &doc.mime_type).await?;
            renamed.push((doc.id, name));
            archived.push(key);
        }
        if impact.archives() {
            revisit::archive(&mut tx, row.id, iteration, &reached, &renamed).await?;
        }
        let updated = revisit::rewind(&mut tx, row.id, &next).await?;
        if impact.restarts_at_once() {
            outbox::enqueue(
                &mut tx,
                dialectic_queue::keys::PLANNER_COMMAND,
                &dialectic_queue::start_stage_command(
                    &row.id.to_string(),
                    &next,
                    u32::try_from(iteration).unwrap_or(1),
                ),
                dialectic_telemetry::current_traceparent().as_deref(),
            )
            .await?;
        }
        revisit::record(
            &mut tx,
            &NewRevision {
                session_id: row.id,
                revision: version,
                stage_slug: stage,
                iteration,
                impact: impact.as_str(),
                reason: (!reason.is_empty()).then_some(reason),
                needs_review: &[],
                archived: &archived,
            },
        )
        .await?;
        tx.commit().await.map_err(StoreError::from)?;
        // The current names now hold nothing the pipeline uses; the re-run writes them again.
        for doc in &documents {
            if let Err(e) = self.blob.delete(&doc.key()).await {
                tracing::warn!(key = %doc.key(), error = %e, "could not remove an archived document's old object");
            }
        }
        self.invalidate(row.project_id).await;
        Ok(RevisitStageResponse {
            session: Some(self.session_view(updated, false).await?),
            needs_review: Vec::new(),
            archived,
            revision: u32::try_from(version).unwrap_or(0),
        })
    }
}
