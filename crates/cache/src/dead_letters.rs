//! Dead letters per session: the planner reads a copy of every dead letter
//! (`<prefix>.dead.notices`) and notes here, in `session:{id}:dead_letters`
//! (a hash by letter id), the ones about a job or a command of the session,
//! with the job's status and attempt at that moment. The gateway names those
//! whose job has not moved on since in the session's notice. The letters
//! themselves stay in the dead queue; losing this hash loses only the notice.

use crate::{Cache, CacheError};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

/// How long a session's notes outlive its last dead letter: a letter nobody
/// replayed for this long no longer reaches its notice (it stays listed by
/// `dialectic admin dlq list`).
pub const DEAD_LETTER_NOTE_TTL_SECS: i64 = 30 * 24 * 3600;

pub fn dead_letters_key(session_id: &str) -> String {
    format!("session:{session_id}:dead_letters")
}

/// One dead letter that held up a session, as noted when it died.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterNote {
    /// Its id in `dialectic admin dlq list` (and `replay`).
    pub letter_id: String,
    pub routing_key: String,
    pub reason: String,
    pub summary: String,
    /// The job it dispatched or reported on; None for a session command.
    #[serde(default)]
    pub job_id: Option<String>,
    #[serde(default)]
    pub step_key: String,
    #[serde(default)]
    pub step_name: String,
    #[serde(default)]
    pub stage: String,
    /// The job's status (or, for a session command, the session's) and the
    /// job's attempt count when it was noted: it holds the session up while
    /// they stay so.
    pub status: String,
    #[serde(default)]
    pub attempt: i32,
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
}

impl Cache {
    /// Notes `note` for `session_id`; the same letter dying again replaces
    /// its earlier note.
    pub async fn note_dead_letter(
        &self,
        session_id: &str,
        note: &DeadLetterNote,
    ) -> Result<(), CacheError> {
        let key = dead_letters_key(session_id);
        let mut pipe = redis::pipe();
        pipe.hset(&key, &note.letter_id, serde_json::to_string(note)?)
            .ignore()
            .expire(&key, DEAD_LETTER_NOTE_TTL_SECS)
            .ignore();
        let mut conn = self.conn.clone();
        let _: () = pipe.query_async(&mut conn).await?;
        Ok(())
    }

    /// The session's noted dead letters, oldest first; a note that does not
    /// parse is skipped, as a notice is no reason to fail a read.
    pub async fn dead_letters(&self, session_id: &str) -> Result<Vec<DeadLetterNote>, CacheError> {
        let mut conn = self.conn.clone();
        let values: Vec<String> = conn.hvals(dead_letters_key(session_id)).await?;
        let mut notes: Vec<DeadLetterNote> = values
            .iter()
            .filter_map(|v| serde_json::from_str(v).ok())
            .collect();
        notes.sort_by(|a, b| (a.at_ms, &a.letter_id).cmp(&(b.at_ms, &b.letter_id)));
        Ok(notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_reads_back_from_its_stored_form() {
        let stored = r#"{"letter_id":"ab","routing_key":"job.plan","reason":"lost","summary":"job dispatch j1","job_id":"j1","status":"pending","at_ms":5}"#;
        let note: DeadLetterNote = serde_json::from_str(stored).expect("parses");
        assert_eq!(
            (note.job_id.as_deref(), note.attempt, note.step_key.as_str()),
            (Some("j1"), 0, "")
        );
        assert_eq!(dead_letters_key("s1"), "session:s1:dead_letters");
    }
}
