//! What the gateway remembers so that a short Postgres outage (a failover)
//! does not cut the progress streams of callers it has just seen (issue 41):
//! which user an API key belongs to, and which sessions a user owns. Every
//! answer still comes from Postgres while it answers. These are read only
//! for `WatchSession`, only while the readiness loop holds Postgres down
//! (it refuses connections of the loop's own: a pool that is merely busy
//! never counts), and only for `gateway.last_known_secs` after Postgres
//! last confirmed them (0 turns the memory off). A key revoked meanwhile is
//! refused all the same: revocation is also published to Redis, which the
//! gateway asks before it answers from this memory (issue 57).

use dialectic_core::ids::{SessionId, UserId};
use moka::sync::Cache;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Entries kept at most: far beyond the keys and sessions one gateway
/// serves in ten minutes, and a bound on memory whatever callers do.
const CAPACITY: u64 = 100_000;

fn expiring<K, V>(keep_secs: u64) -> Option<Cache<K, V>>
where
    K: std::hash::Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    (keep_secs > 0).then(|| {
        Cache::builder()
            .max_capacity(CAPACITY)
            .time_to_live(Duration::from_secs(keep_secs))
            .build()
    })
}

#[derive(Clone)]
pub(crate) struct LastKnown {
    owners: Option<Cache<String, UserId>>,
    sessions: Option<Cache<(UserId, SessionId), ()>>,
    /// The readiness loop's verdict: Postgres is down (not merely busy).
    postgres_down: Arc<AtomicBool>,
}

impl LastKnown {
    /// Remembers for `keep_secs`; answers only while `postgres_down` is set.
    pub(crate) fn new(keep_secs: u64, postgres_down: Arc<AtomicBool>) -> Self {
        Self {
            owners: expiring(keep_secs),
            sessions: expiring(keep_secs),
            postgres_down,
        }
    }

    /// Whether the readiness loop holds Postgres down right now: the only
    /// time this memory may answer.
    pub(crate) fn in_outage(&self) -> bool {
        self.postgres_down.load(Ordering::Relaxed)
    }

    /// Postgres said the key with this hash belongs to `user` (None: to nobody).
    pub(crate) fn key_confirmed(&self, key_hash: &str, user: Option<UserId>) {
        if let Some(owners) = &self.owners {
            match user {
                Some(user) => owners.insert(key_hash.to_string(), user),
                None => owners.invalidate(key_hash),
            }
        }
    }

    pub(crate) fn owner_of_key(&self, key_hash: &str) -> Option<UserId> {
        self.owners.as_ref()?.get(key_hash)
    }

    /// Postgres said `user` owns `session`.
    pub(crate) fn session_confirmed(&self, user: UserId, session: SessionId) {
        if let Some(sessions) = &self.sessions {
            sessions.insert((user, session), ());
        }
    }

    pub(crate) fn owns_session(&self, user: UserId, session: SessionId) -> bool {
        self.sessions
            .as_ref()
            .is_some_and(|s| s.contains_key(&(user, session)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_postgres_disowned_is_forgotten_and_zero_remembers_nothing() {
        let known = LastKnown::new(60, Arc::default());
        let user = UserId::new();
        known.key_confirmed("h", Some(user));
        assert_eq!(known.owner_of_key("h"), Some(user));
        known.key_confirmed("h", None);
        assert_eq!(known.owner_of_key("h"), None);
        let session = SessionId::new();
        known.session_confirmed(user, session);
        assert!(known.owns_session(user, session));
        assert!(!known.owns_session(UserId::new(), session));

        let off = LastKnown::new(0, Arc::default());
        off.key_confirmed("h", Some(user));
        off.session_confirmed(user, session);
        assert_eq!(off.owner_of_key("h"), None);
        assert!(!off.owns_session(user, session));
    }
}
