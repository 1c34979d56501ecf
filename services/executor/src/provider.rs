//! Stage 1 of an attempt: the provider a job's model call goes through. The
//! model row names it; the executor's mode may record or replay exchanges, the
//! row may name a fallback model, and shared call limits may wrap it.

use crate::limits::{Limits, RedisLimiter};
use crate::{BlobExchanges, Executor, permanent};
use dialectic_llm::{
    Limited, ModelProvider, ProviderConfig, Recording, Replay, WithFallback, provider_for,
};
use dialectic_runtime::worker::AttemptError;
use dialectic_store::jobs::JobRow;
use dialectic_store::models::{self, ModelRow};
use std::sync::Arc;
use std::time::Duration;

pub(crate) type Provider = Arc<dyn ModelProvider>;

/// How long a call waits for a free slot of its model before its attempt
/// fails as transient. A slot frees within one call's total timeout (10
/// minutes by default), and a local model serving one call at a time keeps
/// the calls of a fan-out queued for minutes: at 2 minutes, a contract
/// stack's three parse jobs on SmolLM2 spent attempts on waiting alone.
const SLOT_PATIENCE: Duration = Duration::from_secs(15 * 60);

/// `executor.provider_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Call providers.
    Live,
    /// Call them and keep every exchange in S3.
    Record,
    /// Serve recorded exchanges; never call a provider.
    Replay,
}

impl Mode {
    fn parse(value: &str) -> Self {
        match value {
            "record" => Mode::Record,
            "replay" => Mode::Replay,
            _ => Mode::Live,
        }
    }
}

/// The model a row falls back to when its own provider fails (`config.fallback_model`).
fn fallback_model(config: &serde_json::Value) -> Option<&str> {
    config.get("fallback_model").and_then(|v| v.as_str())
}

fn base(executor: &Executor, model: &ModelRow) -> Result<Provider, AttemptError> {
    let config = ProviderConfig {
        reply_limits: executor.reply_limits,
        ..ProviderConfig::from_row(
            &model.config.0,
            model.secret_name.as_deref(),
            &executor.model_key_prefixes,
        )
    };
    // An operator reading the job's error should tell a key the rules keep
    // out from a provider this build lacks.
    let code = if config.refused_secret.is_some() {
        "model_key_refused"
    } else {
        "unsupported_provider"
    };
    provider_for(&model.provider, &executor.simulated, &config).map_err(|e| permanent(code, e))
}

impl Executor {
    /// `job` is the job whose calls these are, None for a question's.
    pub(crate) async fn provider(
        &self,
        model: &ModelRow,
        job: Option<&JobRow>,
    ) -> Result<Provider, AttemptError> {
        let provider = self.with_mode(base(self, model)?);
        let provider = self.with_fallback(provider, model).await?;
        Ok(self.with_limits(provider, model, job))
    }

    fn with_mode(&self, provider: Provider) -> Provider {
        let exchanges = || Arc::new(BlobExchanges(self.blob.clone()));
        match Mode::parse(&self.provider_mode) {
            Mode::Live => provider,
            Mode::Record => Arc::new(Recording {
                inner: provider,
                store: exchanges(),
            }),
            Mode::Replay => Arc::new(Replay { store: exchanges() }),
        }
    }

    async fn with_fallback(
        &self,
        primary: Provider,
        model: &ModelRow,
    ) -> Result<Provider, AttemptError> {
        let Some(name) = fallback_model(&model.config.0) else {
            return Ok(primary);
        };
        let backup = models::model_by_identifier(self.store.pool(), name).await?;
        Ok(Arc::new(WithFallback {
            primary,
            fallback: base(self, &backup)?,
            fallback_model: backup.api_identifier,
        }))
    }

    /// Call limits shared by every replica (Redis), when the row sets any;
    /// a job's wait for a slot is noted for its session's notice.
    fn with_limits(&self, provider: Provider, model: &ModelRow, job: Option<&JobRow>) -> Provider {
        let limits = Limits::from_config(&model.config.0);
        if !limits.any() {
            return provider;
        }
        let limiter = RedisLimiter::new(
            self.cache.clone(),
            limits,
            Duration::from_secs(60),
            Duration::from_secs(self.lease_secs.max(30) * 4),
            SLOT_PATIENCE,
        );
        let limiter = match job {
            Some(job) => limiter.for_job(
                job.session_id.to_string(),
                job.id.to_string(),
                model.api_identifier.clone(),
            ),
            None => limiter,
        };
        Arc::new(Limited {
            inner: provider,
            limiter: Arc::new(limiter),
            key: format!("model:{}", model.api_identifier),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_default_to_live() {
        assert_eq!(Mode::parse("record"), Mode::Record);
        assert_eq!(Mode::parse("replay"), Mode::Replay);
        assert_eq!(Mode::parse("live"), Mode::Live);
        assert_eq!(Mode::parse(""), Mode::Live);
    }

    #[test]
    fn a_fallback_is_named_by_the_model_row() {
        let config = serde_json::json!({"fallback_model": "backup-1", "base_url": "x"});
        assert_eq!(fallback_model(&config), Some("backup-1"));
        assert_eq!(fallback_model(&serde_json::json!({})), None);
        assert_eq!(
            fallback_model(&serde_json::json!({"fallback_model": 3})),
            None
        );
    }
}
