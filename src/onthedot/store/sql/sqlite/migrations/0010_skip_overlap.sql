-- onthedot schema for SQLite, version 10: a job's history records "skip next" (POST
-- /v1/jobs/{job_id}:skip-next) and backfills (:backfill), and each job has an overlap policy (docs/schedules.md,
-- "Overlapping runs"; jobs made before keep what they did: skip). SQLite cannot change a CHECK
-- in place: job_changes is copied aside, created again as schema.sql declares it, and filled
-- back.
CREATE TABLE job_changes_before_0010 AS SELECT * FROM job_changes;
DROP TABLE job_changes;
CREATE TABLE job_changes (
    change_id  TEXT PRIMARY KEY,                    -- ULID: sorts by time
    job_id     TEXT NOT NULL,
    actor      TEXT NOT NULL,
    channel    TEXT CHECK (channel IS NULL OR channel IN ('api', 'mcp', 'chat', 'cli')),
    action     TEXT NOT NULL CHECK (action IN ('update', 'pause', 'resume', 'run', 'delete',
                                               'redrive', 'skip', 'backfill')),
    details    TEXT NOT NULL,                       -- JSON object
    changed_at TEXT NOT NULL
);
INSERT INTO job_changes (change_id, job_id, actor, channel, action, details, changed_at)
SELECT change_id, job_id, actor, channel, action, details, changed_at
FROM job_changes_before_0010;
DROP TABLE job_changes_before_0010;
CREATE INDEX job_changes_by_job ON job_changes (job_id, change_id);
ALTER TABLE jobs ADD COLUMN overlap_policy TEXT NOT NULL DEFAULT 'skip'
    CHECK (overlap_policy IN ('skip', 'buffer_one', 'allow_all'));
