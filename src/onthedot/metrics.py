"""Prometheus metrics of one process, in their own registry (several runtimes can share a
test process without clashing).

Two kinds, and the difference matters in the split layout (docs/operations.md, "Metrics"):

* Counters and histograms count what THIS process did (runs it finished, attempts it started,
  runs it dispatched); each role's process exports its own, and Prometheus sums them
  (``sum without (instance) (...)``).
* Gauges of shared state (open runs by status, dead letters, queue depth, event lag, the oldest
  due run) are read from the store and the queue at scrape time, so every process reports the
  same truth whichever role it runs.

``MetricsServer`` serves ``/metrics`` for a process that has no API (``ONTHEDOT_METRICS_PORT``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter as Tally
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from onthedot.domain.errors import ConfigError

log = logging.getLogger("onthedot.metrics")

# Why a run is executed again (onthedot_runs_recovered_total{cause}); each is counted once,
# by the one process that knows it for sure (docs/operations.md, "Recovered runs").
RECOVERED_CAUSES = ("lease_expired", "worker_shutdown", "worker_and_message_lost",
                    "message_lost")
# What retention deletes (onthedot_retention_removed_total{kind}): the fields of store.Pruned,
# and the queue's own dead-letter messages.
RETENTION_KINDS = ("runs", "events", "jobs", "deliveries", "inbox", "attempts",
                   "dead_letter_messages")

LATENESS_BUCKETS_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.jobs_created = Counter("onthedot_jobs_created", "Jobs created",
                                    registry=self.registry)
        self.runs_finished = Counter("onthedot_runs_finished", "Runs that reached a terminal "
                                     "status in this process", ["status"], registry=self.registry)
        self.runs_by_status = Gauge("onthedot_runs", "Open runs by status (at scrape time; "
                                    "counted up to a cap, so a value at the cap means at least)",
                                    ["status"], registry=self.registry)
        self.dispatch_lateness = Histogram(
            "onthedot_dispatch_lateness_seconds", "Enqueue time minus scheduled time",
            buckets=LATENESS_BUCKETS_SECONDS, registry=self.registry)
        self.queue_depth = Gauge("onthedot_queue_depth", "Messages waiting or in flight "
                                 "(at scrape time)", registry=self.registry)
        self.dead_letters = Gauge("onthedot_dead_letters", "Dead-lettered runs (at scrape time; "
                                  "counted up to a cap)", registry=self.registry)
        self.attempts = Counter("onthedot_run_attempts", "Action attempts started",
                                registry=self.registry)
        self.rescued = Counter("onthedot_runs_rescued", "Runs the rescuer handed back, by what "
                               "stranded them", ["kind"], registry=self.registry)
        self.event_lag = Gauge("onthedot_run_event_lag_seconds", "Age of the oldest run event "
                               "the recurring watcher has not applied (at scrape time); it "
                               "grows while a long transaction hides newer events",
                               registry=self.registry)
        self.deliveries = Counter("onthedot_deliveries", "Sends of run outputs to their "
                                  "channels, by channel and recorded outcome (delivered; "
                                  "retrying: a retry is scheduled; failed: for good)",
                                  ["channel", "status"], registry=self.registry)
        self.run_lateness = Histogram(
            "onthedot_run_lateness_seconds", "Action start minus scheduled time, of first "
            "attempts, observed by the worker that started them",
            buckets=LATENESS_BUCKETS_SECONDS, registry=self.registry)
        self.oldest_due = Gauge("onthedot_oldest_due_run_age_seconds", "Age of the oldest run "
                                "that is due and not yet started: pending, queued, or a retry "
                                "past its time (at scrape time; 0 when none)",
                                registry=self.registry)
        # --- recovery and retention (docs/operations.md, "Recovered runs") ---
        self.runs_recovered = Counter(
            "onthedot_runs_recovered", "Runs handed on to be executed again, by what "
            "interrupted them: lease_expired (counted by the worker whose claim replaced a "
            "dead or frozen worker), worker_shutdown (by the worker that handed its run back "
            "on shutdown), worker_and_message_lost, message_lost (by the rescuer)",
            ["cause"], registry=self.registry)
        self.retention_removed = Counter(
            "onthedot_retention_removed", "Rows deleted by retention in this process, by kind "
            "(runs, events, jobs, deliveries, inbox, attempts, dead_letter_messages)",
            ["kind"], registry=self.registry)
        # Every label shows from the start (at 0), so rate() and alerts see the first one.
        for cause in RECOVERED_CAUSES:
            self.runs_recovered.labels(cause=cause)
        for kind in RETENTION_KINDS:
            self.retention_removed.labels(kind=kind)
        # Watcher failover (docs/reliability.md): shards this watcher took from another
        # watcher whose lease lapsed without being released (it died or stalled).
        self.shard_takeovers = Counter(
            "onthedot_shard_takeovers", "Shards this watcher took over from a watcher whose "
            "lease lapsed (dead or stalled)", registry=self.registry)
        # --- database statements (db/counting.py): read from the process-wide counts at
        # scrape time, so counting a statement costs no Prometheus call ---
        self.registry.register(DbStatementsCollector())


# --- database statements -------------------------------------------------------------------
# What this process sent to its database, by (dialect, role): counted by the drivers' hooks in
# db/counting.py (which says what counts), kept here so that exporting them needs nothing from
# the database layer. Process-wide: two runtimes in one process report the sum.
DB_STATEMENTS: Tally[tuple[str, str]] = Tally()
DB_TRANSACTIONS: Tally[tuple[str, str]] = Tally()


def db_totals() -> tuple[int, int]:
    """(statements, transactions) this process has sent so far, every dialect and role."""
    return sum(DB_STATEMENTS.values()), sum(DB_TRANSACTIONS.values())


class DbStatementsCollector(Collector):
    """``onthedot_db_statements_total`` and ``onthedot_db_transactions_total`` by dialect and
    role (store, queue), read at scrape time."""

    def collect(self) -> Iterator[Metric]:
        for name, what, counts in (
                ("onthedot_db_statements", "SQL statements sent (one per statement of a "
                 "pipeline, one per row of executemany; BEGIN/COMMIT not included)",
                 DB_STATEMENTS),
                ("onthedot_db_transactions", "Transactions committed: transaction blocks, and "
                 "statements run on their own in autocommit", DB_TRANSACTIONS)):
            family = CounterMetricFamily(name, what, labels=["dialect", "role"])
            for (dialect, role), value in sorted(counts.items()):
                family.add_metric([dialect, role], value)
            yield family


REQUEST_READ_TIMEOUT_SECONDS = 5.0  # a client that sends no request line in time is dropped
MAX_REQUEST_HEAD_LINES = 100  # headers read (and ignored) before answering


class MetricsServer:
    """The smallest HTTP server that Prometheus can scrape: ``GET /metrics`` answers the text
    exposition format (``render`` builds it, refreshing the gauges of shared state); anything
    else is 404. One connection, one answer; no keep-alive."""

    def __init__(self, render: Callable[[], Awaitable[bytes]]) -> None:
        self._render = render
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind and listen; returns the bound address (port 0 picks a free one)."""
        try:
            self._server = await asyncio.start_server(self._serve, host, port)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
                              field="metrics_port",
                              expected="a free port and a local address") from exc
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_READ_TIMEOUT_SECONDS):
                request = await reader.readline()
                for _ in range(MAX_REQUEST_HEAD_LINES):
                    if (await reader.readline()) in (b"\r\n", b"\n", b""):
                        break
            method, _, rest = request.decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            if method in ("GET", "HEAD") and path == "/metrics":
                body = await self._render()
                head = _head("200 OK", CONTENT_TYPE_LATEST, len(body))
                writer.write(head if method == "HEAD" else head + body)
            else:
                body = b"not found: try /metrics\n"
                writer.write(_head("404 Not Found", "text/plain; charset=utf-8", len(body)) + body)
            await writer.drain()
        except Exception as exc:  # one scrape failing must not stop the next one
            log.warning("metrics request failed: %s", exc)
            with contextlib.suppress(Exception):
                writer.write(_head("500 Internal Server Error", "text/plain", 0))
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def _head(status: str, content_type: str, length: int) -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n").encode("latin-1")
