//! Provider call limits shared by every executor replica, as Redis leases:
//! a model row's `config.max_concurrency` caps its calls in flight across the
//! whole deployment, so scaling executors never breaks a provider's quota.

use async_trait::async_trait;
use dialectic_cache::Cache;
use dialectic_llm::{CallLimiter, LlmError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub struct RedisLimiter {
    cache: Arc<OnceLock<Cache>>,
    limit: u32,
    /// A holder that dies frees its slot after this long.
    lease: Duration,
    /// Longest wait for a slot before the attempt is retried later.
    patience: Duration,
}

impl RedisLimiter {
    pub fn new(
        cache: Arc<OnceLock<Cache>>,
        limit: u32,
        lease: Duration,
        patience: Duration,
    ) -> Self {
        Self {
            cache,
            limit: limit.max(1),
            lease,
            patience,
        }
    }
}

#[async_trait]
impl CallLimiter for RedisLimiter {
    async fn acquire(&self, key: &str) -> Result<String, LlmError> {
        let holder = uuid::Uuid::now_v7().to_string();
        let started = Instant::now();
        loop {
            let cache = self.cache.get().ok_or_else(|| {
                LlmError::Transient("the call limiter (Redis) is not connected".into())
            })?;
            match cache
                .try_acquire_slot(key, &holder, self.limit, self.lease.as_millis() as u64)
                .await
            {
                Ok(true) => return Ok(holder),
                Ok(false) => {}
                Err(e) => return Err(LlmError::Transient(format!("call limiter: {e}"))),
            }
            if started.elapsed() > self.patience {
                return Err(LlmError::Transient(format!(
                    "no free call slot for {key} within {}s",
                    self.patience.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    async fn release(&self, key: &str, holder: &str) {
        let Some(cache) = self.cache.get() else {
            return;
        };
        if let Err(e) = cache.release_slot(key, holder).await {
            tracing::warn!(error = %e, "could not release a call slot; its lease will expire");
        }
    }
}
