-- API keys: the gateway authenticates every call by one. Only the SHA-256 of a
-- key is stored; the key is shown once, when `dialecticd admin create-key` makes it.
CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text NOT NULL,
    key_hash     text NOT NULL UNIQUE CHECK (length(key_hash) = 64),
    -- The key's first characters, to tell keys apart in lists; never enough to use.
    shown_part   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

CREATE INDEX api_keys_user ON api_keys (user_id);
