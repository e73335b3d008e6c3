"""The engine of tests/engine driven tick by tick with a fake clock, with a real SMTP server
(aiosmtpd) and a real webhook receiver on loopback: on SQLite with its table queue, and on
PostgreSQL with NATS JetStream."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from onthedot.config import Settings
from onthedot.delivery import Deliverer
from onthedot.domain.clock import FakeClock
from onthedot.queue.nats import delete_streams
from onthedot.runtime import Runtime
from tests.conformance.conftest import PG_DSN, drop_pg_schema, new_pg_schema
from tests.engine.conftest import NATS_URL, START, Engine
from tests.support.smtp import Mailbox
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver

SENDER = "onthedot@example.test"
RETRY_PAUSE_SECONDS = 0.01  # between two tries of a failing channel (1 s in production)


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox().start()
    yield box
    box.stop()


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver().start()
    yield receiver
    receiver.stop()


async def open_engine(settings: Settings) -> Engine:
    clock = FakeClock(START)
    rt = await Runtime.open(settings, clock)
    engine = Engine.on(rt, clock, settings)
    engine.worker.deliverer = Deliverer(rt.store, clock, settings, engine.worker.http,
                                        metrics=rt.metrics,
                                        retry_pause_seconds=RETRY_PAUSE_SECONDS)
    return engine


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres,
                                                                   pytest.mark.nats])])
async def env(request: pytest.FixtureRequest, tmp_path: Path,
              mailbox: Mailbox) -> AsyncIterator[Engine]:
    """Mail goes to ``mailbox``; loopback is allowlisted for the webhook receiver."""
    async with engine_on(request.param, tmp_path, smtp_url=mailbox.url, smtp_from=SENDER,
                         egress_allow=LOOPBACK_ALLOW) as engine:
        yield engine


@pytest.fixture
async def guarded(tmp_path: Path, mailbox: Mailbox) -> AsyncIterator[Engine]:
    """SQLite, loopback NOT allowlisted: the egress guard's default."""
    async with engine_on("sqlite", tmp_path, smtp_url=mailbox.url, smtp_from=SENDER) as engine:
        yield engine


@contextlib.asynccontextmanager
async def backend(name: str, tmp_path: Path, **settings: Any) -> AsyncIterator[Settings]:
    """Settings on ``name``'s database (SQLite file; PostgreSQL schema with NATS streams),
    dropped afterwards: engines opened on them one after another share the stored state, as
    processes restarted on one database do."""
    schema = prefix = None
    if name == "sqlite":
        settings["database_url"] = f"sqlite:///{tmp_path}/onthedot.db"
    else:
        schema, prefix = new_pg_schema(), f"t{secrets.token_hex(6)}"
        settings.update(database_url=PG_DSN, database_schema=schema, queue_url=NATS_URL,
                        queue_prefix=prefix)
    try:
        yield Settings(visibility_timeout=30, misfire_grace=60, **settings)
    finally:
        if schema is not None:
            await drop_pg_schema(schema)
        if prefix is not None:
            await delete_streams(NATS_URL, prefix)


@contextlib.asynccontextmanager
async def engine_open(settings: Settings) -> AsyncIterator[Engine]:
    engine = await open_engine(settings)
    try:
        yield engine
    finally:
        await engine.worker.aclose()
        await engine.rt.close()


@contextlib.asynccontextmanager
async def engine_on(name: str, tmp_path: Path, **settings: Any) -> AsyncIterator[Engine]:
    async with backend(name, tmp_path, **settings) as on, engine_open(on) as engine:
        yield engine
