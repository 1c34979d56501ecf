-- A rendered document can show a JSON output (an essay's outline, an
-- argument map): the markdown is for the person, while later steps keep
-- reading the output's JSON contribution (crates/store/src/inputs.rs).
ALTER TABLE dialectic_project_resources
    ADD COLUMN is_json_backed boolean NOT NULL DEFAULT false;
