//! `Debug` for the settings that hold a secret: the secret's presence, never
//! its value, and URLs with their password masked, so a `{:?}` in a log or a
//! panic message cannot leak one.

use crate::{
    AmqpConfig, DatabaseConfig, GatewayConfig, InternalConfig, RedisConfig, S3Config,
    mask_url_password,
};
use dialectic_core::secrets::redacted;
use std::fmt;

/// What a `Debug` shows for a secret: whether there is one.
fn presence(secret: &str) -> &'static str {
    redacted(Some(secret))
}

impl fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("url", &mask_url_password(&self.url))
            .field("max_connections", &self.max_connections)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .finish()
    }
}

impl fmt::Debug for AmqpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpConfig")
            .field("url", &mask_url_password(&self.url))
            .field("prefix", &self.prefix)
            .field("delivery_limit", &self.delivery_limit)
            .field("recycle_after_ms", &self.recycle_after_ms)
            .field("relay_after_ms", &self.relay_after_ms)
            .finish()
    }
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &mask_url_password(&self.url))
            .field("progress_ttl_secs", &self.progress_ttl_secs)
            .finish()
    }
}

impl fmt::Debug for InternalConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InternalConfig")
            .field("key_dir", &self.key_dir)
            .field("token_secret", &presence(&self.token_secret))
            .field("resolve_interval_ms", &self.resolve_interval_ms)
            .field("hosts_file", &self.hosts_file)
            .field("accept_previous_tokens", &self.accept_previous_tokens)
            .finish()
    }
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("access_key", &presence(&self.access_key))
            .field("secret_key", &presence(&self.secret_key))
            .field("force_path_style", &self.force_path_style)
            .finish()
    }
}

impl fmt::Debug for GatewayConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayConfig")
            .field("listen", &self.listen)
            .field("default_user_id", &self.default_user_id)
            .field("bootstrap_key", &presence(&self.bootstrap_key))
            .field("max_prompt_bytes", &self.max_prompt_bytes)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_documents_per_project", &self.max_documents_per_project)
            .field(
                "max_document_bytes_per_project",
                &self.max_document_bytes_per_project,
            )
            .field("max_projects_per_user", &self.max_projects_per_user)
            .field(
                "max_document_bytes_per_user",
                &self.max_document_bytes_per_user,
            )
            .field("max_upload_pages", &self.max_upload_pages)
            .field("max_upload_unpacked_bytes", &self.max_upload_unpacked_bytes)
            .field("max_watches_per_user", &self.max_watches_per_user)
            .field("watch_heartbeat_secs", &self.watch_heartbeat_secs)
            .field("max_export_bytes", &self.max_export_bytes)
            .field("max_exports_per_user", &self.max_exports_per_user)
            .field("last_known_secs", &self.last_known_secs)
            .field("web_origins", &self.web_origins)
            .field("json_api", &self.json_api)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("health_listen", &self.health_listen)
            .field("planner_url", &self.planner_url)
            .field("wallet_url", &self.wallet_url)
            .field("indexer_url", &self.indexer_url)
            .field("executor_url", &self.executor_url)
            .field("connections", &self.connections)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::Settings;

    /// Every secret of the settings, set, is absent from their `Debug`.
    #[test]
    fn debug_shows_no_secret() {
        let mut settings = Settings::default();
        settings.internal.token_secret = "token-secret-1".into();
        settings.s3.access_key = "access-key-2".into();
        settings.s3.secret_key = "secret-key-3".into();
        settings.gateway.bootstrap_key = "dlk_bootstrap_4".into();
        settings.database.url = "postgres://app:db-password-5@db:5432/dialectic".into();
        settings.amqp.url = "amqp://app:amqp-password-6@mq:5672/%2f".into();
        settings.redis.url = "redis://:redis-password-7@cache:6379".into();
        let shown = format!("{settings:?}");
        for secret in [
            "token-secret-1",
            "access-key-2",
            "secret-key-3",
            "dlk_bootstrap_4",
            "db-password-5",
            "amqp-password-6",
            "redis-password-7",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains("postgres://app:***@db:5432/dialectic"),
            "{shown}"
        );
    }
}
