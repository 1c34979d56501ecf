-- Closing a hold (capture, release, the sweeps) first asks whether the hold is
-- already closed. Without an index on hold_id that question scanned the whole
-- ledger while the wallet row was locked, so every capture of a wallet took
-- longer as its ledger grew and the wallet's calls queued behind it: at 1,000
-- sessions on one wallet, most of the run's Postgres time was spent waiting for
-- that lock (BENCHMARKS.md, issue 22).
CREATE INDEX token_wallet_transactions_hold ON token_wallet_transactions (hold_id)
    WHERE hold_id IS NOT NULL;
