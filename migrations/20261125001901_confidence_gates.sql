-- Confidence gates (seed 004 override resolution): a gated step's reply
-- states its confidence; a reply below the gate is run again (its
-- contribution superseded, kept) and the one kept after the last rerun is
-- flagged. Expand only: a nullable column and one with a constant default.
ALTER TABLE dialectic_contributions
    ADD COLUMN confidence double precision,
    ADD COLUMN low_confidence boolean NOT NULL DEFAULT false;
