-- onthedot schema for PostgreSQL, version 10: a job's history records "skip next" (POST
-- /v1/jobs/{job_id}:skip-next).
ALTER TABLE job_changes DROP CONSTRAINT job_changes_action_check;
ALTER TABLE job_changes ADD CONSTRAINT job_changes_action_check
    CHECK (action IN ('update', 'pause', 'resume', 'run', 'delete', 'redrive', 'skip'));
