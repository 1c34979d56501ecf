-- Prompt caching (issue 56, "Prompt caching"). Anthropic bills the tokens a
-- call writes to its prompt cache (`cache_creation_input_tokens`) at their
-- own rate (1.25× input for its 5-minute cache), so a model may price them
-- apart; NULL bills them at the input price. Like the cached price, it needs
-- an input price. (Expand-only: older builds ignore every column added here.)
ALTER TABLE ai_providers
    ADD COLUMN price_cache_write_nanos_per_mtok bigint
        CHECK (price_cache_write_nanos_per_mtok >= 0),
    ADD CONSTRAINT ai_providers_cache_write_price_needs_input CHECK (
        price_cache_write_nanos_per_mtok IS NULL OR price_input_nanos_per_mtok IS NOT NULL);

-- The tokens a call wrote to the provider's prompt cache, a part of its
-- input tokens like the cached ones; NULL on rows recorded before.
ALTER TABLE token_wallet_transactions
    ADD COLUMN cache_write_input_tokens bigint CHECK (cache_write_input_tokens >= 0);

ALTER TABLE model_call_usage
    ADD COLUMN cache_write_input_tokens bigint CHECK (cache_write_input_tokens >= 0);
