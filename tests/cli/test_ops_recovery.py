"""kill -9 of a worker mid-run, seen from outside (issue 18 §4): before, the only trace was
"succeeded on attempt 2". Now the worker that takes the run over writes one WARNING line naming
the run and the cause, and counts it in ``onthedot_runs_recovered_total{cause}`` on its own
``/metrics``. Real processes (``onthedot watcher``, two ``onthedot worker``), JSON logs, on a
SQLite file and on PostgreSQL (the ``deployment`` of test_ops_observability)."""

from __future__ import annotations

import asyncio
import signal

import pytest

from onthedot.api.models import JobCreate
from onthedot.config import Settings
from onthedot.runtime import Runtime
from tests.cli.test_ops_observability import Deployment, deployment, value
from tests.support.waiting import wait_until
from tests.support.webhook import WebhookReceiver

__all__ = ["deployment"]  # the fixture, shared with test_ops_observability

pytestmark = pytest.mark.slow

VISIBILITY_SECONDS = "3"  # the lease a killed worker leaves behind; short, for a quick takeover


async def create_job(settings: Settings, hook_url: str) -> str:
    rt = await Runtime.open(settings)
    try:
        view, _ = await rt.service.create_job("local", JobCreate.model_validate({
            "name": "held", "action": {"type": "webhook", "url": hook_url},
            "job_params": {"type": "immediate"}}).to_spec("UTC"))
        return view.job.job_id
    finally:
        await rt.close()


async def only_run_id(settings: Settings, job_id: str) -> str:
    rt = await Runtime.open(settings)
    try:
        [run] = await rt.store.runs_list(job_id, 10, None)
        return run.run_id
    finally:
        await rt.close()


def test_a_worker_killed_mid_run_leaves_a_warning_and_a_count(deployment: Deployment) -> None:
    deployment.env["ONTHEDOT_VISIBILITY_TIMEOUT"] = VISIBILITY_SECONDS
    receiver = WebhookReceiver(hold=lambda _r, nth: nth == 1).start()  # attempt 1 hangs
    try:
        job_id = asyncio.run(create_job(deployment.settings, receiver.url))
        deployment.start("watcher")
        victim = deployment.start("worker")
        wait_until(receiver.arrived.is_set, 30, "the first attempt to reach the webhook")
        standby = deployment.start("worker")
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=10)

        def finished() -> bool:
            s = standby.scrape()
            return value(s, "onthedot_runs_finished_total", status="SUCCEEDED") == 1
        wait_until(finished, 60, "the standby worker to take the run over and finish it")
        samples = standby.scrape()
    finally:
        receiver.release()
        receiver.stop()

    assert value(samples, "onthedot_runs_recovered_total", cause="lease_expired") == 1
    for cause in ("worker_shutdown", "worker_and_message_lost", "message_lost"):
        assert value(samples, "onthedot_runs_recovered_total", cause=cause) == 0
    run_id = asyncio.run(only_run_id(deployment.settings, job_id))
    warning, succeeded = standby.about(run_id)
    assert (warning["level"], warning["logger"], warning["cause"]) == (
        "WARNING", "onthedot.worker", "lease_expired")
    assert (warning["job_id"], warning["attempt"]) == (job_id, 2)
    assert "attempt 1 lost its worker" in warning["message"]
    assert warning["time"].endswith("Z")
    assert (succeeded["level"], succeeded["attempt"]) == ("INFO", 2)
    assert "cause" not in succeeded
