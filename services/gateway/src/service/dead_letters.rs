//! A session's dead letters in its notice: the ones the planner noted in
//! Redis (`dialectic_cache::dead_letters`) whose job has not moved on since,
//! or, for a command about the session, while the session stands where it
//! stood. A replay that gets the job claimed, a retry, or the job ending
//! some other way takes the letter out of the notice.

use super::Gateway;
use dialectic_cache::dead_letters::DeadLetterNote;
use dialectic_core::ids::JobId;
use dialectic_core::session::{DeadLetterWait, dead_letter_holds_job, dead_letter_notice};
use dialectic_store::dead_letters;
use dialectic_store::sessions::SessionRow;
use std::collections::HashMap;

impl Gateway {
    /// The dead letters that hold the session up, as a notice; empty when
    /// none do. Best effort: Redis or Postgres out of reach costs this
    /// notice, not the read.
    pub(super) async fn dead_letter_notice(&self, row: &SessionRow) -> String {
        let Ok(cache) = self.cache() else {
            return String::new();
        };
        let notes = match cache.dead_letters(&row.id.to_string()).await {
            Ok(notes) if notes.is_empty() => return String::new(),
            Ok(notes) => notes,
            Err(e) => {
                tracing::warn!(error = %e, "the session's dead letters could not be read");
                return String::new();
            }
        };
        let ids: Vec<JobId> = notes.iter().filter_map(note_job).collect();
        let now: HashMap<JobId, (String, i32)> = match dead_letters::job_states(
            self.store.pool(),
            row.id,
            &ids,
        )
        .await
        {
            Ok(states) => states.into_iter().map(|(id, s, a)| (id, (s, a))).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "the jobs of the session's dead letters could not be read");
                return String::new();
            }
        };
        let holding: Vec<DeadLetterWait> = notes
            .into_iter()
            .filter(|note| holds_up(note, row, &now))
            .map(wait)
            .collect();
        dead_letter_notice(&holding)
    }
}

fn note_job(note: &DeadLetterNote) -> Option<JobId> {
    JobId::parse(note.job_id.as_deref()?).ok()
}

fn holds_up(note: &DeadLetterNote, row: &SessionRow, now: &HashMap<JobId, (String, i32)>) -> bool {
    match (&note.job_id, note_job(note)) {
        (None, _) => note.status == row.status,
        (Some(_), None) => false,
        (Some(_), Some(job)) => now.get(&job).is_some_and(|(status, attempt)| {
            dead_letter_holds_job((&note.status, note.attempt), (status, *attempt))
        }),
    }
}

fn wait(note: DeadLetterNote) -> DeadLetterWait {
    DeadLetterWait {
        letter_id: note.letter_id,
        routing_key: note.routing_key,
        reason: note.reason,
        summary: note.summary,
        step_key: note.step_key,
        step_name: note.step_name,
        stage: note.stage,
    }
}
