-- onthedot schema for PostgreSQL, version 2: what compare-and-set job changes, store-side retry
-- timing, the rescuer and history pruning need.

-- Every change of a job is a compare-and-set on its version (docs/reliability.md).
ALTER TABLE jobs ADD COLUMN version bigint NOT NULL DEFAULT 0;

-- When a RETRYING run is due again: the queue only ever holds runs that are due now. Runs left
-- RETRYING by version 1 (their retry parked in the queue) become due at once.
ALTER TABLE job_runs ADD COLUMN retry_at timestamptz;
UPDATE job_runs SET retry_at = now() WHERE status = 'RETRYING';

-- Bumped by an insert at or behind the watermark: a watcher's advance computed before that insert
-- is a compare-and-set on the generation it read, so it cannot land and hide the run.
ALTER TABLE shard_watermarks ADD COLUMN generation bigint NOT NULL DEFAULT 0;

-- The rescuer's sweeps, across shards, each through a partial index.
DROP INDEX job_runs_enqueued;
CREATE INDEX job_runs_enqueued ON job_runs (enqueued_at) WHERE status = 'ENQUEUED';
CREATE INDEX job_runs_retry ON job_runs (retry_at) WHERE status = 'RETRYING';
CREATE INDEX job_runs_lease ON job_runs (lease_expires_at) WHERE status = 'RUNNING';

-- History past retention, oldest first (daily partitions are dropped whole; these serve the
-- rows of partitions that are kept, and the jobs table).
CREATE INDEX job_runs_finished ON job_runs (finished_at)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED');
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status IN ('completed', 'failed', 'cancelled');

-- Settings that shape stored data (the shard count), written once by the first migrate.
CREATE TABLE deployment (
    name  text PRIMARY KEY,
    value text NOT NULL
);
