-- A document whose chain hit the continuation cap is assembled from what exists
-- and marked incomplete, on its chunks and on its rendered resource.
ALTER TABLE dialectic_contributions ADD COLUMN is_incomplete boolean NOT NULL DEFAULT false;
ALTER TABLE dialectic_project_resources ADD COLUMN is_incomplete boolean NOT NULL DEFAULT false;
