"""docker-compose.yml's services, run as the real processes they describe (no container engine
here): each service's command with its EFFECTIVE environment from the file, only the host names
pointed at the local PostgreSQL and NATS, and the ports at free ones (several roles share this
host). The migrate service runs first, the file's token hint creates the token the API needs,
then api, watcher, recurring, rescuer and worker together run a job; every one logs JSON and
answers /metrics on the address the file gives it; all stop cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.queue.nats import delete_streams
from tests.cli.test_deploy_files import COMPOSE, compose_file, environment
from tests.cli.test_ops_observability import onthedot_command
from tests.conformance.conftest import PG_DSN, drop_pg_schema
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.nats]

NATS_URL = "nats://127.0.0.1:4222"
ROLE_SERVICES = ("api", "watcher", "recurring", "rescuer", "worker")
METRICS_AT = re.compile(r"metrics on http://0\.0\.0\.0:(\d+)/metrics")
LISTENING_AT = re.compile(r"listening on http://0\.0\.0\.0:(\d+)")


@dataclass
class Service:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def lines(self) -> list[dict[str, Any]]:
        """Every line as JSON: a line that does not parse fails the test."""
        text = self.log_path.read_text(errors="replace")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def found(self, pattern: re.Pattern[str]) -> int | None:
        for line in self.lines():
            match = pattern.search(line["message"])
            if match:
                return int(match.group(1))
        return None


@dataclass
class Local:
    """What this host puts in place of the compose file's host names and fixed ports."""

    schema: str
    prefix: str
    tmp_path: Path

    def env(self, service: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONTHEDOT_")}
        effective = environment(compose_file()["services"][service])
        assert "@postgres:5432/" in effective["ONTHEDOT_DATABASE_URL"]
        assert effective["ONTHEDOT_QUEUE_URL"] == "nats://nats:4222"
        env.update(effective)
        env.update({"ONTHEDOT_DATABASE_URL": PG_DSN, "ONTHEDOT_DATABASE_SCHEMA": self.schema,
                    "ONTHEDOT_QUEUE_URL": NATS_URL, "ONTHEDOT_QUEUE_PREFIX": self.prefix,
                    "ONTHEDOT_METRICS_PORT": "0", "ONTHEDOT_SHUTDOWN_GRACE": "5",
                    # one process per service: the test scrapes the one worker's counters
                    "ONTHEDOT_PROCESSES": "1",
                    # fewer partitions than in production: each is seconds of DDL here
                    "ONTHEDOT_PARTITION_AHEAD_DAYS": "1", "ONTHEDOT_PARTITION_FAR_MONTHS": "0"})
        return env

    def command(self, service: str) -> list[str]:
        args = [str(a) for a in compose_file()["services"][service]["command"]]
        if "--port" in args:  # a free port, as several roles share this host
            args[args.index("--port") + 1] = "0"
        return args


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Local]:
    here = Local(schema=f"t_{uuid.uuid4().hex[:12]}", prefix=f"t{uuid.uuid4().hex[:10]}",
                 tmp_path=tmp_path)
    yield here
    asyncio.run(drop_pg_schema(here.schema))
    asyncio.run(delete_streams(NATS_URL, here.prefix))


def run_once(local: Local, service: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*onthedot_command(), *args], env=local.env(service),
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_compose_services_run_as_described(local: Local) -> None:
    migrated = run_once(local, "migrate", local.command("migrate"))
    assert migrated.returncode == 0, migrated.stderr
    assert "schema version" in migrated.stdout
    hint = re.search(r"docker compose run --rm (\w+) (token create .*)", COMPOSE.read_text())
    assert hint is not None
    made = run_once(local, hint.group(1), hint.group(2).split())
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()

    services: list[Service] = []
    try:
        for name in ROLE_SERVICES:
            log_path = local.tmp_path / f"{name}.log"
            with open(log_path, "wb") as log:
                proc = subprocess.Popen([*onthedot_command(), *local.command(name)],
                                        env=local.env(name), stdout=subprocess.DEVNULL,
                                        stderr=log)
            services.append(Service(name, proc, log_path))
        ports = {}
        for service in services:
            wait_until(lambda s=service: s.found(METRICS_AT) is not None  # type: ignore[misc]
                       or s.proc.poll() is not None, 60, f"{service.name} to serve metrics")
            port = service.found(METRICS_AT)
            assert port is not None, service.log_path.read_text()
            ports[service.name] = port
            scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
            assert scraped.status_code == 200
            assert "onthedot_runs_recovered_total" in scraped.text
        api = services[0]
        wait_until(lambda: api.found(LISTENING_AT) is not None, 60, "the API to listen")
        base = f"http://127.0.0.1:{api.found(LISTENING_AT)}"
        created = httpx.post(f"{base}/v1/jobs", headers={"Authorization": f"Bearer {token}"},
                             json={"name": "compose", "action": {"type": "message",
                                                                 "text": "hello"},
                                   "job_params": {"type": "immediate"}}, timeout=30)
        assert created.status_code == 201, created.text

        def done() -> bool:
            text = httpx.get(f"http://127.0.0.1:{ports['worker']}/metrics", timeout=10).text
            return 'onthedot_runs_finished_total{status="SUCCEEDED"} 1.0' in text
        wait_until(done, 60, "the worker of the compose file to run the job")
    finally:
        codes = stop(services)
    for service in services:
        assert codes[service.name] == 0, (service.name, service.log_path.read_text()[-2000:])
        assert service.lines()[-1]["message"] == "onthedot stopped", service.name


def stop(services: list[Service]) -> dict[str, int]:
    """SIGTERM every service, then their exit codes (a killed straggler's is negative)."""
    for service in services:
        if service.proc.poll() is None:
            service.proc.send_signal(signal.SIGTERM)
    codes = {}
    for service in services:
        try:
            codes[service.name] = service.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            service.proc.kill()
            codes[service.name] = service.proc.wait(timeout=10)
    return codes
