"""A 3-node JetStream cluster loses a node mid-run.

Three nats-server processes of this test's own, routed into one cluster on loopback; the run
and dead-letter streams are replicated 3 times (ONTHEDOT_QUEUE_REPLICAS=3) and every onthedot
process is given all three servers (ONTHEDOT_QUEUE_URL as a comma-separated list). The store is
the shared PostgreSQL (a schema of this test's own). While one-time webhook jobs fall due over
20 s, the node that leads the run stream is SIGKILLed: the stream and its consumer elect a new
leader among the two survivors, clients reconnect to them, and every run ends SUCCEEDED.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import nats
import nats.errors
import pytest
from nats.js import JetStreamContext

from tests.failure.checks import assert_nothing_lost, eventually, past, run_statuses
from tests.support.cluster import SHARED_PG_DSN, Fleet, NatsCluster, tcp_peer_ports
from tests.support.waiting import wait_until
from tests.support.webhook import WebhookReceiver

pytestmark = [pytest.mark.failure, pytest.mark.slow, pytest.mark.postgres, pytest.mark.nats]

JOBS = 600
WINDOW_SECONDS = 20.0
LEAD_SECONDS = 4.0
KILL_AT_SECONDS = 7.0  # into the window
VISIBILITY_SECONDS = 3.0
PREFIX = "cluster"  # the NATS cluster is ours alone
STREAM, CONSUMER = f"{PREFIX.upper()}_RUNS", "workers"
CLIENT_NAME = "onthedot-queue"  # the connection name NatsQueue gives the server
RETRY = {"max_attempts": 20, "backoff_seconds": 1.0, "max_backoff_seconds": 3.0}


async def _leaders(js: JetStreamContext, stream: str) -> tuple[str | None, str | None]:
    """The servers leading the run stream and its consumer (None while electing)."""
    try:
        info = await js.stream_info(stream)
        consumer = await js.consumer_info(stream, CONSUMER, timeout=1)
    except (nats.errors.Error, TimeoutError):
        return None, None
    return ((info.cluster.leader if info.cluster else None),
            (consumer.cluster.leader if consumer.cluster else None))


async def _lead_from(url: str, node: str, stream: str, within: float = 60) -> None:
    """Step the leaders of the run stream and of its consumer down until both sit on ``node``
    (each step-down hands leadership to a random other replica)."""
    nc = await nats.connect(url.split(","), connect_timeout=2)
    try:
        js = nc.jetstream(timeout=1)
        info = await js.stream_info(stream)
        assert info.config.num_replicas == 3, info.config
        deadline = time.monotonic() + within
        while (leaders := await _leaders(js, stream)) != (node, node):
            assert time.monotonic() < deadline, f"leaders stayed at {leaders}, not {node}"
            if None not in leaders:
                if leaders[0] != node:
                    await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", b"", timeout=5)
                if leaders[1] != node:
                    await nc.request(f"$JS.API.CONSUMER.LEADER.STEPDOWN.{stream}.{CONSUMER}",
                                     b"", timeout=5)
                await eventually(lambda: _moved(js, stream, leaders), 20,
                                 "a new leader after the step-down", every=0.1)
            else:
                await asyncio.sleep(0.1)  # poll interval while an election runs
    finally:
        await nc.close()


async def _moved(js: JetStreamContext, stream: str,
                 before: tuple[str | None, str | None]) -> bool:
    now = await _leaders(js, stream)
    return None not in now and now != before


@pytest.mark.timeout(300)
async def test_no_run_is_lost_when_a_nats_node_dies(
        nats_cluster: NatsCluster, shared_pg_schema: str, webhook: WebhookReceiver,
        make_fleet: Callable[..., Fleet]) -> None:
    fleet = make_fleet(database_url=SHARED_PG_DSN, database_schema=shared_pg_schema,
                       queue_url=nats_cluster.url, queue_replicas=3, queue_prefix=PREFIX,
                       visibility_timeout=VISIBILITY_SECONDS, tick_seconds=0.5,
                       shard_lease_seconds=3, republish_after=10, shutdown_grace=5,
                       database_pool_size=5)
    fleet.migrate()
    roles = [fleet.start(role) for role in ("watcher", "worker", "worker", "recurring", "rescuer")]
    for proc in roles:
        fleet.wait_logged(proc, "running ")

    first_due = datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS)
    await asyncio.to_thread(fleet.create_jobs, [{
        "name": f"once {i}", "action": {"type": "webhook", "url": webhook.url},
        "job_params": {"type": "one-time", "time": (
            first_due + timedelta(seconds=WINDOW_SECONDS * i / JOBS)).isoformat()},
        "retry_policy": RETRY, "timeout_seconds": 30} for i in range(JOBS)])

    kill_at = first_due + timedelta(seconds=KILL_AT_SECONDS)
    await eventually(lambda: past(kill_at), LEAD_SECONDS + KILL_AT_SECONDS + 30,
                     "the middle of the window", every=0.1)
    done_before = run_statuses(SHARED_PG_DSN, shared_pg_schema).get("SUCCEEDED", 0)
    assert done_before > 0, "nothing ran before the node was killed"
    # The victim is the node most onthedot processes are connected to, made leader of both
    # the run stream and its consumer first: its death costs clients their server and the
    # stream and consumer their leader, all at once.
    victim = max(nats_cluster.nodes, key=lambda n: n.clients(CLIENT_NAME))
    on_victim = victim.clients(CLIENT_NAME)
    assert on_victim > 0, "no onthedot process is connected to the cluster"
    await _lead_from(nats_cluster.url, victim.name, STREAM)
    nats_cluster.kill(nats_cluster.nodes.index(victim))
    killed_at = time.monotonic()

    async def all_succeeded() -> bool:
        return run_statuses(SHARED_PG_DSN, shared_pg_schema) == {"SUCCEEDED": JOBS}

    await eventually(all_succeeded, WINDOW_SECONDS + 90, f"all {JOBS} runs to succeed")
    took = time.monotonic() - killed_at
    survivors = {n.port for n in nats_cluster.nodes if n is not victim}
    wait_until(lambda: all(tcp_peer_ports(p.proc.pid) & survivors for p in roles), 30,
               "every process to be connected to a surviving node")

    assert not fleet.unexpected_exits(), [p.log()[-2000:] for p in fleet.unexpected_exits()]
    codes = fleet.stop_all()
    assert set(codes.values()) == {0}, codes
    outcome = assert_nothing_lost(SHARED_PG_DSN, shared_pg_schema, webhook, JOBS)
    reconnected = sum("reconnected to NATS" in p.log() for p in roles)
    print(f"\nnats cluster: {JOBS} runs, {done_before} done before {victim.name} (leader of the "
          f"R3 run stream and its consumer, server of {on_victim} of {len(roles)} processes) "
          f"was SIGKILLed; all SUCCEEDED {took:.1f}s later on the two survivors, "
          f"{reconnected} processes reconnected; {outcome.duplicated} runs executed more than "
          "once")
