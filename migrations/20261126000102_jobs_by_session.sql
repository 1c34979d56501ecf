-- A session's jobs by stage: the planner reads them on every outcome (stage
-- progress, a stage's siblings, the session's open work) and only root jobs
-- were indexed, so each of those reads scanned every job of every session.
-- At 1,000 sessions that made Postgres CPU per job 60% higher than at 100
-- (BENCHMARKS.md, issue 22). This index covers the roots' lookups too.
CREATE INDEX dialectic_jobs_session ON dialectic_generation_jobs (session_id, stage_slug, iteration_number);
DROP INDEX dialectic_jobs_stage_roots;
