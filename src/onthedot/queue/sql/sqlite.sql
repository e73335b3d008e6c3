-- The table queue on SQLite. Its tables live in the store's database file but belong to the
-- queue role: they know message ids and bodies, never job semantics.

-- name: create_messages
-- One row per publication (issue 18 §1.4): a run sent again while its previous message is in
-- flight gets a row of its own, so settling the old delivery never touches the new one.
CREATE TABLE IF NOT EXISTS queue_messages (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,  -- the publication; send order
    message_id     TEXT NOT NULL,           -- the run id: several publications may share it
    body           BLOB NOT NULL,
    visible_at     TEXT NOT NULL,           -- UTC ISO 8601, fixed width
    delivery_count INTEGER NOT NULL DEFAULT 0 CHECK (delivery_count >= 0),
    receipt        TEXT,                    -- changes on every delivery: stale receivers lose
    sent_at        TEXT NOT NULL
)

-- name: create_visible_index
CREATE INDEX IF NOT EXISTS queue_messages_visible_seq ON queue_messages (visible_at, seq)

-- name: create_message_id_index
CREATE INDEX IF NOT EXISTS queue_messages_message_id ON queue_messages (message_id)

-- name: messages_keyed_by_id
-- A file made before publications had rows of their own (message_id was the primary key).
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'queue_messages'
AND NOT EXISTS (SELECT 1 FROM pragma_table_info('queue_messages') WHERE name = 'seq')

-- name: messages_rename_old
ALTER TABLE queue_messages RENAME TO queue_messages_by_id

-- name: messages_copy_old
INSERT INTO queue_messages (message_id, body, visible_at, delivery_count, receipt, sent_at)
SELECT message_id, body, visible_at, delivery_count, receipt, sent_at
FROM queue_messages_by_id ORDER BY rowid

-- name: messages_drop_old
DROP TABLE queue_messages_by_id

-- name: create_dead_letters
CREATE TABLE IF NOT EXISTS queue_dead_letters (
    message_id TEXT PRIMARY KEY,
    body       BLOB NOT NULL,
    reason     TEXT NOT NULL,
    dead_at    TEXT NOT NULL
)

-- name: send
INSERT INTO queue_messages (message_id, body, visible_at, sent_at)
VALUES (:message_id, :body, :now, :now)

-- name: visible
SELECT seq FROM queue_messages WHERE visible_at <= :now ORDER BY visible_at, seq LIMIT :limit

-- name: take
UPDATE queue_messages
SET visible_at = :invisible_until, delivery_count = delivery_count + 1, receipt = :receipt
WHERE seq = :seq AND visible_at <= :now
RETURNING message_id, body, delivery_count, receipt

-- name: extend
UPDATE queue_messages SET visible_at = :invisible_until
WHERE message_id = :message_id AND receipt = :receipt

-- name: ack
DELETE FROM queue_messages WHERE message_id = :message_id AND receipt = :receipt

-- name: nack
UPDATE queue_messages SET visible_at = :visible_at, receipt = NULL
WHERE message_id = :message_id AND receipt = :receipt

-- name: dead_letter_insert
INSERT INTO queue_dead_letters (message_id, body, reason, dead_at)
SELECT message_id, body, :reason, :now FROM queue_messages
WHERE message_id = :message_id AND receipt = :receipt
ON CONFLICT (message_id) DO UPDATE SET body = excluded.body, reason = excluded.reason,
                                       dead_at = excluded.dead_at

-- name: dead_letters
SELECT message_id, body, reason, dead_at FROM queue_dead_letters ORDER BY dead_at DESC LIMIT :limit

-- name: redrive_insert
INSERT INTO queue_messages (message_id, body, visible_at, sent_at)
SELECT message_id, body, :now, :now FROM queue_dead_letters WHERE message_id = :message_id

-- name: redrive_delete
DELETE FROM queue_dead_letters WHERE message_id = :message_id

-- name: live
SELECT message_id FROM queue_messages WHERE message_id IN (SELECT value FROM json_each(:ids))

-- name: prune_dead_letters
DELETE FROM queue_dead_letters WHERE dead_at < :before

-- name: depth
SELECT count(*) AS n FROM queue_messages

-- name: take_many
-- take for the publications :seqs (a JSON array, from visible) in one statement, each under
-- a receipt of its own (:receipt_prefix and its seq); the visibility guard is repeated.
UPDATE queue_messages
SET visible_at = :invisible_until, delivery_count = delivery_count + 1,
    receipt = :receipt_prefix || seq
WHERE seq IN (SELECT value FROM json_each(:seqs)) AND visible_at <= :now
RETURNING seq, message_id, body, delivery_count, receipt

-- name: ack_many
-- ack for many deliveries at once; :acks is a JSON array of [message_id, receipt] pairs, each
-- guarded by its own receipt. The rows returned are the deliveries it settled.
DELETE FROM queue_messages
WHERE (message_id, receipt) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                                FROM json_each(:acks))
RETURNING message_id, receipt
