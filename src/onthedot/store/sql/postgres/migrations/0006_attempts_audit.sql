-- onthedot schema for PostgreSQL, version 6: every attempt of a run, and the history of each
-- job's changes (docs/api.md, "Attempts" and "History"). Neither table is partitioned: like
-- run_events they are small beside job_runs and pruned by a bounded DELETE.

-- One row per claim of a run, written in the statement (so the transaction) of the run's own
-- transition. The claim's fencing token names the attempt: attempt numbers repeat after a
-- release (not counted) or a redrive (starts again at 1). The token is never shown.
CREATE TABLE run_attempts (
    run_id      text COLLATE "C" NOT NULL,
    token       text NOT NULL,
    attempt     integer NOT NULL CHECK (attempt >= 1),
    status      text NOT NULL
                CHECK (status IN ('running', 'succeeded', 'failed', 'released', 'lost')),
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    error       text,
    preview     text,                               -- the start of the output, bounded
    PRIMARY KEY (run_id, token),
    CONSTRAINT run_attempts_finished_has_time CHECK (status = 'running' OR finished_at IS NOT NULL)
);
CREATE INDEX run_attempts_finished ON run_attempts (finished_at) WHERE status <> 'running';

-- Who changed a job, how and when; written in the transaction of the change. A job's creation
-- is read from the job row itself.
CREATE TABLE job_changes (
    change_id  text COLLATE "C" PRIMARY KEY,        -- ULID: sorts by time
    job_id     text COLLATE "C" NOT NULL,
    actor      text NOT NULL,
    channel    text CHECK (channel IS NULL OR channel IN ('api', 'mcp', 'chat', 'cli')),
    action     text NOT NULL CHECK (action IN ('update', 'pause', 'resume', 'run', 'delete',
                                               'redrive')),
    details    jsonb NOT NULL,
    changed_at timestamptz NOT NULL
);
CREATE INDEX job_changes_by_job ON job_changes (job_id, change_id);
