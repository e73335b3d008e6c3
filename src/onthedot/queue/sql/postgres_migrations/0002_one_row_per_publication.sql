-- onthedot queue schema for PostgreSQL, version 2: one row per publication (issue 18 §1.4).
-- Version 1 keyed a message by its run id, so a retry published while the previous attempt's
-- message was still held merged into it, and the ack of that delivery deleted both. Now every
-- send inserts a row of its own, keyed by seq; the run id is looked up through an index.
ALTER TABLE queue_messages DROP CONSTRAINT queue_messages_pkey;
ALTER TABLE queue_messages ADD CONSTRAINT queue_messages_pkey PRIMARY KEY (seq);
CREATE INDEX queue_messages_message_id ON queue_messages (message_id);
COMMENT ON COLUMN queue_messages.message_id IS
    'the run id: several publications of one run may wait or be in flight at once';
