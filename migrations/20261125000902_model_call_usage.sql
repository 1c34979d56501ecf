-- What a held model call cost, written by the executor as soon as the reply
-- arrives and before it captures. If the executor dies in between, or the
-- capture cannot reach the wallet, the wallet's sweep captures this amount
-- once the attempt is over instead of releasing the hold: a call that
-- happened is charged exactly once. (Expand-only: older builds ignore it.)
CREATE TABLE model_call_usage (
    hold_id    uuid PRIMARY KEY REFERENCES token_wallet_transactions (id),
    amount     bigint NOT NULL CHECK (amount >= 0),
    created_at timestamptz NOT NULL DEFAULT now()
);
