"""A watcher that stops renewing (killed, paused) is replaced within a lease: the survivor takes
its shards with new lease tokens, says so (a WARNING line and ``onthedot_shard_takeovers``),
publishes the runs the dead watcher claimed but never published, and the dead watcher's own
claims change nothing if it comes back."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from onthedot.domain.models import JobParams, RunStatus
from onthedot.metrics import Metrics
from onthedot.store.base import DueClaim
from onthedot.watcher import Watcher
from tests.engine.conftest import Engine


async def test_survivor_takes_over_and_publishes_what_the_dead_watcher_claimed(
        engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    rt, clock = engine.rt, engine.clock
    dead = Watcher(rt.store, rt.queue, clock, rt.settings, Metrics(), "w0-dead")
    await dead.refresh_shards()
    assert dead.owned == list(range(rt.settings.shards))
    view = await engine.create(JobParams(type="immediate"))
    run = (await rt.service.list_runs("alice", view.job.job_id)).items[0]
    # The dead watcher's last act: its claim committed, then it was SIGKILLed before publishing.
    claimed = await rt.store.runs_claim_due(DueClaim(
        shard=run.shard, now=clock.now(), limit=10, misfire_grace_seconds=60,
        lease_token=dead.leases[run.shard]))
    assert [r.run_id for r in claimed.enqueued] == [run.run_id]

    clock.advance(seconds=rt.settings.shard_lease_seconds + 0.5)  # its lease lapsed
    survivor = engine.dispatcher
    with caplog.at_level(logging.WARNING, logger="onthedot.watcher"):
        await survivor.refresh_shards()
        assert survivor.owned == list(range(rt.settings.shards))
        assert await survivor.run_once() == 1  # the orphaned run, published again

    took = [r.getMessage() for r in caplog.records if "took over shards" in r.getMessage()]
    assert len(took) == 1
    assert "w0-dead" in took[0]
    assert rt.metrics.registry.get_sample_value("onthedot_shard_takeovers_total") == (
        rt.settings.shards)
    assert any("published 1 runs again" in r.getMessage() for r in caplog.records)
    # Not the rescuer: republish_after (60 s) has not passed, yet the run executes now.
    assert clock.now() - claimed.enqueued[0].enqueued_at < timedelta(
        seconds=rt.settings.republish_after)
    await engine.settle()
    finished = await rt.store.run_get(run.run_id)
    assert finished is not None
    assert finished.status is RunStatus.SUCCEEDED
    assert finished.attempt == 1

    # The dead watcher comes back (it was only paused): its claims change nothing.
    await engine.create(JobParams(type="immediate"))
    assert await dead.run_once() == 0
    assert dead.owned == []
    assert await survivor.run_once() == 1


async def test_a_renewal_in_time_is_not_a_takeover(engine: Engine,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    rt, clock = engine.rt, engine.clock
    watcher = engine.dispatcher
    with caplog.at_level(logging.WARNING, logger="onthedot.watcher"):
        await watcher.refresh_shards()
        first = dict(watcher.leases)
        clock.advance(seconds=rt.settings.shard_lease_seconds / 2)
        await watcher.refresh_shards()
    assert watcher.leases == first  # same tokens
    assert not caplog.records
    assert rt.metrics.registry.get_sample_value("onthedot_shard_takeovers_total") == 0
