-- Named queries of the PostgreSQL store. Parameters are psycopg's %(name)s; nothing is spliced in
-- except the partition DDL's identifiers, composed with psycopg.sql ({placeholders} below).
-- Lookups by run id also name scheduled_at (ids.scheduled_at_of) so they touch one partition.
-- Nullable parameters tested with IS NULL carry a cast: PostgreSQL cannot type a bare NULL.

-- name: job_create
-- The job, its first run and the watchers' wake-up in ONE statement: one round trip, and the
-- statement is its own transaction. Run parameters carry an r_ prefix (jobs and runs share
-- column names). No run when r_run_id is NULL; no run either when the idempotency key
-- matched an existing job (new_job is then empty).
WITH new_job AS (
    INSERT INTO jobs (job_id, user_id, name, action, job_type, schedule, run_time, timezone,
                      status, retry_policy, misfire_policy, timeout_seconds, idempotency_key,
                      request_hash, next_run_at, last_run_id, created_at, updated_at, notify,
                      flexible_window_seconds, overlap_policy)
    VALUES (%(job_id)s, %(user_id)s, %(name)s, %(action)s::jsonb, %(job_type)s, %(schedule)s,
            %(run_time)s, %(timezone)s, %(status)s, %(retry_policy)s::jsonb,
            %(misfire_policy)s, %(timeout_seconds)s, %(idempotency_key)s, %(request_hash)s,
            %(next_run_at)s, %(last_run_id)s, %(created_at)s, %(updated_at)s,
            %(notify_channels)s::jsonb, %(flexible_window_seconds)s, %(overlap_policy)s)
    ON CONFLICT (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING job_id
), new_run AS (
    INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status,
                          attempt)
    SELECT %(r_run_id)s, new_job.job_id, %(r_time_bucket)s, %(r_shard)s, %(r_scheduled_at)s,
           %(r_kind)s, %(r_status)s, %(r_attempt)s
    FROM new_job
    WHERE %(r_run_id)s::text IS NOT NULL
    ON CONFLICT (run_id, scheduled_at) DO NOTHING
    RETURNING run_id
), touched AS (
    -- A first run at or behind the shard's watermark pulls it back (see watermark_touch).
    UPDATE shard_watermarks
    SET bucket = least(bucket, %(r_time_bucket)s), generation = generation + 1
    WHERE shard = %(r_shard)s AND (bucket > %(r_time_bucket)s OR %(behind)s)
      AND EXISTS (SELECT 1 FROM new_run)
), notice AS (
    SELECT pg_notify(%(channel)s, %(payload)s) FROM new_run WHERE %(notify)s
)
SELECT (SELECT count(*) FROM new_job) AS created, (SELECT count(*) FROM notice) AS notices

-- name: job_by_idempotency_key
SELECT * FROM jobs WHERE user_id = %(user_id)s AND idempotency_key = %(idempotency_key)s

-- name: jobs_insert_many
-- job_create for many jobs in ONE statement (so in one transaction): the jobs, the first runs
-- of those inserted, the watermark touches and the wake-ups. Each column comes as one array
-- (element i of every array is item i): job_create's parameters plus, per run, r_behind and
-- r_notify (decided as job_create does); a job without a first run has NULL r_ elements.
-- Arrays of native values cost PostgreSQL less to read than one JSON recordset, and the
-- client no JSON text per row. Answers the ids of the jobs inserted; an item whose key is
-- held inserts nothing.
WITH input AS (
    SELECT * FROM unnest(
        %(job_id)b::text[], %(user_id)b::text[], %(name)b::text[], %(action)b::text[],
        %(job_type)b::text[], %(schedule)b::text[], %(run_time)b::text[], %(timezone)b::text[],
        %(status)b::text[], %(retry_policy)b::text[], %(misfire_policy)b::text[],
        %(timeout_seconds)b::float8[], %(idempotency_key)b::text[], %(request_hash)b::text[],
        %(next_run_at)b::timestamptz[], %(last_run_id)b::text[], %(created_at)b::timestamptz[],
        %(updated_at)b::timestamptz[], %(notify_channels)b::text[],
        %(flexible_window_seconds)b::integer[], %(overlap_policy)b::text[],
        %(r_run_id)b::text[], %(r_time_bucket)b::bigint[],
        %(r_shard)b::integer[], %(r_scheduled_at)b::timestamptz[], %(r_kind)b::text[],
        %(r_status)b::text[], %(r_attempt)b::integer[], %(r_behind)b::boolean[],
        %(r_notify)b::boolean[]
    ) AS t(
        job_id, user_id, name, action, job_type, schedule, run_time, timezone, status,
        retry_policy, misfire_policy, timeout_seconds, idempotency_key, request_hash,
        next_run_at, last_run_id, created_at, updated_at, notify_channels,
        flexible_window_seconds, overlap_policy, r_run_id, r_time_bucket, r_shard, r_scheduled_at, r_kind,
        r_status, r_attempt, r_behind, r_notify)
), new_jobs AS (
    INSERT INTO jobs (job_id, user_id, name, action, job_type, schedule, run_time, timezone,
                      status, retry_policy, misfire_policy, timeout_seconds, idempotency_key,
                      request_hash, next_run_at, last_run_id, created_at, updated_at, notify,
                      flexible_window_seconds, overlap_policy)
    SELECT job_id, user_id, name, action::jsonb, job_type, schedule, run_time, timezone,
           status, retry_policy::jsonb, misfire_policy, timeout_seconds, idempotency_key,
           request_hash, next_run_at, last_run_id, created_at, updated_at,
           notify_channels::jsonb, flexible_window_seconds, overlap_policy
    FROM input
    ON CONFLICT (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING job_id
), new_runs AS (
    INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status,
                          attempt)
    SELECT i.r_run_id, i.job_id, i.r_time_bucket, i.r_shard, i.r_scheduled_at, i.r_kind,
           i.r_status, i.r_attempt
    FROM input AS i JOIN new_jobs USING (job_id)
    WHERE i.r_run_id IS NOT NULL
    ON CONFLICT (run_id, scheduled_at) DO NOTHING
    RETURNING run_id, status
), pending AS (
    SELECT i.r_shard AS shard, i.r_time_bucket AS bucket, i.r_behind AS behind,
           i.r_notify AS notify
    FROM new_runs JOIN input AS i ON i.r_run_id = new_runs.run_id
    WHERE new_runs.status = 'PENDING'
), wanted AS (
    SELECT shard, min(bucket) AS bucket, bool_or(behind) AS behind FROM pending GROUP BY shard
), locked AS (
    -- watermark_touch for each shard, its rows locked in shard order: two concurrent batches
    -- touching the same shards wait for each other instead of deadlocking.
    SELECT w.shard FROM shard_watermarks AS w JOIN wanted USING (shard)
    WHERE w.bucket > wanted.bucket OR wanted.behind
    ORDER BY w.shard
    FOR UPDATE OF w
), touched AS (
    UPDATE shard_watermarks AS w
    SET bucket = least(w.bucket, wanted.bucket), generation = w.generation + 1
    FROM wanted
    WHERE w.shard = wanted.shard AND w.shard IN (SELECT shard FROM locked)
), notices AS (
    SELECT pg_notify(%(channel)s, due.shard::text)
    FROM (SELECT DISTINCT shard FROM pending WHERE notify) AS due
)
SELECT job_id, (SELECT count(*) FROM notices) AS notices FROM new_jobs

-- name: jobs_by_idempotency_keys
-- The jobs holding these keys: element i of %(user_ids)s and of %(keys)s is one pair.
SELECT j.* FROM unnest(%(user_ids)s::text[], %(keys)s::text[]) AS k (user_id, key)
JOIN jobs AS j ON j.user_id = k.user_id AND j.idempotency_key = k.key
WHERE j.idempotency_key IS NOT NULL

-- name: job_get
SELECT * FROM jobs WHERE user_id = %(user_id)s AND job_id = %(job_id)s

-- name: job_get_any
SELECT * FROM jobs WHERE job_id = %(job_id)s

-- name: jobs_get_any_many
SELECT * FROM jobs WHERE job_id = ANY(%(job_ids)s::text[])

-- name: jobs_list
SELECT * FROM jobs
WHERE user_id = %(user_id)s
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(job_id_from)s::text IS NULL OR job_id >= %(job_id_from)s::text)
  AND (%(job_id_to)s::text IS NULL OR job_id < %(job_id_to)s::text)
  AND (%(before_job_id)s::text IS NULL OR job_id < %(before_job_id)s::text)
ORDER BY job_id DESC
LIMIT %(limit)s

-- name: job_update
UPDATE jobs
SET name = %(name)s, action = %(action)s::jsonb, job_type = %(job_type)s,
    schedule = %(schedule)s, run_time = %(run_time)s, timezone = %(timezone)s,
    status = %(status)s, retry_policy = %(retry_policy)s::jsonb,
    misfire_policy = %(misfire_policy)s, timeout_seconds = %(timeout_seconds)s,
    next_run_at = %(next_run_at)s, last_run_id = %(last_run_id)s, updated_at = %(updated_at)s,
    notify = %(notify_channels)s::jsonb,
    flexible_window_seconds = %(flexible_window_seconds)s,
    overlap_policy = %(overlap_policy)s, version = version + 1
WHERE job_id = %(job_id)s AND user_id = %(user_id)s AND version = %(version)s
RETURNING version

-- name: runs_cancel_open
UPDATE job_runs SET status = 'CANCELLED', finished_at = %(now)s
WHERE job_id = %(job_id)s AND (kind = 'scheduled' OR %(include_manual)s)
  AND status IN ('PENDING', 'ENQUEUED', 'RETRYING')

-- name: run_skip
-- "skip next": the job's next run, only while no watcher has taken it (job_save, skip_run), and
-- its RunEvent in the same statement.
WITH skipped AS (
    UPDATE job_runs SET status = 'SKIPPED', finished_at = %(now)s, error = %(error)s
    WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s
      AND status = 'PENDING' AND kind = 'scheduled'
    RETURNING job_id, run_id
)
INSERT INTO run_events (job_id, run_id, status, emitted_at)
SELECT job_id, run_id, 'SKIPPED', %(now)s FROM skipped

-- name: run_insert
INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status, attempt,
                      lease_token, lease_expires_at, enqueued_at, started_at, finished_at,
                      output, error, dead_lettered, retry_at)
VALUES (%(run_id)s, %(job_id)s, %(time_bucket)s, %(shard)s, %(scheduled_at)s, %(kind)s,
        %(status)s, %(attempt)s, %(lease_token)s, %(lease_expires_at)s, %(enqueued_at)s,
        %(started_at)s, %(finished_at)s, %(output)s::jsonb, %(error)s, %(dead_lettered)s,
        %(retry_at)s)
ON CONFLICT (run_id, scheduled_at) DO NOTHING

-- name: run_revive
UPDATE job_runs SET status = 'PENDING', finished_at = NULL, attempt = 0, error = NULL,
                    retry_at = NULL
WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s AND status = 'CANCELLED'

-- name: notify_due
-- Wakes the watchers listening on the channel; sent inside the inserting transaction, so it is
-- delivered only if the run commits.
SELECT pg_notify(%(channel)s, %(payload)s)

-- name: run_get
SELECT * FROM job_runs WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s

-- name: runs_get_many
-- With each run's scheduled_at (from its id), so only the partitions holding them are read.
SELECT r.* FROM job_runs AS r
JOIN unnest(%(run_ids)s::text[], %(scheduled_ats)s::timestamptz[]) AS k (run_id, scheduled_at)
  ON r.run_id = k.run_id AND r.scheduled_at = k.scheduled_at

-- name: runs_list
SELECT * FROM job_runs
WHERE job_id = %(job_id)s
  AND (%(before_scheduled_at)s::timestamptz IS NULL
       OR scheduled_at < %(before_scheduled_at)s::timestamptz)
ORDER BY scheduled_at DESC
LIMIT %(limit)s

-- name: run_last_succeeded
-- What an action knows of the job's history, through job_runs_by_job.
SELECT * FROM job_runs
WHERE job_id = %(job_id)s AND status = 'SUCCEEDED' AND scheduled_at < %(before)s
ORDER BY scheduled_at DESC
LIMIT 1

-- name: runs_claim_due_bucket
-- One (shard, time_bucket) in ONE statement. The CTE locks the due PENDING runs it will take,
-- skipping rows another watcher holds; the UPDATE repeats the guard on the locked row version.
-- The bucket's instant range lets the planner prune to the one daily partition holding it, where
-- the partial index job_runs_due serves the ORDER BY. Late runs of misfire=skip jobs become
-- SKIPPED and get their RunEvent in the same statement.
WITH due AS (
    SELECT r.run_id, r.scheduled_at,
           (r.kind <> 'manual' AND j.misfire_policy = 'skip'
            AND r.scheduled_at < %(misfire_before)s) AS misfired
    FROM job_runs AS r JOIN jobs AS j ON j.job_id = r.job_id
    WHERE r.shard = %(shard)s AND r.time_bucket = %(bucket)s
      AND r.scheduled_at >= %(bucket_from)s AND r.scheduled_at < %(bucket_to)s
      AND r.status = 'PENDING' AND r.scheduled_at <= %(now)s
    ORDER BY r.scheduled_at, r.job_id
    LIMIT %(limit)s
    FOR UPDATE OF r SKIP LOCKED
), claimed AS (
    UPDATE job_runs AS r
    SET status = CASE WHEN due.misfired THEN 'SKIPPED' ELSE 'ENQUEUED' END,
        enqueued_at = CASE WHEN due.misfired THEN r.enqueued_at ELSE %(now)s END,
        finished_at = CASE WHEN due.misfired THEN %(now)s ELSE r.finished_at END,
        error = CASE WHEN due.misfired THEN 'missed: misfire policy is skip' ELSE r.error END
    FROM due
    WHERE r.run_id = due.run_id AND r.scheduled_at = due.scheduled_at
      AND r.shard = %(shard)s AND r.time_bucket = %(bucket)s
      AND r.scheduled_at >= %(bucket_from)s AND r.scheduled_at < %(bucket_to)s
      AND r.status = 'PENDING'
    RETURNING r.*
), skipped_events AS (
    INSERT INTO run_events (job_id, run_id, status, emitted_at)
    SELECT job_id, run_id, 'SKIPPED', %(now)s FROM claimed WHERE status = 'SKIPPED'
    ORDER BY scheduled_at, job_id
)
SELECT * FROM claimed ORDER BY scheduled_at, job_id

-- name: runs_claim_due_buckets
-- runs_claim_due_bucket for several shards at once, one bucket of each (a watcher's tick over its
-- shards): per (shard, bucket, limit) row of the arrays, the same locked CTE, through LATERAL.
-- The overall instant range (%(range_from)s .. %(now)s) lets the planner prune to the daily
-- partitions the buckets lie in.
WITH k AS (
    SELECT * FROM unnest(%(shards)s::integer[], %(buckets)s::bigint[],
                         %(bucket_froms)s::timestamptz[], %(bucket_tos)s::timestamptz[],
                         %(limits)s::integer[])
                  AS k (shard, bucket, bucket_from, bucket_to, lim)
), due AS (
    SELECT d.* FROM k CROSS JOIN LATERAL (
        SELECT r.run_id, r.scheduled_at,
               (r.kind <> 'manual' AND j.misfire_policy = 'skip'
                AND r.scheduled_at < %(misfire_before)s) AS misfired
        FROM job_runs AS r JOIN jobs AS j ON j.job_id = r.job_id
        WHERE r.shard = k.shard AND r.time_bucket = k.bucket
          AND r.scheduled_at >= k.bucket_from AND r.scheduled_at < k.bucket_to
          AND r.scheduled_at >= %(range_from)s AND r.scheduled_at <= %(now)s
          AND r.status = 'PENDING'
        ORDER BY r.scheduled_at, r.job_id
        LIMIT k.lim
        FOR UPDATE OF r SKIP LOCKED
    ) AS d
), claimed AS (
    UPDATE job_runs AS r
    SET status = CASE WHEN due.misfired THEN 'SKIPPED' ELSE 'ENQUEUED' END,
        enqueued_at = CASE WHEN due.misfired THEN r.enqueued_at ELSE %(now)s END,
        finished_at = CASE WHEN due.misfired THEN %(now)s ELSE r.finished_at END,
        error = CASE WHEN due.misfired THEN 'missed: misfire policy is skip' ELSE r.error END
    FROM due
    WHERE r.run_id = due.run_id AND r.scheduled_at = due.scheduled_at
      AND r.scheduled_at >= %(range_from)s AND r.scheduled_at <= %(now)s
      AND r.status = 'PENDING'
    RETURNING r.*
), skipped_events AS (
    INSERT INTO run_events (job_id, run_id, status, emitted_at)
    SELECT job_id, run_id, 'SKIPPED', %(now)s FROM claimed WHERE status = 'SKIPPED'
    ORDER BY scheduled_at, job_id
)
SELECT * FROM claimed ORDER BY shard, scheduled_at, job_id

-- name: bucket_has_pending
-- After a short claim: were rows skipped because another transaction holds them? Their bucket
-- is not drained until that transaction commits, so the watermark must not pass it.
SELECT EXISTS (
    SELECT 1 FROM job_runs
    WHERE shard = %(shard)s AND time_bucket = %(bucket)s
      AND scheduled_at >= %(bucket_from)s AND scheduled_at < %(bucket_to)s
      AND status = 'PENDING'
) AS pending

-- name: watermark_get
SELECT bucket, generation FROM shard_watermarks WHERE shard = %(shard)s

-- name: oldest_pending_bucket
SELECT min(time_bucket) AS bucket FROM job_runs WHERE shard = %(shard)s AND status = 'PENDING'

-- name: watermark_init
INSERT INTO shard_watermarks (shard, bucket) VALUES (%(shard)s, %(bucket)s)
ON CONFLICT (shard) DO NOTHING

-- name: watermark_advance
-- Only from the generation the walk read: an insert at or behind the watermark since then bumped
-- it, and the walk may not have seen that run.
UPDATE shard_watermarks SET bucket = %(bucket)s
WHERE shard = %(shard)s AND generation = %(generation)s AND bucket < %(bucket)s

-- name: watermark_touch
-- A PENDING run inserted behind the watermark (or old enough that a walk running right now might
-- pass it) pulls the watermark back to its bucket and bumps the generation.
UPDATE shard_watermarks
SET bucket = least(bucket, %(bucket)s), generation = generation + 1
WHERE shard = %(shard)s AND (bucket > %(bucket)s OR %(behind)s)

-- name: watermarks_rewind
-- The rescuer's check: a watermark that has passed a PENDING run goes back to that run's bucket.
WITH oldest AS (
    SELECT w.shard,
           (SELECT min(r.time_bucket) FROM job_runs AS r
            WHERE r.shard = w.shard AND r.status = 'PENDING') AS bucket
    FROM shard_watermarks AS w
)
UPDATE shard_watermarks AS w SET bucket = oldest.bucket, generation = w.generation + 1
FROM oldest
WHERE w.shard = oldest.shard AND oldest.bucket < w.bucket
RETURNING w.shard, w.bucket

-- name: run_release
-- A worker shutting down hands the run back undone: the interrupted attempt does not count
-- (its attempt row ends as released). Under the job guard: a stopped run ends CANCELLED.
-- Answers the status the run moved to.
WITH job AS MATERIALIZED (
    SELECT j.status FROM jobs AS j
    WHERE j.job_id = (SELECT r.job_id FROM job_runs AS r
                      WHERE r.run_id = %(run_id)s AND r.scheduled_at = %(scheduled_at)s)
    FOR SHARE
), released AS (
    UPDATE job_runs
    SET status = 'ENQUEUED', attempt = attempt - 1, lease_token = NULL, lease_expires_at = NULL,
        enqueued_at = %(now)s
    WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s
      AND status = 'RUNNING' AND lease_token = %(token)s
      AND NOT EXISTS (SELECT 1 FROM job WHERE job.status = 'cancelled'
                      OR (job.status = 'paused' AND job_runs.kind = 'scheduled'))
    RETURNING run_id, status
), stopped AS (
    UPDATE job_runs
    SET status = 'CANCELLED', attempt = attempt - 1, lease_token = NULL,
        lease_expires_at = NULL, finished_at = %(now)s,
        error = (SELECT CASE job.status WHEN 'paused' THEN %(paused_error)s
                        ELSE %(deleted_error)s END FROM job)
    WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s
      AND status = 'RUNNING' AND lease_token = %(token)s
      AND EXISTS (SELECT 1 FROM job WHERE job.status = 'cancelled'
                  OR (job.status = 'paused' AND job_runs.kind = 'scheduled'))
    RETURNING run_id, status
), moved AS (
    SELECT * FROM released UNION ALL SELECT * FROM stopped
), ended AS (
    UPDATE run_attempts AS a
    SET status = %(a_status)s, finished_at = %(a_now)s, error = %(a_error)s,
        preview = %(a_preview)s
    FROM moved
    WHERE a.run_id = moved.run_id AND a.token = %(a_token)s AND a.status = 'running'
)
SELECT status FROM moved

-- name: run_extend_lease
UPDATE job_runs SET lease_expires_at = %(lease_expires_at)s
WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s
  AND status = 'RUNNING' AND lease_token = %(token)s

-- name: run_redrive
-- Under the job guard: a dead letter of a stopped run stays where it is (no row).
WITH job AS MATERIALIZED (
    SELECT j.status FROM jobs AS j
    WHERE j.job_id = (SELECT r.job_id FROM job_runs AS r
                      WHERE r.run_id = %(run_id)s AND r.scheduled_at = %(scheduled_at)s)
    FOR SHARE
)
UPDATE job_runs
SET status = 'ENQUEUED', attempt = 0, dead_lettered = false, enqueued_at = %(now)s,
    finished_at = NULL, error = NULL, lease_token = NULL
WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s
  AND status = 'FAILED' AND dead_lettered
  AND NOT EXISTS (SELECT 1 FROM job WHERE job.status = 'cancelled'
                  OR (job.status = 'paused' AND job_runs.kind = 'scheduled'))
RETURNING *

-- name: run_job_of
-- run_redrive: the job (and user, for the quota lock) of a run, before any lock is taken.
SELECT j.job_id, j.user_id FROM job_runs r JOIN jobs j ON j.job_id = r.job_id
WHERE r.run_id = %(run_id)s AND r.scheduled_at = %(scheduled_at)s

-- name: job_row_lock
-- run_redrive locks the job's row before it reopens a run of it: a run event being applied
-- to the job (which holds this lock while it decides) either ends it first or sees the run.
SELECT 1 AS locked FROM jobs WHERE job_id = %(job_id)s FOR UPDATE

-- name: job_redrive_revive
-- A finished one-time or immediate job whose run is redriven is scheduled again until that
-- run's event ends it (in the redrive's transaction).
UPDATE jobs
SET status = 'scheduled', next_run_at = %(now)s, updated_at = %(now)s, version = version + 1
WHERE job_id = %(job_id)s AND job_type IN ('one-time', 'immediate')
  AND status IN ('completed', 'failed')

-- name: runs_dead_lettered
SELECT r.* FROM job_runs AS r JOIN jobs AS j ON j.job_id = r.job_id
WHERE r.dead_lettered AND j.user_id = %(user_id)s
  AND (%(before_run_id)s::text IS NULL OR r.run_id < %(before_run_id)s::text)
ORDER BY r.run_id DESC
LIMIT %(limit)s

-- name: runs_count_by_status
SELECT status, count(*) AS n FROM job_runs GROUP BY status

-- name: runs_count_capped
-- What a metrics scrape may cost: each count reads at most %(cap)s entries of a partial index.
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE status = 'PENDING' LIMIT %(cap)s) AS p)
      AS pending,
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE status = 'ENQUEUED' LIMIT %(cap)s) AS e)
      AS enqueued,
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE status = 'RUNNING' LIMIT %(cap)s) AS r)
      AS running,
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE status = 'RETRYING' LIMIT %(cap)s) AS t)
      AS retrying,
  (SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE dead_lettered LIMIT %(cap)s) AS d)
      AS dead_lettered

-- name: runs_retry_due_lock_jobs
-- runs_retry_due's first statement: the jobs of the due RETRYING runs, locked FOR SHARE in
-- job_id order before any run is (the job guard; a pause holding a job and cancelling its runs
-- would deadlock with a hand-back holding a run and waiting for the job).
SELECT j.job_id FROM jobs AS j
WHERE j.job_id IN (SELECT r.job_id FROM job_runs AS r
                   WHERE r.status = 'RETRYING' AND r.retry_at <= %(now)s
                   ORDER BY r.retry_at
                   LIMIT %(limit)s)
ORDER BY j.job_id
FOR SHARE

-- name: runs_retry_due
-- Concurrent rescuers hand back disjoint sets (SKIP LOCKED); the guard is repeated on the row.
-- Only runs of the jobs locked by runs_retry_due_lock_jobs (%(job_ids)s), in the same
-- transaction; a run the job guard stops ends CANCELLED and is not answered.
WITH due AS (
    SELECT r.run_id, r.scheduled_at,
           (j.status = 'cancelled' OR (j.status = 'paused' AND r.kind = 'scheduled')) AS stop,
           j.status AS job_status
    FROM job_runs AS r JOIN jobs AS j ON j.job_id = r.job_id
    WHERE r.status = 'RETRYING' AND r.retry_at <= %(now)s AND r.job_id = ANY(%(job_ids)s)
    ORDER BY r.retry_at
    LIMIT %(limit)s
    FOR UPDATE OF r SKIP LOCKED
), stopped AS (
    UPDATE job_runs AS r
    SET status = 'CANCELLED', finished_at = %(now)s, retry_at = NULL,
        error = CASE due.job_status WHEN 'paused' THEN %(paused_error)s
                ELSE %(deleted_error)s END
    FROM due
    WHERE r.run_id = due.run_id AND r.scheduled_at = due.scheduled_at
      AND r.status = 'RETRYING' AND due.stop
)
UPDATE job_runs AS r SET status = 'ENQUEUED', enqueued_at = %(now)s, retry_at = NULL
FROM due
WHERE r.run_id = due.run_id AND r.scheduled_at = due.scheduled_at AND r.status = 'RETRYING'
  AND NOT due.stop
RETURNING r.*

-- name: runs_lease_expired
SELECT * FROM job_runs WHERE status = 'RUNNING' AND lease_expires_at <= %(now)s
ORDER BY lease_expires_at LIMIT %(limit)s

-- name: runs_enqueued_before
SELECT * FROM job_runs WHERE status = 'ENQUEUED' AND enqueued_at < %(before)s
ORDER BY enqueued_at LIMIT %(limit)s

-- name: run_requeue_running
-- The attempt whose lease ran out stays counted (its row ends as lost); a late write of its
-- worker is fenced. Under the job guard: a stopped run ends CANCELLED (no row answered).
WITH job AS MATERIALIZED (
    SELECT j.status FROM jobs AS j
    WHERE j.job_id = (SELECT r.job_id FROM job_runs AS r
                      WHERE r.run_id = %(run_id)s AND r.scheduled_at = %(scheduled_at)s)
    FOR SHARE
), requeued AS (
    UPDATE job_runs
    SET status = 'ENQUEUED', enqueued_at = %(now)s, lease_token = NULL, lease_expires_at = NULL
    WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s AND status = 'RUNNING'
      AND lease_token = %(token)s AND lease_expires_at <= %(now)s
      AND NOT EXISTS (SELECT 1 FROM job WHERE job.status = 'cancelled'
                      OR (job.status = 'paused' AND job_runs.kind = 'scheduled'))
    RETURNING *
), stopped AS (
    UPDATE job_runs
    SET status = 'CANCELLED', finished_at = %(now)s, lease_token = NULL,
        lease_expires_at = NULL,
        error = (SELECT CASE job.status WHEN 'paused' THEN %(paused_error)s
                        ELSE %(deleted_error)s END FROM job)
    WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s AND status = 'RUNNING'
      AND lease_token = %(token)s AND lease_expires_at <= %(now)s
      AND EXISTS (SELECT 1 FROM job WHERE job.status = 'cancelled'
                  OR (job.status = 'paused' AND job_runs.kind = 'scheduled'))
    RETURNING run_id
), ended AS (
    UPDATE run_attempts AS a
    SET status = %(a_status)s, finished_at = %(a_now)s, error = %(a_error)s,
        preview = %(a_preview)s
    WHERE a.token = %(a_token)s AND a.status = 'running'
      AND a.run_id IN (SELECT run_id FROM requeued UNION ALL SELECT run_id FROM stopped)
)
SELECT * FROM requeued

-- name: run_requeue_enqueued
-- A new publication of a queued run; under the job guard a stopped run ends CANCELLED instead
-- (no row answered).
WITH job AS MATERIALIZED (
    SELECT j.status FROM jobs AS j
    WHERE j.job_id = (SELECT r.job_id FROM job_runs AS r
                      WHERE r.run_id = %(run_id)s AND r.scheduled_at = %(scheduled_at)s)
    FOR SHARE
), stopped AS (
    UPDATE job_runs
    SET status = 'CANCELLED', finished_at = %(now)s,
        error = (SELECT CASE job.status WHEN 'paused' THEN %(paused_error)s
                        ELSE %(deleted_error)s END FROM job)
    WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s AND status = 'ENQUEUED'
      AND enqueued_at = %(enqueued_at)s
      AND EXISTS (SELECT 1 FROM job WHERE job.status = 'cancelled'
                  OR (job.status = 'paused' AND job_runs.kind = 'scheduled'))
)
UPDATE job_runs SET enqueued_at = %(now)s
WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s AND status = 'ENQUEUED'
  AND enqueued_at = %(enqueued_at)s
  AND NOT EXISTS (SELECT 1 FROM job WHERE job.status = 'cancelled'
                  OR (job.status = 'paused' AND job_runs.kind = 'scheduled'))
RETURNING *

-- name: prune_cursor_floor
-- Runs and events a consumer has not read yet are kept, however old.
SELECT coalesce(min(position), 0) AS position FROM consumer_cursors

-- name: prune_events
DELETE FROM run_events
WHERE event_id IN (SELECT event_id FROM run_events
                   WHERE event_id <= %(position)s AND emitted_at < %(before)s
                   ORDER BY event_id LIMIT %(limit)s)

-- name: oldest_unread_event
-- Without events_after's visibility filter: events a long transaction hides count as unread.
SELECT emitted_at FROM run_events WHERE event_id > %(position)s ORDER BY event_id LIMIT 1

-- name: prune_runs
WITH old AS (
    SELECT run_id, scheduled_at FROM job_runs
    WHERE status IN ('SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED') AND finished_at < %(before)s
    ORDER BY finished_at LIMIT %(limit)s
)
DELETE FROM job_runs AS r USING old
WHERE r.run_id = old.run_id AND r.scheduled_at = old.scheduled_at

-- name: prunable_jobs
SELECT job_id FROM jobs AS j
WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < %(before)s
  AND NOT EXISTS (SELECT 1 FROM job_runs AS r
                  WHERE r.job_id = j.job_id
                    AND (r.status IN ('PENDING', 'ENQUEUED', 'RUNNING', 'RETRYING')
                         OR r.finished_at IS NULL OR r.finished_at >= %(keep_from)s))
ORDER BY updated_at LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: job_runs_delete
DELETE FROM job_runs WHERE job_id = %(job_id)s

-- name: job_delete
DELETE FROM jobs
WHERE job_id = %(job_id)s AND status IN ('completed', 'failed', 'cancelled')
  AND updated_at < %(before)s

-- name: deployment_pin
INSERT INTO deployment (name, value) VALUES (%(name)s, %(value)s) ON CONFLICT (name) DO NOTHING

-- name: deployment_get
SELECT value FROM deployment WHERE name = %(name)s

-- name: events_after
-- Only events of transactions older than every transaction still in progress: the set of such
-- events only grows at its end, because event ids carry their transaction id in the high bits
-- (run_event_next_id). "event_id < xmin << 16" is "xid < xmin", written so the primary key
-- range bounds the scan.
SELECT event_id, job_id, run_id, status, emitted_at FROM run_events
WHERE event_id > %(event_id)s
  AND event_id < (pg_snapshot_xmin(pg_current_snapshot())::text::bigint << 16)
ORDER BY event_id
LIMIT %(limit)s

-- name: cursor_get
SELECT position FROM consumer_cursors WHERE consumer = %(consumer)s

-- name: cursor_init
INSERT INTO consumer_cursors (consumer, position) VALUES (%(consumer)s, 0)
ON CONFLICT (consumer) DO NOTHING

-- name: cursor_advance
UPDATE consumer_cursors SET position = %(position)s
WHERE consumer = %(consumer)s AND position = %(previous)s

-- name: jobs_lock_versions
-- events_apply's guard for a batch: the jobs still at the versions the decisions were made from,
-- their rows locked (in job id order, as every multi-row lock here) until the transaction ends.
-- A job changed since answers no row: its event cuts the batch.
SELECT j.job_id FROM jobs AS j
JOIN unnest(%(job_ids)s::text[], %(versions)s::bigint[]) AS k (job_id, version)
  ON j.job_id = k.job_id AND j.version = k.version
ORDER BY j.job_id
FOR UPDATE OF j

-- name: jobs_open_runs
-- events_apply's check, per job with its row locked (jobs_lock_versions): other_open, an open
-- scheduled run besides the next run the event would insert (a resume or a schedule change
-- inserted it; then no second one); open, any open run (scheduled, or run-now too with
-- include_manual), which keeps the job from ending: a change or a redrive that opens a run waits
-- for the lock, so none slips in before the end. A statement of its own, so its snapshot is
-- taken after the locks and sees what committed while they were awaited.
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
FROM unnest(%(job_ids)s::text[], %(insert_run_ids)s::text[], %(include_manual)s::boolean[])
     AS k (job_id, insert_run_id, include_manual)

-- name: jobs_apply_events
-- events_apply's update of the jobs' projection, one row per job (each at most once), guarded
-- by the version its event was decided from.
UPDATE jobs AS j
SET status = coalesce(k.job_status, j.status),
    next_run_at = CASE WHEN k.set_next_run_at THEN k.next_run_at ELSE j.next_run_at END,
    last_run_id = k.last_run_id,
    updated_at = k.updated_at,
    version = j.version + 1
FROM unnest(%(job_ids)s::text[], %(versions)s::bigint[], %(job_statuses)s::text[],
            %(set_next_run_ats)s::boolean[], %(next_run_ats)s::timestamptz[],
            %(last_run_ids)s::text[], %(updated_ats)s::timestamptz[])
     AS k (job_id, version, job_status, set_next_run_at, next_run_at, last_run_id, updated_at)
WHERE j.job_id = k.job_id AND j.version = k.version

-- name: event_runs_insert
-- The next runs of a batch of events in ONE statement, insert-if-absent, with their watermark
-- touches and wake-ups (as jobs_insert_many does for first runs). %(runs)s is a JSON array of
-- the runs' columns plus behind and notify (decided as run_insert's caller does). Answers the
-- ids of the runs inserted; the others exist already (the caller revives a CANCELLED one).
WITH input AS (
    SELECT * FROM json_to_recordset(%(runs)s::json) AS t(
        run_id text, job_id text, time_bucket bigint, shard integer, scheduled_at timestamptz,
        kind text, status text, attempt integer, behind boolean, notify boolean)
), new_runs AS (
    INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status,
                          attempt)
    SELECT run_id, job_id, time_bucket, shard, scheduled_at, kind, status, attempt FROM input
    ON CONFLICT (run_id, scheduled_at) DO NOTHING
    RETURNING run_id, status
), pending AS (
    SELECT i.shard, i.time_bucket AS bucket, i.behind, i.notify
    FROM new_runs JOIN input AS i ON i.run_id = new_runs.run_id
    WHERE new_runs.status = 'PENDING'
), wanted AS (
    SELECT shard, min(bucket) AS bucket, bool_or(behind) AS behind FROM pending GROUP BY shard
), locked AS (
    SELECT w.shard FROM shard_watermarks AS w JOIN wanted USING (shard)
    WHERE w.bucket > wanted.bucket OR wanted.behind
    ORDER BY w.shard
    FOR UPDATE OF w
), touched AS (
    UPDATE shard_watermarks AS w
    SET bucket = least(w.bucket, wanted.bucket), generation = w.generation + 1
    FROM wanted
    WHERE w.shard = wanted.shard AND w.shard IN (SELECT shard FROM locked)
), notices AS (
    SELECT pg_notify(%(channel)s, due.shard::text)
    FROM (SELECT DISTINCT shard FROM pending WHERE notify) AS due
)
SELECT run_id, (SELECT count(*) FROM notices) AS notices FROM new_runs

-- name: shard_leases_previous
-- Who held the wanted shards before this take, and until when (store/leases.py tells a take
-- from a lapsed lease from a renewal or a take of a released one).
SELECT shard, owner, expires_at FROM shard_leases WHERE shard = ANY(%(shards)s::integer[])

-- name: shard_lease_take
-- Shards in ascending order, so two owners asking for overlapping sets cannot deadlock. A new
-- tenure (another owner, or the lease had lapsed) gets the next fencing token; the update waits
-- for any due claim in flight that holds the row (shard_claim_start's share lock).
INSERT INTO shard_leases AS l (shard, owner, expires_at)
SELECT s, %(owner)s, %(expires_at)s FROM unnest(%(shards)s::integer[]) AS s ORDER BY s
ON CONFLICT (shard) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at,
    token = CASE WHEN l.owner = excluded.owner AND l.expires_at > %(now)s THEN l.token
                 ELSE l.token + 1 END
WHERE l.owner = excluded.owner OR l.expires_at <= %(now)s

-- name: shard_leases_owned
SELECT shard, token FROM shard_leases
WHERE owner = %(owner)s AND expires_at > %(now)s ORDER BY shard

-- name: shard_leases_release
-- The row stays (its token must never start again from 1); the lease ends now.
UPDATE shard_leases SET expires_at = %(released_at)s WHERE owner = %(owner)s

-- name: shard_leases_hand_over
-- The owner's leases of shards it no longer wants (another watcher joined) end now, so their new
-- owner takes them at its next renewal instead of after the lease.
UPDATE shard_leases SET expires_at = %(released_at)s
WHERE owner = %(owner)s AND expires_at > %(now)s AND shard <> ALL(%(shards)s::integer[])

-- name: runs_enqueued_in_shards
-- A watcher that took shards from a lapsed lease: the runs the previous holder claimed lately
-- (it may have died before publishing them), through the job_runs_enqueued index.
SELECT * FROM job_runs
WHERE status = 'ENQUEUED' AND enqueued_at >= %(since)s AND shard = ANY(%(shards)s::integer[])
ORDER BY enqueued_at LIMIT %(limit)s

-- name: shard_claim_start
-- A fenced due claim's first statement: the fence and the watermark read at once. A row (its
-- watermark NULL on the shard's first visit) if the claim's token is still the shard's, none
-- otherwise; the share lock on the lease row holds until the claim commits, so no takeover lands
-- while a claim is in flight.
SELECT w.bucket, w.generation FROM shard_leases AS l
LEFT JOIN shard_watermarks AS w ON w.shard = l.shard
WHERE l.shard = %(shard)s AND l.token = %(token)s
FOR SHARE OF l

-- name: shards_claim_start
-- shard_claim_start for several shards (in shard order): a row per shard whose token is still
-- the claim's, with its watermark (NULL on a first visit); a shard without a row has a new owner.
SELECT l.shard, w.bucket, w.generation
FROM unnest(%(shards)s::integer[], %(tokens)s::bigint[]) AS k (shard, token)
JOIN shard_leases AS l ON l.shard = k.shard AND l.token = k.token
LEFT JOIN shard_watermarks AS w ON w.shard = l.shard
ORDER BY l.shard
FOR SHARE OF l

-- name: shard_owners
SELECT shard, owner FROM shard_leases WHERE expires_at > %(now)s

-- name: member_heartbeat
INSERT INTO members (group_name, member, expires_at)
VALUES (%(group_name)s, %(member)s, %(expires_at)s)
ON CONFLICT (group_name, member) DO UPDATE SET expires_at = excluded.expires_at

-- name: members_expired_delete
DELETE FROM members WHERE group_name = %(group_name)s AND expires_at <= %(now)s

-- name: members_live
SELECT member FROM members
WHERE group_name = %(group_name)s AND expires_at > %(now)s
ORDER BY member

-- name: member_leave
DELETE FROM members WHERE group_name = %(group_name)s AND member = %(member)s

-- name: token_add
INSERT INTO api_tokens (token_hash, user_id, created_at, token_id)
VALUES (%(token_hash)s, %(user_id)s, %(now)s, 'tok_' || substr(%(token_hash)s, 1, 10))

-- name: token_user
SELECT user_id FROM api_tokens WHERE token_hash = %(token_hash)s AND revoked_at IS NULL

-- name: tokens_exist
SELECT EXISTS (SELECT 1 FROM api_tokens) AS present

-- name: migrate_lock
-- Serialises concurrent migrate() calls for one schema (CREATE SCHEMA IF NOT EXISTS races).
SELECT pg_advisory_xact_lock(hashtextextended('onthedot.migrate:' || %(schema)s, 0))

-- name: migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: migrations_done
SELECT version FROM schema_migrations

-- name: migration_record
INSERT INTO schema_migrations (version) VALUES (%(version)s)

-- name: partitions_lock
-- One maintainer at a time per schema; the lock ends with the transaction.
SELECT pg_advisory_xact_lock(hashtextextended('onthedot.partitions:' || %(schema)s, 0))

-- name: partitions_list
SELECT c.relname AS name
FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
WHERE i.inhparent = 'job_runs'::regclass

-- name: partition_set_lock_timeout
-- Partition DDL waits for running queries; give up (and retry at the next maintenance) rather
-- than queue every other query of the table behind it.
SELECT set_config('lock_timeout', %(lock_timeout)s, true)

-- name: partition_lock_default
LOCK TABLE job_runs_default IN ACCESS EXCLUSIVE MODE

-- name: partition_create_table
CREATE TABLE {partition} (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)

-- name: partition_move_from_default
WITH moved AS (
    DELETE FROM job_runs_default WHERE scheduled_at >= {lo} AND scheduled_at < {hi}
    RETURNING *
)
INSERT INTO {partition} SELECT * FROM moved

-- name: partition_attach
ALTER TABLE job_runs ATTACH PARTITION {partition} FOR VALUES FROM ({lo}) TO ({hi})

-- name: partition_has_kept_runs
-- The retention rule (docs/reliability.md, "Nothing is kept for ever"), the negation of
-- prune_runs' condition: a run is kept while open, or until it finished (or was dead-lettered)
-- before %(keep_from)s, the earlier of now - retention and the oldest unread run event. One
-- probe per partial index (job_runs_due, _enqueued, _lease, _retry, _finished), so a day of old
-- history is checked without reading its rows.
SELECT EXISTS (SELECT 1 FROM {partition} WHERE status = 'PENDING')
       OR EXISTS (SELECT 1 FROM {partition} WHERE status = 'ENQUEUED')
       OR EXISTS (SELECT 1 FROM {partition} WHERE status = 'RUNNING')
       OR EXISTS (SELECT 1 FROM {partition} WHERE status = 'RETRYING')
       OR EXISTS (SELECT 1 FROM {partition}
                  WHERE status IN ('SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED')
                    AND (finished_at >= %(keep_from)s OR finished_at IS NULL)) AS kept

-- name: partition_detach
ALTER TABLE job_runs DETACH PARTITION {partition}

-- name: partition_drop
DROP TABLE {partition}

-- --- partitions (far future) ---
-- Runs past the daily window live in monthly partitions, themselves partitioned by range: a month
-- ahead of the window is one leaf (job_runs_mYYYYMM_unsplit); when the window reaches it, that
-- leaf is split into the month's days, under a lock on that month alone. Layout and costs:
-- store/pg_partitions.py and docs/postgres.md ("Partitions"). (No braces in this header: the
-- loader gives it to the query above, whose placeholders are braces.)

-- name: partitions_tree
-- Every partition below job_runs (two levels: a day may sit under a month) with its parent.
-- From the catalog alone: pg_partition_tree() would lock every partition and wait behind any
-- DDL. Names print unqualified: the store's search_path is its schema.
SELECT i.inhrelid::regclass::text AS name, 'job_runs' AS parent
FROM pg_inherits AS i
WHERE i.inhparent = 'job_runs'::regclass
UNION ALL
SELECT j.inhrelid::regclass::text, j.inhparent::regclass::text
FROM pg_inherits AS i JOIN pg_inherits AS j ON j.inhparent = i.inhrelid
WHERE i.inhparent = 'job_runs'::regclass

-- name: partition_lock_jobs
-- Attaching a partition gives it job_runs' foreign key, which locks jobs in SHARE ROW EXCLUSIVE
-- mode. Taken first, before any partition: a lock on jobs requested while holding one on a
-- partition would close a cycle with job_save (jobs, then job_runs).
LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE

-- name: partition_lock_exclusive
LOCK TABLE {partition} IN ACCESS EXCLUSIVE MODE

-- name: month_create
CREATE TABLE {month} (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
PARTITION BY RANGE (scheduled_at)

-- name: month_create_unsplit
-- The CHECK lets attaching the month skip scanning this leaf for rows outside the month.
CREATE TABLE {partition} PARTITION OF {month} (
    CONSTRAINT {range_check} CHECK (scheduled_at >= {lo} AND scheduled_at < {hi})
) FOR VALUES FROM ({lo}) TO ({hi})

-- name: month_day_create_detached
-- A day of a month being split, built outside job_runs; its CHECK lets ATTACH skip the scan
-- that would otherwise prove every row belongs to the day.
CREATE TABLE {partition} (
    LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    CONSTRAINT {range_check} CHECK (scheduled_at >= {lo} AND scheduled_at < {hi})
)

-- name: month_day_copy
INSERT INTO {partition} SELECT * FROM {unsplit} WHERE scheduled_at >= {lo} AND scheduled_at < {hi}

-- name: month_day_attach
ALTER TABLE {month} ATTACH PARTITION {partition} FOR VALUES FROM ({lo}) TO ({hi})

-- name: month_day_create
-- A missing day of a month already split (the month has no default partition: nothing to scan).
CREATE TABLE {partition} PARTITION OF {month} FOR VALUES FROM ({lo}) TO ({hi})

-- name: partition_drop_check
ALTER TABLE {partition} DROP CONSTRAINT {range_check}

-- --- attempts and job history (0006) -----------------------------------------------------

-- name: run_attempts
SELECT * FROM run_attempts WHERE run_id = %(run_id)s
ORDER BY started_at, attempt
LIMIT %(limit)s

-- name: prune_attempts
WITH old AS (
    SELECT run_id, token FROM run_attempts
    WHERE status <> 'running' AND finished_at < %(before)s
    ORDER BY finished_at LIMIT %(limit)s
)
DELETE FROM run_attempts AS a USING old
WHERE a.run_id = old.run_id AND a.token = old.token

-- name: job_change_insert
INSERT INTO job_changes (change_id, job_id, actor, channel, action, details, changed_at)
VALUES (%(change_id)s, %(job_id)s, %(actor)s, %(channel)s, %(action)s, %(details)s::jsonb,
        %(changed_at)s)

-- name: job_changes
SELECT * FROM job_changes
WHERE job_id = %(job_id)s
  AND (%(before_change_id)s::text IS NULL OR change_id < %(before_change_id)s::text)
ORDER BY change_id DESC
LIMIT %(limit)s

-- name: job_changes_delete
DELETE FROM job_changes WHERE job_id = %(job_id)s

-- --- news digests (0003) ---

-- name: feed_states_get
SELECT feed_url, etag, last_modified, fetched_at, seen FROM feed_state
WHERE job_id = %(job_id)s AND run_id = %(run_id)s

-- name: run_attempt_live
-- The fence of an attempt's side writes: a takeover bumped the attempt number. FOR SHARE makes
-- a concurrent claim wait for this transaction, so the write lands before the takeover or not
-- at all.
SELECT 1 AS live FROM job_runs
WHERE run_id = %(run_id)s AND scheduled_at = %(scheduled_at)s
  AND status = 'RUNNING' AND attempt = %(attempt)s
FOR SHARE

-- name: feed_states_drop
-- Everything but the states of the run a failed attempt would fall back to.
DELETE FROM feed_state
WHERE job_id = %(job_id)s AND (%(keep_run_id)s::text IS NULL OR run_id <> %(keep_run_id)s)

-- name: feed_state_insert
INSERT INTO feed_state (job_id, run_id, feed_url, etag, last_modified, fetched_at, seen)
VALUES (%(job_id)s, %(run_id)s, %(feed_url)s, %(etag)s, %(last_modified)s, %(fetched_at)s,
        %(seen)s::jsonb)

-- name: job_feed_state_delete
DELETE FROM feed_state WHERE job_id = %(job_id)s

-- name: delivery_claim
-- Only by the attempt that holds the run (fenced like every write of a run): a new (run,
-- channel), a RETRYING one, or a SENDING one whose attempt lost the run; never a DELIVERED or
-- FAILED one, never past max_attempts sends. The last error stays until the outcome.
INSERT INTO deliveries (run_id, channel_key, channel, target, status, attempts, claim_token,
                        updated_at, next_attempt_at)
SELECT %(run_id)s::text, %(channel_key)s::text, %(channel)s::text, %(target)s::text,
       'sending', 1, %(claim_token)s::text, %(now)s::timestamptz, %(stale_at)s::timestamptz
WHERE EXISTS (SELECT 1 FROM job_runs
              WHERE run_id = %(run_id)s::text AND status = 'RUNNING'
                AND lease_token = %(claim_token)s::text)
ON CONFLICT (run_id, channel_key) DO UPDATE
SET status = 'sending', attempts = deliveries.attempts + 1,
    claim_token = excluded.claim_token, updated_at = excluded.updated_at,
    next_attempt_at = excluded.next_attempt_at
WHERE deliveries.attempts < %(max_attempts)s
  AND (deliveries.status = 'retrying'
       OR (deliveries.status = 'sending'
           AND deliveries.claim_token IS DISTINCT FROM excluded.claim_token))
RETURNING *

-- name: delivery_done
UPDATE deliveries
SET status = %(status)s, error = %(error)s, updated_at = %(now)s,
    next_attempt_at = %(next_attempt_at)s::timestamptz,
    sent_at = CASE WHEN %(status)s = 'delivered' THEN %(now)s ELSE sent_at END
WHERE run_id = %(run_id)s AND channel_key = %(channel_key)s AND status = 'sending'
  AND claim_token = %(claim_token)s

-- name: deliveries_retry_claim
-- The retry sweep: due deliveries of SUCCEEDED runs (a RETRYING one whose time came, a SENDING
-- one whose sender died mid-send) become SENDING under the sweep's token. The rows are locked
-- and skipped when locked, and a row changed meanwhile is read again (READ COMMITTED): no longer
-- due, it is not taken, so two sweeps never take the same row.
WITH due AS (
    SELECT d.run_id, d.channel_key FROM deliveries AS d
    WHERE d.status IN ('retrying', 'sending') AND d.next_attempt_at <= %(now)s
      AND EXISTS (SELECT 1 FROM job_runs AS r
                  WHERE r.run_id = d.run_id AND r.status = 'SUCCEEDED')
    ORDER BY d.next_attempt_at LIMIT %(limit)s
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE deliveries AS d
SET status = 'sending', attempts = d.attempts + 1, retries = d.retries + 1,
    claim_token = %(claim_token)s, updated_at = %(now)s, next_attempt_at = %(stale_at)s
FROM due
WHERE d.run_id = due.run_id AND d.channel_key = due.channel_key
RETURNING d.*

-- name: deliveries_of_runs
SELECT * FROM deliveries
WHERE run_id = ANY(%(run_ids)s::text[])
ORDER BY run_id, channel_key

-- name: inbox_insert
INSERT INTO inbox (item_id, user_id, job_id, run_id, title, body, output, scheduled_at,
                   created_at)
VALUES (%(item_id)s, %(user_id)s, %(job_id)s, %(run_id)s, %(title)s, %(body)s,
        %(output)s::jsonb, %(scheduled_at)s, %(created_at)s)
ON CONFLICT (run_id) DO NOTHING

-- name: inbox_delivered
INSERT INTO deliveries (run_id, channel_key, channel, target, status, attempts, claim_token,
                        sent_at, updated_at)
VALUES (%(run_id)s, 'inbox', 'inbox', 'inbox', 'delivered', 1, %(claim_token)s, %(now)s,
        %(now)s)
ON CONFLICT (run_id, channel_key) DO NOTHING

-- name: inbox_list
-- Unread first, then newest first; the cursor is the last item of the previous page.
SELECT * FROM inbox
WHERE user_id = %(user_id)s
  AND (NOT %(unread_only)s OR read_at IS NULL)
  AND (%(after_read)s::boolean IS NULL
       OR (NOT %(after_read)s::boolean
           AND (read_at IS NOT NULL OR item_id < %(after_id)s::text))
       OR (%(after_read)s::boolean AND read_at IS NOT NULL AND item_id < %(after_id)s::text))
ORDER BY read_at IS NOT NULL, item_id DESC
LIMIT %(limit)s

-- name: inbox_mark_read
-- Reading twice keeps the first time.
UPDATE inbox SET read_at = coalesce(read_at, %(now)s)
WHERE user_id = %(user_id)s AND item_id = %(item_id)s
RETURNING *

-- name: webhook_secret_add
INSERT INTO webhook_secrets (secret_id, user_id, secret, created_at)
VALUES (%(secret_id)s, %(user_id)s, %(secret)s, %(created_at)s)

-- name: webhook_secrets_recent
SELECT * FROM webhook_secrets WHERE user_id = %(user_id)s ORDER BY secret_id DESC
LIMIT %(limit)s

-- name: prune_deliveries
DELETE FROM deliveries
WHERE (run_id, channel_key) IN (SELECT run_id, channel_key FROM deliveries
                                WHERE updated_at < %(before)s
                                ORDER BY updated_at LIMIT %(limit)s)

-- name: prune_inbox
DELETE FROM inbox
WHERE item_id IN (SELECT item_id FROM inbox
                  WHERE created_at < %(before)s ORDER BY created_at LIMIT %(limit)s)

-- name: runs_oldest_due
-- A metrics scrape's view of the backlog: the earliest instant of each kind of not-yet-started
-- run (the caller keeps those already due). PENDING: one probe of job_runs_due per shard (its
-- (shard, time_bucket, scheduled_at) order, LIMIT 1), never a scan of every PENDING run; the
-- bound on scheduled_at prunes the partitions ahead of now. RETRYING: the first entry of
-- job_runs_retry. ENQUEUED: the %(enqueued_cap)s oldest by job_runs_enqueued; a first attempt
-- was due at scheduled_at, a retry or a hand-back when it was enqueued.
SELECT
  (SELECT min(first.scheduled_at)
   FROM generate_series(0, %(shards)s - 1) AS shard_no(n)
   CROSS JOIN LATERAL (SELECT scheduled_at FROM job_runs
                       WHERE status = 'PENDING' AND shard = shard_no.n
                         AND scheduled_at <= %(now)s
                       ORDER BY time_bucket, scheduled_at LIMIT 1) AS first) AS pending,
  (SELECT retry_at FROM job_runs WHERE status = 'RETRYING' ORDER BY retry_at LIMIT 1) AS retrying,
  (SELECT min(CASE WHEN attempt = 0 THEN scheduled_at ELSE enqueued_at END) FROM (
      SELECT attempt, scheduled_at, enqueued_at FROM job_runs WHERE status = 'ENQUEUED'
      ORDER BY enqueued_at LIMIT %(enqueued_cap)s) AS queued) AS enqueued

-- --- tokens, reassigning and quotas (0007) ---

-- name: token_create
INSERT INTO api_tokens (token_hash, user_id, created_at, token_id, scopes, expires_at)
VALUES (%(token_hash)s, %(user_id)s, %(created_at)s, %(token_id)s, %(scopes)s, %(expires_at)s)

-- name: token_find
-- A live token only: not revoked, not expired.
SELECT * FROM api_tokens
WHERE token_hash = %(token_hash)s AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > %(now)s)

-- name: token_touch
UPDATE api_tokens SET last_used_at = %(now)s
WHERE token_id = %(token_id)s AND (last_used_at IS NULL OR last_used_at < %(stale_before)s)

-- name: tokens_list
SELECT * FROM api_tokens ORDER BY created_at, token_id

-- name: token_revoke
UPDATE api_tokens SET revoked_at = %(now)s
WHERE token_id = %(token_id)s AND revoked_at IS NULL
RETURNING token_id

-- name: token_rotate
UPDATE api_tokens SET token_hash = %(token_hash)s
WHERE token_id = %(token_id)s AND revoked_at IS NULL
RETURNING *

-- name: jobs_count_of_user
SELECT count(*) AS n FROM jobs WHERE user_id = %(user_id)s

-- name: quota_lock
-- Serialises the active-job quota check of one user across processes, until the inserting
-- transaction ends (so two creates cannot both see room for one more job).
SELECT pg_advisory_xact_lock(hashtextextended('onthedot.quota:' || %(user_id)s, 0))

-- name: jobs_count_active
-- Capped: the quota only needs to know whether the limit is reached.
SELECT count(*) AS n FROM (SELECT 1 FROM jobs
                           WHERE user_id = %(user_id)s AND status IN ('scheduled', 'paused')
                           LIMIT %(cap)s) AS active

-- name: jobs_reassign_key_clashes
SELECT count(*) AS n FROM jobs AS a JOIN jobs AS b
    ON b.user_id = %(to_user)s AND b.idempotency_key = a.idempotency_key
WHERE a.user_id = %(from_user)s AND a.idempotency_key IS NOT NULL

-- name: jobs_reassign
UPDATE jobs SET user_id = %(to_user)s, updated_at = %(now)s, version = version + 1
WHERE user_id = %(from_user)s

-- name: inbox_reassign
UPDATE inbox SET user_id = %(to_user)s WHERE user_id = %(from_user)s

-- name: runs_extend_leases
-- run_extend_lease for a worker's every held run in one statement; the rows it returns are the
-- runs still held. Each pair names its run's partition key, so each lookup reads one partition.
UPDATE job_runs AS r SET lease_expires_at = %(lease_expires_at)s
FROM unnest(%(run_ids)s::text[], %(scheduled_ats)s::timestamptz[], %(tokens)s::text[])
     AS held(run_id, scheduled_at, token)
WHERE r.run_id = held.run_id AND r.scheduled_at = held.scheduled_at
  AND r.status = 'RUNNING' AND r.lease_token = held.token
RETURNING r.run_id

-- name: runs_claim
-- A new attempt for each of a worker's claims that arrive together (store/run_batches.py), in
-- ONE statement: for a queued run, or a running one whose worker stopped renewing. A RETRYING
-- run is not claimable: the rescuer hands it back (ENQUEUED) at its retry_at. The attempt
-- starts in the same statement; an attempt of the run still running lost its lease. Each
-- claimed run comes with its job (its columns prefixed j_; NULL when the job row is gone), so
-- the worker reads no job of its own. Each claim keeps its own guard: a claim whose run is not
-- claimable, or whose job stops it, gets no row. Two claims of one run: the row is updated
-- once, with one of the tokens, and only that caller gets the row. The runs are written in
-- the order given (the store sorts the claims by run id).
-- The job guard (store/job_guard.py), the same in every statement that starts or resumes
-- work: the jobs' rows are locked FOR SHARE, in job order, before a run's row is written. A
-- pause's or delete's UPDATE of the job (FOR NO KEY UPDATE) conflicts with it, so the status
-- read here is the committed one and stays so until this transaction ends (an EXISTS on jobs
-- without the lock reads the old status past an uncommitted pause). A stopped run ends
-- CANCELLED.
WITH claim AS (
    SELECT * FROM unnest(%(run_ids)s::text[], %(scheduled_ats)s::timestamptz[],
                         %(tokens)s::text[], %(nows)s::timestamptz[],
                         %(lease_expires_ats)s::timestamptz[])
        AS c (run_id, scheduled_at, token, now, lease_expires_at)
), job AS MATERIALIZED (
    SELECT j.* FROM jobs AS j
    WHERE j.job_id IN (SELECT r.job_id FROM job_runs AS r
                       JOIN claim AS c ON r.run_id = c.run_id AND r.scheduled_at = c.scheduled_at)
    ORDER BY j.job_id
    FOR SHARE
), claimed AS (
    UPDATE job_runs AS r
    SET status = 'RUNNING', attempt = r.attempt + 1, lease_token = c.token,
        lease_expires_at = c.lease_expires_at, started_at = c.now, error = NULL,
        retry_at = NULL
    FROM claim AS c
    WHERE r.run_id = c.run_id AND r.scheduled_at = c.scheduled_at
      AND (r.status = 'ENQUEUED' OR (r.status = 'RUNNING' AND r.lease_expires_at <= c.now))
      AND NOT EXISTS (SELECT 1 FROM job WHERE job.job_id = r.job_id
                      AND (job.status = 'cancelled'
                           OR (job.status = 'paused' AND r.kind = 'scheduled')))
    RETURNING r.*
), stopped AS (
    UPDATE job_runs AS r
    SET status = 'CANCELLED', finished_at = c.now, lease_token = NULL,
        lease_expires_at = NULL, retry_at = NULL,
        error = CASE job.status WHEN 'paused' THEN %(paused_error)s ELSE %(deleted_error)s END
    FROM claim AS c, job
    WHERE r.run_id = c.run_id AND r.scheduled_at = c.scheduled_at AND job.job_id = r.job_id
      AND (r.status = 'ENQUEUED' OR (r.status = 'RUNNING' AND r.lease_expires_at <= c.now))
      AND (job.status = 'cancelled' OR (job.status = 'paused' AND r.kind = 'scheduled'))
    RETURNING r.run_id, r.finished_at AS ended_at
), ended AS (
    SELECT run_id, started_at AS ended_at FROM claimed
    UNION ALL SELECT run_id, ended_at FROM stopped
), lost AS (
    UPDATE run_attempts AS a SET status = 'lost', finished_at = ended.ended_at,
                                 error = %(lost_error)s
    FROM ended
    WHERE a.run_id = ended.run_id AND a.status = 'running'
), started AS (
    INSERT INTO run_attempts (run_id, token, attempt, status, started_at)
    SELECT run_id, lease_token, attempt, 'running', started_at FROM claimed
)
SELECT claimed.*,
       job.job_id AS j_job_id, job.user_id AS j_user_id, job.name AS j_name,
       job.action AS j_action, job.job_type AS j_job_type, job.schedule AS j_schedule,
       job.run_time AS j_run_time, job.timezone AS j_timezone, job.status AS j_status,
       job.retry_policy AS j_retry_policy, job.misfire_policy AS j_misfire_policy,
       job.timeout_seconds AS j_timeout_seconds, job.idempotency_key AS j_idempotency_key,
       job.request_hash AS j_request_hash, job.next_run_at AS j_next_run_at,
       job.last_run_id AS j_last_run_id, job.created_at AS j_created_at,
       job.updated_at AS j_updated_at, job.version AS j_version, job.notify AS j_notify,
       job.flexible_window_seconds AS j_flexible_window_seconds,
       job.overlap_policy AS j_overlap_policy
FROM claimed LEFT JOIN job ON job.job_id = claimed.job_id

-- name: runs_retry
-- A failed attempt's run put up for a retry, for a worker's retries that arrive together, in ONE statement; each row answers
-- one retry (run id, token, the status it moved to). Under the job guard, the jobs' rows
-- locked FOR SHARE first, in job order: a stopped run ends CANCELLED with its own reason
-- (paused_errors / deleted_errors) instead of RETRYING.
WITH retry AS (
    SELECT * FROM unnest(%(run_ids)s::text[], %(scheduled_ats)s::timestamptz[],
                         %(tokens)s::text[], %(errors)s::text[], %(retry_ats)s::timestamptz[],
                         %(nows)s::timestamptz[], %(a_errors)s::text[],
                         %(paused_errors)s::text[], %(deleted_errors)s::text[])
        AS t (run_id, scheduled_at, token, error, retry_at, now, a_error, paused_error,
              deleted_error)
), job AS MATERIALIZED (
    SELECT j.job_id, j.status FROM jobs AS j
    WHERE j.job_id IN (SELECT r.job_id FROM job_runs AS r
                       JOIN retry AS t ON r.run_id = t.run_id AND r.scheduled_at = t.scheduled_at)
    ORDER BY j.job_id
    FOR SHARE
), retrying AS (
    UPDATE job_runs AS r SET status = 'RETRYING', error = t.error, lease_expires_at = NULL,
                             retry_at = t.retry_at
    FROM retry AS t
    WHERE r.run_id = t.run_id AND r.scheduled_at = t.scheduled_at
      AND r.status = 'RUNNING' AND r.lease_token = t.token
      AND NOT EXISTS (SELECT 1 FROM job WHERE job.job_id = r.job_id
                      AND (job.status = 'cancelled'
                           OR (job.status = 'paused' AND r.kind = 'scheduled')))
    RETURNING r.run_id, r.status, t.token, t.now, t.a_error
), stopped AS (
    UPDATE job_runs AS r
    SET status = 'CANCELLED', lease_expires_at = NULL, finished_at = t.now,
        error = CASE job.status WHEN 'paused' THEN t.paused_error ELSE t.deleted_error END
    FROM retry AS t, job
    WHERE r.run_id = t.run_id AND r.scheduled_at = t.scheduled_at AND job.job_id = r.job_id
      AND r.status = 'RUNNING' AND r.lease_token = t.token
      AND (job.status = 'cancelled' OR (job.status = 'paused' AND r.kind = 'scheduled'))
    RETURNING r.run_id, r.status, t.token, t.now, t.a_error
), moved AS (
    SELECT * FROM retrying UNION ALL SELECT * FROM stopped
), ended AS (
    UPDATE run_attempts AS a
    SET status = 'failed', finished_at = moved.now, error = moved.a_error, preview = NULL
    FROM moved
    WHERE a.run_id = moved.run_id AND a.token = moved.token AND a.status = 'running'
)
SELECT run_id, token, status FROM moved

-- name: runs_finish
-- The terminal status, its RunEvent, the end of the attempt and (the i_ values; NULL without)
-- the run's inbox item with its delivery row, for a worker's finishes that arrive together,
-- in ONE statement (so the item is written exactly when the success is); each returned row answers one
-- finish (run id, token, its event). A finish whose token no longer holds its run gets no row.
WITH finish AS (
    SELECT * FROM unnest(%(run_ids)s::text[], %(scheduled_ats)s::timestamptz[],
                         %(tokens)s::text[], %(statuses)s::text[],
                         %(finished_ats)s::timestamptz[], %(outputs)s::text[],
                         %(errors)s::text[], %(dead_lettereds)s::boolean[],
                         %(a_statuses)s::text[], %(a_errors)s::text[], %(a_previews)s::text[],
                         %(i_item_ids)s::text[], %(i_user_ids)s::text[], %(i_titles)s::text[],
                         %(i_bodies)s::text[], %(i_outputs)s::text[],
                         %(i_scheduled_ats)s::timestamptz[], %(i_created_ats)s::timestamptz[])
        AS f (run_id, scheduled_at, token, status, finished_at, output, error, dead_lettered,
              a_status, a_error, a_preview, i_item_id, i_user_id, i_title, i_body, i_output,
              i_scheduled_at, i_created_at)
), finished AS (
    UPDATE job_runs AS r
    SET status = f.status, finished_at = f.finished_at, output = f.output::jsonb,
        error = f.error, dead_lettered = f.dead_lettered, lease_expires_at = NULL
    FROM finish AS f
    WHERE r.run_id = f.run_id AND r.scheduled_at = f.scheduled_at
      AND r.status = 'RUNNING' AND r.lease_token = f.token
    RETURNING r.job_id, r.run_id, r.status, f.token, f.finished_at, f.a_status, f.a_error,
              f.a_preview, f.i_item_id, f.i_user_id, f.i_title, f.i_body, f.i_output,
              f.i_scheduled_at, f.i_created_at
), item AS (
    INSERT INTO inbox (item_id, user_id, job_id, run_id, title, body, output, scheduled_at,
                       created_at)
    SELECT i_item_id, i_user_id, job_id, run_id, i_title, i_body, i_output::jsonb,
           i_scheduled_at, i_created_at
    FROM finished WHERE i_item_id IS NOT NULL
    ON CONFLICT (run_id) DO NOTHING
), delivered AS (
    INSERT INTO deliveries (run_id, channel_key, channel, target, status, attempts,
                            claim_token, sent_at, updated_at)
    SELECT run_id, 'inbox', 'inbox', 'inbox', 'delivered', 1, token, i_created_at,
           i_created_at
    FROM finished WHERE i_item_id IS NOT NULL
    ON CONFLICT (run_id, channel_key) DO NOTHING
), ended AS (
    UPDATE run_attempts AS a
    SET status = finished.a_status, finished_at = finished.finished_at,
        error = finished.a_error, preview = finished.a_preview
    FROM finished
    WHERE a.run_id = finished.run_id AND a.token = finished.token AND a.status = 'running'
), appended AS (
    INSERT INTO run_events (job_id, run_id, status, emitted_at)
    SELECT job_id, run_id, status, finished_at FROM finished ORDER BY run_id
    RETURNING event_id, job_id, run_id
)
SELECT appended.event_id, appended.job_id, appended.run_id, finished.token
FROM appended JOIN finished ON finished.run_id = appended.run_id
