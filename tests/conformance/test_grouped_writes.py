"""A worker's claims and finishes arrive together (hundreds of runs in flight): on every backend
each concurrent call gets its own outcome, fenced by its own token, whether or not the backend
writes them in one transaction (SQLite's group write, PostgreSQL's statement groups)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from onthedot.domain.history import AttemptStatus
from onthedot.domain.models import JobRun, RunStatus
from onthedot.store.base import RunClaim, RunFinish, RunRetry, Store

from .factories import new_token
from .test_store import LEASE_SECONDS, half_past, run_in, visible_events, with_job

RUNS = 40


async def test_concurrent_claims_and_finishes_each_get_their_own_outcome(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    runs = [await run_in(store, job, RunStatus.ENQUEUED,
                         scheduled_at=now - timedelta(seconds=i + 1)) for i in range(RUNS)]
    tokens = [new_token() for _ in runs]
    # Every run claimed twice at once, by two deliveries of its message: one claim wins.
    first = [RunClaim(r.run_id, t, now, LEASE_SECONDS) for r, t in zip(runs, tokens, strict=True)]
    second = [RunClaim(r.run_id, new_token(), now, LEASE_SECONDS) for r in runs]
    claimed = await asyncio.gather(*(store.run_claim(c) for c in [*first, *second]))
    winners: dict[str, JobRun] = {}
    for result in claimed:
        if result is not None:
            assert result.run_id not in winners, "one run claimed twice"
            winners[result.run_id] = result
    assert set(winners) == {r.run_id for r in runs}
    assert all(w.status is RunStatus.RUNNING and w.attempt == 1 for w in winners.values())

    after = max((e.event_id for e in await store.events_after(0, 1000)), default=0)
    finished_at = now + timedelta(seconds=5)
    half = RUNS // 2
    # Together: the right token finishes the first half, a wrong one fails on the second half,
    # the second half's holders put their runs up for a retry.
    finishes = [RunFinish(run_id=w.run_id, token=str(w.lease_token),
                          status=RunStatus.SUCCEEDED, finished_at=finished_at,
                          output={"i": i})
                for i, w in enumerate(list(winners.values())[:half])]
    stale = [RunFinish(run_id=w.run_id, token=new_token(), status=RunStatus.FAILED,
                       finished_at=finished_at, error="not mine")
             for w in list(winners.values())[half:]]
    retries = [RunRetry(run_id=w.run_id, token=str(w.lease_token), error="try again",
                        now=finished_at, retry_at=finished_at + timedelta(minutes=1))
               for w in list(winners.values())[half:]]
    outcomes = await asyncio.gather(*(store.run_finish(f) for f in finishes),
                                    *(store.run_finish(f) for f in stale),
                                    *(store.run_retry(r) for r in retries))

    events = outcomes[:half]
    assert all(e is not None for e in events)
    assert [e.run_id for e in events if e is not None] == [f.run_id for f in finishes]
    assert len({e.event_id for e in events if e is not None}) == half
    assert outcomes[half:2 * half] == [None] * half, "a stale token finished a run"
    assert outcomes[2 * half:] == [RunStatus.RETRYING] * half
    for i, f in enumerate(finishes):
        stored = await store.run_get(f.run_id)
        assert stored is not None
        assert (stored.status, stored.output) == (RunStatus.SUCCEEDED, {"i": i})
        attempts = await store.run_attempts(f.run_id, 10)
        assert [a.status for a in attempts] == [AttemptStatus.SUCCEEDED]
    for r in retries:
        stored = await store.run_get(r.run_id)
        assert stored is not None
        assert (stored.status, stored.error) == (RunStatus.RETRYING, "try again")
        attempts = await store.run_attempts(r.run_id, 10)
        assert [(a.status, a.error) for a in attempts] == [(AttemptStatus.FAILED, "try again")]
    seen = await visible_events(store, after, half)
    assert sorted(e.run_id for e in seen) == sorted(f.run_id for f in finishes)


async def test_a_finish_and_a_takeover_of_the_same_run_at_once(store: Store) -> None:
    # The old holder's result and a new attempt's claim (its lease ended) land together: either
    # the result is recorded and the claim refused, or the claim wins and the result is fenced
    # off. Never both, never neither.
    now = half_past()
    job = await with_job(store)
    for i in range(10):
        run = await run_in(store, job, RunStatus.RUNNING,
                           scheduled_at=now - timedelta(minutes=i + 1),
                           now=now - timedelta(hours=1))
        later = now + timedelta(seconds=1)
        event, taken = await asyncio.gather(
            store.run_finish(RunFinish(run_id=run.run_id, token=str(run.lease_token),
                                       status=RunStatus.SUCCEEDED, finished_at=later)),
            store.run_claim(RunClaim(run.run_id, new_token(), later, LEASE_SECONDS)))
        assert (event is None) != (taken is None), (event, taken)
        stored = await store.run_get(run.run_id)
        assert stored is not None
        assert stored.status is (RunStatus.SUCCEEDED if taken is None else RunStatus.RUNNING)
