-- Expand/contract upgrades. A migration that only expands the schema (new
-- tables, nullable or defaulted columns, indexes) leaves the previous release
-- working, so its pods stay ready while the new ones roll out. A migration
-- that contracts it (drops, renames, new NOT NULL without a default) must set
-- oldest_compatible to the schema version of the oldest build that still works
-- on it, usually its own predecessor's: older builds then report NOT_SERVING
-- instead of failing on a missing column. Contract one release after the
-- expand that replaced what is removed.
CREATE TABLE schema_compatibility (
    singleton         boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    oldest_compatible bigint NOT NULL
);
-- Builds before this one refuse any newer schema by themselves.
INSERT INTO schema_compatibility (oldest_compatible) VALUES (20261123000801);
