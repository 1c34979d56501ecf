//! A token wallet's balance (`token_wallets`); the ledger that moves it is
//! in `ledger`.

use crate::StoreError;
use dialectic_core::ids::{UserId, WalletId};
use sqlx::PgPool;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WalletBalance {
    pub id: WalletId,
    pub balance: i64,
    pub held: i64,
}

pub async fn wallet_balance(
    pool: &PgPool,
    wallet_id: Option<WalletId>,
    user_id: Option<UserId>,
) -> Result<WalletBalance, StoreError> {
    sqlx::query_as::<_, WalletBalance>(
        "SELECT id, balance, held FROM token_wallets
         WHERE ($1::uuid IS NOT NULL AND id = $1) OR ($1::uuid IS NULL AND user_id = $2 AND organization_id IS NULL)",
    )
    .bind(wallet_id)
    .bind(user_id)
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| {
        let name = wallet_id.map_or_else(|| format!("of user {user_id:?}"), |id| id.to_string());
        StoreError::not_found("wallet", name)
    })
}
