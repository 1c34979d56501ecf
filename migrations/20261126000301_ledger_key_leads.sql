-- A ledger request looks its idempotency key up on every call. With the
-- wallet first in the key's index, the planner could not tell that index
-- from the wallet's history index `(wallet_id, created_at DESC, id)` while
-- the table's statistics were a fresh install's (the seed row: one row per
-- page), and read the wallet's whole history for every hold and capture
-- until autovacuum analyzed the table (BENCHMARKS.md, the statistics round).
-- Led by the key, the index is the only one a lookup by key alone can use,
-- and the ledger's statements look keys up alone (crates/store/src/ledger.rs).
CREATE UNIQUE INDEX token_wallet_transactions_key
    ON token_wallet_transactions (idempotency_key, wallet_id);
ALTER TABLE token_wallet_transactions
    DROP CONSTRAINT token_wallet_transactions_wallet_id_idempotency_key_key;
