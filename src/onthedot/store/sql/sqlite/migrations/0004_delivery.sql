-- onthedot schema for SQLite, version 4: delivering each run's result to the job's channels,
-- the user's inbox and the secrets that sign outgoing webhooks (docs/delivery.md).

-- Where a job's results go: a JSON list of channels. Jobs made before get the inbox.
ALTER TABLE jobs ADD COLUMN notify TEXT NOT NULL DEFAULT '[{"channel": "inbox"}]';

-- One row per (run, channel): a channel DELIVERED for a run is never sent again, however often
-- the run is executed.
CREATE TABLE deliveries (
    run_id      TEXT NOT NULL,
    channel_key TEXT NOT NULL,                      -- "inbox", "email:<address>", "webhook:<url>"
    channel     TEXT NOT NULL CHECK (channel IN ('inbox', 'email', 'webhook')),
    target      TEXT NOT NULL,                      -- what the user sees: address, URL, "inbox"
    status      TEXT NOT NULL CHECK (status IN ('sending', 'delivered', 'failed')),
    attempts    INTEGER NOT NULL CHECK (attempts >= 0),
    claim_token TEXT,                               -- the run attempt that claimed it last
    sent_at     TEXT,
    error       TEXT,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, channel_key),
    CHECK (status <> 'delivered' OR sent_at IS NOT NULL)
);
CREATE INDEX deliveries_updated ON deliveries (updated_at);

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
