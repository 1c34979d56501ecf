//! Reading and mirroring the blackboard: Postgres holds every entry, Redis a
//! copy per session and type. A reader compares the copy's length with the
//! recorded count and rebuilds a copy that is missing or short (after a Redis
//! restart, say); a writer that finds its push did not give the recorded
//! count rebuilds it too. Without Redis, reads go to Postgres.

use dialectic_cache::Cache;
use dialectic_core::blackboard::StoredEntry;
use dialectic_core::ids::SessionId;
use dialectic_store::{Store, StoreError, blackboard};

/// A session's entries (of one type, or all), by type and then oldest first.
pub async fn entries(
    store: &Store,
    cache: Option<&Cache>,
    session_id: SessionId,
    entry_type: Option<&str>,
) -> Result<Vec<StoredEntry>, StoreError> {
    let mut all = Vec::new();
    for (entry_type, count) in blackboard::counts(store.pool(), session_id, entry_type).await? {
        let copied = match cache {
            Some(cache) => copy_of(cache, session_id, &entry_type, count).await,
            None => None,
        };
        match copied {
            Some(entries) => all.extend(entries),
            None => all.extend(rebuild(store, cache, session_id, &entry_type).await?),
        }
    }
    Ok(all)
}

/// The Redis copy of one type when it holds exactly the recorded count.
async fn copy_of(
    cache: &Cache,
    session_id: SessionId,
    entry_type: &str,
    count: i64,
) -> Option<Vec<StoredEntry>> {
    let bodies = match cache.board_list(&session_id.to_string(), entry_type).await {
        Ok(bodies) => bodies,
        Err(e) => {
            tracing::warn!(error = %e, "blackboard copy unreadable; reading Postgres");
            return None;
        }
    };
    if i64::try_from(bodies.len()).ok() != Some(count) {
        return None;
    }
    bodies
        .iter()
        .map(|b| serde_json::from_str(b).ok())
        .collect()
}

/// Reads one type from Postgres and writes the Redis copy again.
async fn rebuild(
    store: &Store,
    cache: Option<&Cache>,
    session_id: SessionId,
    entry_type: &str,
) -> Result<Vec<StoredEntry>, StoreError> {
    let recorded = blackboard::of_type(store.pool(), session_id, entry_type).await?;
    if let Some(cache) = cache {
        let bodies: Vec<String> = recorded
            .iter()
            .filter_map(|e| serde_json::to_string(e).ok())
            .collect();
        match cache
            .board_replace(&session_id.to_string(), entry_type, &bodies)
            .await
        {
            Ok(()) => tracing::info!(
                entry_type,
                entries = bodies.len(),
                "blackboard copy rebuilt"
            ),
            Err(e) => {
                tracing::warn!(error = %e, entry_type, "could not rebuild the blackboard copy")
            }
        }
    }
    Ok(recorded)
}

/// After the commit that recorded it: pushes an entry to the Redis copy and
/// announces it; rebuilds the copy when the push did not give `count` entries.
pub async fn mirror(
    store: &Store,
    cache: &Cache,
    session_id: SessionId,
    entry: &StoredEntry,
    count: i64,
) -> Result<(), StoreError> {
    let body = match serde_json::to_string(entry) {
        Ok(body) => body,
        Err(e) => {
            tracing::warn!(error = %e, "blackboard entry does not serialise");
            return Ok(());
        }
    };
    match cache
        .board_push(&session_id.to_string(), &entry.entry_type, &body)
        .await
    {
        Ok(length) if i64::try_from(length).ok() == Some(count) => Ok(()),
        Ok(_) => rebuild(store, Some(cache), session_id, &entry.entry_type)
            .await
            .map(drop),
        // Readers rebuild it from Postgres.
        Err(e) => {
            tracing::warn!(error = %e, "could not copy a blackboard entry to Redis");
            Ok(())
        }
    }
}
