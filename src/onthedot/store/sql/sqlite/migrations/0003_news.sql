-- onthedot schema for SQLite, version 3: what a news digest remembers of each feed between runs
-- of a job (docs/actions.md).

-- One row per (job, run, feed): a run writes its own rows, and the next run reads those of the
-- job's last SUCCEEDED run only, so an attempt whose result was never recorded cannot make a
-- feed look already read. Only the rows of that run and of the latest run are kept.
CREATE TABLE feed_state (
    job_id        TEXT NOT NULL,
    run_id        TEXT NOT NULL,
    feed_url      TEXT NOT NULL,
    etag          TEXT,
    last_modified TEXT,
    fetched_at    TEXT NOT NULL,
    seen          TEXT NOT NULL,
    PRIMARY KEY (job_id, run_id, feed_url)
);
