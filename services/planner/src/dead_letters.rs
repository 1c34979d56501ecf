//! Notes which session each dead letter holds up, for its notice (issue 55:
//! a session that cannot move says why). Reads `<prefix>.dead.notices`, the
//! dead-letter exchange's second queue, so it sees every dead letter — the
//! ones our consumers send there and the ones the broker moves itself (a
//! delivery limit, a reject) — without peeking at the dead queue, where a
//! peek would count as a delivery. Writes only the Redis note: the letter
//! stays in the dead queue for operators, and no job or session changes.

use dialectic_cache::Cache;
use dialectic_cache::dead_letters::DeadLetterNote;
use dialectic_core::ids::{JobId, SessionId};
use dialectic_queue::Delivery;
use dialectic_queue::dead::{DeadLetter, Subject, subject};
use dialectic_runtime::{Disposition, Handler};
use dialectic_store::{Store, StoreError, dead_letters};
use std::sync::{Arc, OnceLock};

pub(crate) struct DeadLetterNotes {
    pub store: Store,
    pub cache: Arc<OnceLock<Cache>>,
}

/// Why a letter could not be noted now (it is delivered again).
#[derive(Debug, thiserror::Error)]
enum NoteError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Cache(#[from] dialectic_cache::CacheError),
    #[error("redis is not connected yet")]
    NoCache,
}

#[async_trait::async_trait]
impl Handler for DeadLetterNotes {
    async fn handle(&self, delivery: &Delivery) -> Disposition {
        let letter = DeadLetter::from_delivery(delivery);
        match self.note(&letter).await {
            Ok(()) => Disposition::Ack,
            Err(e) => {
                tracing::warn!(id = %letter.id, error = %e, "a dead letter could not be noted; trying again");
                Disposition::Requeue
            }
        }
    }
}

impl DeadLetterNotes {
    async fn note(&self, letter: &DeadLetter) -> Result<(), NoteError> {
        let Some((session_id, note)) = self.whom(letter).await? else {
            tracing::info!(id = %letter.id, summary = %letter.summary, "a dead letter about no session");
            return Ok(());
        };
        let cache = self.cache.get().ok_or(NoteError::NoCache)?;
        cache
            .note_dead_letter(&session_id.to_string(), &note)
            .await?;
        tracing::warn!(id = %letter.id, %session_id, reason = %letter.reason, summary = %letter.summary, "a dead letter holds up a session");
        Ok(())
    }

    /// The session the letter holds up and its note; None when it is about
    /// no session (undecodable, an edit to render, a job or session gone).
    async fn whom(
        &self,
        letter: &DeadLetter,
    ) -> Result<Option<(SessionId, DeadLetterNote)>, StoreError> {
        let mut note = DeadLetterNote {
            letter_id: letter.id.clone(),
            routing_key: letter.routing_key.clone(),
            reason: letter.reason.clone(),
            summary: letter.summary.clone(),
            job_id: None,
            step_key: String::new(),
            step_name: String::new(),
            stage: String::new(),
            status: String::new(),
            attempt: 0,
            at_ms: chrono::Utc::now().timestamp_millis(),
        };
        match subject(&letter.body) {
            Some(Subject::Job(id)) => {
                let Ok(id) = JobId::parse(&id) else {
                    return Ok(None);
                };
                let Some(job) = dead_letters::letter_job(self.store.pool(), id).await? else {
                    return Ok(None);
                };
                note.job_id = Some(id.to_string());
                (note.step_key, note.step_name) = (job.step_key, job.step_name);
                (note.stage, note.status) = (job.stage_slug, job.status);
                note.attempt = job.attempt_count;
                Ok(Some((job.session_id, note)))
            }
            Some(Subject::Session(id)) => {
                let Ok(id) = SessionId::parse(&id) else {
                    return Ok(None);
                };
                let status = dead_letters::session_status(self.store.pool(), id).await?;
                Ok(status.map(|status| (id, DeadLetterNote { status, ..note })))
            }
            None => Ok(None),
        }
    }
}
