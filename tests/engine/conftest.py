"""An in-process engine driven tick by tick with a fake clock: ``engine`` on a real SQLite file
with its table queue; ``both`` on that and on PostgreSQL with NATS JetStream; ``shape``
also on PostgreSQL with its own table queue."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.models import JobParams, RunStatus
from onthedot.queue.nats import delete_streams
from onthedot.runtime import Runtime
from onthedot.service import JobSpec, JobView
from onthedot.watcher import RecurringWatcher, Rescuer, Watcher
from onthedot.watcher.recurring import CONSUMER as RECURRING_CONSUMER
from onthedot.worker import Worker
from tests.conformance.conftest import (
    PG_DSN,
    PG_TEST_AHEAD_DAYS,
    PG_TEST_FAR_MONTHS,
    drop_pg_schema,
    new_pg_schema,
)
from tests.support.waiting import POLL_SECONDS
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver

NATS_URL = "nats://127.0.0.1:4222"

START = datetime(2026, 6, 22, 0, 0, 30, tzinfo=UTC)
RECEIVE_WAIT = 1.0  # seconds a round waits for runs the watcher has just published
SETTLE_WAIT = 5.0  # seconds settle() waits at the end for a run or an event on its way
FAR_AHEAD = timedelta(days=36500)


@dataclass
class Engine:
    rt: Runtime
    clock: FakeClock
    dispatcher: Watcher
    worker: Worker
    recurring: RecurringWatcher
    rescuer: Rescuer

    @classmethod
    def on(cls, rt: Runtime, clock: FakeClock, settings: Settings,
           worker_settings: Settings | None = None) -> Engine:
        """Every role on ``rt``, ticked by hand; the worker may call out under other settings."""
        return cls(
            rt=rt, clock=clock,
            dispatcher=Watcher(rt.store, rt.queue, clock, settings, rt.metrics, "w1"),
            worker=Worker(rt.store, rt.queue, clock, worker_settings or settings, rt.actions,
                          rt.metrics),
            recurring=RecurringWatcher(rt.store, clock, settings, "r1"),
            rescuer=Rescuer(rt.store, rt.queue, clock, settings, rt.metrics, "x1"),
        )

    async def tick(self) -> int:
        """One round of every role; returns how much work was done."""
        await self.dispatcher.refresh_shards()
        published = await self.dispatcher.run_once()
        work = published + (await self.rescuer.run_once()).total
        # What was just published is waited for: a JetStream consumer takes in a stored
        # message asynchronously, so a no-wait pull right after the publish can come back
        # empty on a busy machine, and a round with no work would end settle() early.
        work += await self.worker.run_once(1000, wait_seconds=RECEIVE_WAIT if published else 0.0)
        work += await self.recurring.run_once()
        return work

    async def settle(self, max_rounds: int = 20) -> None:
        for _ in range(max_rounds):
            if await self.tick() == 0 and not await self._work_on_its_way():
                return
        raise AssertionError("engine did not settle")

    async def _work_on_its_way(self) -> bool:
        """A round that found nothing ends settle() only if nothing is still on its way, for up
        to SETTLE_WAIT seconds: on a loaded machine a published message can take longer than a
        round's wait to reach the consumer, and on PostgreSQL a run event stays invisible while
        any older transaction of the cluster is open (another test's, under xdist). Tests that
        lose a message on purpose pay the wait."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_WAIT
        while loop.time() < deadline:
            enqueued = (await self.rt.store.runs_count_by_status()).get(RunStatus.ENQUEUED, 0)
            # Any unread event at all gives a lag above 0 seen from far enough ahead.
            unread = await self.rt.store.events_lag(RECURRING_CONSUMER,
                                                    self.clock.now() + FAR_AHEAD) > 0
            if not enqueued and not unread:
                return False
            work = await self.worker.run_once(1000, wait_seconds=RECEIVE_WAIT if enqueued
                                              else 0.0)
            if work or await self.recurring.run_once():
                return True
            if not enqueued:
                await asyncio.sleep(POLL_SECONDS)
        return False

    async def create(self, params: JobParams, action: dict[str, object] | None = None,
                     **spec: object) -> JobView:
        view, created = await self.rt.service.create_job(
            "alice", JobSpec(action=action or {"type": "message", "text": "hi"}, params=params,
                             **spec))  # type: ignore[arg-type]
        assert created
        return view


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/onthedot.db"


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[Engine]:
    clock = FakeClock(START)
    settings = Settings(database_url=db_url, visibility_timeout=30, misfire_grace=60,
                        egress_allow=LOOPBACK_ALLOW)
    rt = await Runtime.open(settings, clock)
    engine = Engine.on(rt, clock, settings)
    yield engine
    await engine.worker.aclose()
    await rt.close()


@asynccontextmanager
async def open_engine(shape: str, tmp_path: Path,
                      visibility_timeout: float = 30) -> AsyncIterator[Engine]:
    """``sqlite``: SQLite with its table queue; ``postgres``: PostgreSQL with NATS JetStream;
    ``postgres-table``: PostgreSQL with its own table queue (no NATS). A test that moves the
    clock past a held run's lease gives a longer ``visibility_timeout``."""
    clock = FakeClock(START)
    extra: dict[str, Any] = {}
    schema = prefix = None
    if shape == "sqlite":
        extra["database_url"] = f"sqlite:///{tmp_path}/onthedot.db"
    else:
        schema = new_pg_schema()
        extra.update(database_url=PG_DSN, database_schema=schema,
                     partition_ahead_days=PG_TEST_AHEAD_DAYS,
                     partition_far_months=PG_TEST_FAR_MONTHS)
        if shape == "postgres":
            prefix = f"t{secrets.token_hex(6)}"
            extra.update(queue_url=NATS_URL, queue_prefix=prefix)
    settings = Settings(visibility_timeout=visibility_timeout, misfire_grace=60,
                        egress_allow=LOOPBACK_ALLOW, **extra)
    rt = await Runtime.open(settings, clock)
    engine = Engine.on(rt, clock, settings)
    try:
        yield engine
    finally:
        await engine.worker.aclose()
        await rt.close()
        if schema is not None:
            await drop_pg_schema(schema)
        if prefix is not None:
            await delete_streams(NATS_URL, prefix)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres,
                                                                   pytest.mark.nats])])
async def both(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    async with open_engine(request.param, tmp_path) as engine:
        yield engine


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres,
                                                                   pytest.mark.nats]),
                        pytest.param("postgres-table", marks=pytest.mark.postgres)])
async def shape(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    """``both``, plus PostgreSQL with its table queue: for the tests where the queue's part
    (lost messages, held messages, dead letters) is what is checked."""
    async with open_engine(request.param, tmp_path) as engine:
        yield engine


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver().start()
    yield receiver
    receiver.stop()
