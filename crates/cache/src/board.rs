//! The blackboard's Redis copy (seed 004 §1): one list per session and entry
//! type, every list key tracked in the session's set so clearing deletes
//! exactly those keys (never a SCAN), and each new entry announced on the
//! session's channel. The seed pushed, tracked and announced in three calls,
//! so a crash between them left a list the clear could not find; here the
//! three are one MULTI. Postgres keeps the record: callers rebuild a list
//! whose length is not the recorded count.

use crate::{Cache, CacheError};
use dialectic_core::blackboard::{channel, list_key, tracking_key};
use redis::AsyncCommands;

const CLEAR: &str = crate::delete_tracked!();

impl Cache {
    /// Appends an entry (its JSON) to its list, tracks the list and announces
    /// the entry; returns the list's length afterwards.
    pub async fn board_push(
        &self,
        session_id: &str,
        entry_type: &str,
        body: &str,
    ) -> Result<u64, CacheError> {
        let key = list_key(session_id, entry_type);
        let mut conn = self.conn.clone();
        let (length,): (u64,) = redis::pipe()
            .atomic()
            .rpush(&key, body)
            .sadd(tracking_key(session_id), &key)
            .ignore()
            .publish(channel(session_id), body)
            .ignore()
            .query_async(&mut conn)
            .await?;
        Ok(length)
    }

    /// Replaces a list with the recorded entries (their JSON, oldest first).
    pub async fn board_replace(
        &self,
        session_id: &str,
        entry_type: &str,
        bodies: &[String],
    ) -> Result<(), CacheError> {
        let key = list_key(session_id, entry_type);
        let mut pipe = redis::pipe();
        pipe.atomic().del(&key).ignore();
        if !bodies.is_empty() {
            pipe.rpush(&key, bodies)
                .ignore()
                .sadd(tracking_key(session_id), &key)
                .ignore();
        }
        let mut conn = self.conn.clone();
        let _: () = pipe.query_async(&mut conn).await?;
        Ok(())
    }

    /// A list's entries (their JSON), oldest first.
    pub async fn board_list(
        &self,
        session_id: &str,
        entry_type: &str,
    ) -> Result<Vec<String>, CacheError> {
        let mut conn = self.conn.clone();
        Ok(conn.lrange(list_key(session_id, entry_type), 0, -1).await?)
    }

    /// Drops a session's whole copy through its tracking set; returns how
    /// many lists went.
    pub async fn board_clear(&self, session_id: &str) -> Result<u64, CacheError> {
        let mut conn = self.conn.clone();
        Ok(redis::cmd("EVAL")
            .arg(CLEAR)
            .arg(1)
            .arg(tracking_key(session_id))
            .query_async(&mut conn)
            .await?)
    }
}
