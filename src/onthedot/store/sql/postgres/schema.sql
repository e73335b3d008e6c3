-- The declared current schema of the PostgreSQL store. The numbered migrations must produce
-- exactly this (tests/conformance/test_migrations.py compares the catalogs); change both together.
-- Schema bookkeeping (schema_migrations) and the daily partitions are created by the store.

-- Ids compare byte-wise (COLLATE "C"), as in SQLite and Python, whatever the database's
-- collation: keyset pages and "first live member" mean the same on every backend.
CREATE TABLE jobs (
    job_id          text COLLATE "C" PRIMARY KEY,   -- ULID: sorts by creation time
    user_id         text NOT NULL,
    name            text NOT NULL,
    action          jsonb NOT NULL,                 -- {"type": ..., ...}
    job_type        text NOT NULL CHECK (job_type IN ('immediate', 'one-time', 'recurring')),
    schedule        text,
    run_time        text,
    timezone        text NOT NULL,
    status          text NOT NULL
                    CHECK (status IN ('scheduled', 'paused', 'completed', 'failed', 'cancelled')),
    retry_policy    jsonb NOT NULL,
    misfire_policy  text NOT NULL CHECK (misfire_policy IN ('run_late', 'skip')),
    timeout_seconds double precision NOT NULL CHECK (timeout_seconds > 0),
    idempotency_key text,
    request_hash    text,
    next_run_at     timestamptz,
    last_run_id     text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT jobs_recurring_has_schedule CHECK (job_type <> 'recurring' OR schedule IS NOT NULL),
    CONSTRAINT jobs_one_time_has_time CHECK (job_type <> 'one-time' OR run_time IS NOT NULL),
    version         bigint NOT NULL DEFAULT 0,      -- compare-and-set on every change (0002)
    notify          jsonb NOT NULL DEFAULT '[{"channel": "inbox"}]'::jsonb, -- channels (0004)
    flexible_window_seconds integer NOT NULL DEFAULT 0      -- 0 = exact (0005)
                    CONSTRAINT jobs_flexible_window_range
                    CHECK (flexible_window_seconds BETWEEN 0 AND 3600),
    overlap_policy  text NOT NULL DEFAULT 'skip'    -- (0010)
                    CONSTRAINT jobs_overlap_policy_check
                    CHECK (overlap_policy IN ('skip', 'buffer_one', 'allow_all'))
);
CREATE INDEX jobs_by_user ON jobs (user_id, job_id);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX jobs_active_by_user ON jobs (user_id) WHERE status IN ('scheduled', 'paused');

-- Natively partitioned by day on scheduled_at: old history is dropped by detaching a partition,
-- and a claim for one hourly bucket reads one partition. The run id encodes scheduled_at
-- (ids.run_id_for), so (run_id, scheduled_at) is as unique as run_id alone and every lookup by
-- run id can name its partition.
CREATE TABLE job_runs (
    run_id           text COLLATE "C" NOT NULL,     -- deterministic: job_id + scheduled_at
    job_id           text COLLATE "C" NOT NULL REFERENCES jobs (job_id),
    time_bucket      bigint NOT NULL,               -- scheduled_at (UTC) truncated to the hour
    shard            integer NOT NULL CHECK (shard >= 0),
    scheduled_at     timestamptz NOT NULL,
    kind             text NOT NULL CHECK (kind IN ('scheduled', 'manual')),
    status           text NOT NULL CHECK (status IN ('PENDING', 'ENQUEUED', 'RUNNING', 'RETRYING',
                                                     'SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED')),
    attempt          integer NOT NULL CHECK (attempt >= 0),
    lease_token      text,
    lease_expires_at timestamptz,
    enqueued_at      timestamptz,
    started_at       timestamptz,
    finished_at      timestamptz,
    output           jsonb,
    error            text,
    dead_lettered    boolean NOT NULL DEFAULT false,
    CONSTRAINT job_runs_pkey PRIMARY KEY (run_id, scheduled_at),
    -- The primary key is only as unique as run_id if run_id really encodes scheduled_at.
    CONSTRAINT job_runs_id_encodes_time
        CHECK (run_id LIKE '%-' || to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYYMMDD"T"HH24MISSUS"Z"')),
    CONSTRAINT job_runs_bucket_of_time
        CHECK (time_bucket = to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24')::bigint),
    CONSTRAINT job_runs_running_has_lease
        CHECK (status <> 'RUNNING'
               OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL AND started_at IS NOT NULL)),
    CONSTRAINT job_runs_finished_has_time
        CHECK (status NOT IN ('SUCCEEDED', 'FAILED', 'SKIPPED') OR finished_at IS NOT NULL),
    CONSTRAINT job_runs_dead_is_failed CHECK (NOT dead_lettered OR status = 'FAILED'),
    retry_at         timestamptz                    -- RETRYING: when the next attempt is due (0002)
) PARTITION BY RANGE (scheduled_at);
-- Safety net for runs outside the daily partitions the maintainer keeps (far future, or older
-- than yesterday when first inserted); PostgresStore.partitions_maintain moves a day's rows out
-- when it creates that day's partition.
CREATE TABLE job_runs_default PARTITION OF job_runs DEFAULT;
-- The execution path: one (shard, time_bucket) at a time, due runs in schedule order. Partial, so
-- finished history costs the watcher nothing; declared on the parent, so every partition has it.
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
CREATE INDEX job_runs_dead ON job_runs (run_id) WHERE dead_lettered;

-- Run event ids follow visibility, not allocation: the inserting transaction's id (xid8) in the
-- high bits and an ordinal within that transaction in the low 16 bits. Together with the filter
-- in events_after (only transactions older than every one still running), a consumer reading
-- "event_id > cursor" can never skip an event that commits late. See docs/postgres.md.
CREATE FUNCTION run_event_next_id() RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
    SELECT (pg_current_xact_id()::text::bigint << 16)
         + set_config('onthedot.run_event_ordinal',
                      (coalesce(nullif(current_setting('onthedot.run_event_ordinal', true), ''),
                                '0')::integer + 1)::text,
                      true)::bigint
$$;

CREATE TABLE run_events (
    event_id   bigint PRIMARY KEY DEFAULT run_event_next_id(),
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),  -- the inserting transaction
    job_id     text NOT NULL,
    run_id     text NOT NULL,
    status     text NOT NULL CHECK (status IN ('SUCCEEDED', 'FAILED', 'SKIPPED')),
    emitted_at timestamptz NOT NULL,
    -- Fails when one transaction appends more than 65535 events (the ordinal would spill into
    -- the next transaction's ids).
    CONSTRAINT run_events_id_of_xact CHECK (event_id >> 16 = xid::text::bigint)
);

CREATE TABLE consumer_cursors (
    consumer text PRIMARY KEY,
    position bigint NOT NULL CHECK (position >= 0)
);

CREATE TABLE shard_watermarks (
    shard  integer PRIMARY KEY,
    bucket     bigint NOT NULL,
    generation bigint NOT NULL DEFAULT 0           -- bumped by inserts at or behind it (0002)
);

CREATE TABLE shard_leases (
    shard      integer PRIMARY KEY,
    owner      text NOT NULL,
    expires_at timestamptz NOT NULL,                -- 1970-01-01: released (rows stay)
    token      bigint NOT NULL DEFAULT 1            -- (0008) fencing token of the tenure
);

-- Who is alive in a group (all watchers, the recurring watchers); ownership is the lease.
CREATE TABLE members (
    group_name text NOT NULL,
    member     text COLLATE "C" NOT NULL,  -- the first live member leads
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (group_name, member)
);

CREATE TABLE api_tokens (
    token_hash text PRIMARY KEY,                    -- sha256 of the bearer token; never the token
    user_id    text NOT NULL,
    created_at timestamptz NOT NULL,
    token_id   text NOT NULL,                       -- (0007) what list/revoke/rotate name
    scopes     text NOT NULL DEFAULT 'write',       -- (0007) space-separated
    expires_at timestamptz,                         -- (0007)
    last_used_at timestamptz,                       -- (0007) updated at most once a minute
    revoked_at timestamptz                          -- (0007) kept, never accepted again
);
CREATE UNIQUE INDEX api_tokens_id ON api_tokens (token_id);

-- Settings that shape stored data (the shard count), written once by the first migrate.
CREATE TABLE deployment (
    name  text PRIMARY KEY,
    value text NOT NULL
);

-- --- news digests (0003) ---
-- What a news digest remembers of each feed between runs: one row per (job, run, feed). A run
-- reads the rows of the job's last SUCCEEDED run only; the rows of that run and of the latest
-- run are kept, older ones deleted when a run writes its own.
CREATE TABLE feed_state (
    job_id        text COLLATE "C" NOT NULL,
    run_id        text COLLATE "C" NOT NULL,      -- the run whose attempt read the feed
    feed_url      text NOT NULL,
    etag          text,                           -- validators for a conditional GET
    last_modified text,
    fetched_at    timestamptz NOT NULL,           -- read in full or confirmed unchanged
    seen          jsonb NOT NULL,                 -- array of item keys, bounded
    PRIMARY KEY (job_id, run_id, feed_url)
);

-- --- delivery (0004) ---
-- One row per (run, channel): a channel DELIVERED for a run is never sent again, however often
-- the run is executed.
CREATE TABLE deliveries (
    run_id          text COLLATE "C" NOT NULL,
    channel_key     text NOT NULL,                  -- "inbox", "email:<address>", "webhook:<url>"
    channel         text NOT NULL CHECK (channel IN ('inbox', 'email', 'webhook')),
    target          text NOT NULL,                  -- what the user sees: address, URL, "inbox"
    status          text NOT NULL
                    CHECK (status IN ('sending', 'delivered', 'retrying', 'failed')),
    attempts        integer NOT NULL CHECK (attempts >= 0),
    claim_token     text,                           -- the attempt or retry sweep that claimed it
    sent_at         timestamptz,
    error           text,                           -- the last failed send's
    updated_at      timestamptz NOT NULL,
    next_attempt_at timestamptz,                    -- retrying: due; sending: the claim is lost
    retries         integer NOT NULL DEFAULT 0 CHECK (retries >= 0),  -- scheduled retries so far
    PRIMARY KEY (run_id, channel_key),
    CONSTRAINT deliveries_delivered_has_time CHECK (status <> 'delivered' OR sent_at IS NOT NULL),
    CONSTRAINT deliveries_pending_has_time
        CHECK (status NOT IN ('retrying', 'sending') OR next_attempt_at IS NOT NULL)
);
CREATE INDEX deliveries_updated ON deliveries (updated_at);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at)
    WHERE status IN ('retrying', 'sending');

-- The inbox channel: one item per run, by construction.
CREATE TABLE inbox (
    item_id      text COLLATE "C" PRIMARY KEY,      -- ULID: sorts by delivery time
    user_id      text NOT NULL,
    job_id       text COLLATE "C" NOT NULL,
    run_id       text COLLATE "C" NOT NULL UNIQUE,
    title        text NOT NULL,
    body         text NOT NULL,                     -- the output as text
    output       jsonb,
    scheduled_at timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    read_at      timestamptz
);
CREATE INDEX inbox_by_user ON inbox (user_id, item_id);
CREATE INDEX inbox_unread ON inbox (user_id, item_id) WHERE read_at IS NULL;
CREATE INDEX inbox_created ON inbox (created_at);

-- HMAC keys of the X-Onthedot-Signature header; kept readable because signing needs them.
CREATE TABLE webhook_secrets (
    secret_id  text COLLATE "C" PRIMARY KEY,        -- ULID: the newest signs
    user_id    text NOT NULL,
    secret     text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX webhook_secrets_by_user ON webhook_secrets (user_id, secret_id);

-- (0006) One row per claim of a run, written in the statement (so the transaction) of the run's own
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
                                               'redrive', 'skip', 'backfill')),
    details    jsonb NOT NULL,
    changed_at timestamptz NOT NULL
);
CREATE INDEX job_changes_by_job ON job_changes (job_id, change_id);
