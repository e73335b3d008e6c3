"""Actions against real HTTP servers on loopback, driven one step at a time with a fake clock.

A ``Rig`` creates jobs through the service (what the API and MCP call) under one egress
allowlist and fires them with a worker that may have another one, as when an operator changes
``ONTHEDOT_EGRESS_ALLOW`` between creation and fire time.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.models import JobParams, JobRun, RetryPolicy
from onthedot.runtime import Runtime
from onthedot.service import JobSpec
from onthedot.watcher import Watcher
from onthedot.worker import Worker
from tests.actions.servers import Route, ScriptedServer
from tests.engine.conftest import Engine

START = datetime(2026, 6, 22, 0, 0, 30, tzinfo=UTC)

# Every spelling of a refused destination that the URL alone gives away, and why it is refused.
LITERAL_REFUSALS = [
    ("http://127.0.0.1/", "loopback"),
    ("http://2130706433/", "loopback"),  # one decimal number
    ("http://0x7f.1/", "loopback"),  # hex, two parts
    ("http://017700000001/", "loopback"),  # one octal number
    ("http://0x7f000001/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://127.0.0.1.:8080/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),  # IPv4-mapped
    ("http://[2002:7f00:1::]/", "loopback"),  # 6to4 of 127.0.0.1
    ("http://localhost/", "loopback"),
    ("http://LOCALHOST.:9000/", "loopback"),
    ("http://hooks.localhost/", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("http://[::ffff:a9fe:a9fe]/", "cloud metadata"),  # 169.254.169.254, mapped
    ("http://[64:ff9b::a9fe:a9fe]/", "cloud metadata"),  # NAT64
    ("http://[fd00:ec2::254]/", "cloud metadata"),
    ("http://100.100.100.200/", "cloud metadata"),
    ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata"),
    ("http://metadata.google.internal./", "cloud metadata"),
    ("http://10.1.2.3/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://[::ffff:c0a8:101]/", "private"),  # 192.168.1.1, mapped
    ("http://[2002:c0a8:101::1]/", "private"),  # 192.168.1.1, 6to4
    ("http://100.64.0.1/", "shared (carrier-grade NAT)"),
    ("http://169.254.1.1/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fc00::1]/", "unique-local"),
    ("http://224.0.0.1/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://0/", "unspecified"),
    ("http://[::]/", "unspecified"),
    ("http://255.255.255.255/", "reserved"),
    ("http://240.0.0.1/", "reserved"),
    ("http://[::127.0.0.1]/", "reserved"),  # IPv4-compatible
]


class FakeDns:
    """A resolver with fixed answers that records what it was asked (DNS cannot be served
    from loopback to the system resolver, so name-based cases use this)."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self.answers:
            raise OSError(f"{host}: no such name")
        return self.answers[host]


@dataclass
class Rig:
    rt: Runtime
    clock: FakeClock
    dispatcher: Watcher
    worker: Worker

    async def create(self, url: str, *, max_attempts: int = 3, **action: Any) -> str:
        view, _ = await self.rt.service.create_job("alice", JobSpec(
            action={"type": "webhook", "url": url, **action},
            params=JobParams(type="immediate"),
            retry_policy=RetryPolicy(max_attempts=max_attempts, backoff_seconds=1)))
        return view.job.job_id

    async def fire(self, job_id: str) -> JobRun:
        """Dispatch what is due, let the worker handle it, return the job's latest run."""
        await self.dispatcher.refresh_shards()
        await self.dispatcher.run_once()
        await self.worker.run_once()
        return (await self.rt.service.list_runs("alice", job_id)).items[0]


RigFactory = Callable[..., Awaitable[Rig]]


@pytest.fixture
async def make_rig(tmp_path: Path) -> AsyncIterator[RigFactory]:
    """``make_rig(allow, worker_allow=..., http=...)``: jobs are validated under ``allow``;
    the worker calls out under ``worker_allow`` (default: the same), or through ``http``."""
    made: list[Rig] = []

    async def make(allow: str = "", *, worker_allow: str | None = None,
                   http: httpx.AsyncClient | None = None) -> Rig:
        clock = FakeClock(START)
        settings = Settings(database_url=f"sqlite:///{tmp_path}/rig{len(made)}.db",
                            egress_allow=allow)
        rt = await Runtime.open(settings, clock)
        worker_settings = settings.model_copy(
            update={"egress_allow": allow if worker_allow is None else worker_allow})
        rig = Rig(rt=rt, clock=clock,
                  dispatcher=Watcher(rt.store, rt.queue, clock, settings, rt.metrics, "d1"),
                  worker=Worker(rt.store, rt.queue, clock, worker_settings, rt.actions,
                                rt.metrics, http=http))
        made.append(rig)
        return rig

    yield make
    for rig in made:
        await rig.worker.aclose()
        await rig.rt.close()


@dataclass
class Servers:
    started: list[ScriptedServer] = field(default_factory=list)

    def __call__(self, routes: dict[str, Route], **options: Any) -> ScriptedServer:
        server = ScriptedServer(routes, **options).start()
        self.started.append(server)
        return server


@pytest.fixture
def serve() -> Iterator[Servers]:
    """``serve({path: route}, bind=..., tls=...)``: a scripted server, stopped after the test."""
    servers = Servers()
    yield servers
    for server in servers.started:
        server.stop()


# --- the engine with a model and news feeds (prompt and model-digest tests) -------------------
ModelEngineFactory = Callable[..., Awaitable[Engine]]


@pytest.fixture
async def model_engine(tmp_path: Path) -> AsyncIterator[ModelEngineFactory]:
    """``model_engine(llm_url, feeds={topic: {language: [url]}}, **settings)``: the engine of
    tests/engine on a fresh SQLite file, with the model at ``llm_url`` (None: no model) and a
    deployment feeds file naming ``feeds``. Loopback is NOT allowlisted unless the settings
    say so (``egress_allow=LOOPBACK_ALLOW``): the model is reached because it is trusted."""
    made: list[Engine] = []

    async def make(llm_url: str | None, *, feeds: dict[str, Any] | None = None,
                   **settings: Any) -> Engine:
        if feeds is not None:
            path = tmp_path / f"feeds{len(made)}.json"
            path.write_text(json.dumps(feeds), "utf-8")
            settings["news_feeds_file"] = str(path)
        if llm_url is not None:
            settings.update(llm_base_url=llm_url, llm_model="test-model",
                            llm_api_key="sk-test")
        full = Settings(database_url=f"sqlite:///{tmp_path}/model{len(made)}.db",
                        visibility_timeout=30, misfire_grace=60, **settings)
        clock = FakeClock(START)
        rt = await Runtime.open(full, clock)
        engine = Engine.on(rt, clock, full)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        await engine.worker.aclose()
        await engine.rt.close()


def closed_port() -> int:
    """A loopback port nothing listens on (a model that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
