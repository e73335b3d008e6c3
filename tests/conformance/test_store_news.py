"""Store conformance for what actions read and keep between runs: the job's last succeeded run
(``ActionContext.previous``) and the news digest's per-feed state. Every backend, the same
assertions."""

from __future__ import annotations

from datetime import timedelta

from onthedot.domain.models import Job, JobRun, JobStatus, RunEvent, RunStatus
from onthedot.store.base import (
    ApplyResult,
    EventApply,
    FeedState,
    FeedStatesPut,
    Prune,
    RunClaim,
    RunFinish,
    Store,
)

from .factories import make_run, new_token
from .test_store import half_past, run_in, with_job


async def test_last_succeeded_is_the_latest_success_scheduled_before(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=3))
    other = await with_job(store, now=now - timedelta(days=3))
    hour = timedelta(hours=1)
    older = await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=now - 5 * hour)
    latest = await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=now - 4 * hour)
    for i, status in enumerate([RunStatus.FAILED, RunStatus.SKIPPED, RunStatus.CANCELLED,
                                RunStatus.RUNNING, RunStatus.RETRYING]):
        await run_in(store, job, status, scheduled_at=now - 3 * hour + i * timedelta(minutes=1))
    await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=now)  # not before itself
    await run_in(store, other, RunStatus.SUCCEEDED, scheduled_at=now - hour)

    assert await store.run_last_succeeded(job.job_id, now) == latest
    assert await store.run_last_succeeded(job.job_id, latest.scheduled_at) == older
    assert await store.run_last_succeeded(job.job_id, older.scheduled_at) is None
    assert await store.run_last_succeeded("no-such-job", now) is None


async def test_last_succeeded_counts_a_run_now_as_history(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=now - timedelta(hours=2))
    manual = make_run(job, RunStatus.SUCCEEDED, scheduled_at=now - timedelta(hours=1),
                      kind="manual")
    assert await store.run_insert(manual)

    assert await store.run_last_succeeded(job.job_id, now) == manual


def state(url: str, at_hours: int = 0, **kw: object) -> FeedState:
    return FeedState(feed_url=url, fetched_at=half_past() - timedelta(hours=at_hours),
                     **kw)  # type: ignore[arg-type]


async def running(store: Store, job: Job, hours_ago: int) -> JobRun:
    """A run of ``job`` being attempted (attempt 1), scheduled ``hours_ago``."""
    return await run_in(store, job, RunStatus.RUNNING,
                        scheduled_at=half_past() - timedelta(hours=hours_ago))


def put(run: JobRun, keep: JobRun | None, *states: FeedState,
        attempt: int | None = None) -> FeedStatesPut:
    return FeedStatesPut(job_id=run.job_id, run_id=run.run_id,
                         attempt=run.attempt if attempt is None else attempt,
                         keep_run_id=None if keep is None else keep.run_id, states=states)


async def test_feed_states_round_trip_per_run(store: Store) -> None:
    job = await with_job(store)
    run = await running(store, job, 1)
    written = (
        state("https://news.example/rss", etag='W/"abc"', last_modified="Mon, 22 Jun 2026 "
              "07:00:00 GMT", seen=("k3", "k2", "k1")),
        state("https://新聞.example/財經?a=1&b=2", at_hours=1),
    )
    assert await store.feed_states_put(put(run, None, *written))

    read = await store.feed_states_get(job.job_id, run.run_id)

    assert sorted(read, key=lambda s: s.feed_url) == sorted(written, key=lambda s: s.feed_url)
    assert await store.feed_states_get(job.job_id, "another-run") == []
    assert await store.feed_states_get("another-job", run.run_id) == []


async def test_feed_states_keep_only_the_fallback_run_and_the_latest(store: Store) -> None:
    job = await with_job(store)
    other = await with_job(store)
    url = "https://news.example/rss"
    one, two, three = [await running(store, job, h) for h in (3, 2, 1)]
    elsewhere = await running(store, other, 3)

    assert await store.feed_states_put(put(one, None, state(url, seen=("a",))))
    assert await store.feed_states_put(put(elsewhere, None, state(url)))
    # Two writes of run two's attempt: the second replaces the first.
    assert await store.feed_states_put(put(two, one, state(url, seen=("b",)),
                                           state(url + "?2")))
    assert await store.feed_states_put(put(two, one, state(url, seen=("c",))))

    assert [s.seen for s in await store.feed_states_get(job.job_id, one.run_id)] == [("a",)]
    assert [s.seen for s in await store.feed_states_get(job.job_id, two.run_id)] == [("c",)]

    # Run two succeeded; run three falls back to it, and run one's states go.
    assert await store.feed_states_put(put(three, two, state(url, seen=("d",))))
    assert await store.feed_states_get(job.job_id, one.run_id) == []
    assert [s.seen for s in await store.feed_states_get(job.job_id, two.run_id)] == [("c",)]
    assert [s.seen for s in await store.feed_states_get(job.job_id, three.run_id)] == [("d",)]
    # Another job's states are never touched.
    assert len(await store.feed_states_get(other.job_id, elsewhere.run_id)) == 1


async def test_feed_states_of_an_attempt_that_lost_the_run_are_not_written(
        store: Store) -> None:
    job = await with_job(store)
    url = "https://news.example/rss"
    first = await running(store, job, 2)
    assert await store.feed_states_put(put(first, None, state(url, seen=("kept",))))
    taken = await running(store, job, 1)
    # Another worker took the run over (attempt 2): attempt 1 is a zombie now.
    lease_expired = half_past() + timedelta(hours=1)
    assert await store.run_claim(RunClaim(run_id=taken.run_id, token=new_token(),
                                          now=lease_expired, lease_seconds=30)) is not None
    assert not await store.feed_states_put(put(taken, first, state(url, seen=("zombie",)),
                                               attempt=1))
    assert await store.feed_states_get(job.job_id, taken.run_id) == []
    assert await store.feed_states_put(put(taken, first, state(url, seen=("live",)),
                                           attempt=2))
    # A finished run takes no more writes either.
    done = await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=half_past())
    assert not await store.feed_states_put(put(done, None, state(url)))
    assert [s.seen for s in await store.feed_states_get(job.job_id, first.run_id)] == \
        [("kept",)]
    assert [s.seen for s in await store.feed_states_get(job.job_id, taken.run_id)] == \
        [("live",)]


async def test_pruning_a_job_deletes_its_feed_states(store: Store) -> None:
    now = half_past()
    long_ago = now - timedelta(days=31)
    done = await with_job(store, now=long_ago, status=JobStatus.COMPLETED, updated_at=long_ago)
    live = await with_job(store, now=long_ago)
    runs = []
    for job in (done, live):
        run = await run_in(store, job, RunStatus.RUNNING, scheduled_at=long_ago)
        assert await store.feed_states_put(put(run, None, state("https://news.example/rss")))
        runs.append(run)
    # The done job's run finished long ago (a RUNNING run would keep its job), and the
    # recurring watcher read its event (the run of an unread event is kept with it).
    event = await finish(store, runs[0])
    assert await store.event_apply(EventApply(
        consumer="recurring", previous_event_id=0, event=event, job_version=done.version,
        insert_run=None, job_status=None, next_run_at=None,
        set_next_run_at=False)) is ApplyResult.APPLIED

    pruned = await store.prune(Prune(before=now - timedelta(days=30)))

    assert pruned.jobs == 1
    assert await store.feed_states_get(done.job_id, runs[0].run_id) == []
    assert len(await store.feed_states_get(live.job_id, runs[1].run_id)) == 1


async def finish(store: Store, run: JobRun) -> RunEvent:
    assert run.lease_token is not None
    event = await store.run_finish(RunFinish(
        run_id=run.run_id, token=run.lease_token, status=RunStatus.SUCCEEDED,
        finished_at=run.scheduled_at))
    assert event is not None
    return event
