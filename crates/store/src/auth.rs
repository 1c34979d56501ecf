//! Users and their API keys (stored as SHA-256 hashes only).

use crate::StoreError;
use dialectic_core::ids::{UserId, WalletId};
use sqlx::PgPool;

/// Who a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyOwner {
    pub user_id: UserId,
    pub is_admin: bool,
}

/// The owner of an unrevoked key with this hash, if any.
pub async fn owner_of_key(pool: &PgPool, key_hash: &str) -> Result<Option<KeyOwner>, StoreError> {
    Ok(sqlx::query_as::<_, KeyOwner>(
        "SELECT u.id AS user_id, u.is_admin FROM api_keys k JOIN users u ON u.id = k.user_id
         WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
    )
    .bind(key_hash)
    .fetch_optional(pool)
    .await?)
}

/// Whether `user_id` is an administrator (false for an unknown user).
pub async fn is_admin(pool: &PgPool, user_id: UserId) -> Result<bool, StoreError> {
    Ok(
        sqlx::query_scalar::<_, bool>("SELECT is_admin FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(pool)
            .await?
            .unwrap_or(false),
    )
}

/// A new user with an empty wallet, in one transaction (a user without a
/// wallet could not start a session).
pub async fn create_user(
    pool: &PgPool,
    display_name: &str,
    is_admin: bool,
) -> Result<UserId, StoreError> {
    let id = UserId::new();
    let mut tx = pool.begin().await?;
    sqlx::query("INSERT INTO users (id, display_name, is_admin) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(display_name)
        .bind(is_admin)
        .execute(&mut *tx)
        .await?;
    sqlx::query("INSERT INTO token_wallets (id, user_id) VALUES ($1, $2)")
        .bind(WalletId::new())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(id)
}

/// Stores a key's hash for `user_id`; returns the key row's id.
pub async fn insert_key(
    pool: &PgPool,
    user_id: UserId,
    name: &str,
    key_hash: &str,
    shown_part: &str,
) -> Result<UserId, StoreError> {
    let id = UserId::new();
    let inserted = sqlx::query(
        "INSERT INTO api_keys (id, user_id, name, key_hash, shown_part)
         SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM users WHERE id = $2)",
    )
    .bind(id)
    .bind(user_id)
    .bind(name)
    .bind(key_hash)
    .bind(shown_part)
    .execute(pool)
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(StoreError::not_found("user", user_id));
    }
    Ok(id)
}

/// Revokes a key by its hash; true when a live key was revoked.
pub async fn revoke_key(pool: &PgPool, key_hash: &str) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL",
    )
    .bind(key_hash)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}
