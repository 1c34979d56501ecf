-- Project documents (AddProjectDocument): files a user uploads to a project,
-- stored under `projects/{id}/general_resource/` (seed 001), indexed through
-- the indexer, and read by steps through `project_document` input rules in
-- upload order. A retried upload with the same client request id is the
-- first one. Expand only: older builds never read the column.
ALTER TABLE dialectic_project_resources ADD COLUMN client_request_id text;
CREATE UNIQUE INDEX dialectic_project_resources_request
    ON dialectic_project_resources (project_id, client_request_id)
    WHERE client_request_id IS NOT NULL;
CREATE INDEX dialectic_project_resources_uploads
    ON dialectic_project_resources (project_id, created_at)
    WHERE resource_type = 'project_document';
