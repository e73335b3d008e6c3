"""Changes landing while a run is in flight (issue 18 §1.1, §1.7), on both backend pairs.

A webhook that fails (HTTP 500, so every attempt is followed by a retry) or that is slow (held
until released, then 200); a pause, delete, schedule change, run-now, or pause then run-now
lands while the run is RUNNING, while it is RETRYING, or at the instant its attempt ends (the
worker records the result while the change commits). Then time moves on far enough for every
retry and occurrence, and after every interleaving:

* a paused or deleted job executes nothing after the change was acknowledged (the webhook's
  calls are counted from the acknowledgement): no retry, no hand-back, no next occurrence;
  the one exception is an explicit run-now on a paused job, which executes with its retries,
  and which a delete stops;
* a one-time job executes at most its one occurrence;
* a scheduled recurring job has exactly one open scheduled run, at its next_run_at; a paused
  or deleted one has no waiting run; a paused one resumed fires again.

Found on main: a run RUNNING when its job was paused or deleted went RETRYING when its attempt
failed, and the rescuer and a worker executed it again up to max_attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable
from datetime import timedelta

import pytest

from onthedot.domain.errors import ConflictError
from onthedot.domain.models import JobParams, JobStatus, RetryPolicy, RunStatus
from onthedot.service import JobPatch
from tests.engine.conftest import Engine
from tests.engine.test_races import applied_every_event
from tests.support.waiting import async_wait_until
from tests.support.webhook import WebhookReceiver

MAX_ATTEMPTS = 3
BACKOFF_SECONDS = 1.0  # retries fall due within the rounds below
ROUNDS = 4  # of moving time on and letting every role work
ROUND_SECONDS = 120.0
ARRIVAL_SPREAD_SECONDS = 0.02  # the change and the attempt's end, a few ms apart either way
WAITING = {RunStatus.PENDING, RunStatus.ENQUEUED, RunStatus.RETRYING}
OPEN = WAITING | {RunStatus.RUNNING}

# (phase the change lands in, whether the webhook fails)
PHASES = [("running", True), ("retrying", True), ("finishing", True), ("running", False),
          ("finishing", False)]
STOPS_SCHEDULED = {"pause", "delete", "pause_run_now"}


async def apply_change(engine: Engine, job_id: str, change: str) -> None:
    svc = engine.rt.service
    if change in ("pause", "pause_run_now"):
        await svc.pause_job("alice", job_id)
    if change == "delete":
        await svc.delete_job("alice", job_id)
    if change == "patch":
        await svc.update_job("alice", job_id, JobPatch(params=JobParams(
            type="recurring", schedule="*/10 * * * *", timezone="UTC")))
    if change in ("run_now", "pause_run_now"):
        await svc.run_job_now("alice", job_id)


class Trial:
    """One job, one webhook, one interleaving."""

    def __init__(self, engine: Engine, job_type: str, change: str, phase: str, fails: bool,
                 rng: random.Random) -> None:
        self.engine = engine
        self.job_type = job_type
        self.change = change
        self.phase = phase
        self.fails = fails
        self.rng = rng
        self.hook = WebhookReceiver(status_for=lambda _r, _n: 500 if fails else 200,
                                    hold_all=phase != "retrying").start()
        self.job_id = ""
        self.acked_at_call = 0  # webhook calls received when the change was acknowledged

    async def run(self) -> None:
        try:
            await self._start()
            await self._change_in_flight()
            await self._time_passes()
            await self._check_after_ack()
            self.hook.status_for = lambda _r, _n: 200
            await self._time_passes(rounds=2)
            await applied_every_event(self.engine)
            await self._check_invariants()
            if self.change in ("pause", "pause_run_now") and self.job_type == "recurring":
                await self._resume_fires_again()
            # Out of the way of the next trial, which shares the engine.
            await self.engine.rt.service.delete_job("alice", self.job_id)
            await self._time_passes(rounds=1)
        finally:
            self.hook.stop()

    def what(self) -> str:
        return (f"{self.job_type} job, {self.change} while {self.phase}, "
                f"{'failing' if self.fails else 'slow'} webhook")

    async def _start(self) -> None:
        engine = self.engine
        engine.clock.advance(3600)
        if self.job_type == "recurring":
            params = JobParams(type="recurring", schedule="*/5 * * * *", timezone="UTC")
        else:
            at = engine.clock.now() + timedelta(minutes=3)
            params = JobParams(type="one-time", time=at.isoformat())
        view = await engine.create(
            params, {"type": "webhook", "url": self.hook.url},
            retry_policy=RetryPolicy(max_attempts=MAX_ATTEMPTS, backoff_seconds=BACKOFF_SECONDS,
                                     max_backoff_seconds=BACKOFF_SECONDS))
        self.job_id = view.job.job_id
        assert view.job.next_run_at is not None
        engine.clock.set(view.job.next_run_at + timedelta(seconds=1))
        await engine.dispatcher.refresh_shards()
        assert await engine.dispatcher.run_once() == 1

    async def _change_in_flight(self) -> None:
        engine = self.engine
        work = asyncio.ensure_future(engine.worker.run_once())
        if self.phase == "retrying":
            assert await work == 1
            runs = await engine.rt.store.runs_list(self.job_id, 10, None)
            assert [r.status for r in runs] == [RunStatus.RETRYING], self.what()
            await self._change_now()
            return
        await async_wait_until(self._called, 30, "the attempt to reach the webhook")
        if self.phase == "running":
            await self._change_now()
            self.hook.release()
            await work
            return
        # finishing: the attempt ends and the change commits at the same moment
        await asyncio.gather(self._later(self._release_and_finish(work)),
                             self._later(self._change_now()))

    async def _called(self) -> bool:
        return self.hook.count() >= 1

    async def _later(self, step: Awaitable[None]) -> None:
        await asyncio.sleep(self.rng.random() * ARRIVAL_SPREAD_SECONDS)
        await step

    async def _release_and_finish(self, work: asyncio.Future[int]) -> None:
        self.hook.release()
        await work

    async def _change_now(self) -> None:
        await apply_change(self.engine, self.job_id, self.change)
        self.acked_at_call = self.hook.count()

    async def _time_passes(self, rounds: int = ROUNDS) -> None:
        for _ in range(rounds):
            self.engine.clock.advance(ROUND_SECONDS)
            await self.engine.settle(60)

    async def _kinds(self) -> dict[str, str]:
        runs = await self.engine.rt.store.runs_list(self.job_id, 1000, None)
        return {r.run_id: r.kind for r in runs}

    async def _check_after_ack(self) -> None:
        kinds = await self._kinds()
        after = self.hook.received[self.acked_at_call:]
        scheduled_after = [c.idempotency_key for c in after
                           if kinds.get(c.idempotency_key or "") == "scheduled"]
        manual_after = [c.idempotency_key for c in after
                        if kinds.get(c.idempotency_key or "") == "manual"]
        if self.change in STOPS_SCHEDULED:
            assert scheduled_after == [], f"{self.what()}: executed after the ack"
        if self.change == "delete":
            assert manual_after == [], f"{self.what()}: a run-now executed after the delete"
        if self.change in ("run_now", "pause_run_now"):
            # Honoured, on a paused job too, with every retry it is owed.
            assert len(manual_after) == (MAX_ATTEMPTS if self.fails else 1), self.what()
        if self.job_type == "one-time":
            executed = {c.idempotency_key for c in self.hook.received
                        if kinds.get(c.idempotency_key or "") == "scheduled"}
            assert len(executed) <= 1, f"{self.what()}: occurrences executed {executed}"
        if self.change in STOPS_SCHEDULED and self.phase == "running" and self.fails:
            first = min((r for r in await self.engine.rt.store.runs_list(self.job_id, 1000, None)
                         if r.kind == "scheduled"), key=lambda r: r.scheduled_at)
            assert first.status is RunStatus.CANCELLED, self.what()
            assert "while the attempt ran" in str(first.error), first.error

    async def _check_invariants(self) -> None:
        job = await self.engine.rt.store.job_get_any(self.job_id)
        assert job is not None
        runs = await self.engine.rt.store.runs_list(self.job_id, 1000, None)
        if job.status in (JobStatus.PAUSED, JobStatus.CANCELLED):
            waiting = [r for r in runs if r.status in WAITING]
            assert waiting == [], f"{self.what()}: {job.status.value} job with {waiting}"
        elif job.status is JobStatus.SCHEDULED:
            assert self.job_type == "recurring", f"{self.what()}: a one-time job still scheduled"
            open_runs = [r for r in runs if r.status in OPEN and r.kind == "scheduled"]
            assert len(open_runs) == 1, f"{self.what()}: open runs {open_runs}"
            assert open_runs[0].scheduled_at == job.next_run_at, self.what()
        else:
            assert [r for r in runs if r.status in OPEN] == [], self.what()

    async def _resume_fires_again(self) -> None:
        before = self.hook.count()
        await self.engine.rt.service.resume_job("alice", self.job_id)
        await self._time_passes(rounds=3)
        await applied_every_event(self.engine)
        assert self.hook.count() > before, f"{self.what()}: resumed, never fired again"
        await self._check_invariants()


async def run_trials(engine: Engine, job_type: str, change: str, seed: int) -> None:
    rng = random.Random(seed)
    for phase, fails in PHASES:
        await Trial(engine, job_type, change, phase, fails, rng).run()


CHANGES = [("recurring", "pause"), ("recurring", "delete"), ("recurring", "patch"),
           ("recurring", "run_now"), ("recurring", "pause_run_now"),
           ("one-time", "pause"), ("one-time", "delete")]


@pytest.mark.parametrize(("job_type", "change"), CHANGES,
                         ids=[f"{t}-{c}" for t, c in CHANGES])
async def test_a_change_in_flight_keeps_the_lifecycle_invariants(
        both: Engine, job_type: str, change: str) -> None:
    await run_trials(both, job_type, change, seed=18)



async def test_a_dead_letter_is_redriven_only_when_its_job_lets_it_run(
        both: Engine, webhook: WebhookReceiver) -> None:
    """Redrive follows the job guard: not a paused job's scheduled run (after :resume, yes), a
    paused job's run-now, never a deleted job's run."""
    webhook.status_for = lambda _r, _n: 500
    view = await both.create(JobParams(type="recurring", schedule="*/5 * * * *"),
                             {"type": "webhook", "url": webhook.url},
                             retry_policy=RetryPolicy(max_attempts=1))
    job_id = view.job.job_id
    assert view.job.next_run_at is not None
    both.clock.set(view.job.next_run_at + timedelta(seconds=1))
    await both.settle()
    await both.rt.service.pause_job("alice", job_id)
    await both.rt.service.run_job_now("alice", job_id)
    await both.settle()
    dead = {r.kind: r for r in await both.rt.store.runs_list(job_id, 100, None)
            if r.dead_lettered}
    assert set(dead) == {"scheduled", "manual"}

    svc = both.rt.service
    with pytest.raises(ConflictError) as refused:
        await svc.redrive("alice", dead["scheduled"].run_id)
    assert refused.value.code == "job_paused"
    assert (await svc.redrive("alice", dead["manual"].run_id)).status is RunStatus.ENQUEUED
    await svc.resume_job("alice", job_id)
    assert (await svc.redrive("alice", dead["scheduled"].run_id)).status is RunStatus.ENQUEUED
    await both.settle()
    # Both failed again (the webhook still answers 500): dead letters once more. Deleted, the
    # job's dead letters stay where they are.
    await svc.delete_job("alice", job_id)
    for run in dead.values():
        stored = await both.rt.store.run_get(run.run_id)
        assert stored is not None
        assert stored.dead_lettered, stored
        with pytest.raises(ConflictError) as refused:
            await svc.redrive("alice", run.run_id)
        assert refused.value.code == "job_cancelled"


@pytest.mark.parametrize("change", ["pause", "delete"])
async def test_a_worker_shutting_down_hands_back_no_run_of_a_stopped_job(
        both: Engine, webhook: WebhookReceiver, change: str) -> None:
    """A worker interrupted mid-action hands its run back to the queue, unless the job was
    paused or deleted meanwhile: then the run ends CANCELLED and its message is acked."""
    webhook.hold_all = True
    view = await both.create(JobParams(type="recurring", schedule="*/5 * * * *"),
                             {"type": "webhook", "url": webhook.url})
    assert view.job.next_run_at is not None
    both.clock.set(view.job.next_run_at + timedelta(seconds=1))
    await both.dispatcher.refresh_shards()
    assert await both.dispatcher.run_once() == 1
    work = asyncio.ensure_future(both.worker.run_once())
    await async_wait_until(lambda: asyncio.sleep(0, webhook.count() >= 1), 30,
                           "the attempt to reach the webhook")
    await apply_change(both, view.job.job_id, change)
    work.cancel()  # what drain() does to an attempt past the grace period
    with contextlib.suppress(asyncio.CancelledError):
        await work
    webhook.release()
    (run,) = await both.rt.store.runs_list(view.job.job_id, 10, None)
    assert run.status is RunStatus.CANCELLED
    assert "not handed back" in str(run.error)
    # Acked, not handed back: nothing comes back, however long we wait.
    both.clock.advance(3600)
    await both.settle()
    assert webhook.count() == 1
