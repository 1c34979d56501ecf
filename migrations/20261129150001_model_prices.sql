-- Prices in money (issue 56, "Prices"). The wallet counts tokens; these say
-- what a model's tokens cost in a currency, so a session's cost can be read
-- in money and two models compared on one pipeline. (Expand-only: older
-- builds ignore every column added here.)
--
-- Money is exact: integer nanos of the currency (10^-9 of a unit, as
-- google.type.Money), never a float. A price is per million tokens; NULL is
-- unpriced. Input and output are priced together or not at all; a cached
-- price (prompt-cache reads) needs them, and without it cached tokens are
-- billed at the input price.
ALTER TABLE ai_providers
    ADD COLUMN price_input_nanos_per_mtok        bigint CHECK (price_input_nanos_per_mtok >= 0),
    ADD COLUMN price_output_nanos_per_mtok       bigint CHECK (price_output_nanos_per_mtok >= 0),
    ADD COLUMN price_cached_input_nanos_per_mtok bigint CHECK (price_cached_input_nanos_per_mtok >= 0),
    ADD COLUMN price_currency text NOT NULL DEFAULT 'USD' CHECK (price_currency ~ '^[A-Z]{3}$'),
    ADD CONSTRAINT ai_providers_prices_together CHECK (
        (price_input_nanos_per_mtok IS NULL) = (price_output_nanos_per_mtok IS NULL)
        AND (price_cached_input_nanos_per_mtok IS NULL OR price_input_nanos_per_mtok IS NOT NULL));

-- What a model call's capture (or late debit) was for and cost in money, as
-- priced when the call was made: later price changes do not rewrite it. The
-- token counts are the provider's (cached input tokens are a part of the
-- input tokens). Money is NULL when the model was unpriced.
ALTER TABLE token_wallet_transactions
    ADD COLUMN input_tokens        bigint CHECK (input_tokens >= 0),
    ADD COLUMN output_tokens       bigint CHECK (output_tokens >= 0),
    ADD COLUMN cached_input_tokens bigint CHECK (cached_input_tokens >= 0),
    ADD COLUMN money_currency      text,
    ADD COLUMN money_nanos         bigint CHECK (money_nanos >= 0),
    ADD CONSTRAINT token_wallet_transactions_money_whole
        CHECK ((money_currency IS NULL) = (money_nanos IS NULL));

-- The same, recorded before the capture, so the wallet's sweep captures an
-- abandoned call with its money too.
ALTER TABLE model_call_usage
    ADD COLUMN input_tokens        bigint CHECK (input_tokens >= 0),
    ADD COLUMN output_tokens       bigint CHECK (output_tokens >= 0),
    ADD COLUMN cached_input_tokens bigint CHECK (cached_input_tokens >= 0),
    ADD COLUMN money_currency      text,
    ADD COLUMN money_nanos         bigint CHECK (money_nanos >= 0),
    ADD CONSTRAINT model_call_usage_money_whole
        CHECK ((money_currency IS NULL) = (money_nanos IS NULL));
