//! Provider call limits shared by every executor replica, in Redis: a model
//! row's `config.max_concurrency` caps its calls in flight (leases), and
//! `config.requests_per_minute` / `tokens_per_minute` cap its rate (window
//! budgets), across the whole deployment, so scaling executors never breaks a
//! provider's quota.

use async_trait::async_trait;
use dialectic_cache::Cache;
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
}

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
        }
    }

    /// One try at everything the call needs; budgets taken before a failed
    /// slot stay spent for this window, which errs on the provider's side.
    async fn try_once(
        &self,
        cache: &Cache,
        key: &str,
        holder: &str,
        tokens: u64,
    ) -> Result<bool, LlmError> {
        let err =
            |e: dialectic_cache::CacheError| LlmError::Transient(format!("call limiter: {e}"));
        let window = self.window.as_secs().max(1);
        if let Some(rpm) = self.limits.requests_per_minute {
            let taken = cache
                .try_take_budget(&format!("{key}:requests"), 1, rpm, window)
                .await
                .map_err(err)?;
            if !taken {
                return Ok(false);
            }
        }
        if let Some(tpm) = self.limits.tokens_per_minute {
            let taken = cache
                .try_take_budget(&format!("{key}:tokens"), tokens, tpm, window)
                .await
                .map_err(err)?;
            if !taken {
                return Ok(false);
            }
        }
        match self.limits.max_concurrency {
            Some(limit) => cache
                .try_acquire_slot(key, holder, limit.max(1), self.lease.as_millis() as u64)
                .await
                .map_err(err),
            None => Ok(true),
        }
    }
}

#[async_trait]
impl CallLimiter for RedisLimiter {
    async fn acquire(&self, key: &str, tokens: u64) -> Result<String, LlmError> {
        let holder = dialectic_core::ids::instance_name("limiter");
        let started = Instant::now();
        loop {
            let cache = self.cache.get().ok_or_else(|| {
                LlmError::Transient("the call limiter (Redis) is not connected".into())
            })?;
            if self.try_once(cache, key, &holder, tokens).await? {
                return Ok(holder);
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
