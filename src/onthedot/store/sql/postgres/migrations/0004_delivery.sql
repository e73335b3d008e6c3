-- onthedot schema for PostgreSQL, version 4: delivering each run's result to the job's
-- channels, the user's inbox and the secrets that sign outgoing webhooks (docs/delivery.md).

-- Where a job's results go: a JSON list of channels. Jobs made before get the inbox.
ALTER TABLE jobs ADD COLUMN notify jsonb NOT NULL DEFAULT '[{"channel": "inbox"}]'::jsonb;

-- One row per (run, channel): a channel DELIVERED for a run is never sent again, however often
-- the run is executed.
CREATE TABLE deliveries (
    run_id      text COLLATE "C" NOT NULL,
    channel_key text NOT NULL,                      -- "inbox", "email:<address>", "webhook:<url>"
    channel     text NOT NULL CHECK (channel IN ('inbox', 'email', 'webhook')),
    target      text NOT NULL,                      -- what the user sees: address, URL, "inbox"
    status      text NOT NULL CHECK (status IN ('sending', 'delivered', 'failed')),
    attempts    integer NOT NULL CHECK (attempts >= 0),
    claim_token text,                               -- the run attempt that claimed it last
    sent_at     timestamptz,
    error       text,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (run_id, channel_key),
    CONSTRAINT deliveries_delivered_has_time CHECK (status <> 'delivered' OR sent_at IS NOT NULL)
);
CREATE INDEX deliveries_updated ON deliveries (updated_at);

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
