"""Store conformance for the flexible window (migration 0005): the window is stored with the
job on every write path (single create, batch insert, save), and the store refuses a value
outside 0..3600 itself. Every backend, the same assertions."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import psycopg
import pytest

from onthedot.domain.models import JobParams
from onthedot.store.base import JobSave, Store

from .test_store import half_past, with_job
from .test_store_insert_many import item

WINDOWED = JobParams(type="recurring", schedule="0 8 * * *", timezone="Asia/Taipei",
                     flexible_window_seconds=600)


async def test_the_window_is_stored_with_the_job_and_changed_by_a_save(store: Store) -> None:
    job = await with_job(store, params=WINDOWED)
    stored = await store.job_get(job.user_id, job.job_id)
    assert stored is not None
    assert stored.params.flexible_window_seconds == 600

    exact = replace(WINDOWED, flexible_window_seconds=0)
    assert await store.job_save(JobSave(job=replace(stored, params=exact))) is not None
    again = await store.job_get(job.user_id, job.job_id)
    assert again is not None
    assert again.params.flexible_window_seconds == 0


async def test_a_job_without_a_window_is_exact(store: Store) -> None:
    job = await with_job(store)
    stored = await store.job_get(job.user_id, job.job_id)
    assert stored is not None
    assert stored.params.flexible_window_seconds == 0


async def test_batch_inserts_keep_each_jobs_window(store: Store) -> None:
    now = half_past()
    items = [item(now, key=f"k{n}", params=replace(WINDOWED, flexible_window_seconds=n * 60))
             for n in range(3)]
    await store.jobs_insert_many(items)
    for n, i in enumerate(items):
        stored = await store.job_get(i.job.user_id, i.job.job_id)
        assert stored is not None
        assert stored.params.flexible_window_seconds == n * 60


@pytest.mark.parametrize("window", [-1, 3601])
async def test_the_store_refuses_a_window_out_of_range(store: Store, window: int) -> None:
    # A CHECK of the schema, as for timeout_seconds: the service refuses first, with a 422.
    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.CheckViolation)):
        await with_job(store, params=replace(WINDOWED, flexible_window_seconds=window))
