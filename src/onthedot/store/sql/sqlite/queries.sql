-- Named queries of the SQLite store. Parameters are named (:name); nothing is spliced in.

-- name: job_insert
INSERT INTO jobs (job_id, user_id, name, action, job_type, schedule, run_time, timezone, status,
                  retry_policy, misfire_policy, timeout_seconds, idempotency_key, request_hash,
                  next_run_at, last_run_id, created_at, updated_at)
VALUES (:job_id, :user_id, :name, :action, :job_type, :schedule, :run_time, :timezone, :status,
        :retry_policy, :misfire_policy, :timeout_seconds, :idempotency_key, :request_hash,
        :next_run_at, :last_run_id, :created_at, :updated_at)
ON CONFLICT (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING

-- name: job_by_idempotency_key
SELECT * FROM jobs WHERE user_id = :user_id AND idempotency_key = :idempotency_key

-- name: job_get
SELECT * FROM jobs WHERE user_id = :user_id AND job_id = :job_id

-- name: job_get_any
SELECT * FROM jobs WHERE job_id = :job_id

-- name: jobs_list
SELECT * FROM jobs
WHERE user_id = :user_id
  AND (:status IS NULL OR status = :status)
  AND (:job_id_from IS NULL OR job_id >= :job_id_from)
  AND (:job_id_to IS NULL OR job_id < :job_id_to)
  AND (:before_job_id IS NULL OR job_id < :before_job_id)
ORDER BY job_id DESC
LIMIT :limit

-- name: job_update
UPDATE jobs
SET name = :name, action = :action, job_type = :job_type, schedule = :schedule,
    run_time = :run_time, timezone = :timezone, status = :status, retry_policy = :retry_policy,
    misfire_policy = :misfire_policy, timeout_seconds = :timeout_seconds,
    next_run_at = :next_run_at, last_run_id = :last_run_id, updated_at = :updated_at
WHERE job_id = :job_id AND user_id = :user_id

-- name: runs_cancel_open
UPDATE job_runs SET status = 'CANCELLED', finished_at = :now
WHERE job_id = :job_id AND (kind = 'scheduled' OR :include_manual)
  AND status IN ('PENDING', 'ENQUEUED', 'RETRYING')

-- name: run_insert
INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status, attempt,
                      lease_token, lease_expires_at, enqueued_at, started_at, finished_at,
                      output, error, dead_lettered)
VALUES (:run_id, :job_id, :time_bucket, :shard, :scheduled_at, :kind, :status, :attempt,
        :lease_token, :lease_expires_at, :enqueued_at, :started_at, :finished_at,
        :output, :error, :dead_lettered)
ON CONFLICT (run_id) DO NOTHING

-- name: run_revive
UPDATE job_runs SET status = 'PENDING', finished_at = NULL, attempt = 0, error = NULL
WHERE run_id = :run_id AND status = 'CANCELLED'

-- name: run_get
SELECT * FROM job_runs WHERE run_id = :run_id

-- name: runs_list
SELECT * FROM job_runs
WHERE job_id = :job_id
  AND (:before_scheduled_at IS NULL OR scheduled_at < :before_scheduled_at)
ORDER BY scheduled_at DESC
LIMIT :limit

-- name: runs_due_in_bucket
-- One (shard, time_bucket) partition through the partial index job_runs_due.
SELECT r.*, j.misfire_policy
FROM job_runs AS r JOIN jobs AS j ON j.job_id = r.job_id
WHERE r.shard = :shard AND r.time_bucket = :bucket AND r.status = 'PENDING'
  AND r.scheduled_at <= :now
ORDER BY r.scheduled_at, r.job_id
LIMIT :limit

-- name: run_mark_enqueued
UPDATE job_runs SET status = 'ENQUEUED', enqueued_at = :now
WHERE run_id = :run_id AND status = 'PENDING'

-- name: run_mark_skipped
UPDATE job_runs SET status = 'SKIPPED', finished_at = :now, error = 'missed: misfire policy is skip'
WHERE run_id = :run_id AND status = 'PENDING'

-- name: watermark_get
SELECT bucket FROM shard_watermarks WHERE shard = :shard

-- name: oldest_pending_bucket
SELECT min(time_bucket) AS bucket FROM job_runs WHERE shard = :shard AND status = 'PENDING'

-- name: watermark_set
INSERT INTO shard_watermarks (shard, bucket) VALUES (:shard, :bucket)
ON CONFLICT (shard) DO UPDATE SET bucket = excluded.bucket
WHERE excluded.bucket > shard_watermarks.bucket

-- name: runs_stale_enqueued
SELECT * FROM job_runs
WHERE shard = :shard AND status = 'ENQUEUED' AND enqueued_at < :older_than
ORDER BY enqueued_at
LIMIT :limit

-- name: run_touch_enqueued
UPDATE job_runs SET enqueued_at = :now WHERE run_id = :run_id AND status = 'ENQUEUED'

-- name: run_claim
-- A new attempt: for a queued or retrying run, or a running one whose worker stopped renewing.
UPDATE job_runs
SET status = 'RUNNING', attempt = attempt + 1, lease_token = :token,
    lease_expires_at = :lease_expires_at, started_at = :now, error = NULL
WHERE run_id = :run_id
  AND (status IN ('ENQUEUED', 'RETRYING') OR (status = 'RUNNING' AND lease_expires_at <= :now))
RETURNING *

-- name: run_release
-- A worker shutting down hands the run back undone: the interrupted attempt does not count.
UPDATE job_runs
SET status = 'ENQUEUED', attempt = attempt - 1, lease_token = NULL, lease_expires_at = NULL,
    enqueued_at = :now
WHERE run_id = :run_id AND status = 'RUNNING' AND lease_token = :token

-- name: run_extend_lease
UPDATE job_runs SET lease_expires_at = :lease_expires_at
WHERE run_id = :run_id AND status = 'RUNNING' AND lease_token = :token

-- name: run_retry
UPDATE job_runs SET status = 'RETRYING', error = :error, lease_expires_at = NULL
WHERE run_id = :run_id AND status = 'RUNNING' AND lease_token = :token

-- name: run_finish
UPDATE job_runs
SET status = :status, finished_at = :finished_at, output = :output, error = :error,
    dead_lettered = :dead_lettered, lease_expires_at = NULL
WHERE run_id = :run_id AND status = 'RUNNING' AND lease_token = :token
RETURNING job_id

-- name: event_append
INSERT INTO run_events (job_id, run_id, status, emitted_at)
VALUES (:job_id, :run_id, :status, :emitted_at)
RETURNING event_id

-- name: run_redrive
UPDATE job_runs
SET status = 'ENQUEUED', attempt = 0, dead_lettered = 0, enqueued_at = :now,
    finished_at = NULL, error = NULL, lease_token = NULL
WHERE run_id = :run_id AND status = 'FAILED' AND dead_lettered = 1
RETURNING *

-- name: runs_dead_lettered
SELECT r.* FROM job_runs AS r JOIN jobs AS j ON j.job_id = r.job_id
WHERE r.dead_lettered = 1 AND j.user_id = :user_id
  AND (:before_run_id IS NULL OR r.run_id < :before_run_id)
ORDER BY r.run_id DESC
LIMIT :limit

-- name: runs_count_by_status
SELECT status, count(*) AS n FROM job_runs GROUP BY status

-- name: events_after
SELECT * FROM run_events WHERE event_id > :event_id ORDER BY event_id LIMIT :limit

-- name: cursor_get
SELECT position FROM consumer_cursors WHERE consumer = :consumer

-- name: cursor_init
INSERT INTO consumer_cursors (consumer, position) VALUES (:consumer, 0)
ON CONFLICT (consumer) DO NOTHING

-- name: cursor_advance
UPDATE consumer_cursors SET position = :position
WHERE consumer = :consumer AND position = :previous

-- name: job_apply_event
UPDATE jobs
SET status = CASE WHEN :job_status IS NULL THEN status ELSE :job_status END,
    next_run_at = CASE WHEN :set_next_run_at THEN :next_run_at ELSE next_run_at END,
    last_run_id = :last_run_id,
    updated_at = :updated_at
WHERE job_id = :job_id

-- name: shard_lease_take
INSERT INTO shard_leases (shard, owner, expires_at) VALUES (:shard, :owner, :expires_at)
ON CONFLICT (shard) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE shard_leases.owner = excluded.owner OR shard_leases.expires_at <= :now

-- name: shard_leases_owned
SELECT shard FROM shard_leases WHERE owner = :owner AND expires_at > :now ORDER BY shard

-- name: shard_leases_release
DELETE FROM shard_leases WHERE owner = :owner

-- name: shard_owners
SELECT shard, owner FROM shard_leases WHERE expires_at > :now

-- name: member_heartbeat
INSERT INTO members (group_name, member, expires_at) VALUES (:group_name, :member, :expires_at)
ON CONFLICT (group_name, member) DO UPDATE SET expires_at = excluded.expires_at

-- name: members_expired_delete
DELETE FROM members WHERE group_name = :group_name AND expires_at <= :now

-- name: members_live
SELECT member FROM members WHERE group_name = :group_name AND expires_at > :now ORDER BY member

-- name: member_leave
DELETE FROM members WHERE group_name = :group_name AND member = :member

-- name: token_add
INSERT INTO api_tokens (token_hash, user_id, created_at) VALUES (:token_hash, :user_id, :now)

-- name: token_user
SELECT user_id FROM api_tokens WHERE token_hash = :token_hash

-- name: tokens_exist
SELECT EXISTS (SELECT 1 FROM api_tokens) AS present
