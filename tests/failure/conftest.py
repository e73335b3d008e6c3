"""Fixtures of the failure tests: a webhook receiver, an isolated deployment on the shared
servers (own PostgreSQL schema, own NATS prefix; both removed at teardown) and role processes
that are SIGKILLed by PID at teardown whatever happened."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from onthedot.queue.nats import delete_streams
from tests.support.cluster import (
    SHARED_NATS_URL,
    SHARED_PG_DSN,
    Deployment,
    Fleet,
    NatsCluster,
    PgCluster,
    drop_schema,
    nats_binary,
    new_prefix,
    new_schema,
    pg_bin_dir,
)
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver().start()
    # A worker SIGKILLed mid-request resets its connection: that is the point of these tests,
    # so the server's per-connection traceback on stderr is noise.
    server = receiver._server
    assert server is not None
    server.handle_error = lambda *_args: None  # type: ignore[method-assign]
    yield receiver
    receiver.stop()


@pytest.fixture
async def deployment() -> AsyncIterator[Deployment]:
    """Shared PostgreSQL + shared NATS, isolated by schema and prefix."""
    found = Deployment(SHARED_PG_DSN, new_schema(), SHARED_NATS_URL, new_prefix())
    try:
        yield found
    finally:
        drop_schema(found.database_url, found.schema)
        await delete_streams(found.queue_url, found.prefix)


@pytest.fixture
def make_fleet(tmp_path: Path) -> Iterator[Callable[..., Fleet]]:
    """``make_fleet(**settings)``: role processes sharing those ``ONTHEDOT_*`` settings."""
    fleets: list[Fleet] = []

    def make(**settings: object) -> Fleet:
        logs = tmp_path / f"fleet-{len(fleets)}"
        logs.mkdir()
        made = Fleet(logs=logs, settings={"egress_allow": LOOPBACK_ALLOW, **settings})
        fleets.append(made)
        return made

    yield make
    for made in fleets:
        made.close()


@pytest.fixture
def private_pg() -> Iterator[PgCluster]:
    """A PostgreSQL cluster of this test's own (restarting it disturbs nobody)."""
    if pg_bin_dir() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not installed")
    cluster = PgCluster.create()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
async def shared_nats_prefix() -> AsyncIterator[str]:
    """A stream prefix of this test's own on the shared NATS server, deleted afterwards."""
    prefix = new_prefix()
    try:
        yield prefix
    finally:
        await delete_streams(SHARED_NATS_URL, prefix)


@pytest.fixture
def shared_pg_schema() -> Iterator[str]:
    """A schema of this test's own in the shared PostgreSQL database, dropped afterwards."""
    schema = new_schema()
    try:
        yield schema
    finally:
        drop_schema(SHARED_PG_DSN, schema)


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    """Three JetStream servers of this test's own, routed into one cluster on loopback."""
    if nats_binary() is None:
        pytest.skip("nats-server binary not installed")
    cluster = NatsCluster.create(tmp_path / "nats", size=3)
    try:
        cluster.start()
        cluster.wait_ready()
        yield cluster
    finally:
        cluster.stop()
