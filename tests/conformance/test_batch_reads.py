"""Reads of many jobs and runs at once (the recurring watcher reads a batch of events' jobs and
runs in two reads): the same rows ``job_get_any`` and ``run_get`` return, by id, without the
ones that do not exist."""

from __future__ import annotations

from datetime import timedelta

from onthedot.domain.models import RunStatus
from onthedot.store.base import Store

from .test_store import half_past, run_in, with_job


async def test_many_jobs_and_runs_in_one_read_each(store: Store) -> None:
    now = half_past()
    jobs = [await with_job(store) for _ in range(3)]
    runs = [await run_in(store, job, status, scheduled_at=now - timedelta(minutes=i))
            for i, (job, status) in enumerate(
                [(jobs[0], RunStatus.SUCCEEDED), (jobs[0], RunStatus.FAILED),
                 (jobs[1], RunStatus.PENDING)])]

    found = await store.jobs_get_any_many([jobs[0].job_id, jobs[1].job_id, jobs[0].job_id,
                                           "01J00000000000000000000000"])
    assert found == {j.job_id: await store.job_get_any(j.job_id) for j in jobs[:2]}
    assert set(found) == {jobs[0].job_id, jobs[1].job_id}

    got = await store.runs_get_many([r.run_id for r in runs] + ["no-such-run", runs[0].run_id])
    assert got == {r.run_id: await store.run_get(r.run_id) for r in runs}
    assert len(got) == 3
    assert await store.jobs_get_any_many([]) == {}
    assert await store.runs_get_many([]) == {}
