"""The worker's heartbeat: one store write per beat for every run a process holds, fencing as
before (a run another attempt took is reported lost and no longer renewed), and no false
alarm for a run whose own result was just recorded."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from onthedot.config import Settings
from onthedot.domain.models import JobParams, RunStatus
from onthedot.queue.base import Delivery
from onthedot.runtime import Runtime
from onthedot.service import JobSpec
from onthedot.store.base import RunClaim, RunFinish, Store
from onthedot.watcher import Watcher
from onthedot.worker import Worker
from onthedot.worker.heartbeat import Heartbeats
from tests.support.waiting import async_wait_until as wait_until
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver

from .conftest import Engine

LOST = "lease lost to another attempt"


class CountingStore:
    """The real store, noting every lease renewal it is asked for."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.batches: list[int] = []
        self.singles = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def runs_extend_leases(self, items: Any, until: Any) -> set[str]:
        self.batches.append(len(items))
        return await self._store.runs_extend_leases(items, until)

    async def run_extend_lease(self, *args: Any) -> bool:
        self.singles += 1
        return await self._store.run_extend_lease(*args)


async def _claimed(engine: Engine, count: int) -> list[tuple[str, str, Delivery]]:
    """``count`` immediate runs, published and received, each claimed as a worker would."""
    for _ in range(count):
        await engine.create(JobParams(type="immediate"))
    await engine.dispatcher.refresh_shards()
    await engine.dispatcher.run_once()
    deliveries = await engine.rt.queue.receive(count, engine.rt.settings.visibility_timeout)
    assert len(deliveries) == count
    out = []
    for n, delivery in enumerate(deliveries):
        token = f"attempt-{n}"
        run = await engine.rt.store.run_claim(RunClaim(delivery.message_id, token,
                                                       engine.clock.now(), 30))
        assert run is not None
        out.append((run.run_id, token, delivery))
    return out


def _lost(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if LOST in r.getMessage()]


async def test_one_write_renews_every_held_run_and_only_real_losses_are_reported(
        both: Engine, caplog: pytest.LogCaptureFixture) -> None:
    engine = both
    store = CountingStore(engine.rt.store)
    beats = Heartbeats(store, engine.rt.queue, engine.clock,  # type: ignore[arg-type]
                       engine.rt.settings.visibility_timeout)
    (kept, kept_token, _), (taken, _, _), (done, done_token, _) = runs = await _claimed(engine, 3)
    for run_id, token, delivery in runs:
        beats.hold(run_id, token, delivery)
    assert len(beats) == 3
    # Another attempt took the second run after its lease ended (this one stalled) ...
    later = engine.clock.now() + timedelta(seconds=31)
    assert await engine.rt.store.run_claim(RunClaim(taken, "newer", later, 30)) is not None
    # ... and the third attempt recorded its own result; its beat raced the write.
    beats.recording(done, done_token)
    assert await engine.rt.store.run_finish(RunFinish(done, done_token, RunStatus.SUCCEEDED,
                                                      engine.clock.now(), output="ok"))
    engine.clock.advance(5)
    caplog.set_level(logging.DEBUG, logger="onthedot.worker")

    await beats.beat_once()

    assert store.batches == [3], "one store write for every held run"
    assert store.singles == 0
    renewed = await engine.rt.store.run_get(kept)
    assert renewed is not None
    assert renewed.lease_expires_at == engine.clock.now() + timedelta(seconds=30)
    assert renewed.lease_token == kept_token
    newer = await engine.rt.store.run_get(taken)
    assert newer is not None
    assert newer.lease_token == "newer"
    assert newer.lease_expires_at == later + timedelta(seconds=30), "not renewed by the loser"
    assert _lost(caplog) == [f"run {taken}: {LOST}"], "the finished run is no false alarm"
    assert len(beats) == 1, "lost and finished runs are no longer renewed"

    await beats.beat_once()
    assert store.batches == [3, 1]
    assert len(_lost(caplog)) == 1
    await beats.aclose()


async def test_a_worker_with_runs_in_flight_beats_them_together(
        engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    receiver = WebhookReceiver(hold_all=True).start()
    store = CountingStore(engine.rt.store)
    # A short visibility timeout, so beats (every third of it) come while the calls are held;
    # the table queue and the store run on the test's frozen clock, so nothing expires.
    settings = engine.rt.settings.model_copy(update={"visibility_timeout": 0.3})
    worker = Worker(store, engine.rt.queue, engine.clock, settings,  # type: ignore[arg-type]
                    engine.rt.actions, engine.rt.metrics)
    try:
        for _ in range(4):
            await engine.create(JobParams(type="immediate"),
                                {"type": "webhook", "url": receiver.url})
        await engine.dispatcher.refresh_shards()
        await engine.dispatcher.run_once()
        working = asyncio.create_task(worker.run_once(10))
        await wait_until(lambda: _async(receiver.count() == 4), what="4 calls in flight")
        await wait_until(lambda: _async(store.batches.count(4) >= 2), what="2 beats of 4 runs")
        receiver.release()
        assert await working == 4
    finally:
        receiver.stop()
        await worker.aclose()
    assert store.singles == 0, "no run renewed on its own"
    assert set(store.batches) <= {1, 2, 3, 4}
    assert not _lost(caplog)
    counts = await engine.rt.store.runs_count_by_status()
    assert counts.get(RunStatus.SUCCEEDED) == 4


async def _async(value: bool) -> bool:
    return value


class SlowClaims(CountingStore):
    """The real store, answering claims late, as a store with a queue of writes ahead does."""

    def __init__(self, store: Store, delay: float) -> None:
        super().__init__(store)
        self.delay = delay

    async def run_claim_job(self, claim: RunClaim) -> Any:
        await asyncio.sleep(self.delay)
        return await self._store.run_claim_job(claim)


async def test_a_run_claimed_late_keeps_its_message(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The message's invisibility counts from its receipt; the first beat used to come one
    interval after the claim. A claim slower than two thirds of the visibility timeout let the
    message reappear first: another receiver got it and the attempt that was running "lost its
    lease to another attempt" (the warning the webhook burst showed under load)."""
    visibility = 1.5
    settings = Settings(database_url=f"sqlite:///{tmp_path}/late.db",
                        visibility_timeout=visibility, egress_allow=LOOPBACK_ALLOW)
    rt = await Runtime.open(settings)  # the real clock: the message really reappears
    receiver = WebhookReceiver(hold_all=True).start()
    store = SlowClaims(rt.store, delay=visibility * 0.75)
    worker = Worker(store, rt.queue, rt.clock, settings,  # type: ignore[arg-type]
                    rt.actions, rt.metrics)
    stop = asyncio.Event()
    try:
        view, _ = await rt.service.create_job("alice", JobSpec(
            action={"type": "webhook", "url": receiver.url}, params=JobParams(type="immediate")))
        watcher = Watcher(rt.store, rt.queue, rt.clock, settings, rt.metrics, "w1")
        await watcher.refresh_shards()
        assert await watcher.run_once() == 1
        working = asyncio.create_task(worker.run(stop))
        await asyncio.to_thread(receiver.arrived.wait, 10)
        # Held past the visibility timeout of its receipt, while the worker keeps receiving.
        await asyncio.sleep(visibility * 1.5)
        receiver.release()

        async def finished() -> bool:
            runs = await rt.store.runs_list(view.job.job_id, 5, None)
            return runs[0].status is RunStatus.SUCCEEDED

        await wait_until(finished, what="the run finished")
        stop.set()
        await working
    finally:
        receiver.stop()
        await worker.drain(1.0)
        await rt.close()
    assert not _lost(caplog), "the attempt kept its message"
    assert receiver.count() == 1, "executed once"
