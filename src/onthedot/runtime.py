"""Wiring: settings -> store, queue, service and the background roles of one process.

``onthedot serve`` runs every role in one process; ``onthedot api|watcher|worker|recurring``
run one each. Whatever runs, it is the same objects built here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from onthedot.actions import ActionRegistry, default_registry
from onthedot.config import Settings
from onthedot.domain.clock import Clock, SystemClock
from onthedot.domain.errors import ConfigError
from onthedot.metrics import Metrics
from onthedot.queue.base import Queue
from onthedot.service import JobService
from onthedot.store.base import Store

log = logging.getLogger("onthedot")

ROLES = ("watcher", "worker", "recurring")


def build_store(settings: Settings) -> Store:
    url = settings.database_url
    if url.startswith(("postgresql://", "postgres://")):
        from onthedot.store.postgres import PostgresStore

        return PostgresStore(url)
    if url.startswith("sqlite:") or "://" not in url:
        from onthedot.store.sqlite import SqliteStore

        return SqliteStore(url)
    raise ConfigError(f"unsupported database url {url!r}", field="database_url",
                      expected="sqlite:///path.db or postgresql://user@host:5432/db")


def build_queue(settings: Settings, clock: Clock) -> Queue:
    url = settings.queue_url
    if url is None or url.startswith("table"):
        if not (settings.database_url.startswith("sqlite:") or "://" not in settings.database_url):
            raise ConfigError("the table queue lives in a SQLite database; with PostgreSQL set "
                              "a NATS queue", field="queue_url", expected="nats://host:4222")
        from onthedot.queue.table import TableQueue

        return TableQueue(settings.database_url, clock)
    if url.startswith("nats://"):
        from onthedot.queue.nats import NatsQueue

        return NatsQueue(url, visibility_timeout=settings.visibility_timeout)
    raise ConfigError(f"unsupported queue url {url!r}", field="queue_url",
                      expected="nats://host:4222 (or unset for the table queue)")


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    store: Store
    queue: Queue
    service: JobService
    actions: ActionRegistry
    metrics: Metrics = field(default_factory=Metrics)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stoppers: list[object] = field(default_factory=list)

    @classmethod
    async def open(cls, settings: Settings, clock: Clock | None = None,
                   actions: ActionRegistry | None = None) -> Runtime:
        clock = clock or SystemClock()
        actions = actions or default_registry()
        store = build_store(settings)
        queue = build_queue(settings, clock)
        await store.migrate()
        await queue.open()
        service = JobService(store, queue, clock, settings, actions)
        return cls(settings=settings, clock=clock, store=store, queue=queue, service=service,
                   actions=actions)

    async def start(self, roles: Iterable[str]) -> None:
        """Start background roles (any of ``ROLES``) as tasks of the running loop."""
        from onthedot.engine import start_roles

        for role in roles:
            if role not in ROLES:
                raise ConfigError(f"unknown role {role!r}", field="role",
                                  expected=" | ".join(ROLES))
        self._stoppers = await start_roles(self, set(roles))

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Stop taking new runs, give in-flight runs ``grace_seconds`` to finish, release the
        rest (their messages become visible again after the visibility timeout)."""
        from onthedot.engine import stop_roles

        grace = self.settings.shutdown_grace if grace_seconds is None else grace_seconds
        await stop_roles(self._stoppers, grace)
        self._stoppers = []

    async def close(self) -> None:
        await self.stop()
        with contextlib.suppress(Exception):
            await self.queue.close()
        await self.store.close()
