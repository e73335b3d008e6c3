"""Wiring: settings -> store, queue, service and the background roles of one process.

``onthedot serve`` runs every role in one process; ``onthedot
api|watcher|worker|recurring|rescuer`` run one each. Whatever runs, it is the same objects
built here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import generate_latest

from onthedot.actions import ActionRegistry, WebhookSigner, default_registry
from onthedot.config import Settings
from onthedot.domain.clock import Clock, SystemClock
from onthedot.domain.errors import ConfigError
from onthedot.metrics import Metrics, MetricsServer
from onthedot.queue.base import Queue
from onthedot.service import JobService
from onthedot.store.base import Store
from onthedot.supervisor import core_count
from onthedot.watcher import RecurringWatcher, Rescuer, Watcher
from onthedot.watcher.recurring import CONSUMER as RECURRING_CONSUMER
from onthedot.worker import Worker

log = logging.getLogger("onthedot")

ROLES = ("watcher", "worker", "recurring", "rescuer")
SHARDS_SETTING = "shards"
# Gauges of stored runs count at most this many per status (a scrape must stay cheap whatever
# the database holds); a gauge at the cap reads as "at least".
SCRAPE_COUNT_CAP = 100_000


# The packages each optional extra brings (pyproject.toml), by top-level module name.
EXTRA_MODULES = {"postgres": ("psycopg", "psycopg_pool"), "nats": ("nats",)}


@contextlib.contextmanager
def needs_extra(extra: str, field: str) -> Iterator[None]:
    """Turn the import of a backend whose extra is not installed into a ConfigError that says
    what to install, instead of a ModuleNotFoundError from deep inside the backend."""
    try:
        yield
    except ModuleNotFoundError as exc:
        package = (exc.name or "").split(".")[0]
        if package not in EXTRA_MODULES[extra]:
            raise
        raise ConfigError(f"{field} needs the optional package {package}, which is not "
                          f"installed: pip install 'onthedot[{extra}]'", field=field,
                          expected=f"the {extra} extra installed, or another {field}") from exc


def build_store(settings: Settings, clock: Clock | None = None) -> Store:
    url = settings.database_url
    if _is_postgres(url):
        with needs_extra("postgres", "database_url"):
            from onthedot.store.postgres import PostgresStore

        return PostgresStore(url, schema=settings.database_schema,
                             partition_ahead_days=settings.partition_ahead_days,
                             partition_far_months=settings.partition_far_months,
                             retention_days=settings.retention_days,
                             pool_max=settings.database_pool_size, clock=clock)
    if url.startswith("sqlite:") or "://" not in url:
        from onthedot.store.sqlite import SqliteStore

        return SqliteStore(url, clock)
    raise ConfigError(f"unsupported database url {url!r}", field="database_url",
                      expected="sqlite:///path.db or postgresql://user@host:5432/db")


def build_queue(settings: Settings, clock: Clock) -> Queue:
    """Unset (or ``table``): a table queue in the store's own database, SQLite or PostgreSQL,
    so either database alone is a complete deployment. ``nats://``: NATS JetStream, for a
    throughput one database's queue table cannot carry (docs/postgres.md, "The table queue")."""
    url = settings.queue_url
    if url is None or url.startswith("table"):
        if _is_postgres(settings.database_url):
            with needs_extra("postgres", "database_url"):
                from onthedot.queue.postgres import PostgresQueue

            return PostgresQueue(settings.database_url, schema=settings.database_schema,
                                 pool_max=settings.database_pool_size, clock=clock)
        from onthedot.queue.table import TableQueue

        return TableQueue(settings.database_url, clock)
    if url.startswith("nats://"):
        with needs_extra("nats", "queue_url"):
            from onthedot.queue.nats import NatsQueue

        return NatsQueue(url, visibility_timeout=settings.visibility_timeout,
                         replicas=settings.queue_replicas, prefix=settings.queue_prefix,
                         dead_letter_max_age_seconds=settings.retention_days * 86400.0,
                         clock=clock)
    raise ConfigError(f"unsupported queue url {url!r}", field="queue_url",
                      expected="nats://host:4222 (or unset for the table queue)")


# SQLite: one file's write lock serialises the writers of every process. Two processes
# measured better than one (docs/performance.md, "Cores"); more were not measured.
SQLITE_DEFAULT_PROCESSES = 2


def process_count(settings: Settings) -> int:
    """ONTHEDOT_PROCESSES, or its default: every core on PostgreSQL; on SQLite as many, but
    at most SQLITE_DEFAULT_PROCESSES."""
    if settings.processes is not None:
        return settings.processes
    if _is_postgres(settings.database_url):
        return core_count()
    return min(core_count(), SQLITE_DEFAULT_PROCESSES)


def _is_postgres(database_url: str) -> bool:
    return database_url.startswith(("postgresql://", "postgres://"))


async def pin_shard_count(store: Store, settings: Settings) -> None:
    """The shard count is part of every stored run (its shard): the first process writes it
    to the database, and a process configured with another count refuses to start rather than
    leave runs in shards no watcher owns."""
    stored = await store.deployment_pin(SHARDS_SETTING, str(settings.shards))
    if stored != str(settings.shards):
        raise ConfigError(
            f"this database was set up with {stored} shards, but this process is configured "
            f"with ONTHEDOT_SHARDS={settings.shards}; every process of a deployment must use "
            "the same count", field="shards", expected=stored)


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    store: Store
    queue: Queue
    service: JobService
    actions: ActionRegistry
    metrics: Metrics = field(default_factory=Metrics)
    member_id: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-"
                           f"{secrets.token_hex(3)}")
    dispatcher: Watcher | None = None
    recurring: RecurringWatcher | None = None
    rescuer: Rescuer | None = None
    worker: Worker | None = None
    _watcher_store: Store | None = None
    _metrics_server: MetricsServer | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    async def open(cls, settings: Settings, clock: Clock | None = None,
                   actions: ActionRegistry | None = None) -> Runtime:
        clock = clock or SystemClock()
        store = build_store(settings, clock)
        actions = actions or default_registry(settings, WebhookSigner(store, clock))
        queue = build_queue(settings, clock)
        try:
            await store.migrate()
            await pin_shard_count(store, settings)
            await queue.open()
        except BaseException:
            await store.close()
            raise
        metrics = Metrics()
        service = JobService(store, queue, clock, settings, actions, metrics=metrics)
        return cls(settings=settings, clock=clock, store=store, queue=queue, service=service,
                   actions=actions, metrics=metrics)

    async def start(self, roles: Iterable[str]) -> None:
        """Start background roles (any of ``ROLES``) as tasks of the running loop."""
        wanted = set(roles)
        for role in wanted - set(ROLES):
            raise ConfigError(f"unknown role {role!r}", field="role", expected=" | ".join(ROLES))
        self._stop.clear()
        if "watcher" in wanted and self.dispatcher is None:
            # Its own store connection: in one process the workers' writes would otherwise
            # queue in front of every claim and delay dispatch.
            self._watcher_store = build_store(self.settings, self.clock)
            self.dispatcher = Watcher(self._watcher_store, self.queue, self.clock,
                                         self.settings, self.metrics, self.member_id)
            self.service.set_due_soon_hook(self.dispatcher.wake)
            self._spawn(self.dispatcher.run(self._stop), "watcher")
        if "recurring" in wanted and self.recurring is None:
            self.recurring = RecurringWatcher(self.store, self.clock, self.settings,
                                              self.member_id)
            self._spawn(self.recurring.run(self._stop), "recurring")
        if "rescuer" in wanted and self.rescuer is None:
            self.rescuer = Rescuer(self.store, self.queue, self.clock, self.settings,
                                   self.metrics, self.member_id)
            self._spawn(self.rescuer.run(self._stop), "rescuer")
        if "worker" in wanted and self.worker is None:
            self.worker = Worker(self.store, self.queue, self.clock, self.settings,
                                 self.actions, self.metrics)
            self._spawn(self.worker.run(self._stop), "worker")

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=f"onthedot-{name}"))

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Stop taking new runs, give in-flight runs ``grace_seconds`` to finish, release the
        rest (their messages become visible again after the visibility timeout)."""
        grace = self.settings.shutdown_grace if grace_seconds is None else grace_seconds
        self._stop.set()  # loops stop receiving and claiming at their next step
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.worker is not None:
            # Only a worker runs actions; the other roles have nothing to wait for.
            n = self.worker.inflight
            log.info("stopping: waiting up to %gs for %d run%s in flight", grace, n,
                     "" if n == 1 else "s")
            await self.worker.drain(grace)
        self.dispatcher = self.recurring = self.rescuer = self.worker = None
        if self._watcher_store is not None:
            await self._watcher_store.close()
            self._watcher_store = None

    async def close(self) -> None:
        await self.stop()
        if self._metrics_server is not None:
            await self._metrics_server.close()
            self._metrics_server = None
        with contextlib.suppress(Exception):
            await self.queue.close()
        await self.store.close()

    # --- metrics -----------------------------------------------------------------------------
    async def metrics_text(self) -> bytes:
        """Prometheus text of this process: its own counters, and the gauges of shared state
        read from the store and the queue now, so every role's process reports the same."""
        m = self.metrics
        try:
            counts = await self.store.runs_count_capped(SCRAPE_COUNT_CAP)
            for run_status, count in counts.open.items():
                m.runs_by_status.labels(status=run_status.value).set(count)
            m.dead_letters.set(counts.dead_lettered)
            m.queue_depth.set(await self.queue.depth())
            now = self.clock.now()
            m.event_lag.set(await self.store.events_lag(RECURRING_CONSUMER, now))
            oldest = await self.store.runs_oldest_due(now, self.settings.shards)
            m.oldest_due.set(0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()))
        except Exception as exc:
            # The counters are still worth a scrape; the gauges keep their last values.
            log.warning("metrics: shared state unreadable (%s); gauges not refreshed", exc)
        return generate_latest(m.registry)

    async def serve_metrics(self) -> tuple[str, int] | None:
        """Serve /metrics on ONTHEDOT_METRICS_HOST:ONTHEDOT_METRICS_PORT until close(); nothing
        when no port is set. Returns the bound address."""
        if self.settings.metrics_port is None or self._metrics_server is not None:
            return None
        server = MetricsServer(self.metrics_text)
        host, port = await server.start(self.settings.metrics_host, self.settings.metrics_port)
        self._metrics_server = server
        log.info("metrics on http://%s:%d/metrics", f"[{host}]" if ":" in host else host, port)
        return host, port


async def serve_roles(settings: Settings, roles: Iterable[str],
                      on_ready: Callable[[], None] | None = None) -> None:
    """Run background roles in this process until SIGTERM or SIGINT, then stop gracefully:
    no new runs are taken, in-flight ones get ``shutdown_grace`` seconds to finish.
    ``on_ready`` is called once the roles run (a supervisor waits for it)."""
    import signal

    runtime = await Runtime.open(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await runtime.serve_metrics()
        await runtime.start(roles)
        log.info("running %s as %s", ", ".join(sorted(roles)), runtime.member_id)
        if on_ready is not None:
            on_ready()
        await stop.wait()
        log.info("stopping %s", ", ".join(sorted(roles)))
    finally:
        await runtime.close()
    log.info("onthedot stopped")
