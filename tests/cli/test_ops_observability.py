"""What an operator sees of the split layout: ``onthedot watcher``, ``rescuer``, ``recurring``
and ``worker`` as real processes on one database (a SQLite file, or a PostgreSQL schema), each
with ``ONTHEDOT_LOG_FORMAT=json`` and its own ``/metrics`` (``ONTHEDOT_METRICS_PORT``).

One scenario: a run that succeeds, one that fails for good (dead-lettered), one that a crashed
worker left RUNNING (rescued, then finished), one skipped as missed, and a message that names no
run. Each outcome leaves exactly one line naming the run; every process reports the shared
gauges (dead letters, queue, oldest due run) while its counters count only its own work; and
each process ends with one final line, only the worker saying how many runs it waits for.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql

from onthedot.api.models import JobCreate
from onthedot.config import Settings
from onthedot.domain.models import RunStatus
from onthedot.runtime import Runtime
from tests.conformance.factories import make_job, make_run
from tests.support.waiting import wait_until
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver

pytestmark = pytest.mark.slow

PG_DSN = os.environ.get("ONTHEDOT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
METRICS_AT = re.compile(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def onthedot_command() -> list[str]:
    script = Path(sys.executable).parent / "onthedot"
    return [str(script)] if script.exists() else [sys.executable, "-m", "onthedot.cli"]


@dataclass
class Role:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    port: int = 0

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def lines(self) -> list[dict[str, Any]]:
        """Every line of the log as JSON: a line that does not parse fails the test."""
        return [json.loads(line) for line in self.text().splitlines() if line.strip()]

    def about(self, run_id: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line.get("run_id") == run_id]

    def scrape(self) -> Samples:
        answer = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain")
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(answer.text)
                for s in family.samples}


@dataclass
class Deployment:
    env: dict[str, str]
    tmp_path: Path
    settings: Settings
    roles: list[Role] = field(default_factory=list)

    def start(self, name: str) -> Role:
        log_path = self.tmp_path / f"{name}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([*onthedot_command(), name], env=self.env,
                                    stdout=subprocess.DEVNULL, stderr=log)
        role = Role(name, proc, log_path)
        self.roles.append(role)
        wait_until(lambda: bool(METRICS_AT.search(role.text())) or proc.poll() is not None,
                   30, f"{name} to serve metrics")
        match = METRICS_AT.search(role.text())
        assert match, role.text()
        role.port = int(match.group(1))
        wait_until(lambda: "running " in role.text(), 30, f"{name} to start")
        return role


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTHEDOT_")}
    env.update({"ONTHEDOT_LOG_FORMAT": "json", "ONTHEDOT_LOG_LEVEL": "INFO",
                "ONTHEDOT_METRICS_PORT": "0", "ONTHEDOT_SHUTDOWN_GRACE": "5",
                "ONTHEDOT_EGRESS_ALLOW": LOOPBACK_ALLOW, "ONTHEDOT_WORKERS": "4",
                "ONTHEDOT_PROCESSES": "1"})  # one process per role: its log, its metrics
    schema = None
    if request.param == "sqlite":
        env["ONTHEDOT_DATABASE_URL"] = f"sqlite:///{tmp_path}/ops.db"
    else:
        schema = f"t_{uuid.uuid4().hex[:12]}"
        env.update({"ONTHEDOT_DATABASE_URL": PG_DSN, "ONTHEDOT_DATABASE_SCHEMA": schema,
                    "ONTHEDOT_PARTITION_AHEAD_DAYS": "1", "ONTHEDOT_PARTITION_FAR_MONTHS": "0"})
    settings = Settings(database_url=env["ONTHEDOT_DATABASE_URL"],
                        database_schema=schema or "public", partition_ahead_days=1,
                        partition_far_months=0, egress_allow=LOOPBACK_ALLOW)
    dep = Deployment(env=env, tmp_path=tmp_path, settings=settings)
    try:
        yield dep
    finally:
        for role in dep.roles:
            if role.proc.poll() is None:
                role.proc.kill()
                role.proc.wait(timeout=10)
        if schema is not None:
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(schema)))


@dataclass
class Seeded:
    ok_job: str
    failing_job: str
    rescued_run: str
    skipped_run: str


async def seed(settings: Settings, hook_url: str) -> Seeded:
    """The database a new operator might find: two jobs due now (one whose webhook answers 500,
    with one attempt allowed), a run a crashed worker left RUNNING, a missed run of a
    misfire=skip job, and a message that names no run."""
    rt = await Runtime.open(settings)
    try:
        now = datetime.now(UTC)
        ok, _ = await rt.service.create_job("local", JobCreate.model_validate({
            "name": "ok", "action": {"type": "message", "text": "hello"},
            "job_params": {"type": "immediate"}}).to_spec("UTC"))
        failing, _ = await rt.service.create_job("local", JobCreate.model_validate({
            "name": "failing", "action": {"type": "webhook", "url": hook_url},
            "retry_policy": {"max_attempts": 1},
            "job_params": {"type": "immediate"}}).to_spec("UTC"))
        crashed = make_job(now=now, user_id="local",
                           action={"type": "message", "text": "rescued"})
        stranded = make_run(crashed, RunStatus.RUNNING, scheduled_at=now - timedelta(minutes=5),
                            now=now - timedelta(minutes=2))  # its lease ran out a minute ago
        assert (await rt.store.job_create(crashed, None)).created
        assert await rt.store.run_insert(stranded)
        missed_job = make_job(now=now, user_id="local", misfire_policy="skip")
        missed = make_run(missed_job, RunStatus.PENDING, scheduled_at=now - timedelta(minutes=10))
        assert (await rt.store.job_create(missed_job, missed)).created
        await rt.queue.send("junk-1", b"not a run message")
        return Seeded(ok.job.job_id, failing.job.job_id, stranded.run_id, missed.run_id)
    finally:
        await rt.close()


async def run_ids(settings: Settings, job_id: str) -> list[str]:
    rt = await Runtime.open(settings)
    try:
        return [r.run_id for r in await rt.store.runs_list(job_id, 10, None)]
    finally:
        await rt.close()


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def only_line(role: Role, run_id: str) -> dict[str, Any]:
    lines = role.about(run_id)
    assert len(lines) == 1, (role.name, run_id, lines)
    assert lines[0]["level"] in ("INFO", "WARNING")
    return lines[0]


def test_split_roles_log_each_outcome_once_and_report_shared_gauges(
        deployment: Deployment) -> None:
    receiver = WebhookReceiver(status_for=lambda _r, _n: 500).start()
    try:
        seeded = asyncio.run(seed(deployment.settings, receiver.url))
        watcher = deployment.start("watcher")
        rescuer = deployment.start("rescuer")
        recurring = deployment.start("recurring")

        # No worker yet: every process sees the backlog build up in the shared store.
        def backlog() -> bool:
            s = watcher.scrape()
            return (value(s, "onthedot_runs", status="ENQUEUED") >= 3
                    and value(s, "onthedot_oldest_due_run_age_seconds") > 0)
        wait_until(backlog, 30, "the watcher to queue the due runs")
        seen = rescuer.scrape()
        assert value(seen, "onthedot_runs", status="ENQUEUED") >= 3
        assert value(seen, "onthedot_queue_depth") >= 4  # three runs and the junk message
        assert value(seen, "onthedot_oldest_due_run_age_seconds") > 0
        assert value(watcher.scrape(), "onthedot_dispatch_lateness_seconds_count") >= 2

        worker = deployment.start("worker")

        def done() -> bool:
            s = worker.scrape()
            return (value(s, "onthedot_runs_finished_total", status="SUCCEEDED") == 2
                    and value(s, "onthedot_runs_finished_total", status="FAILED") == 1)
        wait_until(done, 30, "the worker to finish the three runs")
        by_worker = worker.scrape()
        # First attempts only: the rescued run (its second attempt) is not lateness.
        assert value(by_worker, "onthedot_run_lateness_seconds_count") == 2
        assert value(by_worker, "onthedot_run_attempts_total") == 3

        # The watcher process did none of that work, yet reports the shared truth.
        def settled() -> bool:
            s = watcher.scrape()
            return (value(s, "onthedot_dead_letters") == 1
                    and value(s, "onthedot_runs", status="ENQUEUED") == 0
                    and value(s, "onthedot_oldest_due_run_age_seconds") == 0)
        wait_until(settled, 30, "the watcher's gauges to show the finished runs")
        by_watcher = watcher.scrape()
        assert value(by_watcher, "onthedot_runs_finished_total", status="SUCCEEDED") == 0
        assert value(by_watcher, "onthedot_dead_letters") == 1
        assert value(recurring.scrape(), "onthedot_dead_letters") == 1
        # The recurring watcher applies the terminal run events: the lag returns to 0.
        wait_until(lambda: value(recurring.scrape(), "onthedot_run_event_lag_seconds") == 0,
                   30, "the recurring watcher to apply the run events")

        for role in deployment.roles:
            role.proc.send_signal(signal.SIGTERM)
        for role in deployment.roles:
            assert role.proc.wait(timeout=30) == 0, role.text()
    finally:
        receiver.stop()

    ok_run, = asyncio.run(run_ids(deployment.settings, seeded.ok_job))
    failed_run, = asyncio.run(run_ids(deployment.settings, seeded.failing_job))

    succeeded = only_line(worker, ok_run)
    assert (succeeded["level"], succeeded["attempt"], succeeded["job_id"]) == (
        "INFO", 1, seeded.ok_job)
    assert "succeeded" in succeeded["message"]
    assert succeeded["logger"] == "onthedot.worker"
    assert datetime.fromisoformat(succeeded["time"]).tzinfo is not None

    failed = only_line(worker, failed_run)
    assert (failed["level"], failed["attempt"]) == ("WARNING", 1)
    assert "500" in failed["error"]
    assert "dead-lettered" in failed["message"]

    handed_back = only_line(rescuer, seeded.rescued_run)
    assert (handed_back["level"], handed_back["attempt"]) == ("WARNING", 1)
    finished = only_line(worker, seeded.rescued_run)
    assert (finished["level"], finished["attempt"]) == ("INFO", 2)

    skipped = only_line(watcher, seeded.skipped_run)
    assert skipped["level"] == "INFO"
    assert "missed" in skipped["error"]

    junk = [line for line in worker.lines() if "junk-1" in line["message"]]
    assert len(junk) == 1, junk
    assert junk[0]["level"] == "WARNING"
    assert "dead-lettered" in junk[0]["message"]

    # Shutdown: only the worker waits for runs; every process ends with one final line.
    waits = [line["message"] for line in worker.lines() if "waiting up to" in line["message"]]
    assert waits == ["stopping: waiting up to 5s for 0 runs in flight"]
    for role in (watcher, rescuer, recurring):
        assert not any("waiting" in line["message"] or "in flight" in line["message"]
                       for line in role.lines()), role.text()
    for role in deployment.roles:
        assert role.lines()[-1]["message"] == "onthedot stopped", role.text()
        assert not any(line["logger"].startswith(("httpx", "httpcore"))
                       for line in role.lines())
