"""A worker's batched writes on every backend: one lease renewal for all the runs it holds
(``runs_extend_leases``), each run still fenced by its own token."""

from __future__ import annotations

from datetime import timedelta

from onthedot.domain.history import AttemptStatus
from onthedot.domain.models import RunStatus
from onthedot.store.base import RunClaim, Store

from .factories import new_token
from .test_store import LEASE_SECONDS, half_past, run_in, with_job


async def test_one_call_extends_every_held_lease_and_reports_the_lost_ones(
        store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    held = [await run_in(store, job, RunStatus.RUNNING, scheduled_at=now - timedelta(minutes=m),
                         now=now) for m in range(1, 4)]
    taken_over = await run_in(store, job, RunStatus.RUNNING,
                              scheduled_at=now - timedelta(minutes=9), now=now - timedelta(hours=1))
    assert taken_over.lease_token is not None
    stale = taken_over.lease_token
    newer = await store.run_claim(RunClaim(taken_over.run_id, new_token(), now, LEASE_SECONDS))
    assert newer is not None
    done = await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=now - timedelta(minutes=8))
    until = now + timedelta(minutes=5)

    still = await store.runs_extend_leases(
        [*((r.run_id, r.lease_token) for r in held if r.lease_token),
         (taken_over.run_id, stale), (done.run_id, new_token()), ("no-such-run", new_token())],
        until)

    assert still == {r.run_id for r in held}
    for run in held:
        stored = await store.run_get(run.run_id)
        assert stored is not None
        assert stored.lease_expires_at == until
        assert stored.lease_token == run.lease_token
    assert await store.run_get(taken_over.run_id) == newer, "the newer attempt keeps its lease"
    assert await store.run_get(done.run_id) == done
    assert await store.runs_extend_leases([], until) == set()
    # A renewal starts and ends no attempt: the newer attempt's row is still the running one.
    attempts = await store.run_attempts(taken_over.run_id, 10)
    assert (attempts[-1].attempt, attempts[-1].status) == (newer.attempt, AttemptStatus.RUNNING)
