-- The table queue on PostgreSQL (queue/postgres.py). Its tables are made by the numbered
-- migrations in postgres_migrations/ and live in the store's schema, but belong to the queue
-- role: they know message ids and bodies, never job semantics. Every connection runs in UTC with
-- search_path set to that schema. %(channel)s is the NOTIFY channel of the schema: a statement
-- that makes a message visible now wakes the idle receivers of every process.

-- name: migrate_lock
-- Serialises concurrent open() calls for one schema (CREATE ... races), and with the store's
-- migrate(), which takes the same lock: both may CREATE the schema.
SELECT pg_advisory_xact_lock(hashtextextended('onthedot.migrate:' || %(schema)s, 0))

-- name: migrations_table
CREATE TABLE IF NOT EXISTS queue_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: migrations_done
SELECT version FROM queue_migrations

-- name: migration_record
INSERT INTO queue_migrations (version) VALUES (%(version)s)

-- name: send
-- One statement for a whole batch, one row per message: a send is one publication, even when
-- the id is already waiting or in flight (its ack must not take the new one along). NOTIFY is
-- sent only when a row was inserted, and only at commit.
WITH sent AS (
    INSERT INTO queue_messages (message_id, body, visible_at, sent_at)
    SELECT m.message_id, m.body, %(now)s, %(now)s
    FROM unnest(%(message_ids)s::text[], %(bodies)s::bytea[]) WITH ORDINALITY
         AS m (message_id, body, n)
    ORDER BY m.n
    RETURNING message_id
)
SELECT count(*) AS sent, CASE WHEN count(*) > 0 THEN pg_notify(%(channel)s, '') END AS woke
FROM sent

-- name: receive
-- Locks up to %(limit)s visible messages, passing over rows another receiver holds (SKIP
-- LOCKED: two receivers never wait for each other nor take the same row), and hides each until
-- the visibility deadline under a fresh receipt. The visibility guard is repeated in the UPDATE.
WITH picked AS (
    SELECT message_id, visible_at, seq FROM queue_messages
    WHERE visible_at <= %(now)s
    ORDER BY visible_at, seq
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), taken AS (
    UPDATE queue_messages AS m
    SET visible_at = %(invisible_until)s, delivery_count = m.delivery_count + 1,
        receipt = nextval('queue_receipts')
    FROM picked
    WHERE m.seq = picked.seq AND m.visible_at <= %(now)s
    RETURNING m.message_id, m.body, m.delivery_count, m.receipt,
              picked.visible_at AS was_visible_at, picked.seq
)
SELECT message_id, body, delivery_count, receipt FROM taken ORDER BY was_visible_at, seq

-- name: next_visible
-- When an idle receiver should look again at the latest: the earliest visibility deadline or
-- nack delay that ends (in flight messages included: their deadline is when they come back).
SELECT min(visible_at) AS next_visible FROM queue_messages

-- name: extend
UPDATE queue_messages SET visible_at = %(invisible_until)s
WHERE message_id = %(message_id)s AND receipt = %(receipt)s

-- name: nack
-- Ends this delivery: the message is visible again at %(visible_at)s under no receipt. A nack
-- without delay wakes the idle receivers at once; a delayed one is found by their next look
-- (an idle receiver wakes at the earliest visible_at, see next_visible).
WITH nacked AS (
    UPDATE queue_messages SET visible_at = %(visible_at)s, receipt = NULL
    WHERE message_id = %(message_id)s AND receipt = %(receipt)s
    RETURNING message_id
)
SELECT message_id, CASE WHEN %(wake)s THEN pg_notify(%(channel)s, '') END AS woke FROM nacked

-- name: dead_letter
-- Moves the message, guarded by the receipt like every other move, in one statement. A message
-- dead-lettered again after a redrive replaces its entry.
WITH gone AS (
    DELETE FROM queue_messages WHERE message_id = %(message_id)s AND receipt = %(receipt)s
    RETURNING message_id, body
)
INSERT INTO queue_dead_letters (message_id, body, reason, dead_at)
SELECT message_id, body, %(reason)s, %(now)s FROM gone
ON CONFLICT (message_id) DO UPDATE
SET body = excluded.body, reason = excluded.reason, dead_at = excluded.dead_at
RETURNING message_id

-- name: dead_letters
SELECT message_id, body, reason, dead_at FROM queue_dead_letters
ORDER BY dead_at DESC, message_id DESC LIMIT %(limit)s

-- name: redrive
-- Back to the main queue as a new publication (delivery count from 0), beside any message the
-- run was given meanwhile (duplicates are fenced by the store's claim).
WITH back AS (
    DELETE FROM queue_dead_letters WHERE message_id = %(message_id)s
    RETURNING message_id, body
), sent AS (
    INSERT INTO queue_messages (message_id, body, visible_at, sent_at)
    SELECT message_id, body, %(now)s, %(now)s FROM back
    RETURNING message_id
)
SELECT message_id, CASE WHEN EXISTS (SELECT 1 FROM sent) THEN pg_notify(%(channel)s, '') END
       AS woke
FROM back

-- name: live
SELECT DISTINCT message_id FROM queue_messages WHERE message_id = ANY(%(message_ids)s::text[])

-- name: prune_dead_letters
DELETE FROM queue_dead_letters WHERE dead_at < %(before)s

-- name: depth
SELECT count(*) AS n FROM queue_messages

-- name: ack_many
-- ack for a worker's acks that arrive together, in one statement: each pair is guarded by its
-- own receipt, and the rows returned are the deliveries it settled.
DELETE FROM queue_messages AS q
USING unnest(%(message_ids)s::text[], %(receipts)s::bigint[]) AS a (message_id, receipt)
WHERE q.message_id = a.message_id AND q.receipt = a.receipt
RETURNING q.message_id, q.receipt
