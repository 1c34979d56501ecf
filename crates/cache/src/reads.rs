//! Cached hot reads (seed 004 §7): a project's document lists and rendered
//! documents. Every cached key is recorded in the set `cache_keys:{project}`,
//! so invalidation deletes exactly those keys, never a SCAN. Keys also carry
//! the project's generation (`cache:{project}:gen`), bumped on invalidation:
//! a reader that loaded rows before a change and stores them after it writes
//! under the old generation, which nobody reads again, so a stale entry
//! cannot outlive the invalidation that should have removed it.

use crate::{Cache, CacheError};
use redis::AsyncCommands;

pub fn keys_set(project_id: &str) -> String {
    format!("cache_keys:{project_id}")
}

fn generation_key(project_id: &str) -> String {
    format!("cache:{project_id}:gen")
}

fn entry_key(project_id: &str, generation: u64, name: &str) -> String {
    format!("cache:{project_id}:{generation}:{name}")
}

const INVALIDATE: &str = concat!("redis.call('INCR', KEYS[2])", crate::delete_tracked!());

/// What a lookup found: the generation to store under on a miss, and the entry.
pub struct Lookup {
    pub generation: u64,
    pub hit: Option<Vec<u8>>,
}

impl Cache {
    pub async fn cached(&self, project_id: &str, name: &str) -> Result<Lookup, CacheError> {
        let mut conn = self.conn.clone();
        let generation: Option<u64> = conn.get(generation_key(project_id)).await?;
        let generation = generation.unwrap_or(0);
        let hit: Option<Vec<u8>> = conn.get(entry_key(project_id, generation, name)).await?;
        Ok(Lookup { generation, hit })
    }

    /// Stores an entry for `ttl_secs` under the generation a lookup returned.
    pub async fn store_cached(
        &self,
        project_id: &str,
        generation: u64,
        name: &str,
        body: &[u8],
        ttl_secs: u64,
    ) -> Result<(), CacheError> {
        let key = entry_key(project_id, generation, name);
        let set = keys_set(project_id);
        let mut conn = self.conn.clone();
        let _: () = redis::pipe()
            .atomic()
            .set_ex(&key, body, ttl_secs)
            .sadd(&set, &key)
            // The set outlives its entries a little; an expired member is a no-op DEL.
            .expire(&set, (ttl_secs * 2) as i64)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Drops every cached read of a project; returns how many keys went.
    pub async fn invalidate_project(&self, project_id: &str) -> Result<u64, CacheError> {
        let mut conn = self.conn.clone();
        let removed: u64 = redis::cmd("EVAL")
            .arg(INVALIDATE)
            .arg(2)
            .arg(keys_set(project_id))
            .arg(generation_key(project_id))
            .query_async(&mut conn)
            .await?;
        Ok(removed)
    }
}
