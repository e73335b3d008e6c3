"""Concurrent ``POST /v1/jobs``: creates arriving together share a transaction (group commit),
and each is still answered as if it had been alone."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx

from onthedot.domain.models import RunStatus
from onthedot.runtime import Runtime
from tests.api.conftest import job_body


async def test_one_key_sent_by_many_at_once_creates_one_job(client: httpx.AsyncClient,
                                                            rt: Runtime) -> None:
    headers = {"Idempotency-Key": "morning"}
    answers = await asyncio.gather(*(client.post("/v1/jobs", json=job_body(), headers=headers)
                                     for _ in range(40)))

    assert Counter(a.status_code for a in answers) == {201: 1, 200: 39}
    assert len({a.json()["job_id"] for a in answers}) == 1
    assert await rt.store.runs_count_by_status() == {RunStatus.PENDING: 1}


async def test_a_key_reused_for_another_job_at_the_same_time_is_a_409(
        client: httpx.AsyncClient, rt: Runtime) -> None:
    headers = {"Idempotency-Key": "shared"}
    bodies = [job_body(name="a" if n % 2 else "b") for n in range(20)]

    answers = await asyncio.gather(*(client.post("/v1/jobs", json=b, headers=headers)
                                     for b in bodies))

    created = [(b, a) for b, a in zip(bodies, answers, strict=True) if a.status_code == 201]
    assert len(created) == 1
    winner_body, winner = created[0]
    for body, answer in zip(bodies, answers, strict=True):
        if answer is winner:
            continue
        if body == winner_body:
            assert answer.status_code == 200
            assert answer.json()["job_id"] == winner.json()["job_id"]
        else:
            assert answer.status_code == 409
            assert answer.json()["code"] == "idempotency_key_reused"
    assert await rt.store.runs_count_by_status() == {RunStatus.PENDING: 1}


async def test_creates_at_once_each_get_their_own_job_or_error(client: httpx.AsyncClient,
                                                               rt: Runtime) -> None:
    bodies = [job_body(name=f"job {n}") for n in range(30)]
    bodies[11] = job_body(job_params={"type": "recurring", "schedule": "99 8 * * *"})

    answers = await asyncio.gather(*(client.post("/v1/jobs", json=b) for b in bodies))

    assert [a.status_code for a in answers] == [422 if n == 11 else 201 for n in range(30)]
    names = [a.json()["name"] for n, a in enumerate(answers) if n != 11]
    assert names == [f"job {n}" for n in range(30) if n != 11]
    for answer in answers:
        if answer.status_code == 201:
            job = answer.json()
            assert (await client.get(f"/v1/jobs/{job['job_id']}")).json() == job
    assert await rt.store.runs_count_by_status() == {RunStatus.PENDING: 29}
