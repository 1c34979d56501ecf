//! Redis adapter (seed 004 §§1, 2): `session:{id}:events` pub/sub for live
//! progress, `session:{id}:history` (a stream) for the last
//! [`HISTORY_LEN`]-or-so events by sequence, `session:{id}:sequence` for the
//! last sequence given (kept without a TTL, so a session's sequence never
//! goes back after its history expires), `session:{id}:progress` for the
//! latest event and `session:{id}:status` for the last status an event
//! named, with a TTL.

pub mod board;
pub mod dead_letters;
pub mod reads;
pub mod uploads;
pub mod waits;

/// Lua: deletes every key the set KEYS[1] tracks, then the set (seed 004 §7:
/// a tracking set instead of a SCAN), in batches `unpack` can take; returns
/// how many keys it tracked.
macro_rules! delete_tracked {
    () => {
        r#"
local keys = redis.call('SMEMBERS', KEYS[1])
for i = 1, #keys, 500 do
  redis.call('DEL', unpack(keys, i, math.min(i + 499, #keys)))
end
redis.call('DEL', KEYS[1])
return #keys
"#
    };
}
pub(crate) use delete_tracked;

use dialectic_core::error::{ErrorCode, ErrorContract, Reason};
use dialectic_core::job::JobStatus;
use dialectic_core::progress::EventKind;
use futures::StreamExt;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("progress event is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl ErrorContract for CacheError {
    fn code(&self) -> ErrorCode {
        match self {
            CacheError::Redis(_) => ErrorCode::Unavailable,
            CacheError::Json(_) => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            CacheError::Redis(_) => Reason::CacheUnavailable,
            CacheError::Json(_) => Reason::CorruptProgressEvent,
        }
    }
}

/// One progress event, as published and as kept for catch-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressEvent {
    pub session_id: String,
    pub kind: EventKind,
    /// A `JobStatus` event's new status (its `message` says it in words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_status: Option<JobStatus>,
    #[serde(default)]
    pub session_status: String,
    #[serde(default)]
    pub stage_slug: String,
    #[serde(default)]
    pub job_id: String,
    #[serde(default)]
    pub job_type: String,
    #[serde(default)]
    pub document_key: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub stage_percent: u32,
    /// Milliseconds since the Unix epoch.
    #[serde(default)]
    pub at_ms: i64,
    /// The event's place in its session (from 1), given once by
    /// [`PUBLISH_EVENT`] as it is published; 0 on an event not yet published.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sequence: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ProgressEvent {
    /// An event of `kind` about `session_id`, every other field empty.
    pub fn new(kind: EventKind, session_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            kind,
            job_status: None,
            session_status: String::new(),
            stage_slug: String::new(),
            job_id: String::new(),
            job_type: String::new(),
            document_key: String::new(),
            model: String::new(),
            message: String::new(),
            stage_percent: 0,
            at_ms: 0,
            sequence: 0,
        }
    }
}

pub fn events_channel(session_id: &str) -> String {
    format!("session:{session_id}:events")
}

/// Set while an API key (by its hash) counts as lately revoked.
pub fn revoked_key(key_hash: &str) -> String {
    format!("revoked_key:{key_hash}")
}

/// The session's retained events, as a stream whose entry ids are
/// `{sequence}-0`.
pub fn history_key(session_id: &str) -> String {
    format!("session:{session_id}:history")
}

/// The last sequence given to one of the session's events.
pub fn sequence_key(session_id: &str) -> String {
    format!("session:{session_id}:sequence")
}

pub fn progress_key(session_id: &str) -> String {
    format!("session:{session_id}:progress")
}

/// The session's status as its last event naming one said it.
pub fn status_key(session_id: &str) -> String {
    format!("session:{session_id}:status")
}

#[derive(Clone)]
pub struct Cache {
    client: redis::Client,
    conn: ConnectionManager,
    progress_ttl_secs: u64,
}

impl Cache {
    pub async fn connect(url: &str, progress_ttl_secs: u64) -> Result<Self, CacheError> {
        use redis::IntoConnectionInfo;
        // No Nagle: a command written in two segments would otherwise wait
        // for the server's delayed ACK (up to 40 ms) on every round trip.
        let info = url
            .into_connection_info()?
            .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
        let client = redis::Client::open(info)?;
        let conn = ConnectionManager::new(client.clone()).await?;
        Ok(Self {
            client,
            conn,
            progress_ttl_secs,
        })
    }

    /// Records that the API key with this hash was revoked, for `ttl_secs`
    /// (at least the gateways' `gateway.last_known_secs`): a gateway that
    /// cannot ask Postgres about a key asks here, so a revoked key is never
    /// honoured from what the gateway remembers of it.
    pub async fn key_revoked(&self, key_hash: &str, ttl_secs: u64) -> Result<(), CacheError> {
        let mut conn = self.conn.clone();
        let _: () = conn
            .set_ex(revoked_key(key_hash), 1, ttl_secs.max(1))
            .await?;
        Ok(())
    }

    /// Whether [`Cache::key_revoked`] recorded this key hash lately.
    pub async fn is_key_revoked(&self, key_hash: &str) -> Result<bool, CacheError> {
        let mut conn = self.conn.clone();
        Ok(conn.exists(revoked_key(key_hash)).await?)
    }

    pub async fn ping(&self) -> Result<(), CacheError> {
        let mut conn = self.conn.clone();
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        Ok(())
    }

    /// Publishes events in order, each recorded as its session's latest
    /// progress, in one round trip however many a planner unit produced.
    /// The last one that names the session's status also records that status
    /// (`latest_status`): job events name none. Each gets its sequence and
    /// its place in the history as it is published (see [`PUBLISH_EVENT`]).
    pub async fn publish(&self, events: &[ProgressEvent]) -> Result<(), CacheError> {
        self.publish_all(events, true).await
    }

    /// Publishes a detail event (e.g. a compression step) without making it
    /// the session's latest progress, which carries the stage's percentage.
    /// It is kept in the history and sequenced like any other.
    pub async fn notify(&self, event: &ProgressEvent) -> Result<(), CacheError> {
        self.publish_all(std::slice::from_ref(event), false).await
    }

    async fn publish_all(&self, events: &[ProgressEvent], latest: bool) -> Result<(), CacheError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        for event in events {
            // The script appends the sequence: the body must not carry one.
            let body = serde_json::to_string(&ProgressEvent {
                sequence: 0,
                ..event.clone()
            })?;
            let sid = &event.session_id;
            pipe.cmd("EVAL")
                .arg(PUBLISH_EVENT)
                .arg(4)
                .arg(history_key(sid))
                .arg(progress_key(sid))
                .arg(status_key(sid))
                .arg(sequence_key(sid))
                .arg(body)
                .arg(self.progress_ttl_secs.max(1))
                .arg(HISTORY_LEN)
                .arg(events_channel(sid))
                .arg(if latest {
                    &event.session_status[..]
                } else {
                    ""
                })
                .arg(if latest { "1" } else { "0" })
                .ignore();
        }
        let mut conn = self.conn.clone();
        let _: () = pipe.query_async(&mut conn).await?;
        Ok(())
    }

    /// The session's retained events after `after`, oldest first, at most
    /// `count`.
    pub async fn history_after(
        &self,
        session_id: &str,
        after: u64,
        count: usize,
    ) -> Result<Vec<ProgressEvent>, CacheError> {
        let mut conn = self.conn.clone();
        let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
            .arg(history_key(session_id))
            .arg(format!("{}-0", after.saturating_add(1)))
            .arg("+")
            .arg("COUNT")
            .arg(count.max(1))
            .query_async(&mut conn)
            .await?;
        entries
            .iter()
            .map(|(_, fields)| history_entry(fields))
            .collect()
    }

    /// The sequence of the session's last published event; 0 before its
    /// first.
    pub async fn last_sequence(&self, session_id: &str) -> Result<u64, CacheError> {
        let mut conn = self.conn.clone();
        let last: Option<u64> = conn.get(sequence_key(session_id)).await?;
        Ok(last.unwrap_or(0))
    }

    /// The status the session's last event naming one carried: where a
    /// watcher joining while Postgres is unreachable starts.
    pub async fn latest_status(&self, session_id: &str) -> Result<Option<String>, CacheError> {
        let mut conn = self.conn.clone();
        Ok(conn.get(status_key(session_id)).await?)
    }

    pub async fn latest(&self, session_id: &str) -> Result<Option<ProgressEvent>, CacheError> {
        let mut conn = self.conn.clone();
        let body: Option<String> = conn.get(progress_key(session_id)).await?;
        Ok(match body {
            Some(b) => Some(serde_json::from_str(&b)?),
            None => None,
        })
    }

    /// Live events of one session. Subscribe before reading the catch-up
    /// snapshot so nothing falls between the two.
    pub async fn subscribe(
        &self,
        session_id: &str,
    ) -> Result<impl futures::Stream<Item = ProgressEvent> + use<>, CacheError> {
        let mut pubsub = self.client.get_async_pubsub().await?;
        pubsub.subscribe(events_channel(session_id)).await?;
        Ok(pubsub.into_on_message().filter_map(|msg| async move {
            let body: String = msg.get_payload().ok()?;
            serde_json::from_str(&body).ok()
        }))
    }

    /// How many connections (across every process) subscribe to a session's
    /// events (`PUBSUB NUMSUB`): the gateway keeps one per session it has
    /// watchers of, so this is what an operator reads to see its fan-out.
    pub async fn subscribers(&self, session_id: &str) -> Result<u64, CacheError> {
        let mut conn = self.conn.clone();
        let (_, count): (String, u64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(events_channel(session_id))
            .query_async(&mut conn)
            .await?;
        Ok(count)
    }
}

/// About how many events a session's history keeps (`MAXLEN ~`: Redis
/// trims whole nodes, so a little more may stay).
pub const HISTORY_LEN: u64 = 1000;

/// Lua: publishes one event (ARGV[1], JSON without a sequence) with the
/// next sequence of its session (the counter KEYS[4]), so the sequence is
/// given once and the history, the latest progress and the live channel all
/// carry it: appends it to the history stream KEYS[1] as entry
/// `{sequence}-0` (trimmed to about ARGV[3] entries, expiring ARGV[2]
/// seconds after the last event), and when ARGV[6] is 1 records it as the
/// latest progress (KEYS[2]) and ARGV[5], when not empty, as the status
/// (KEYS[3]); then PUBLISHes it on ARGV[4]. Should the counter be lost while
/// the history stays (an eviction), it resumes past the history's last id.
const PUBLISH_EVENT: &str = r#"
local seq = redis.call('INCR', KEYS[4])
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 then
  local kept = tonumber(string.match(last[1][1], '^(%d+)'))
  if kept >= seq then
    seq = kept + 1
    redis.call('SET', KEYS[4], seq)
  end
end
local body = string.sub(ARGV[1], 1, -2) .. ',"sequence":' .. string.format('%d', seq) .. '}'
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], string.format('%d-0', seq), 'e', body)
redis.call('EXPIRE', KEYS[1], ARGV[2])
if ARGV[6] == '1' then
  redis.call('SET', KEYS[2], body, 'EX', ARGV[2])
  if ARGV[5] ~= '' then
    redis.call('SET', KEYS[3], ARGV[5], 'EX', ARGV[2])
  end
end
redis.call('PUBLISH', ARGV[4], body)
return seq
"#;

/// The event a history entry's fields (`e`, its JSON) hold.
fn history_entry(fields: &[String]) -> Result<ProgressEvent, CacheError> {
    let body = fields
        .chunks(2)
        .find(|pair| pair[0] == "e")
        .and_then(|pair| pair.get(1))
        .map_or("", String::as_str);
    Ok(serde_json::from_str(body)?)
}

/// Leases on a shared counter in Redis: at most `limit` holders at once across
/// every process. A lease expires by itself, so a crashed holder frees its slot.
const ACQUIRE_LEASE: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0
"#;

impl Cache {
    /// Tries to take one of `limit` slots of `name` for `lease_ms`; true when taken.
    pub async fn try_acquire_slot(
        &self,
        name: &str,
        holder: &str,
        limit: u32,
        lease_ms: u64,
    ) -> Result<bool, CacheError> {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let mut conn = self.conn.clone();
        let taken: i32 = redis::cmd("EVAL")
            .arg(ACQUIRE_LEASE)
            .arg(1)
            .arg(format!("limit:{name}"))
            .arg(now_ms)
            .arg(now_ms + lease_ms)
            .arg(limit)
            .arg(holder)
            .arg(lease_ms.max(1000))
            .query_async(&mut conn)
            .await?;
        Ok(taken == 1)
    }

    pub async fn release_slot(&self, name: &str, holder: &str) -> Result<(), CacheError> {
        let mut conn = self.conn.clone();
        let _: i32 = conn.zrem(format!("limit:{name}"), holder).await?;
        Ok(())
    }
}

/// A fixed-window budget (requests or tokens per window) shared by every process.
const TAKE_BUDGET: &str = r#"
local used = redis.call('INCRBY', KEYS[1], ARGV[1])
if used == tonumber(ARGV[1]) then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
if used > tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return 0
end
return 1
"#;

impl Cache {
    /// Takes `amount` from this window's budget of `limit` for `name`; false
    /// when the window is spent (try again in the next one).
    pub async fn try_take_budget(
        &self,
        name: &str,
        amount: u64,
        limit: u64,
        window_secs: u64,
    ) -> Result<bool, CacheError> {
        let window_secs = window_secs.max(1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut conn = self.conn.clone();
        // A request larger than the whole budget could never pass; let it take all of it.
        let amount = amount.clamp(1, limit.max(1));
        let taken: i32 = redis::cmd("EVAL")
            .arg(TAKE_BUDGET)
            .arg(1)
            .arg(format!("budget:{name}:{}", now / window_secs))
            .arg(amount)
            .arg(limit)
            .arg(window_secs * 2)
            .query_async(&mut conn)
            .await?;
        Ok(taken == 1)
    }
}

impl Cache {
    /// Cached numbers (token counts) for `keys`, in order; None where absent.
    pub async fn get_counts(&self, keys: &[String]) -> Result<Vec<Option<u64>>, CacheError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn.clone();
        // MGET with one key returns a bare value, so always ask for a list.
        let values: Vec<Option<u64>> = redis::cmd("MGET").arg(keys).query_async(&mut conn).await?;
        Ok(values)
    }

    /// Stores numbers under their keys for `ttl_secs` (content-addressed, so
    /// they never go stale; the TTL only bounds memory).
    pub async fn set_counts(
        &self,
        entries: &[(String, u64)],
        ttl_secs: u64,
    ) -> Result<(), CacheError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for (key, value) in entries {
            pipe.set_ex(key, *value, ttl_secs.max(1)).ignore();
        }
        let mut conn = self.conn.clone();
        let _: () = pipe.query_async(&mut conn).await?;
        Ok(())
    }
}
