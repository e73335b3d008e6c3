-- onthedot schema for PostgreSQL, version 3: what a news digest remembers of each feed between
-- runs of a job (docs/actions.md).

-- One row per (job, run, feed): a run writes its own rows, and the next run reads those of the
-- job's last SUCCEEDED run only, so an attempt whose result was never recorded cannot make a
-- feed look already read. Only the rows of that run and of the latest run are kept.
CREATE TABLE feed_state (
    job_id        text COLLATE "C" NOT NULL,
    run_id        text COLLATE "C" NOT NULL,
    feed_url      text NOT NULL,
    etag          text,
    last_modified text,
    fetched_at    timestamptz NOT NULL,
    seen          jsonb NOT NULL,
    PRIMARY KEY (job_id, run_id, feed_url)
);
