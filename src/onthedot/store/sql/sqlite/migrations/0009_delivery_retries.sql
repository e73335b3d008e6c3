-- onthedot schema for SQLite, version 9: deliveries retried on a schedule (docs/delivery.md,
-- "Failures and retries"). A send that failed with an error worth retrying leaves the delivery
-- 'retrying' until next_attempt_at; 'failed' is final. A 'sending' claim carries the time it
-- counts as lost in next_attempt_at. SQLite cannot change a CHECK, so the table is rebuilt.
ALTER TABLE deliveries RENAME TO deliveries_0008;

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

-- A claim made before this version has no time at which it counts as lost: it gets one now.
INSERT INTO deliveries (run_id, channel_key, channel, target, status, attempts, claim_token,
                        sent_at, error, updated_at, next_attempt_at, retries)
SELECT run_id, channel_key, channel, target, status, attempts, claim_token, sent_at, error,
       updated_at, CASE WHEN status = 'sending' THEN updated_at END, 0
FROM deliveries_0008;

DROP TABLE deliveries_0008;

CREATE INDEX deliveries_updated ON deliveries (updated_at);
-- The retry sweep's due query.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at)
    WHERE status IN ('retrying', 'sending');
