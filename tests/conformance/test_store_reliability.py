"""Store conformance, continued: what keeps runs from being lost off the happy path.

Watermark guards (a run inserted or revived behind the watermark is found again), the rescuer's
queries (retries, expired leases, lost messages, rewinding a watermark), job versions under
concurrent changes, the pinned shard count, and retention. Every backend, the same assertions.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from onthedot.domain.ids import time_bucket_of
from onthedot.domain.models import JobStatus, RunStatus
from onthedot.store.base import (
    ApplyResult,
    EventApply,
    JobSave,
    Prune,
    RunClaim,
    RunFinish,
    Store,
)
from onthedot.store.postgres import PostgresStore
from tests.support.waiting import async_wait_until

from .conftest import StoreEnv
from .factories import make_run, new_token
from .test_store import (
    MARGIN_SECONDS,
    claim,
    finished_event,
    half_past,
    run_in,
    visible_events,
    with_job,
)


async def watermark_row(env: StoreEnv, shard: int) -> tuple[int, int]:
    statement = ("SELECT bucket, generation FROM shard_watermarks WHERE shard = :shard"
                 if env.kind == "sqlite" else
                 "SELECT bucket, generation FROM shard_watermarks WHERE shard = %(shard)s")
    rows = await env.sql(statement, {"shard": shard})
    return int(rows[0][0]), int(rows[0][1])


async def force_watermark(env: StoreEnv, shard: int, bucket: int) -> None:
    """What a bug (or a hand edit) could do: move a watermark past PENDING runs."""
    statement = ("UPDATE shard_watermarks SET bucket = :bucket WHERE shard = :shard"
                 if env.kind == "sqlite" else
                 "UPDATE shard_watermarks SET bucket = %(bucket)s WHERE shard = %(shard)s")
    await env.sql(statement, {"shard": shard, "bucket": bucket})


# --- runs behind the watermark -------------------------------------------------------------


async def test_a_run_revived_behind_the_watermark_is_found(store: Store) -> None:
    """Issue 8 §1: resuming a paused one-time job after its time revived its CANCELLED run in
    its old bucket, behind the watermark, where no watcher looked again."""
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=3))
    old = await run_in(store, job, RunStatus.CANCELLED, scheduled_at=now - timedelta(days=2))
    await claim(store, old.shard, now)  # the watermark moves up to now - margin
    assert await store.shard_watermark(old.shard) == time_bucket_of(
        now - timedelta(seconds=MARGIN_SECONDS))

    revived = await store.job_save(JobSave(job=job, insert_run=replace(
        old, status=RunStatus.PENDING, finished_at=None)))
    assert revived is not None

    assert await store.shard_watermark(old.shard) == old.time_bucket
    got = await claim(store, old.shard, now)
    assert [r.run_id for r in got.enqueued] == [old.run_id]


async def test_a_run_inserted_behind_the_watermark_is_found(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=3))
    shard = make_run(job, RunStatus.PENDING).shard
    await claim(store, shard, now)

    late = make_run(job, RunStatus.PENDING, scheduled_at=now - timedelta(hours=7))
    saved = await store.job_save(JobSave(job=job, insert_run=late))
    assert saved is not None
    manual = make_run(job, RunStatus.PENDING, scheduled_at=now - timedelta(hours=9),
                      kind="manual")
    assert await store.run_insert(manual)

    got = await claim(store, shard, now)
    assert [r.run_id for r in got.enqueued] == [manual.run_id, late.run_id]


async def test_an_old_insert_bumps_the_watermark_generation(store_env: StoreEnv,
                                                            store: Store) -> None:
    """An insert old enough that a walk running at that moment could pass it bumps the
    generation even when it is not behind the watermark yet; a fresh insert does not touch
    the watermark row at all (it is every create's hot path)."""
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=3))
    shard = make_run(job, RunStatus.PENDING).shard
    await claim(store, shard, now - timedelta(hours=2))
    bucket, generation = await watermark_row(store_env, shard)

    # "Fresh" and "old" are judged by the store's own (system) clock.
    assert await store.run_insert(make_run(
        job, RunStatus.PENDING, scheduled_at=datetime.now(UTC) + timedelta(minutes=5)))
    assert await watermark_row(store_env, shard) == (bucket, generation)

    old = make_run(job, RunStatus.PENDING,
                   scheduled_at=datetime.now(UTC) - timedelta(minutes=10))
    assert old.time_bucket > bucket  # ahead of the watermark, but old
    assert await store.run_insert(old)
    assert await watermark_row(store_env, shard) == (bucket, generation + 1)


@pytest.mark.postgres
async def test_pg_a_walk_racing_an_old_insert_does_not_pass_it(pg_env: StoreEnv,
                                                               pg_store: PostgresStore) -> None:
    """The race the generation closes: a watcher's walk reads the watermark and scans the
    buckets while another transaction inserts a run behind it; the walk commits its advance
    after that insert committed. Without the compare-and-set on the generation the watermark
    would jump past the run, which no later walk would then see."""
    now = half_past()
    job = await with_job(pg_store, now=now - timedelta(days=3))
    shard = make_run(job, RunStatus.PENDING).shard
    await claim(pg_store, shard, now - timedelta(days=2))  # watermark two days back
    late = make_run(job, RunStatus.PENDING, scheduled_at=now - timedelta(days=1))
    walker = pg_env.open()
    inserted = asyncio.Event()
    commit = asyncio.Event()

    async def insert_and_hold() -> None:
        async with pg_store._tx() as conn:  # the store's own insert path, held open
            await pg_store._insert_or_revive(conn, late)
            inserted.set()
            await commit.wait()

    inserting = asyncio.create_task(insert_and_hold())
    await inserted.wait()
    walk = asyncio.create_task(claim(walker, shard, now))  # does not see the run; then waits

    async def walk_blocked() -> bool:
        # The walk has scanned (without the uncommitted run) and waits for the watermark row.
        rows = await pg_env.sql("SELECT count(*) FROM pg_stat_activity WHERE "
                                "wait_event_type = 'Lock' AND application_name = %(app)s",
                                {"app": f"onthedot/{pg_store.schema}"})
        return bool(rows[0][0])

    await async_wait_until(walk_blocked, 30, "the walk to wait for the watermark row")
    commit.set()
    await inserting
    first = await walk

    assert late.run_id not in {r.run_id for r in first.enqueued}
    assert await pg_store.shard_watermark(shard) is not None
    assert (await pg_store.shard_watermark(shard) or 0) <= late.time_bucket
    second = await claim(pg_store, shard, now)
    assert [r.run_id for r in second.enqueued] == [late.run_id]


async def test_watermarks_rewind_to_a_run_left_behind(store_env: StoreEnv, store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=3))
    stranded = await run_in(store, job, RunStatus.PENDING, scheduled_at=now - timedelta(days=1))
    await claim(store, stranded.shard, now - timedelta(days=2))
    await force_watermark(store_env, stranded.shard, time_bucket_of(now))
    assert (await claim(store, stranded.shard, now)).enqueued == []  # the watcher is blind

    assert await store.watermarks_rewind() == {stranded.shard: stranded.time_bucket}
    assert await store.watermarks_rewind() == {}

    got = await claim(store, stranded.shard, now)
    assert [r.run_id for r in got.enqueued] == [stranded.run_id]


# --- the rescuer's queries -----------------------------------------------------------------


async def test_rescue_candidates_are_expired_leases_and_long_enqueued_runs(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    expired = await run_in(store, job, RunStatus.RUNNING, scheduled_at=now - timedelta(hours=1),
                           now=now - timedelta(minutes=1))
    alive = await run_in(store, job, RunStatus.RUNNING, scheduled_at=now - timedelta(hours=2),
                         now=now)
    waiting = await run_in(store, job, RunStatus.ENQUEUED, scheduled_at=now - timedelta(hours=3),
                           now=now - timedelta(minutes=5))
    fresh = await run_in(store, job, RunStatus.ENQUEUED, scheduled_at=now - timedelta(hours=4),
                         now=now - timedelta(seconds=5))
    retrying = await run_in(store, job, RunStatus.RETRYING, scheduled_at=now - timedelta(hours=5),
                            retry_at=now + timedelta(hours=1))

    got = await store.runs_rescue_candidates(now, now - timedelta(minutes=1), 10)

    assert {r.run_id for r in got} == {expired.run_id, waiting.run_id}
    assert {alive.run_id, fresh.run_id, retrying.run_id}.isdisjoint(r.run_id for r in got)


async def test_requeue_an_expired_lease_keeps_the_attempt_and_fences_the_old_worker(
        store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    lost = await run_in(store, job, RunStatus.RUNNING, scheduled_at=now - timedelta(hours=1),
                        now=now - timedelta(minutes=1))
    assert lost.lease_token is not None

    requeued = await store.run_requeue(lost, now)

    assert requeued is not None
    assert (requeued.status, requeued.attempt, requeued.enqueued_at, requeued.lease_token) == (
        RunStatus.ENQUEUED, lost.attempt, now, None)
    assert await store.run_requeue(lost, now) is None  # once
    late = RunFinish(lost.run_id, lost.lease_token, RunStatus.SUCCEEDED, now, output="late")
    assert await store.run_finish(late) is None  # the lost worker's late result is fenced
    again = await store.run_claim(RunClaim(lost.run_id, new_token(), now, 30))
    assert again is not None
    assert again.attempt == lost.attempt + 1


async def test_requeue_refuses_a_live_lease_and_a_run_that_moved_on(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    alive = await run_in(store, job, RunStatus.RUNNING, scheduled_at=now - timedelta(hours=1),
                         now=now)
    assert await store.run_requeue(alive, now) is None
    assert await store.run_get(alive.run_id) == alive

    waiting = await run_in(store, job, RunStatus.ENQUEUED, scheduled_at=now - timedelta(hours=2),
                           now=now - timedelta(minutes=5))
    restamped = await store.run_requeue(waiting, now)
    assert restamped is not None
    assert (restamped.status, restamped.enqueued_at) == (RunStatus.ENQUEUED, now)
    assert await store.run_requeue(waiting, now) is None  # read before the re-stamp: stale

    claimed = await store.run_claim(RunClaim(waiting.run_id, new_token(), now, 30))
    assert claimed is not None
    assert await store.run_requeue(restamped, now) is None  # claimed meanwhile
    assert await store.run_requeue(replace(waiting, status=RunStatus.SUCCEEDED), now) is None


async def test_concurrent_rescuers_hand_each_retry_back_once(store_env: StoreEnv,
                                                              store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    runs = [await run_in(store, job, RunStatus.RETRYING,
                         scheduled_at=now - timedelta(minutes=i + 1), retry_at=now)
            for i in range(60)]
    rescuers: list[Store] = [store, *(store_env.open() for _ in range(3))]

    async def drain(s: Store) -> list[str]:
        got: list[str] = []
        while batch := await s.runs_retry_due(now, 7):
            got += [r.run_id for r in batch]
        return got

    results = await asyncio.gather(*(drain(s) for s in rescuers))

    handed = [run_id for got in results for run_id in got]
    assert sorted(handed) == sorted(r.run_id for r in runs)


# --- job versions --------------------------------------------------------------------------


async def test_concurrent_saves_of_one_version_have_one_winner(store_env: StoreEnv,
                                                               store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    writers: list[Store] = [store, *(store_env.open() for _ in range(5))]
    changes = [replace(job, name=f"change {i}", updated_at=now) for i in range(len(writers))]

    results = await asyncio.gather(*(w.job_save(JobSave(job=c))
                                     for w, c in zip(writers, changes, strict=True)))

    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert await store.job_get_any(job.job_id) == winners[0]
    assert winners[0].version == job.version + 1


async def test_event_apply_refuses_a_decision_made_from_an_old_job_version(store: Store) -> None:
    """Issue 8 §2: the recurring watcher decided from a job read outside its transaction, so a
    pause landing between decide and apply still got a next run."""
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    event = await finished_event(store, job, now)
    await visible_events(store, 0, 1)
    nxt = make_run(job, RunStatus.PENDING, scheduled_at=now + timedelta(days=1))
    decision = EventApply(consumer="recurring", previous_event_id=0, event=event,
                          job_version=job.version, insert_run=nxt, job_status=None,
                          next_run_at=nxt.scheduled_at, set_next_run_at=True)
    paused = await store.job_save(JobSave(job=replace(job, status=JobStatus.PAUSED,
                                                      next_run_at=None, updated_at=now),
                                          cancel_open_runs=True))
    assert paused is not None

    assert await store.event_apply(decision) is ApplyResult.JOB_CHANGED

    assert await store.cursor_get("recurring") == 0  # nothing was written
    assert await store.run_get(nxt.run_id) is None
    assert await store.job_get_any(job.job_id) == paused
    keep = replace(decision, job_version=paused.version, insert_run=None, next_run_at=None,
                   set_next_run_at=False)
    assert await store.event_apply(keep) is ApplyResult.APPLIED


async def test_event_apply_inserts_no_second_open_run(store: Store) -> None:
    """A resume (or a schedule change) inserted the job's next run while the event's run was
    still running: the event's own next run would be a second open run."""
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    event = await finished_event(store, job, now - timedelta(minutes=10))
    await visible_events(store, 0, 1)
    already = await run_in(store, job, RunStatus.PENDING, scheduled_at=now + timedelta(hours=1))
    nxt = make_run(job, RunStatus.PENDING, scheduled_at=now + timedelta(hours=2))
    decision = EventApply(consumer="recurring", previous_event_id=0, event=event,
                          job_version=job.version, insert_run=nxt, job_status=None,
                          next_run_at=nxt.scheduled_at, set_next_run_at=True)

    assert await store.event_apply(decision) is ApplyResult.APPLIED

    assert await store.run_get(nxt.run_id) is None
    assert await store.run_get(already.run_id) == already
    projected = await store.job_get_any(job.job_id)
    assert projected is not None
    assert (projected.next_run_at, projected.last_run_id) == (job.next_run_at, event.run_id)


# --- deployment settings -------------------------------------------------------------------


async def test_deployment_pin_keeps_the_first_value(store_env: StoreEnv, store: Store) -> None:
    others: list[Store] = [store_env.open() for _ in range(3)]
    for other in others:
        await other.migrate()

    values = await asyncio.gather(*(s.deployment_pin("shards", str(32 + i))
                                    for i, s in enumerate([store, *others])))

    assert len(set(values)) == 1
    assert await store.deployment_pin("shards", "64") == values[0]


# --- retention -----------------------------------------------------------------------------


async def test_prune_deletes_old_history_and_keeps_what_is_open_or_unread(store: Store) -> None:
    now = half_past()
    cutoff = now - timedelta(days=30)
    long_ago = cutoff - timedelta(days=1)
    live_job = await with_job(store, now=long_ago - timedelta(days=1))
    done_job = await with_job(store, now=long_ago - timedelta(days=1),
                              status=JobStatus.COMPLETED, updated_at=long_ago)
    busy_job = await with_job(store, now=long_ago - timedelta(days=1),
                              status=JobStatus.CANCELLED, updated_at=long_ago)
    recent_job = await with_job(store, now=long_ago, status=JobStatus.FAILED, updated_at=now)
    old_runs = [await run_in(store, live_job, status, scheduled_at=long_ago - timedelta(hours=i),
                             now=long_ago - timedelta(hours=i))
                for i, status in enumerate([RunStatus.SUCCEEDED, RunStatus.FAILED,
                                            RunStatus.SKIPPED, RunStatus.CANCELLED])]
    kept = [
        await run_in(store, live_job, RunStatus.SUCCEEDED, scheduled_at=now, now=now),
        await run_in(store, live_job, RunStatus.PENDING, scheduled_at=long_ago + timedelta(1)),
        await run_in(store, busy_job, RunStatus.RUNNING, scheduled_at=long_ago - timedelta(1),
                     now=long_ago),
    ]
    await run_in(store, done_job, RunStatus.SUCCEEDED, scheduled_at=long_ago, now=long_ago)
    event = await finished_event(store, live_job, long_ago - timedelta(hours=5))
    await visible_events(store, 0, 1)
    # The recurring watcher has not read the event: it and its run are kept, however old.
    kept_while_unread = await store.prune(Prune(before=cutoff))
    assert await store.run_get(event.run_id) is not None
    assert await store.events_after(0, 10) != []
    assert kept_while_unread.events == 0

    read = EventApply(consumer="recurring", previous_event_id=0, event=event,
                      job_version=(await store.job_get_any(live_job.job_id) or live_job).version,
                      insert_run=None, job_status=None, next_run_at=None, set_next_run_at=False)
    assert await store.event_apply(read) is ApplyResult.APPLIED
    pruned = await store.prune(Prune(before=cutoff))

    assert pruned.events == 1
    assert kept_while_unread.jobs + pruned.jobs == 1  # done_job; busy_job still runs
    for run in [*old_runs, event]:
        assert await store.run_get(run.run_id) is None
    for run in kept:
        assert await store.run_get(run.run_id) == run
    assert await store.job_get_any(done_job.job_id) is None
    for job in (live_job, busy_job, recent_job):
        assert await store.job_get_any(job.job_id) is not None
    assert await store.events_after(0, 10) == []
    assert (await store.prune(Prune(before=cutoff))).total == 0


async def test_prune_works_in_batches(store: Store) -> None:
    now = half_past()
    long_ago = now - timedelta(days=40)
    job = await with_job(store, now=long_ago - timedelta(days=1))
    for i in range(7):
        await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=long_ago - timedelta(hours=i),
                     now=long_ago)

    first = await store.prune(Prune(before=now - timedelta(days=30), limit=3))
    assert first.runs == 3
    rest = [await store.prune(Prune(before=now - timedelta(days=30), limit=3)) for _ in range(3)]
    assert [p.runs for p in rest] == [3, 1, 0]


async def test_events_lag_is_the_age_of_the_oldest_unread_event(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    assert await store.events_lag("recurring", now) == 0.0
    event = await finished_event(store, job, now - timedelta(seconds=90))
    await visible_events(store, 0, 1)

    assert await store.events_lag("recurring", now) == 90.0

    applied = EventApply(consumer="recurring", previous_event_id=0, event=event,
                         job_version=job.version, insert_run=None, job_status=None,
                         next_run_at=None, set_next_run_at=False)
    assert await store.event_apply(applied) is ApplyResult.APPLIED
    assert await store.events_lag("recurring", now) == 0.0
