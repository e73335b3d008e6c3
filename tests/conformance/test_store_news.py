"""Store conformance for what actions read and keep between runs: the job's last succeeded run
(``ActionContext.previous``) and the news digest's per-feed state. Every backend, the same
assertions."""

from __future__ import annotations

from datetime import timedelta

from onthedot.domain.models import JobStatus, RunStatus
from onthedot.store.base import FeedState, FeedStatesPut, Prune, Store

from .factories import make_run
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


async def test_feed_states_round_trip_per_run(store: Store) -> None:
    job = await with_job(store)
    written = (
        state("https://news.example/rss", etag='W/"abc"', last_modified="Mon, 22 Jun 2026 "
              "07:00:00 GMT", seen=("k3", "k2", "k1")),
        state("https://新聞.example/財經?a=1&b=2", at_hours=1),
    )
    await store.feed_states_put(FeedStatesPut(job_id=job.job_id, run_id="run-1",
                                              keep_run_id=None, states=written))

    read = await store.feed_states_get(job.job_id, "run-1")

    assert sorted(read, key=lambda s: s.feed_url) == sorted(written, key=lambda s: s.feed_url)
    assert await store.feed_states_get(job.job_id, "run-2") == []
    assert await store.feed_states_get("another-job", "run-1") == []


async def test_feed_states_keep_only_the_fallback_run_and_the_latest(store: Store) -> None:
    job = await with_job(store)
    other = await with_job(store)
    url = "https://news.example/rss"

    def put(job_id: str, run_id: str, keep: str | None, *states: FeedState) -> FeedStatesPut:
        return FeedStatesPut(job_id=job_id, run_id=run_id, keep_run_id=keep, states=states)

    await store.feed_states_put(put(job.job_id, "run-1", None, state(url, seen=("a",))))
    await store.feed_states_put(put(other.job_id, "run-1", None, state(url)))
    # run-2's first attempt, then its retry: the retry replaces what the first attempt wrote.
    await store.feed_states_put(put(job.job_id, "run-2", "run-1", state(url, seen=("b",)),
                                    state(url + "?2")))
    await store.feed_states_put(put(job.job_id, "run-2", "run-1", state(url, seen=("c",))))

    assert [s.seen for s in await store.feed_states_get(job.job_id, "run-1")] == [("a",)]
    assert [s.seen for s in await store.feed_states_get(job.job_id, "run-2")] == [("c",)]

    # run-2 succeeded; run-3 falls back to it, and run-1's states go.
    await store.feed_states_put(put(job.job_id, "run-3", "run-2", state(url, seen=("d",))))
    assert await store.feed_states_get(job.job_id, "run-1") == []
    assert [s.seen for s in await store.feed_states_get(job.job_id, "run-2")] == [("c",)]
    assert [s.seen for s in await store.feed_states_get(job.job_id, "run-3")] == [("d",)]
    # Another job's states are never touched.
    assert len(await store.feed_states_get(other.job_id, "run-1")) == 1


async def test_pruning_a_job_deletes_its_feed_states(store: Store) -> None:
    now = half_past()
    long_ago = now - timedelta(days=31)
    done = await with_job(store, now=long_ago, status=JobStatus.COMPLETED, updated_at=long_ago)
    live = await with_job(store, now=long_ago)
    for job in (done, live):
        await store.feed_states_put(FeedStatesPut(job_id=job.job_id, run_id="run-1",
                                                  keep_run_id=None,
                                                  states=(state("https://news.example/rss"),)))

    pruned = await store.prune(Prune(before=now - timedelta(days=30)))

    assert pruned.jobs == 1
    assert await store.feed_states_get(done.job_id, "run-1") == []
    assert len(await store.feed_states_get(live.job_id, "run-1")) == 1
