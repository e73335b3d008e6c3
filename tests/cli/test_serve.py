"""``onthedot serve`` as a real process: jobs created over HTTP fire, SIGTERM shuts down
gracefully (in-flight runs finish within the grace period) and the exit code is 0."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.support.waiting import wait_until
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver

pytestmark = pytest.mark.slow
LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    log_path: Path
    url: str = ""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, within: float) -> tuple[int, float]:
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=within)
        return code, time.monotonic() - started


def onthedot_command() -> list[str]:
    script = Path(sys.executable).parent / "onthedot"
    return [str(script)] if script.exists() else [sys.executable, "-m", "onthedot.cli"]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Served]:
    env = {**os.environ, "ONTHEDOT_SHUTDOWN_GRACE": "5", "ONTHEDOT_LOG_LEVEL": "INFO",
           "ONTHEDOT_EGRESS_ALLOW": LOOPBACK_ALLOW}
    env.pop("ONTHEDOT_TOKEN", None)
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*onthedot_command(), "serve", "--port", "0", "--database-url",
                                 f"sqlite:///{tmp_path}/serve.db", "--workers", "4"],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    served = Served(proc=proc, log_path=log_path)
    try:
        wait_until(lambda: bool(LISTENING.search(served.log())) or proc.poll() is not None, 30,
                   "onthedot serve to listen")
        match = LISTENING.search(served.log())
        assert match, served.log()
        served.url = match.group(1)
        wait_until(lambda: _healthy(served.url), 30, "/healthz")
        yield served
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_jobs_fire_and_sigterm_exits_cleanly(serve: Served) -> None:
    in_two_seconds = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with httpx.Client(base_url=serve.url, timeout=10) as http:
        now = http.post("/v1/jobs", json={
            "name": "now", "action": {"type": "message", "text": "right away"},
            "job_params": {"type": "immediate"}})
        soon = http.post("/v1/jobs", json={
            "name": "soon", "action": {"type": "message", "text": "in two seconds"},
            "job_params": {"type": "one-time", "time": in_two_seconds}})
        assert (now.status_code, soon.status_code) == (201, 201), (now.text, soon.text)

        def output_of(job_id: str) -> object:
            runs = http.get(f"/v1/jobs/{job_id}/runs").json()["runs"]
            if not runs or runs[0]["status"] != "SUCCEEDED":
                return None
            return runs[0]["output"]["message"]

        for response, text in ((now, "right away"), (soon, "in two seconds")):
            job_id = response.json()["job_id"]
            wait_until(lambda j=job_id, t=text: output_of(j) == t, 20,  # type: ignore[misc]
                       f"{text!r} to run")

    code, took = serve.terminate(within=30)
    assert code == 0, serve.log()
    assert took < 5 + 5, f"took {took:.1f}s"
    assert "Traceback" not in serve.log()


def test_sigterm_lets_the_in_flight_run_finish(serve: Served) -> None:
    receiver = WebhookReceiver(hold_all=True).start()
    try:
        with httpx.Client(base_url=serve.url, timeout=10) as http:
            job_id = http.post("/v1/jobs", json={
                "action": {"type": "webhook", "url": receiver.url},
                "job_params": {"type": "immediate"}}).json()["job_id"]
            assert receiver.arrived.wait(timeout=20), serve.log()
        serve.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "waiting up to 5s for 1 run in flight" in serve.log(), 10,
                   "shutdown to begin")
        receiver.release()  # the held request answers 200 within the grace period
        assert serve.proc.wait(timeout=30) == 0, serve.log()
    finally:
        receiver.stop()
    assert "Traceback" not in serve.log()
    assert serve.log().rstrip().endswith("onthedot stopped"), serve.log()
    # The run was recorded as succeeded before the process exited.
    assert _run_status(serve, job_id) == "SUCCEEDED"


def _run_status(serve: Served, job_id: str) -> str:
    import asyncio

    from onthedot.config import Settings
    from onthedot.runtime import Runtime

    db = re.search(r"sqlite:///\S+serve\.db", " ".join(map(str, serve.proc.args)))
    assert db

    async def read() -> str:
        rt = await Runtime.open(Settings(database_url=db.group(0)))
        try:
            runs = await rt.store.runs_list(job_id, 10, None)
            return runs[0].status.value
        finally:
            await rt.close()

    return asyncio.run(read())
