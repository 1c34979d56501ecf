-- A hold is closed once: by its capture or by its release. The ledger's
-- common requests no longer lock the wallet before they look (one statement,
-- so the wallet row is locked only while it runs; BENCHMARKS.md, issue 22),
-- so two closes racing under different keys are stopped here: the second
-- fails on this index and its request runs again on the locked path, which
-- sees the first.
CREATE UNIQUE INDEX token_wallet_transactions_one_close
    ON token_wallet_transactions (hold_id)
    WHERE kind IN ('capture', 'release');
