"""PostgreSQL restarted in the middle of a run.

A private PostgreSQL cluster (so the shared server is not disturbed) holds the store; a watcher,
two workers and a recurring watcher run as separate processes on it, with the shared NATS
server under a prefix of their own. Runs fall due across the restart: one-time webhook jobs
spread over 30 s and a recurring job every 2 s. In the middle, PostgreSQL is stopped (fast
shutdown: every session is cut), left down until the watcher and the recurring watcher have
both noticed, and started again. No process is restarted: each must reconnect by itself, and
every run must end SUCCEEDED with nothing lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from tests.failure.checks import assert_nothing_lost, eventually, past, run_statuses
from tests.support.cluster import SHARED_NATS_URL, Fleet, PgCluster, tcp_peer_ports
from tests.support.procs import RoleProcess
from tests.support.waiting import wait_until
from tests.support.webhook import WebhookReceiver

pytestmark = [pytest.mark.failure, pytest.mark.slow, pytest.mark.nats]

ONE_TIME_JOBS = 600
WINDOW_SECONDS = 30.0  # the one-time jobs fall due over this window
LEAD_SECONDS = 4.0  # creating 600 jobs takes about a second here
RESTART_AT_SECONDS = 6.0  # into the window; the outage lasts ~10 s (the pool timeout)
RECURRING_EVERY_SECONDS = 2
VISIBILITY_SECONDS = 3.0
SCHEMA = "onthedot"  # the cluster is ours alone; dropped with it
RETRY = {"max_attempts": 20, "backoff_seconds": 1.0, "max_backoff_seconds": 3.0}


def _webhook_job(receiver: WebhookReceiver, name: str,
                 job_params: dict[str, object]) -> dict[str, object]:
    return {"name": name, "action": {"type": "webhook", "url": receiver.url},
            "job_params": job_params, "retry_policy": RETRY, "timeout_seconds": 30}


def _failure_logged(proc: RoleProcess, since: int, text: str) -> Callable[[], bool]:
    def logged() -> bool:
        assert proc.alive(), f"{proc.roles} died while PostgreSQL was down:\n{proc.log()[-3000:]}"
        return text in proc.log()[since:]

    return logged


def _job_statuses(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(f"SELECT name, status FROM {SCHEMA}.jobs").fetchall()
    return {str(name): str(status) for name, status in rows}


def _recurring_runs(dsn: str) -> list[tuple[datetime, str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(f"SELECT r.scheduled_at, r.status FROM {SCHEMA}.job_runs r "
                            f"JOIN {SCHEMA}.jobs j USING (job_id) WHERE j.name = 'every 2s' "
                            "ORDER BY r.scheduled_at").fetchall()
    return [(at, str(status)) for at, status in rows]


@pytest.mark.timeout(300)
async def test_every_process_survives_a_postgres_restart(
        private_pg: PgCluster, shared_nats_prefix: str, webhook: WebhookReceiver,
        make_fleet: Callable[..., Fleet]) -> None:
    dsn = private_pg.dsn()
    fleet = make_fleet(database_url=dsn, database_schema=SCHEMA, queue_url=SHARED_NATS_URL,
                       queue_prefix=shared_nats_prefix, visibility_timeout=VISIBILITY_SECONDS,
                       tick_seconds=0.5, shard_lease_seconds=3, republish_after=10,
                       min_interval=1, shutdown_grace=5, database_pool_size=5)
    fleet.migrate()
    roles = [fleet.start(role) for role in ("watcher", "worker", "worker", "recurring", "rescuer")]
    for proc in roles:
        fleet.wait_logged(proc, "running ")
    watcher, recurring = roles[0], roles[3]

    first_due = datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS)
    until = first_due + timedelta(seconds=WINDOW_SECONDS)
    bodies = [_webhook_job(webhook, f"once {i}", {
        "type": "one-time",
        "time": (first_due + timedelta(seconds=WINDOW_SECONDS * i / ONE_TIME_JOBS)).isoformat()})
        for i in range(ONE_TIME_JOBS)]
    bodies.append(_webhook_job(webhook, "every 2s", {
        "type": "recurring", "schedule": f"FREQ=SECONDLY;INTERVAL={RECURRING_EVERY_SECONDS};"
                                         f"UNTIL={until.strftime('%Y%m%dT%H%M%SZ')}"}))
    await asyncio.to_thread(fleet.create_jobs, bodies)

    # Mid-window, with runs already done: cut every session and keep the server down until
    # the watcher and the recurring watcher have both failed a tick on it.
    restart_at = first_due + timedelta(seconds=RESTART_AT_SECONDS)
    await eventually(lambda: past(restart_at), LEAD_SECONDS + RESTART_AT_SECONDS + 30,
                     "the middle of the window", every=0.1)
    done_before = run_statuses(dsn, SCHEMA).get("SUCCEEDED", 0)
    assert done_before > 0, "nothing ran before the restart"
    watcher_mark, recurring_mark = len(watcher.log()), len(recurring.log())
    down_at = time.monotonic()
    private_pg.stop("fast")
    wait_until(_failure_logged(watcher, watcher_mark, "dispatch tick failed"), 30,
               "the watcher to notice PostgreSQL is down")
    wait_until(_failure_logged(recurring, recurring_mark, "recurring tick failed"), 30,
               "the recurring watcher to notice PostgreSQL is down")
    private_pg.start()
    outage = time.monotonic() - down_at
    back_at = datetime.now(UTC)

    async def all_done() -> bool:
        jobs = _job_statuses(dsn)
        return set(jobs.values()) == {"completed"} and len(jobs) == ONE_TIME_JOBS + 1

    took = await eventually(all_done, WINDOW_SECONDS + 90, "every job to complete")
    # The fast shutdown cut every session, so a connection to the server now is a new one.
    wait_until(lambda: all(private_pg.port in tcp_peer_ports(p.proc.pid) for p in roles), 30,
               "every process to hold a connection to the restarted server")

    assert not fleet.unexpected_exits(), [p.log()[-2000:] for p in fleet.unexpected_exits()]
    codes = fleet.stop_all()
    assert set(codes.values()) == {0}, codes  # the same four processes, all still healthy
    recurring_runs = _recurring_runs(dsn)
    after_restart = [at for at, _status in recurring_runs if at > back_at]
    assert after_restart, (f"the recurring job stopped at the restart: {recurring_runs}; "
                           f"first due {first_due}, until {until}, back {back_at}")
    outcome = assert_nothing_lost(dsn, SCHEMA, webhook, ONE_TIME_JOBS + len(recurring_runs))
    print(f"\npostgres restart: {ONE_TIME_JOBS} one-time runs + {len(recurring_runs)} "
          f"recurring runs, {done_before} done before PostgreSQL went down for {outage:.1f}s; "
          f"all SUCCEEDED {took:.1f}s after it came back, each of the 4 processes reconnected "
          f"by itself; {outcome.duplicated} runs executed more than once")


@pytest.mark.timeout(180)
async def test_a_result_recorded_across_an_outage_does_not_run_the_action_again(
        private_pg: PgCluster, shared_nats_prefix: str, webhook: WebhookReceiver,
        make_fleet: Callable[..., Fleet]) -> None:
    """Issue 8 §5: a transient store error while recording a result re-executed the whole
    action. Here the action (a webhook) completes while PostgreSQL is down: the worker keeps
    the message and retries the write, and when the server is back the result lands once."""
    dsn = private_pg.dsn()
    fleet = make_fleet(database_url=dsn, database_schema=SCHEMA, queue_url=SHARED_NATS_URL,
                       queue_prefix=shared_nats_prefix, visibility_timeout=VISIBILITY_SECONDS,
                       tick_seconds=0.5, shard_lease_seconds=3, shutdown_grace=5,
                       database_pool_size=3)
    fleet.migrate()
    roles = [fleet.start(role) for role in ("watcher", "worker", "worker", "rescuer")]
    for proc in roles:
        fleet.wait_logged(proc, "running ")
    webhook.hold = lambda _r, nth: nth == 1
    await asyncio.to_thread(fleet.create_jobs, [_webhook_job(webhook, "held", {
        "type": "immediate"})])
    await asyncio.to_thread(webhook.arrived.wait, 30)

    private_pg.stop("fast")
    marks = [len(p.log()) for p in roles]
    webhook.release()  # the action ends while the store is away

    def retrying() -> bool:
        return any("recording the result of run" in p.log()[mark:]
                   for p, mark in zip(roles, marks, strict=True))

    wait_until(retrying, 30, "a worker to retry recording the result")
    # The outage lasts longer than the visibility timeout (a duration of the scenario, not a
    # synchronisation): the message must stay with the worker that holds the result.
    await asyncio.sleep(2 * VISIBILITY_SECONDS)
    private_pg.start()

    async def succeeded() -> bool:
        return run_statuses(dsn, SCHEMA) == {"SUCCEEDED": 1}

    await eventually(succeeded, 60, "the run to be recorded")
    assert webhook.count() == 1, "the action ran again"
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(f"SELECT attempt FROM {SCHEMA}.job_runs").fetchone()
    assert row is not None
    assert row[0] == 1
    assert set(fleet.stop_all().values()) == {0}
