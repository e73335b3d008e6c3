-- onthedot schema for PostgreSQL, version 10: a job's history records "skip next" (POST
-- /v1/jobs/{job_id}:skip-next) and backfills (:backfill), and each job has an overlap policy (docs/schedules.md,
-- "Overlapping runs"; jobs made before keep what they did: skip).
ALTER TABLE job_changes DROP CONSTRAINT job_changes_action_check;
ALTER TABLE job_changes ADD CONSTRAINT job_changes_action_check
    CHECK (action IN ('update', 'pause', 'resume', 'run', 'delete', 'redrive', 'skip',
                      'backfill'));
ALTER TABLE jobs ADD COLUMN overlap_policy text NOT NULL DEFAULT 'skip'
    CONSTRAINT jobs_overlap_policy_check CHECK (overlap_policy IN ('skip', 'buffer_one', 'allow_all'));
