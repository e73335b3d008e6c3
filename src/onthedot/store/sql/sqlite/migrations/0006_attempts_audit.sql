-- onthedot schema for SQLite, version 6: every attempt of a run, and the history of each job's
-- changes (docs/api.md, "Attempts" and "History").

-- One row per claim of a run, written in the transaction of the run's own transition. The
-- claim's fencing token names the attempt: attempt numbers repeat after a release (not
-- counted) or a redrive (starts again at 1). The token is never shown.
CREATE TABLE run_attempts (
    run_id      TEXT NOT NULL,
    token       TEXT NOT NULL,
    attempt     INTEGER NOT NULL CHECK (attempt >= 1),
    status      TEXT NOT NULL
                CHECK (status IN ('running', 'succeeded', 'failed', 'released', 'lost')),
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    error       TEXT,
    preview     TEXT,                               -- the start of the output, bounded
    PRIMARY KEY (run_id, token),
    CHECK (status = 'running' OR finished_at IS NOT NULL)
);
CREATE INDEX run_attempts_finished ON run_attempts (finished_at) WHERE status <> 'running';

-- Who changed a job, how and when; written in the transaction of the change. A job's creation
-- is read from the job row itself.
CREATE TABLE job_changes (
    change_id  TEXT PRIMARY KEY,                    -- ULID: sorts by time
    job_id     TEXT NOT NULL,
    actor      TEXT NOT NULL,
    channel    TEXT CHECK (channel IS NULL OR channel IN ('api', 'mcp', 'chat', 'cli')),
    action     TEXT NOT NULL CHECK (action IN ('update', 'pause', 'resume', 'run', 'delete',
                                               'redrive')),
    details    TEXT NOT NULL,                       -- JSON object
    changed_at TEXT NOT NULL
);
CREATE INDEX job_changes_by_job ON job_changes (job_id, change_id);
