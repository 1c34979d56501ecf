//! Jobs waiting for a model's call slot, per session: while a job waits its
//! row says only `processing`, the same as while its model answers, so the
//! executor notes the wait here for the session's notice. Each entry lives
//! in `session:{id}:slot_waits` with its expiry as score: a waiter refreshes
//! it and removes it when the wait ends; one that dies leaves an entry that
//! readers ignore once it expires. Losing the set loses only the notice.

use crate::{Cache, CacheError};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

pub fn slot_waits_key(session_id: &str) -> String {
    format!("session:{session_id}:slot_waits")
}

/// One job waiting for a call slot of `model`, capped at `max_concurrency`.
/// Serialized as the set's member, so the same wait is the same member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotWaiter {
    pub job_id: String,
    pub model: String,
    pub max_concurrency: u32,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Cache {
    /// Notes (or refreshes) that `waiter` waits, for `ttl_ms` from now.
    pub async fn slot_wait_begun(
        &self,
        session_id: &str,
        waiter: &SlotWaiter,
        ttl_ms: u64,
    ) -> Result<(), CacheError> {
        let key = slot_waits_key(session_id);
        let member = serde_json::to_string(waiter)?;
        let mut pipe = redis::pipe();
        pipe.zadd(&key, member, now_ms() + ttl_ms)
            .ignore()
            .pexpire(&key, ttl_ms as i64)
            .ignore();
        let mut conn = self.conn.clone();
        let _: () = pipe.query_async(&mut conn).await?;
        Ok(())
    }

    /// Forgets `waiter`'s wait: it got its slot or gave up.
    pub async fn slot_wait_ended(
        &self,
        session_id: &str,
        waiter: &SlotWaiter,
    ) -> Result<(), CacheError> {
        let member = serde_json::to_string(waiter)?;
        let mut conn = self.conn.clone();
        let _: i64 = conn.zrem(slot_waits_key(session_id), member).await?;
        Ok(())
    }

    /// The session's jobs waiting for a call slot now; an entry that does not
    /// parse is skipped, as a notice is no reason to fail a read.
    pub async fn slot_waiters(&self, session_id: &str) -> Result<Vec<SlotWaiter>, CacheError> {
        let mut conn = self.conn.clone();
        let members: Vec<String> = conn
            .zrangebyscore(slot_waits_key(session_id), now_ms(), "+inf")
            .await?;
        Ok(members
            .iter()
            .filter_map(|m| serde_json::from_str(m).ok())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_is_one_stable_member() {
        let waiter = SlotWaiter {
            job_id: "j1".into(),
            model: "simulated".into(),
            max_concurrency: 1,
        };
        let member = serde_json::to_string(&waiter).ok();
        assert_eq!(
            member.as_deref(),
            Some(r#"{"job_id":"j1","model":"simulated","max_concurrency":1}"#)
        );
        assert_eq!(slot_waits_key("s1"), "session:s1:slot_waits");
    }
}
