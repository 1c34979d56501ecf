//! Provider call limits shared by every executor replica, in Redis: a model
//! row's `config.max_concurrency` caps its calls in flight (leases), and
//! `config.requests_per_minute` / `tokens_per_minute` cap its rate (window
//! budgets), across the whole deployment, so scaling executors never breaks a
//! provider's quota. A job's wait for a slot is noted for its session's
//! notice (`dialectic_cache::waits`).

use async_trait::async_trait;
use dialectic_cache::Cache;
use dialectic_cache::waits::SlotWaiter;
use dialectic_llm::{CallLimiter, LlmError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// What one model may use, from its row's `config`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub max_concurrency: Option<u32>,
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
}

impl Limits {
    pub fn from_config(config: &serde_json::Value) -> Self {
        let number = |k: &str| config.get(k).and_then(|v| v.as_u64()).filter(|n| *n > 0);
        Self {
            max_concurrency: number("max_concurrency").map(|n| n.min(u64::from(u32::MAX)) as u32),
            requests_per_minute: number("requests_per_minute"),
            tokens_per_minute: number("tokens_per_minute"),
        }
    }

    pub fn any(&self) -> bool {
        self.max_concurrency.is_some()
            || self.requests_per_minute.is_some()
            || self.tokens_per_minute.is_some()
    }
}

pub struct RedisLimiter {
    cache: Arc<OnceLock<Cache>>,
    limits: Limits,
    /// The rate window; a minute in production, shorter in tests.
    window: Duration,
    /// A holder that dies frees its slot after this long.
    lease: Duration,
    /// Longest wait for a slot before the attempt is retried later.
    patience: Duration,
    /// The job whose calls these are (its session and its wait), when a
    /// job's: a question's calls have no session to tell.
    waiter: Option<(String, SlotWaiter)>,
}

/// What one try at a call's limits found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    Taken,
    /// A rate window is spent: not a slot wait.
    NoBudget,
    NoSlot,
}

/// How long a noted wait outlives its last refresh: a waiter that dies
/// leaves a notice this stale at most.
const WAIT_TTL: Duration = Duration::from_secs(30);
/// How often a waiter refreshes its note, well within `WAIT_TTL`.
const WAIT_REFRESH: Duration = Duration::from_secs(5);

impl RedisLimiter {
    pub fn new(
        cache: Arc<OnceLock<Cache>>,
        limits: Limits,
        window: Duration,
        lease: Duration,
        patience: Duration,
    ) -> Self {
        Self {
            cache,
            limits,
            window,
            lease,
            patience,
            waiter: None,
        }
    }

    /// Notes this job's waits for a slot against `session_id`.
    pub fn for_job(mut self, session_id: String, job_id: String, model: String) -> Self {
        self.waiter = self.limits.max_concurrency.map(|max_concurrency| {
            let waiter = SlotWaiter {
                job_id,
                model,
                max_concurrency,
            };
            (session_id, waiter)
        });
        self
    }

    /// One try at everything the call needs; budgets taken before a failed
    /// slot stay spent for this window, which errs on the provider's side.
    async fn try_once(
        &self,
        cache: &Cache,
        key: &str,
        holder: &str,
        tokens: u64,
    ) -> Result<Room, LlmError> {
        let window = self.window.as_secs().max(1);
        if let Some(rpm) = self.limits.requests_per_minute {
            let taken = cache
                .try_take_budget(&format!("{key}:requests"), 1, rpm, window)
                .await
                .map_err(limiter_error)?;
            if !taken {
                return Ok(Room::NoBudget);
            }
        }
        if let Some(tpm) = self.limits.tokens_per_minute {
            let taken = cache
                .try_take_budget(&format!("{key}:tokens"), tokens, tpm, window)
                .await
                .map_err(limiter_error)?;
            if !taken {
                return Ok(Room::NoBudget);
            }
        }
        let Some(limit) = self.limits.max_concurrency else {
            return Ok(Room::Taken);
        };
        let taken = cache
            .try_acquire_slot(key, holder, limit.max(1), self.lease.as_millis() as u64)
            .await
            .map_err(limiter_error)?;
        Ok(if taken { Room::Taken } else { Room::NoSlot })
    }

    /// Tries until the call has room or patience runs out; `noted` says
    /// whether a slot wait was noted, for the caller to clear.
    async fn wait_for_room(
        &self,
        key: &str,
        holder: &str,
        tokens: u64,
        noted: &mut bool,
    ) -> Result<(), LlmError> {
        let started = Instant::now();
        let mut refreshed: Option<Instant> = None;
        loop {
            let cache = self.cache.get().ok_or_else(|| {
                LlmError::Transient("the call limiter (Redis) is not connected".into())
            })?;
            match self.try_once(cache, key, holder, tokens).await? {
                Room::Taken => return Ok(()),
                Room::NoSlot if refreshed.is_none_or(|at| at.elapsed() >= WAIT_REFRESH) => {
                    *noted |= self.note_wait(cache).await;
                    refreshed = Some(Instant::now());
                }
                Room::NoSlot | Room::NoBudget => {}
            }
            if started.elapsed() > self.patience {
                return Err(LlmError::Transient(format!(
                    "no free call slot for {key} within {}s",
                    self.patience.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Best effort: a note that cannot be written costs the notice, not the call.
    async fn note_wait(&self, cache: &Cache) -> bool {
        let Some((session_id, waiter)) = &self.waiter else {
            return false;
        };
        let ttl = WAIT_TTL.as_millis() as u64;
        match cache.slot_wait_begun(session_id, waiter, ttl).await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(error = %e, "a wait for a call slot was not noted");
                false
            }
        }
    }

    async fn clear_wait(&self) {
        let (Some((session_id, waiter)), Some(cache)) = (&self.waiter, self.cache.get()) else {
            return;
        };
        if let Err(e) = cache.slot_wait_ended(session_id, waiter).await {
            tracing::debug!(error = %e, "a wait for a call slot was not cleared; it expires");
        }
    }
}

fn limiter_error(e: dialectic_cache::CacheError) -> LlmError {
    LlmError::Transient(format!("call limiter: {e}"))
}

#[async_trait]
impl CallLimiter for RedisLimiter {
    async fn acquire(&self, key: &str, tokens: u64) -> Result<String, LlmError> {
        let holder = dialectic_core::ids::instance_name("limiter");
        let mut noted = false;
        let result = self.wait_for_room(key, &holder, tokens, &mut noted).await;
        if noted {
            self.clear_wait().await;
        }
        result.map(|()| holder)
    }

    async fn release(&self, key: &str, holder: &str) {
        if self.limits.max_concurrency.is_none() {
            return;
        }
        let Some(cache) = self.cache.get() else {
            return;
        };
        if let Err(e) = cache.release_slot(key, holder).await {
            tracing::warn!(error = %e, "could not release a call slot; its lease will expire");
        }
    }
}
