-- The declared current schema of the SQLite store. The numbered migrations must produce exactly
-- this (tests/conformance/test_migrations.py compares sqlite_master); change both together.
-- Schema bookkeeping (schema_migrations) is created by the store.
-- Timestamps are UTC ISO 8601 text of fixed width ('2026-06-22T08:00:00.000000Z'), so text order
-- is time order and an operator can read them in the sqlite3 shell.

CREATE TABLE jobs (
    job_id          TEXT PRIMARY KEY,               -- ULID: sorts by creation time
    user_id         TEXT NOT NULL,
    name            TEXT NOT NULL,
    action          TEXT NOT NULL,                  -- JSON: {"type": ..., ...}
    job_type        TEXT NOT NULL CHECK (job_type IN ('immediate', 'one-time', 'recurring')),
    schedule        TEXT,
    run_time        TEXT,
    timezone        TEXT NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('scheduled', 'paused', 'completed', 'failed', 'cancelled')),
    retry_policy    TEXT NOT NULL,                  -- JSON
    misfire_policy  TEXT NOT NULL CHECK (misfire_policy IN ('run_late', 'skip')),
    timeout_seconds REAL NOT NULL CHECK (timeout_seconds > 0),
    idempotency_key TEXT,
    request_hash    TEXT,
    next_run_at     TEXT,
    last_run_id     TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    version         INTEGER NOT NULL DEFAULT 0,     -- compare-and-set on every change
    notify          TEXT NOT NULL DEFAULT '[{"channel": "inbox"}]', -- JSON: channels (0004)
    flexible_window_seconds INTEGER NOT NULL DEFAULT 0   -- 0 = exact (0005)
                    CHECK (flexible_window_seconds BETWEEN 0 AND 3600),
    overlap_policy  TEXT NOT NULL DEFAULT 'skip'     -- (0010)
                    CHECK (overlap_policy IN ('skip', 'buffer_one', 'allow_all')),
    CHECK (job_type <> 'recurring' OR schedule IS NOT NULL),
    CHECK (job_type <> 'one-time' OR run_time IS NOT NULL)
);
CREATE INDEX jobs_by_user ON jobs (user_id, job_id);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX jobs_active_by_user ON jobs (user_id) WHERE status IN ('scheduled', 'paused');

CREATE TABLE job_runs (
    run_id           TEXT PRIMARY KEY,              -- deterministic: job_id + scheduled_at
    job_id           TEXT NOT NULL REFERENCES jobs (job_id),
    time_bucket      INTEGER NOT NULL,              -- scheduled_at (UTC) truncated to the hour
    shard            INTEGER NOT NULL CHECK (shard >= 0),
    scheduled_at     TEXT NOT NULL,
    kind             TEXT NOT NULL CHECK (kind IN ('scheduled', 'manual')),
    status           TEXT NOT NULL CHECK (status IN ('PENDING', 'ENQUEUED', 'RUNNING', 'RETRYING',
                                                     'SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED')),
    attempt          INTEGER NOT NULL CHECK (attempt >= 0),
    lease_token      TEXT,
    lease_expires_at TEXT,
    enqueued_at      TEXT,
    started_at       TEXT,
    finished_at      TEXT,
    output           TEXT,                          -- JSON
    error            TEXT,
    dead_lettered    INTEGER NOT NULL DEFAULT 0 CHECK (dead_lettered IN (0, 1)),
    retry_at         TEXT,                          -- RETRYING: when the next attempt is due
    CHECK (status <> 'RUNNING'
           OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL AND started_at IS NOT NULL)),
    CHECK (status NOT IN ('SUCCEEDED', 'FAILED', 'SKIPPED') OR finished_at IS NOT NULL),
    CHECK (dead_lettered = 0 OR status = 'FAILED')
);
-- The execution path: one (shard, time_bucket) partition at a time, due runs in schedule order.
-- Partial, so finished history costs the watcher nothing.
CREATE INDEX job_runs_due ON job_runs (shard, time_bucket, scheduled_at, job_id)
    WHERE status = 'PENDING';
-- The rescuer's sweeps, across shards.
CREATE INDEX job_runs_enqueued ON job_runs (enqueued_at) WHERE status = 'ENQUEUED';
CREATE INDEX job_runs_retry ON job_runs (retry_at) WHERE status = 'RETRYING';
CREATE INDEX job_runs_lease ON job_runs (lease_expires_at) WHERE status = 'RUNNING';
-- History past retention, oldest first.
CREATE INDEX job_runs_finished ON job_runs (finished_at)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED');
CREATE INDEX job_runs_by_job ON job_runs (job_id, scheduled_at);
CREATE INDEX job_runs_dead ON job_runs (run_id) WHERE dead_lettered = 1;

CREATE TABLE run_events (
    event_id   INTEGER PRIMARY KEY AUTOINCREMENT,   -- monotonic: SQLite has a single writer
    job_id     TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('SUCCEEDED', 'FAILED', 'SKIPPED')),
    emitted_at TEXT NOT NULL
);

CREATE TABLE consumer_cursors (
    consumer TEXT PRIMARY KEY,
    position INTEGER NOT NULL CHECK (position >= 0)
);

CREATE TABLE shard_watermarks (
    shard  INTEGER PRIMARY KEY,
    bucket     INTEGER NOT NULL,
    generation INTEGER NOT NULL DEFAULT 0          -- bumped by inserts at or behind it
);

CREATE TABLE shard_leases (
    shard      INTEGER PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires_at TEXT NOT NULL,                       -- 1970-01-01: released (rows stay)
    token INTEGER NOT NULL DEFAULT 1                -- (0008) fencing token of the tenure
);

CREATE TABLE members (
    group_name TEXT NOT NULL,
    member     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    PRIMARY KEY (group_name, member)
);

CREATE TABLE api_tokens (
    token_hash TEXT PRIMARY KEY,                    -- sha256 of the bearer token; never the token
    user_id    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    token_id TEXT,                                  -- (0007) what list/revoke/rotate name
    scopes TEXT NOT NULL DEFAULT 'write',           -- (0007) space-separated
    expires_at TEXT,                                -- (0007)
    last_used_at TEXT,                              -- (0007) updated at most once a minute
    revoked_at TEXT                                 -- (0007) kept, never accepted again
);
CREATE UNIQUE INDEX api_tokens_id ON api_tokens (token_id);

-- Settings that shape stored data (the shard count), written once by the first migrate.
CREATE TABLE deployment (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- --- news digests (0003) ---
-- What a news digest remembers of each feed between runs: one row per (job, run, feed). A run
-- reads the rows of the job's last SUCCEEDED run only; the rows of that run and of the latest
-- run are kept, older ones deleted when a run writes its own.
CREATE TABLE feed_state (
    job_id        TEXT NOT NULL,
    run_id        TEXT NOT NULL,                  -- the run whose attempt read the feed
    feed_url      TEXT NOT NULL,
    etag          TEXT,                           -- validators for a conditional GET
    last_modified TEXT,
    fetched_at    TEXT NOT NULL,                  -- read in full or confirmed unchanged
    seen          TEXT NOT NULL,                  -- JSON array of item keys, bounded
    PRIMARY KEY (job_id, run_id, feed_url)
);

-- --- delivery (0004) ---
-- One row per (run, channel): a channel DELIVERED for a run is never sent again, however often
-- the run is executed.
CREATE TABLE deliveries (
    run_id          TEXT NOT NULL,
    channel_key     TEXT NOT NULL,                  -- "inbox", "email:<address>", "webhook:<url>"
    channel         TEXT NOT NULL CHECK (channel IN ('inbox', 'email', 'webhook')),
    target          TEXT NOT NULL,                  -- what the user sees: address, URL, "inbox"
    status          TEXT NOT NULL
                    CHECK (status IN ('sending', 'delivered', 'retrying', 'failed')),
    attempts        INTEGER NOT NULL CHECK (attempts >= 0),
    claim_token     TEXT,                           -- the attempt or retry sweep that claimed it
    sent_at         TEXT,
    error           TEXT,                           -- the last failed send's
    updated_at      TEXT NOT NULL,
    next_attempt_at TEXT,                           -- retrying: due; sending: the claim is lost
    retries         INTEGER NOT NULL DEFAULT 0 CHECK (retries >= 0),  -- scheduled retries so far
    PRIMARY KEY (run_id, channel_key),
    CHECK (status <> 'delivered' OR sent_at IS NOT NULL),
    CHECK (status NOT IN ('retrying', 'sending') OR next_attempt_at IS NOT NULL)
);
CREATE INDEX deliveries_updated ON deliveries (updated_at);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at)
    WHERE status IN ('retrying', 'sending');

-- The inbox channel: one item per run, by construction.
CREATE TABLE inbox (
    item_id      TEXT PRIMARY KEY,                  -- ULID: sorts by delivery time
    user_id      TEXT NOT NULL,
    job_id       TEXT NOT NULL,
    run_id       TEXT NOT NULL UNIQUE,
    title        TEXT NOT NULL,
    body         TEXT NOT NULL,                     -- the output as text
    output       TEXT,                              -- JSON
    scheduled_at TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    read_at      TEXT
);
CREATE INDEX inbox_by_user ON inbox (user_id, item_id);
CREATE INDEX inbox_unread ON inbox (user_id, item_id) WHERE read_at IS NULL;
CREATE INDEX inbox_created ON inbox (created_at);

-- HMAC keys of the X-Onthedot-Signature header; kept readable because signing needs them.
CREATE TABLE webhook_secrets (
    secret_id  TEXT PRIMARY KEY,                    -- ULID: the newest signs
    user_id    TEXT NOT NULL,
    secret     TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX webhook_secrets_by_user ON webhook_secrets (user_id, secret_id);

-- (0006) One row per claim of a run, written in the transaction of the run's own transition. The
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
                                               'redrive', 'skip', 'backfill')),
    details    TEXT NOT NULL,                       -- JSON object
    changed_at TEXT NOT NULL
);
CREATE INDEX job_changes_by_job ON job_changes (job_id, change_id);
