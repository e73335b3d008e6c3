"""The engine as separate OS processes on one SQLite file: crashes, zombies, downtime, scale."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from onthedot.config import Settings
from onthedot.domain.models import JobParams, RetryPolicy, RunStatus
from onthedot.runtime import Runtime
from onthedot.service import JobSpec
from tests.support.procs import RoleProcess, start_roles
from tests.support.waiting import async_wait_until, wait_until
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver

pytestmark = pytest.mark.slow

VISIBILITY = 2.0  # seconds: short, so crash recovery is quick in tests


@pytest.fixture
async def client_rt(tmp_path: Path) -> AsyncIterator[Runtime]:
    """A runtime in the test process used only to create jobs and read state."""
    rt = await Runtime.open(Settings(database_url=f"sqlite:///{tmp_path}/shared.db",
                                     egress_allow=LOOPBACK_ALLOW))
    yield rt
    await rt.close()


@pytest.fixture
def procs() -> Iterator[list[RoleProcess]]:
    started: list[RoleProcess] = []
    yield started
    for p in started:
        if p.alive():
            p.kill()


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver().start()
    yield receiver
    receiver.stop()


def _settings(tmp_path: Path, **extra: object) -> dict[str, object]:
    return {"database_url": f"sqlite:///{tmp_path}/shared.db", "visibility_timeout": VISIBILITY,
            "tick_seconds": 0.2, "shard_lease_seconds": 3, "shutdown_grace": 5,
            "egress_allow": LOOPBACK_ALLOW, **extra}


async def _run_status(rt: Runtime, job_id: str) -> RunStatus | None:
    runs = (await rt.service.list_runs("alice", job_id)).items
    return runs[-1].status if runs else None


async def test_worker_killed_mid_action_is_taken_over(tmp_path: Path, client_rt: Runtime,
                                                      procs: list[RoleProcess],
                                                      webhook: WebhookReceiver) -> None:
    webhook.hold = lambda _r, nth: nth == 1  # the first attempt hangs inside the action
    view, _ = await client_rt.service.create_job("alice", JobSpec(
        action={"type": "webhook", "url": webhook.url}, params=JobParams(type="immediate"),
        timeout_seconds=60))
    job_id = view.job.job_id
    procs.append(start_roles("watcher", tmp_path, "watcher", **_settings(tmp_path)))
    victim = start_roles("worker", tmp_path, "worker-a", **_settings(tmp_path))
    procs.append(victim)
    wait_until(webhook.arrived.is_set, 20, "the first attempt to reach the webhook")
    standby = start_roles("worker", tmp_path, "worker-b", **_settings(tmp_path))
    procs.append(standby)
    wait_until(lambda: "running worker" in standby.log(), 20, "the second worker to start")
    killed_at = datetime.now(UTC)
    victim.kill()

    async def succeeded() -> bool:
        return await _run_status(client_rt, job_id) is RunStatus.SUCCEEDED

    await async_wait_until(succeeded, 30, "another worker to finish the run")
    run = (await client_rt.service.list_runs("alice", job_id)).items[0]
    assert run.attempt == 2
    assert webhook.keys[run.run_id] == 2  # the same idempotency key both times
    # Taken over within the visibility timeout of the last heartbeat (issue 8 §5: it once took
    # two timeouts, when the store lease outlived the message's invisibility).
    assert run.started_at is not None
    takeover = (run.started_at - killed_at).total_seconds()
    assert takeover <= VISIBILITY + 1.0, f"taken over {takeover:.2f}s after the kill"
    webhook.release()


async def test_sigterm_with_every_slot_busy_exits_within_the_grace(
        tmp_path: Path, client_rt: Runtime, procs: list[RoleProcess],
        webhook: WebhookReceiver) -> None:
    """Issue 8 §5: with every worker slot busy on a hanging webhook, the worker waited for a
    free slot before it saw the stop flag: SIGTERM took the action's whole timeout (90 s)."""
    webhook.hold_all = True
    jobs = []
    for _ in range(2):
        view, _ = await client_rt.service.create_job("alice", JobSpec(
            action={"type": "webhook", "url": webhook.url}, params=JobParams(type="immediate"),
            timeout_seconds=90))
        jobs.append(view.job.job_id)
    grace = 1.0
    procs.append(start_roles("watcher", tmp_path, "watcher", **_settings(tmp_path)))
    worker = start_roles("worker", tmp_path, "worker", **_settings(tmp_path, workers=2,
                                                                   shutdown_grace=grace))
    procs.append(worker)
    wait_until(lambda: webhook.count() == 2, 20, "both slots to hang in the webhook")

    started = time.monotonic()
    code = worker.terminate(timeout=30)
    took = time.monotonic() - started

    assert code == 0, worker.log()[-2000:]
    assert took <= grace + 4.0, f"exited {took:.1f}s after SIGTERM with a {grace}s grace"
    for job_id in jobs:  # handed back undone, the interrupted attempt not counted
        run = (await client_rt.service.list_runs("alice", job_id)).items[0]
        assert (run.status, run.attempt) == (RunStatus.ENQUEUED, 0)
    webhook.hold_all = False
    webhook.release()
    procs.append(start_roles("worker", tmp_path, "worker-2", **_settings(tmp_path)))

    async def all_done() -> bool:
        return all([await _run_status(client_rt, j) is RunStatus.SUCCEEDED for j in jobs])

    await async_wait_until(all_done, 30, "another worker to run both")


async def test_zombie_worker_late_completion_is_rejected(tmp_path: Path, client_rt: Runtime,
                                                         procs: list[RoleProcess],
                                                         webhook: WebhookReceiver) -> None:
    webhook.hold = lambda _r, nth: nth == 1
    view, _ = await client_rt.service.create_job("alice", JobSpec(
        action={"type": "webhook", "url": webhook.url}, params=JobParams(type="immediate"),
        timeout_seconds=60))
    job_id = view.job.job_id
    procs.append(start_roles("watcher", tmp_path, "watcher", **_settings(tmp_path)))
    zombie = start_roles("worker", tmp_path, "worker-zombie", **_settings(tmp_path))
    procs.append(zombie)
    wait_until(webhook.arrived.is_set, 20, "the first attempt to reach the webhook")
    zombie.proc.send_signal(signal.SIGSTOP)  # frozen: no heartbeats, lease lapses
    procs.append(start_roles("worker", tmp_path, "worker-b", **_settings(tmp_path)))

    async def succeeded() -> bool:
        return await _run_status(client_rt, job_id) is RunStatus.SUCCEEDED

    await async_wait_until(succeeded, 30, "the second worker to finish the run")
    before = (await client_rt.service.list_runs("alice", job_id)).items[0]
    webhook.release()  # the zombie's action now completes...
    zombie.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: "result of attempt 1 discarded" in zombie.log(), 20,
               "the zombie to try to record its result")
    after = (await client_rt.service.list_runs("alice", job_id)).items[0]
    assert after == before, "the zombie's late write must change nothing"
    assert after.attempt == 2
    assert len([e for e in await client_rt.store.events_after(0, 100)
                if e.run_id == after.run_id]) == 1


async def test_service_down_when_runs_were_due(tmp_path: Path, client_rt: Runtime,
                                               procs: list[RoleProcess]) -> None:
    settings = _settings(tmp_path, misfire_grace=1)
    due = datetime.now(UTC) + timedelta(seconds=2)
    late = await client_rt.service.create_job("alice", JobSpec(
        action={"type": "message", "text": "late"},
        params=JobParams(type="one-time", time=due.isoformat())))
    skip = await client_rt.service.create_job("alice", JobSpec(
        action={"type": "message", "text": "skip"},
        params=JobParams(type="one-time", time=due.isoformat()), misfire_policy="skip"))
    service = start_roles("watcher,worker,recurring,rescuer", tmp_path, "serve-1", **settings)
    procs.append(service)
    service.kill()  # the whole service dies before the runs are due
    wait_until(lambda: datetime.now(UTC) > due + timedelta(seconds=2), 10,
               "the runs to become due and pass the misfire grace")
    procs.append(start_roles("watcher,worker,recurring,rescuer", tmp_path, "serve-2", **settings))

    async def both_final() -> bool:
        jobs = [await client_rt.service.get_job("alice", v.job.job_id) for v in (late[0], skip[0])]
        return all(j.status == "completed" for j in jobs)

    await async_wait_until(both_final, 30, "the restarted service to handle the missed runs")
    late_run = (await client_rt.service.list_runs("alice", late[0].job.job_id)).items[0]
    skip_run = (await client_rt.service.list_runs("alice", skip[0].job.job_id)).items[0]
    assert late_run.status is RunStatus.SUCCEEDED
    assert late_run.started_at is not None
    assert late_run.started_at - late_run.scheduled_at > timedelta(seconds=1)
    assert skip_run.status is RunStatus.SKIPPED


async def test_two_watchers_four_workers_run_2000_runs_once_each(
        tmp_path: Path, client_rt: Runtime, procs: list[RoleProcess],
        webhook: WebhookReceiver) -> None:
    total = int(os.environ.get("ONTHEDOT_TEST_RUNS", "2000"))
    for i in range(total):
        await client_rt.service.create_job("alice", JobSpec(
            action={"type": "webhook", "url": webhook.url, "body": {"i": i}},
            params=JobParams(type="immediate"), retry_policy=RetryPolicy(max_attempts=1)))
    settings = _settings(tmp_path, visibility_timeout=30, workers=32)
    for i in range(2):
        procs.append(start_roles("watcher", tmp_path, f"watcher-{i}", **settings))
    for i in range(4):
        procs.append(start_roles("worker", tmp_path, f"worker-{i}", **settings))
    started = time.monotonic()

    async def all_done() -> bool:
        counts = await client_rt.store.runs_count_by_status()
        return counts.get(RunStatus.SUCCEEDED, 0) == total

    await async_wait_until(all_done, 240, f"all {total} runs to succeed")
    elapsed = time.monotonic() - started
    counts = await client_rt.store.runs_count_by_status()
    assert counts == {RunStatus.SUCCEEDED: total}
    assert len(webhook.keys) == total, "a run is missing"
    assert max(webhook.keys.values()) == 1, "a run was executed twice"
    assert sorted(r.body["i"] for r in webhook.received) == list(range(total))
    for p in procs:
        assert p.terminate() == 0, p.log()[-2000:]
    print(f"\n2,000 runs by 2 watchers + 4 workers in {elapsed:.1f}s")
