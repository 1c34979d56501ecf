-- Idempotent mutations (issue 61, item 4). A mutating call that names a
-- client_request_id claims a row here before it acts and stores its encoded
-- answer after; a retry with the same id within the gateway's window gets that
-- answer back instead of acting again. Written by the gateway only: the row is
-- the gateway's memory of what it answered, not session state.
CREATE TABLE dialectic_idempotent_calls (
    user_id     uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The RPC's name: the same id may be used for two different calls.
    rpc         text        NOT NULL,
    request_id  text        NOT NULL CHECK (length(request_id) BETWEEN 1 AND 128),
    -- SHA-256 of the encoded request: the same id with another request is refused.
    fingerprint bytea       NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    -- NULL while the first call is in flight.
    answer      bytea,
    PRIMARY KEY (user_id, rpc, request_id)
);

-- Expired rows are pruned per user when that user makes the next claim.
CREATE INDEX dialectic_idempotent_calls_expiry
    ON dialectic_idempotent_calls (user_id, claimed_at);
