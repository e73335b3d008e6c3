-- onthedot schema for PostgreSQL, version 9: deliveries retried on a schedule
-- (docs/delivery.md, "Failures and retries"). A send that failed with an error worth retrying
-- leaves the delivery 'retrying' until next_attempt_at; 'failed' is final. A 'sending' claim
-- carries the time it counts as lost in next_attempt_at.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('sending', 'delivered', 'retrying', 'failed'));
ALTER TABLE deliveries ADD COLUMN next_attempt_at timestamptz;
ALTER TABLE deliveries ADD COLUMN retries integer NOT NULL DEFAULT 0 CHECK (retries >= 0);

-- A claim made before this version has no time at which it counts as lost: it gets one now.
UPDATE deliveries SET next_attempt_at = updated_at WHERE status = 'sending';

ALTER TABLE deliveries ADD CONSTRAINT deliveries_pending_has_time
    CHECK (status NOT IN ('retrying', 'sending') OR next_attempt_at IS NOT NULL);
-- The retry sweep's due query.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at)
    WHERE status IN ('retrying', 'sending');
