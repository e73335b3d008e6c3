-- Named queries of the SQLite store. Parameters are named (:name); nothing is spliced in.

-- name: job_insert
INSERT INTO jobs (job_id, user_id, name, action, job_type, schedule, run_time, timezone, status,
                  retry_policy, misfire_policy, timeout_seconds, idempotency_key, request_hash,
                  next_run_at, last_run_id, created_at, updated_at, notify,
                  flexible_window_seconds, overlap_policy)
VALUES (:job_id, :user_id, :name, :action, :job_type, :schedule, :run_time, :timezone, :status,
        :retry_policy, :misfire_policy, :timeout_seconds, :idempotency_key, :request_hash,
        :next_run_at, :last_run_id, :created_at, :updated_at, :notify_channels,
        :flexible_window_seconds, :overlap_policy)
ON CONFLICT (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING

-- name: job_by_idempotency_key
SELECT * FROM jobs WHERE user_id = :user_id AND idempotency_key = :idempotency_key

-- name: jobs_insert_many
-- job_insert for many jobs in one statement; :jobs is a JSON array of job_insert's parameters.
-- (WHERE true: without it SQLite would read ON CONFLICT as part of the SELECT.)
INSERT INTO jobs (job_id, user_id, name, action, job_type, schedule, run_time, timezone, status,
                  retry_policy, misfire_policy, timeout_seconds, idempotency_key, request_hash,
                  next_run_at, last_run_id, created_at, updated_at, notify,
                  flexible_window_seconds, overlap_policy)
SELECT json_extract(value, '$.job_id'), json_extract(value, '$.user_id'),
       json_extract(value, '$.name'), json_extract(value, '$.action'),
       json_extract(value, '$.job_type'), json_extract(value, '$.schedule'),
       json_extract(value, '$.run_time'), json_extract(value, '$.timezone'),
       json_extract(value, '$.status'), json_extract(value, '$.retry_policy'),
       json_extract(value, '$.misfire_policy'), json_extract(value, '$.timeout_seconds'),
       json_extract(value, '$.idempotency_key'), json_extract(value, '$.request_hash'),
       json_extract(value, '$.next_run_at'), json_extract(value, '$.last_run_id'),
       json_extract(value, '$.created_at'), json_extract(value, '$.updated_at'),
       json_extract(value, '$.notify_channels'),
       json_extract(value, '$.flexible_window_seconds'),
       json_extract(value, '$.overlap_policy')
FROM json_each(:jobs)
WHERE true
ON CONFLICT (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING job_id

-- name: jobs_by_idempotency_keys
-- The jobs holding these keys; :keys is a JSON array of [user_id, idempotency_key] pairs.
SELECT j.* FROM json_each(:keys) AS k
JOIN jobs AS j ON j.user_id = json_extract(k.value, '$[0]')
              AND j.idempotency_key = json_extract(k.value, '$[1]')
WHERE j.idempotency_key IS NOT NULL

-- name: job_get
SELECT * FROM jobs WHERE user_id = :user_id AND job_id = :job_id

-- name: job_get_any
SELECT * FROM jobs WHERE job_id = :job_id

-- name: jobs_get_any_many
SELECT * FROM jobs WHERE job_id IN (SELECT value FROM json_each(:job_ids))

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
    next_run_at = :next_run_at, last_run_id = :last_run_id, updated_at = :updated_at,
    notify = :notify_channels, flexible_window_seconds = :flexible_window_seconds,
    overlap_policy = :overlap_policy, version = version + 1
WHERE job_id = :job_id AND user_id = :user_id AND version = :version
RETURNING version

-- name: runs_cancel_open
UPDATE job_runs SET status = 'CANCELLED', finished_at = :now
WHERE job_id = :job_id AND (kind = 'scheduled' OR :include_manual)
  AND status IN ('PENDING', 'ENQUEUED', 'RETRYING')

-- name: run_skip
-- "skip next": the job's next run, only while no watcher has taken it (job_save, skip_run).
UPDATE job_runs SET status = 'SKIPPED', finished_at = :now, error = :error
WHERE run_id = :run_id AND status = 'PENDING' AND kind = 'scheduled'

-- name: run_insert
INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status, attempt,
                      lease_token, lease_expires_at, enqueued_at, started_at, finished_at,
                      output, error, dead_lettered, retry_at)
VALUES (:run_id, :job_id, :time_bucket, :shard, :scheduled_at, :kind, :status, :attempt,
        :lease_token, :lease_expires_at, :enqueued_at, :started_at, :finished_at,
        :output, :error, :dead_lettered, :retry_at)
ON CONFLICT (run_id) DO NOTHING

-- name: runs_insert_many
-- run_insert for many runs in one statement; :runs is a JSON array of run_insert's parameters.
INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status, attempt,
                      lease_token, lease_expires_at, enqueued_at, started_at, finished_at,
                      output, error, dead_lettered, retry_at)
SELECT json_extract(value, '$.run_id'), json_extract(value, '$.job_id'),
       json_extract(value, '$.time_bucket'), json_extract(value, '$.shard'),
       json_extract(value, '$.scheduled_at'), json_extract(value, '$.kind'),
       json_extract(value, '$.status'), json_extract(value, '$.attempt'),
       json_extract(value, '$.lease_token'), json_extract(value, '$.lease_expires_at'),
       json_extract(value, '$.enqueued_at'), json_extract(value, '$.started_at'),
       json_extract(value, '$.finished_at'), json_extract(value, '$.output'),
       json_extract(value, '$.error'), json_extract(value, '$.dead_lettered'),
       json_extract(value, '$.retry_at')
FROM json_each(:runs)
WHERE true
ON CONFLICT (run_id) DO NOTHING
RETURNING run_id

-- name: run_revive
UPDATE job_runs SET status = 'PENDING', finished_at = NULL, attempt = 0, error = NULL,
                    retry_at = NULL
WHERE run_id = :run_id AND status = 'CANCELLED'

-- name: run_get
SELECT * FROM job_runs WHERE run_id = :run_id

-- name: runs_get_many
SELECT * FROM job_runs WHERE run_id IN (SELECT value FROM json_each(:run_ids))

-- name: runs_list
SELECT * FROM job_runs
WHERE job_id = :job_id
  AND (:before_scheduled_at IS NULL OR scheduled_at < :before_scheduled_at)
ORDER BY scheduled_at DESC
LIMIT :limit

-- name: run_last_succeeded
-- What an action knows of the job's history, through job_runs_by_job.
SELECT * FROM job_runs
WHERE job_id = :job_id AND status = 'SUCCEEDED' AND scheduled_at < :before
ORDER BY scheduled_at DESC
LIMIT 1

-- name: runs_due_in_bucket
-- One (shard, time_bucket) partition through the partial index job_runs_due.
SELECT r.*, j.misfire_policy
FROM job_runs AS r JOIN jobs AS j ON j.job_id = r.job_id
WHERE r.shard = :shard AND r.time_bucket = :bucket AND r.status = 'PENDING'
  AND r.scheduled_at <= :now
ORDER BY r.scheduled_at, r.job_id
LIMIT :limit

-- name: runs_due_in_buckets
-- runs_due_in_bucket for several shards at once, one bucket of each (a watcher's tick): :steps is
-- a JSON array of [shard, bucket]; each pair reads job_runs_due through a correlated subquery,
-- at most :limit runs of each (one LIMIT for all: SQLite's LIMIT cannot name the outer row).
SELECT r.*, j.misfire_policy
FROM (SELECT json_extract(value, '$[0]') AS shard, json_extract(value, '$[1]') AS bucket
      FROM json_each(:steps)) AS k
JOIN job_runs AS r ON r.run_id IN (
    SELECT d.run_id FROM job_runs AS d
    WHERE d.shard = k.shard AND d.time_bucket = k.bucket AND d.status = 'PENDING'
      AND d.scheduled_at <= :now
    ORDER BY d.scheduled_at, d.job_id
    LIMIT :limit)
JOIN jobs AS j ON j.job_id = r.job_id
ORDER BY r.shard, r.scheduled_at, r.job_id

-- name: runs_mark_enqueued
-- The due claim's runs, read PENDING under the same write lock; :run_ids is a JSON array.
UPDATE job_runs SET status = 'ENQUEUED', enqueued_at = :now
WHERE run_id IN (SELECT value FROM json_each(:run_ids)) AND status = 'PENDING'

-- name: run_mark_skipped
UPDATE job_runs SET status = 'SKIPPED', finished_at = :now, error = 'missed: misfire policy is skip'
WHERE run_id = :run_id AND status = 'PENDING'

-- name: watermark_get
SELECT bucket, generation FROM shard_watermarks WHERE shard = :shard

-- name: oldest_pending_bucket
SELECT min(time_bucket) AS bucket FROM job_runs WHERE shard = :shard AND status = 'PENDING'

-- name: watermark_init
INSERT INTO shard_watermarks (shard, bucket) VALUES (:shard, :bucket)
ON CONFLICT (shard) DO NOTHING

-- name: watermark_advance
-- Only from the generation the walk read: an insert at or behind the watermark since then bumped
-- it, and the walk may not have seen that run.
UPDATE shard_watermarks SET bucket = :bucket
WHERE shard = :shard AND generation = :generation AND bucket < :bucket

-- name: watermark_touch
-- A PENDING run inserted behind the watermark (or old enough that a walk running right now might
-- pass it) pulls the watermark back to its bucket and bumps the generation.
UPDATE shard_watermarks
SET bucket = min(bucket, :bucket), generation = generation + 1
WHERE shard = :shard AND (bucket > :bucket OR :behind)

-- name: watermarks_touch_many
-- watermark_touch for several shards at once; :touches is a JSON array of
-- {shard, bucket, behind}, one per shard (the earliest bucket of the shard's new runs).
UPDATE shard_watermarks AS w
SET bucket = min(w.bucket, t.bucket), generation = w.generation + 1
FROM (SELECT json_extract(value, '$.shard') AS shard, json_extract(value, '$.bucket') AS bucket,
             json_extract(value, '$.behind') AS behind
      FROM json_each(:touches)) AS t
WHERE w.shard = t.shard AND (w.bucket > t.bucket OR t.behind)

-- name: watermarks_rewind
-- The rescuer's check: a watermark that has passed a PENDING run goes back to that run's bucket.
UPDATE shard_watermarks AS w
SET bucket = (SELECT min(r.time_bucket) FROM job_runs AS r
              WHERE r.shard = w.shard AND r.status = 'PENDING'),
    generation = generation + 1
WHERE (SELECT min(r.time_bucket) FROM job_runs AS r
       WHERE r.shard = w.shard AND r.status = 'PENDING') < w.bucket
RETURNING shard, bucket

-- name: run_stop_next_attempt
-- The job guard stops a queued run, or one whose worker died, before its next attempt: it
-- ends CANCELLED with the reason (claims and the rescuer's hand-backs).
UPDATE job_runs
SET status = 'CANCELLED', finished_at = :now, lease_token = NULL, lease_expires_at = NULL,
    retry_at = NULL,
    error = (SELECT CASE j.status WHEN 'paused' THEN :paused_error ELSE :deleted_error END
                 FROM jobs AS j WHERE j.job_id = job_runs.job_id)
WHERE run_id = :run_id
  AND (status = 'ENQUEUED' OR (status = 'RUNNING' AND lease_expires_at <= :now))
  AND EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
              AND (j.status = 'cancelled'
                   OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))
RETURNING *

-- name: run_release
-- A worker shutting down hands the run back undone: the interrupted attempt does not count.
-- Under the job guard; run_release_stopped ends a stopped run instead.
UPDATE job_runs
SET status = 'ENQUEUED', attempt = attempt - 1, lease_token = NULL, lease_expires_at = NULL,
    enqueued_at = :now
WHERE run_id = :run_id AND status = 'RUNNING' AND lease_token = :token
  AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
                  AND (j.status = 'cancelled'
                       OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))

-- name: run_release_stopped
UPDATE job_runs
SET status = 'CANCELLED', attempt = attempt - 1, lease_token = NULL, lease_expires_at = NULL,
    finished_at = :now,
    error = (SELECT CASE j.status WHEN 'paused' THEN :paused_error ELSE :deleted_error END
                 FROM jobs AS j WHERE j.job_id = job_runs.job_id)
WHERE run_id = :run_id AND status = 'RUNNING' AND lease_token = :token
  AND EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
              AND (j.status = 'cancelled'
                   OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))

-- name: run_extend_lease
UPDATE job_runs SET lease_expires_at = :lease_expires_at
WHERE run_id = :run_id AND status = 'RUNNING' AND lease_token = :token

-- name: event_append
INSERT INTO run_events (job_id, run_id, status, emitted_at)
VALUES (:job_id, :run_id, :status, :emitted_at)
RETURNING event_id

-- name: run_redrive
-- Under the job guard: a dead letter of a stopped run stays where it is (no row).
UPDATE job_runs
SET status = 'ENQUEUED', attempt = 0, dead_lettered = 0, enqueued_at = :now,
    finished_at = NULL, error = NULL, lease_token = NULL
WHERE run_id = :run_id AND status = 'FAILED' AND dead_lettered = 1
  AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
                  AND (j.status = 'cancelled'
                       OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))
RETURNING *

-- name: run_job_of
-- run_redrive: the job of a run, read under the write lock before anything changes.
SELECT j.job_id, j.user_id FROM job_runs r JOIN jobs j ON j.job_id = r.job_id
WHERE r.run_id = :run_id

-- name: job_redrive_revive
-- A finished one-time or immediate job whose run is redriven is scheduled again until that
-- run's event ends it (in the redrive's transaction).
UPDATE jobs
SET status = 'scheduled', next_run_at = :now, updated_at = :now, version = version + 1
WHERE job_id = :job_id AND job_type IN ('one-time', 'immediate')
  AND status IN ('completed', 'failed')

-- name: runs_dead_lettered
SELECT r.* FROM job_runs AS r JOIN jobs AS j ON j.job_id = r.job_id
WHERE r.dead_lettered = 1 AND j.user_id = :user_id
  AND (:before_run_id IS NULL OR r.run_id < :before_run_id)
ORDER BY r.run_id DESC
LIMIT :limit

-- name: runs_count_by_status
SELECT status, count(*) AS n FROM job_runs GROUP BY status

-- name: runs_count_capped
-- What a metrics scrape may cost: each count reads at most :cap entries of a partial index.
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE status = 'PENDING' LIMIT :cap) AS p)
      AS pending,
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE status = 'ENQUEUED' LIMIT :cap) AS e)
      AS enqueued,
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE status = 'RUNNING' LIMIT :cap) AS r)
      AS running,
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE status = 'RETRYING' LIMIT :cap) AS t)
      AS retrying,
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE dead_lettered = 1 LIMIT :cap) AS d)
      AS dead_lettered

-- name: runs_retry_due_stopped
-- Before runs_retry_due, in its transaction: due RETRYING runs the job guard stops end
-- CANCELLED (not handed back).
UPDATE job_runs
SET status = 'CANCELLED', finished_at = :now, retry_at = NULL,
    error = (SELECT CASE j.status WHEN 'paused' THEN :paused_error ELSE :deleted_error END
                 FROM jobs AS j WHERE j.job_id = job_runs.job_id)
WHERE run_id IN (SELECT run_id FROM job_runs
                 WHERE status = 'RETRYING' AND retry_at <= :now
                 ORDER BY retry_at LIMIT :limit)
  AND status = 'RETRYING'
  AND EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
              AND (j.status = 'cancelled'
                   OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))

-- name: runs_retry_due
UPDATE job_runs SET status = 'ENQUEUED', enqueued_at = :now, retry_at = NULL
WHERE run_id IN (SELECT run_id FROM job_runs
                 WHERE status = 'RETRYING' AND retry_at <= :now
                 ORDER BY retry_at LIMIT :limit)
  AND status = 'RETRYING'
  AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
                  AND (j.status = 'cancelled'
                       OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))
RETURNING *

-- name: runs_lease_expired
SELECT * FROM job_runs WHERE status = 'RUNNING' AND lease_expires_at <= :now
ORDER BY lease_expires_at LIMIT :limit

-- name: runs_enqueued_before
SELECT * FROM job_runs WHERE status = 'ENQUEUED' AND enqueued_at < :before
ORDER BY enqueued_at LIMIT :limit

-- name: run_requeue_running
-- The attempt whose lease ran out stays counted; a late write of its worker is fenced.
-- Under the job guard (runs_claim); a stopped run ends with run_stop_next_attempt.
UPDATE job_runs
SET status = 'ENQUEUED', enqueued_at = :now, lease_token = NULL, lease_expires_at = NULL
WHERE run_id = :run_id AND status = 'RUNNING' AND lease_token = :token
  AND lease_expires_at <= :now
  AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
                  AND (j.status = 'cancelled'
                       OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))
RETURNING *

-- name: run_requeue_enqueued
-- Under the job guard (runs_claim); a stopped run ends with run_stop_next_attempt.
UPDATE job_runs SET enqueued_at = :now
WHERE run_id = :run_id AND status = 'ENQUEUED' AND enqueued_at = :enqueued_at
  AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
                  AND (j.status = 'cancelled'
                       OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))
RETURNING *

-- name: prune_cursor_floor
-- Runs and events a consumer has not read yet are kept, however old.
SELECT coalesce(min(position), 0) AS position FROM consumer_cursors

-- name: prune_events
DELETE FROM run_events
WHERE event_id IN (SELECT event_id FROM run_events
                   WHERE event_id <= :position AND emitted_at < :before
                   ORDER BY event_id LIMIT :limit)

-- name: oldest_unread_event
SELECT emitted_at FROM run_events WHERE event_id > :position ORDER BY event_id LIMIT 1

-- name: prune_runs
DELETE FROM job_runs
WHERE run_id IN (SELECT run_id FROM job_runs
                 WHERE status IN ('SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED')
                   AND finished_at < :before
                 ORDER BY finished_at LIMIT :limit)

-- name: prunable_jobs
SELECT job_id FROM jobs AS j
WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < :before
  AND NOT EXISTS (SELECT 1 FROM job_runs AS r
                  WHERE r.job_id = j.job_id
                    AND (r.status IN ('PENDING', 'ENQUEUED', 'RUNNING', 'RETRYING')
                         OR r.finished_at IS NULL OR r.finished_at >= :keep_from))
ORDER BY updated_at LIMIT :limit

-- name: job_runs_delete
DELETE FROM job_runs WHERE job_id = :job_id

-- name: job_delete
DELETE FROM jobs
WHERE job_id = :job_id AND status IN ('completed', 'failed', 'cancelled') AND updated_at < :before

-- name: deployment_pin
INSERT INTO deployment (name, value) VALUES (:name, :value) ON CONFLICT (name) DO NOTHING

-- name: deployment_get
SELECT value FROM deployment WHERE name = :name

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

-- name: jobs_versions
-- events_apply's guard for a batch, under the write lock: the jobs' versions now (a job whose
-- version is not the one its event was decided from cuts the batch).
SELECT job_id, version FROM jobs WHERE job_id IN (SELECT value FROM json_each(:job_ids))

-- name: jobs_open_runs
-- events_apply's check, per job, under the write lock: other_open, an open scheduled run besides
-- the next run the event would insert (then no second one); open, any open run (run-now too with
-- include_manual), which keeps the job from ending. :jobs is a JSON array of
-- {job_id, insert_run_id, include_manual}.
SELECT k.job_id,
       EXISTS (
           SELECT 1 FROM job_runs AS r
           WHERE r.job_id = k.job_id AND r.kind = 'scheduled' AND r.run_id <> k.insert_run_id
             AND r.status IN ('PENDING', 'ENQUEUED', 'RUNNING', 'RETRYING')
       ) AS other_open,
       EXISTS (
           SELECT 1 FROM job_runs AS r
           WHERE r.job_id = k.job_id AND (r.kind = 'scheduled' OR k.include_manual)
             AND r.status IN ('PENDING', 'ENQUEUED', 'RUNNING', 'RETRYING')
       ) AS open
FROM (SELECT json_extract(value, '$.job_id') AS job_id,
             json_extract(value, '$.insert_run_id') AS insert_run_id,
             json_extract(value, '$.include_manual') AS include_manual
      FROM json_each(:jobs)) AS k

-- name: jobs_apply_events
-- events_apply's update of the jobs' projection, one row per job (each at most once), guarded
-- by the version its event was decided from; :jobs is a JSON array of the rows.
UPDATE jobs AS j
SET status = CASE WHEN k.job_status IS NULL THEN j.status ELSE k.job_status END,
    next_run_at = CASE WHEN k.set_next_run_at THEN k.next_run_at ELSE j.next_run_at END,
    last_run_id = k.last_run_id,
    updated_at = k.updated_at,
    version = j.version + 1
FROM (SELECT json_extract(value, '$.job_id') AS job_id,
             json_extract(value, '$.version') AS version,
             json_extract(value, '$.job_status') AS job_status,
             json_extract(value, '$.set_next_run_at') AS set_next_run_at,
             json_extract(value, '$.next_run_at') AS next_run_at,
             json_extract(value, '$.last_run_id') AS last_run_id,
             json_extract(value, '$.updated_at') AS updated_at
      FROM json_each(:jobs)) AS k
WHERE j.job_id = k.job_id AND j.version = k.version

-- name: shard_leases_previous
-- Who held the wanted shards before this take, and until when (store/leases.py tells a take
-- from a lapsed lease from a renewal or a take of a released one).
SELECT shard, owner, expires_at FROM shard_leases
WHERE shard IN (SELECT value FROM json_each(:shards))

-- name: shard_lease_take
-- A new tenure (another owner, or the lease had lapsed) gets the next fencing token. Every wanted
-- shard in one statement; :shards is a JSON array ("WHERE true" keeps SQLite from reading ON
-- CONFLICT as a join constraint).
INSERT INTO shard_leases (shard, owner, expires_at)
SELECT value, :owner, :expires_at FROM json_each(:shards) WHERE true
ON CONFLICT (shard) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at,
    token = CASE WHEN shard_leases.owner = excluded.owner AND shard_leases.expires_at > :now
                 THEN shard_leases.token ELSE shard_leases.token + 1 END
WHERE shard_leases.owner = excluded.owner OR shard_leases.expires_at <= :now

-- name: shard_leases_owned
SELECT shard, token FROM shard_leases WHERE owner = :owner AND expires_at > :now ORDER BY shard

-- name: shard_leases_release
-- The row stays (its token must never start again from 1); the lease ends now.
UPDATE shard_leases SET expires_at = :released_at WHERE owner = :owner

-- name: shard_leases_hand_over
-- The owner's leases of shards it no longer wants (another watcher joined) end now, so their new
-- owner takes them at its next renewal instead of after the lease.
UPDATE shard_leases SET expires_at = :released_at
WHERE owner = :owner AND expires_at > :now AND shard NOT IN (SELECT value FROM json_each(:shards))

-- name: runs_enqueued_in_shards
-- A watcher that took shards from a lapsed lease: the runs the previous holder claimed lately
-- (it may have died before publishing them), through the job_runs_enqueued index.
SELECT * FROM job_runs
WHERE status = 'ENQUEUED' AND enqueued_at >= :since
  AND shard IN (SELECT value FROM json_each(:shards))
ORDER BY enqueued_at LIMIT :limit

-- name: shards_claim_start
-- shard_claim_start for several shards; :claims is a JSON array of [shard, token]. A shard
-- without a row has a new owner.
SELECT l.shard, w.bucket, w.generation
FROM (SELECT json_extract(value, '$[0]') AS shard, json_extract(value, '$[1]') AS token
      FROM json_each(:claims)) AS k
JOIN shard_leases AS l ON l.shard = k.shard AND l.token = k.token
LEFT JOIN shard_watermarks AS w ON w.shard = l.shard

-- name: shard_claim_start
-- A fenced due claim's first statement: the shard's watermark (NULL on its first visit) if the
-- claim's token is still the shard's, no row otherwise.
SELECT w.bucket, w.generation FROM shard_leases AS l
LEFT JOIN shard_watermarks AS w ON w.shard = l.shard
WHERE l.shard = :shard AND l.token = :token

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
INSERT INTO api_tokens (token_hash, user_id, created_at, token_id)
VALUES (:token_hash, :user_id, :now, 'tok_' || substr(:token_hash, 1, 10))

-- name: token_user
SELECT user_id FROM api_tokens WHERE token_hash = :token_hash AND revoked_at IS NULL

-- name: tokens_exist
SELECT EXISTS (SELECT 1 FROM api_tokens) AS present

-- --- attempts and job history (0006) -----------------------------------------------------

-- name: attempt_end
UPDATE run_attempts
SET status = :a_status, finished_at = :a_now, error = :a_error, preview = :a_preview
WHERE run_id = :a_run_id AND token = :a_token AND status = 'running'

-- name: run_attempts
SELECT * FROM run_attempts WHERE run_id = :run_id
ORDER BY started_at, attempt
LIMIT :limit

-- name: prune_attempts
DELETE FROM run_attempts
WHERE rowid IN (SELECT rowid FROM run_attempts
                WHERE status <> 'running' AND finished_at < :before
                ORDER BY finished_at LIMIT :limit)

-- name: job_change_insert
INSERT INTO job_changes (change_id, job_id, actor, channel, action, details, changed_at)
VALUES (:change_id, :job_id, :actor, :channel, :action, :details, :changed_at)

-- name: job_changes
SELECT * FROM job_changes
WHERE job_id = :job_id AND (:before_change_id IS NULL OR change_id < :before_change_id)
ORDER BY change_id DESC
LIMIT :limit

-- name: job_changes_delete
DELETE FROM job_changes WHERE job_id = :job_id

-- --- news digests (0003) ---

-- name: feed_states_get
SELECT feed_url, etag, last_modified, fetched_at, seen FROM feed_state
WHERE job_id = :job_id AND run_id = :run_id

-- name: run_attempt_live
-- The fence of an attempt's side writes: a takeover bumped the attempt number.
SELECT 1 AS live FROM job_runs
WHERE run_id = :run_id AND status = 'RUNNING' AND attempt = :attempt

-- name: feed_states_drop
-- Everything but the states of the run a failed attempt would fall back to.
DELETE FROM feed_state
WHERE job_id = :job_id AND (:keep_run_id IS NULL OR run_id <> :keep_run_id)

-- name: feed_state_insert
INSERT INTO feed_state (job_id, run_id, feed_url, etag, last_modified, fetched_at, seen)
VALUES (:job_id, :run_id, :feed_url, :etag, :last_modified, :fetched_at, :seen)

-- name: job_feed_state_delete
DELETE FROM feed_state WHERE job_id = :job_id

-- name: delivery_claim
-- Only by the attempt that holds the run (fenced like every write of a run): a new (run,
-- channel), a RETRYING one, or a SENDING one whose attempt lost the run; never a DELIVERED or
-- FAILED one, never past :max_attempts sends. The last error stays until the outcome.
INSERT INTO deliveries (run_id, channel_key, channel, target, status, attempts, claim_token,
                        updated_at, next_attempt_at)
SELECT :run_id, :channel_key, :channel, :target, 'sending', 1, :claim_token, :now, :stale_at
WHERE EXISTS (SELECT 1 FROM job_runs
              WHERE run_id = :run_id AND status = 'RUNNING' AND lease_token = :claim_token)
ON CONFLICT (run_id, channel_key) DO UPDATE
SET status = 'sending', attempts = deliveries.attempts + 1,
    claim_token = excluded.claim_token, updated_at = excluded.updated_at,
    next_attempt_at = excluded.next_attempt_at
WHERE deliveries.attempts < :max_attempts
  AND (deliveries.status = 'retrying'
       OR (deliveries.status = 'sending' AND deliveries.claim_token IS NOT excluded.claim_token))
RETURNING *

-- name: delivery_done
UPDATE deliveries
SET status = :status, error = :error, updated_at = :now, next_attempt_at = :next_attempt_at,
    sent_at = CASE WHEN :status = 'delivered' THEN :now ELSE sent_at END
WHERE run_id = :run_id AND channel_key = :channel_key AND status = 'sending'
  AND claim_token = :claim_token

-- name: deliveries_retry_claim
-- The retry sweep: due deliveries of SUCCEEDED runs (a RETRYING one whose time came, a SENDING
-- one whose sender died mid-send) become SENDING under the sweep's token. One statement on the
-- one writer: two sweeps never take the same row.
UPDATE deliveries
SET status = 'sending', attempts = attempts + 1, retries = retries + 1,
    claim_token = :claim_token, updated_at = :now, next_attempt_at = :stale_at
WHERE (run_id, channel_key) IN (
    SELECT d.run_id, d.channel_key FROM deliveries AS d
    WHERE d.status IN ('retrying', 'sending') AND d.next_attempt_at <= :now
      AND EXISTS (SELECT 1 FROM job_runs AS r
                  WHERE r.run_id = d.run_id AND r.status = 'SUCCEEDED')
    ORDER BY d.next_attempt_at LIMIT :limit)
RETURNING *

-- name: deliveries_of_runs
SELECT * FROM deliveries
WHERE run_id IN (SELECT value FROM json_each(:run_ids))
ORDER BY run_id, channel_key

-- name: inbox_list
-- Unread first, then newest first; the cursor is the last item of the previous page.
SELECT * FROM inbox
WHERE user_id = :user_id
  AND (NOT :unread_only OR read_at IS NULL)
  AND (:after_read IS NULL
       OR (:after_read = 0 AND (read_at IS NOT NULL OR item_id < :after_id))
       OR (:after_read = 1 AND read_at IS NOT NULL AND item_id < :after_id))
ORDER BY read_at IS NOT NULL, item_id DESC
LIMIT :limit

-- name: inbox_mark_read
-- Reading twice keeps the first time.
UPDATE inbox SET read_at = coalesce(read_at, :now)
WHERE user_id = :user_id AND item_id = :item_id
RETURNING *

-- name: webhook_secret_add
INSERT INTO webhook_secrets (secret_id, user_id, secret, created_at)
VALUES (:secret_id, :user_id, :secret, :created_at)

-- name: webhook_secrets_recent
SELECT * FROM webhook_secrets WHERE user_id = :user_id ORDER BY secret_id DESC LIMIT :limit

-- name: prune_deliveries
DELETE FROM deliveries
WHERE (run_id, channel_key) IN (SELECT run_id, channel_key FROM deliveries
                                WHERE updated_at < :before ORDER BY updated_at LIMIT :limit)

-- name: prune_inbox
DELETE FROM inbox
WHERE item_id IN (SELECT item_id FROM inbox
                  WHERE created_at < :before ORDER BY created_at LIMIT :limit)

-- name: runs_oldest_due
-- A metrics scrape's view of the backlog: the earliest instant of each kind of not-yet-started
-- run (the caller keeps those already due). PENDING: one probe of job_runs_due per shard (its
-- (shard, time_bucket, scheduled_at) order, LIMIT 1), never a scan of every PENDING run.
-- RETRYING: the first entry of job_runs_retry. ENQUEUED: the :enqueued_cap oldest by
-- job_runs_enqueued; a first attempt was due at scheduled_at, a retry or a hand-back when it
-- was enqueued.
WITH RECURSIVE shard_no(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM shard_no WHERE n + 1 < :shards)
SELECT
  (SELECT min(first_due) FROM (
      SELECT (SELECT scheduled_at FROM job_runs
              WHERE status = 'PENDING' AND shard = shard_no.n
              ORDER BY time_bucket, scheduled_at LIMIT 1) AS first_due
      FROM shard_no)) AS pending,
  (SELECT retry_at FROM job_runs WHERE status = 'RETRYING' ORDER BY retry_at LIMIT 1) AS retrying,
  (SELECT min(CASE WHEN attempt = 0 THEN scheduled_at ELSE enqueued_at END) FROM (
      SELECT attempt, scheduled_at, enqueued_at FROM job_runs WHERE status = 'ENQUEUED'
      ORDER BY enqueued_at LIMIT :enqueued_cap)) AS enqueued

-- --- tokens, reassigning and quotas (0007) ---

-- name: token_create
INSERT INTO api_tokens (token_hash, user_id, created_at, token_id, scopes, expires_at)
VALUES (:token_hash, :user_id, :created_at, :token_id, :scopes, :expires_at)

-- name: token_find
-- A live token only: not revoked, not expired.
SELECT * FROM api_tokens
WHERE token_hash = :token_hash AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > :now)

-- name: token_touch
UPDATE api_tokens SET last_used_at = :now
WHERE token_id = :token_id AND (last_used_at IS NULL OR last_used_at < :stale_before)

-- name: tokens_list
SELECT * FROM api_tokens ORDER BY created_at, token_id

-- name: token_revoke
UPDATE api_tokens SET revoked_at = :now WHERE token_id = :token_id AND revoked_at IS NULL

-- name: token_rotate
UPDATE api_tokens SET token_hash = :token_hash
WHERE token_id = :token_id AND revoked_at IS NULL
RETURNING *

-- name: jobs_count_of_user
SELECT count(*) AS n FROM jobs WHERE user_id = :user_id

-- name: jobs_count_active
-- Capped: the quota only needs to know whether the limit is reached.
SELECT count(*) AS n FROM (SELECT 1 FROM jobs
                           WHERE user_id = :user_id AND status IN ('scheduled', 'paused')
                           LIMIT :cap)

-- name: jobs_reassign_key_clashes
SELECT count(*) AS n FROM jobs AS a JOIN jobs AS b
    ON b.user_id = :to_user AND b.idempotency_key = a.idempotency_key
WHERE a.user_id = :from_user AND a.idempotency_key IS NOT NULL

-- name: jobs_reassign
UPDATE jobs SET user_id = :to_user, updated_at = :now, version = version + 1
WHERE user_id = :from_user

-- name: inbox_reassign
UPDATE inbox SET user_id = :to_user WHERE user_id = :from_user

-- name: runs_claim
-- A new attempt for each claim of a batch (store/run_batches.py), in one statement: for a
-- queued run, or a running one whose worker stopped renewing (a RETRYING run is not
-- claimable: the rescuer hands it back at its retry_at); :claims is a JSON array of
-- {run_id, token, now, lease_expires_at}.
-- The job guard (store/job_guard.py), the same in every transition that starts or resumes
-- work: a scheduled run of a paused job, or any run of a deleted one, does not move here; the
-- same write transaction (BEGIN IMMEDIATE, so no pause lands in between) then ends it with
-- runs_stop_next_attempt. Each claim keeps its own guard; two claims
-- of one run update it once, with one of the tokens (the returned lease_token says whose).
UPDATE job_runs
SET status = 'RUNNING', attempt = attempt + 1, lease_token = c.token,
    lease_expires_at = c.lease_expires_at, started_at = c.now, error = NULL, retry_at = NULL
FROM (SELECT json_extract(value, '$.run_id') AS run_id, json_extract(value, '$.token') AS token,
             json_extract(value, '$.now') AS now,
             json_extract(value, '$.lease_expires_at') AS lease_expires_at
      FROM json_each(:claims)) AS c
WHERE job_runs.run_id = c.run_id
  AND (job_runs.status = 'ENQUEUED'
       OR (job_runs.status = 'RUNNING' AND job_runs.lease_expires_at <= c.now))
  AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
                  AND (j.status = 'cancelled'
                       OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))
RETURNING *

-- name: runs_stop_next_attempt
-- run_stop_next_attempt for a batch of claims (the same :claims), in the same transaction.
UPDATE job_runs
SET status = 'CANCELLED', finished_at = c.now, lease_token = NULL, lease_expires_at = NULL,
    retry_at = NULL,
    error = (SELECT CASE j.status WHEN 'paused' THEN :paused_error ELSE :deleted_error END
                 FROM jobs AS j WHERE j.job_id = job_runs.job_id)
FROM (SELECT json_extract(value, '$.run_id') AS run_id, json_extract(value, '$.now') AS now
      FROM json_each(:claims)) AS c
WHERE job_runs.run_id = c.run_id
  AND (job_runs.status = 'ENQUEUED'
       OR (job_runs.status = 'RUNNING' AND job_runs.lease_expires_at <= c.now))
  AND EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
              AND (j.status = 'cancelled'
                   OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))
RETURNING run_id, finished_at

-- name: attempts_lost_many
-- Before new attempts start: any attempt of these runs still running lost its lease; :ended is a JSON array of {run_id, now}.
UPDATE run_attempts SET status = 'lost', finished_at = e.now, error = :error
FROM (SELECT json_extract(value, '$.run_id') AS run_id, json_extract(value, '$.now') AS now
      FROM json_each(:ended)) AS e
WHERE run_attempts.run_id = e.run_id AND run_attempts.status = 'running'

-- name: attempts_start_many
-- The attempts that start; :started is a JSON array of {run_id, token, attempt, now}.
INSERT INTO run_attempts (run_id, token, attempt, status, started_at)
SELECT json_extract(value, '$.run_id'), json_extract(value, '$.token'),
       json_extract(value, '$.attempt'), 'running', json_extract(value, '$.now')
FROM json_each(:started)

-- name: attempts_end_many
-- attempt_end for many attempts; :ended is a JSON array of attempt_end's parameters.
UPDATE run_attempts
SET status = e.a_status, finished_at = e.a_now, error = e.a_error, preview = e.a_preview
FROM (SELECT json_extract(value, '$.a_run_id') AS a_run_id,
             json_extract(value, '$.a_token') AS a_token,
             json_extract(value, '$.a_status') AS a_status,
             json_extract(value, '$.a_now') AS a_now,
             json_extract(value, '$.a_error') AS a_error,
             json_extract(value, '$.a_preview') AS a_preview
      FROM json_each(:ended)) AS e
WHERE run_attempts.run_id = e.a_run_id AND run_attempts.token = e.a_token
  AND run_attempts.status = 'running'

-- name: runs_retry
-- Failed attempts' runs put up for a retry, under the job guard (runs_retry_stopped ends a
-- stopped run instead); :retries is a JSON array of {run_id, token, error, retry_at}.
UPDATE job_runs SET status = 'RETRYING', error = t.error, lease_expires_at = NULL,
                    retry_at = t.retry_at
FROM (SELECT json_extract(value, '$.run_id') AS run_id, json_extract(value, '$.token') AS token,
             json_extract(value, '$.error') AS error,
             json_extract(value, '$.retry_at') AS retry_at
      FROM json_each(:retries)) AS t
WHERE job_runs.run_id = t.run_id AND job_runs.status = 'RUNNING'
  AND job_runs.lease_token = t.token
  AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
                  AND (j.status = 'cancelled'
                       OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))
RETURNING run_id, lease_token, status

-- name: runs_retry_stopped
-- The retries the job guard stops, CANCELLED (the same :retries, each with its paused_error and
-- deleted_error), after runs_retry in the same transaction.
UPDATE job_runs
SET status = 'CANCELLED', lease_expires_at = NULL, finished_at = t.now,
    error = (SELECT CASE j.status WHEN 'paused' THEN t.paused_error ELSE t.deleted_error END
                 FROM jobs AS j WHERE j.job_id = job_runs.job_id)
FROM (SELECT json_extract(value, '$.run_id') AS run_id, json_extract(value, '$.token') AS token,
             json_extract(value, '$.now') AS now,
             json_extract(value, '$.paused_error') AS paused_error,
             json_extract(value, '$.deleted_error') AS deleted_error
      FROM json_each(:retries)) AS t
WHERE job_runs.run_id = t.run_id AND job_runs.status = 'RUNNING'
  AND job_runs.lease_token = t.token
  AND EXISTS (SELECT 1 FROM jobs AS j WHERE j.job_id = job_runs.job_id
              AND (j.status = 'cancelled'
                   OR (j.status = 'paused' AND job_runs.kind = 'scheduled')))
RETURNING run_id, lease_token, status

-- name: runs_finish
-- The terminal status of a batch of runs (their events, attempts and inbox items follow in
-- the same transaction); :finishes is a JSON array of {run_id, token, status, finished_at,
-- output, error, dead_lettered}. The returned rows are the runs it finished.
UPDATE job_runs
SET status = f.status, finished_at = f.finished_at, output = f.output, error = f.error,
    dead_lettered = f.dead_lettered, lease_expires_at = NULL
FROM (SELECT json_extract(value, '$.run_id') AS run_id, json_extract(value, '$.token') AS token,
             json_extract(value, '$.status') AS status,
             json_extract(value, '$.finished_at') AS finished_at,
             json_extract(value, '$.output') AS output, json_extract(value, '$.error') AS error,
             json_extract(value, '$.dead_lettered') AS dead_lettered
      FROM json_each(:finishes)) AS f
WHERE job_runs.run_id = f.run_id AND job_runs.status = 'RUNNING'
  AND job_runs.lease_token = f.token
RETURNING run_id, job_id, lease_token

-- name: inbox_insert_many
-- The runs' inbox items; :items is a JSON array of inbox_params.
INSERT INTO inbox (item_id, user_id, job_id, run_id, title, body, output, scheduled_at,
                   created_at)
SELECT json_extract(value, '$.item_id'), json_extract(value, '$.user_id'),
       json_extract(value, '$.job_id'), json_extract(value, '$.run_id'),
       json_extract(value, '$.title'), json_extract(value, '$.body'),
       json_extract(value, '$.output'), json_extract(value, '$.scheduled_at'),
       json_extract(value, '$.created_at')
FROM json_each(:items)
WHERE true
ON CONFLICT (run_id) DO NOTHING

-- name: inbox_delivered_many
-- Their DELIVERED rows (the same :items).
INSERT INTO deliveries (run_id, channel_key, channel, target, status, attempts, claim_token,
                        sent_at, updated_at)
SELECT json_extract(value, '$.run_id'), 'inbox', 'inbox', 'inbox', 'delivered', 1,
       json_extract(value, '$.claim_token'), json_extract(value, '$.now'),
       json_extract(value, '$.now')
FROM json_each(:items)
WHERE true
ON CONFLICT (run_id, channel_key) DO NOTHING

-- name: events_append_many
-- event_append for many runs, in the array's order; :events is a JSON array of
-- {job_id, run_id, status, emitted_at}.
INSERT INTO run_events (job_id, run_id, status, emitted_at)
SELECT json_extract(value, '$.job_id'), json_extract(value, '$.run_id'),
       json_extract(value, '$.status'), json_extract(value, '$.emitted_at')
FROM json_each(:events)
ORDER BY key
RETURNING event_id, run_id
