-- onthedot queue schema for PostgreSQL, version 1: the table queue (docs/postgres.md, "The table
-- queue"). These migrations belong to the queue role, not to the store: PostgresQueue.open()
-- applies them, recorded in queue_migrations, in the same schema (search_path) as the store's
-- tables. A deployment that uses NATS never creates them.

-- Fencing: every delivery takes the next number. An ack, nack, extend or dead-letter names the
-- number it was handed; once the message was delivered again the number no longer matches and
-- the late move changes nothing.
CREATE SEQUENCE queue_receipts AS bigint;

-- One row per message that is waiting, in flight or waiting out a nack delay. Acked and
-- dead-lettered messages are deleted: the table's size is the backlog, not the history.
CREATE TABLE queue_messages (
    message_id     text COLLATE "C" PRIMARY KEY,   -- the run id: a second send collapses into it
    body           bytea NOT NULL,
    visible_at     timestamptz NOT NULL,           -- receivable from then on; pushed forward by
                                                   -- a delivery (the visibility deadline), an
                                                   -- extend and a delayed nack
    delivery_count integer NOT NULL DEFAULT 0 CHECK (delivery_count >= 0),
    receipt        bigint,                         -- the latest delivery's number; NULL when
                                                   -- never delivered or nacked
    sent_at        timestamptz NOT NULL,
    seq            bigint GENERATED ALWAYS AS IDENTITY,  -- send order among equal visible_at
    CONSTRAINT queue_messages_receipt_after_delivery CHECK (receipt IS NULL OR delivery_count > 0)
);
-- The receive scan: the oldest visible messages first, and "when does the next one become
-- visible" for an idle receiver's wait.
CREATE INDEX queue_messages_visible ON queue_messages (visible_at, seq);

-- Messages a worker gave up on; listed and redriven through the API, pruned after retention.
CREATE TABLE queue_dead_letters (
    message_id text COLLATE "C" PRIMARY KEY,
    body       bytea NOT NULL,
    reason     text NOT NULL,
    dead_at    timestamptz NOT NULL
);
CREATE INDEX queue_dead_letters_dead_at ON queue_dead_letters (dead_at);
