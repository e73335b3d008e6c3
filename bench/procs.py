"""The systems under test as child processes, and the backends they run on.

Every onthedot process is the real command line (``onthedot serve``, ``onthedot worker``, ...)
in its own OS process, configured only through ``ONTHEDOT_*`` variables, so what is measured is
what an operator runs. Each configuration gets backends of its own — a fresh SQLite file, or a
fresh PostgreSQL schema and NATS stream prefix — removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.tinyhttp import Connection

METRICS_AT = re.compile(r"metrics on http://[^\s]+:(\d+)/metrics")

PG_DSN = os.environ.get("ONTHEDOT_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
NATS_URL = os.environ.get("ONTHEDOT_BENCH_NATS_URL", "nats://127.0.0.1:4222")
REDIS_URL = os.environ.get("ONTHEDOT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
LOOPBACK_ALLOW = "127.0.0.1"  # the webhook receiver listens on loopback
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0
ONTHEDOT = [sys.executable, "-c", "import sys; from onthedot.cli import main; sys.exit(main())"]


class Unavailable(Exception):
    """A configuration this build cannot run (e.g. a server that refuses to start)."""


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    # An ``onthedot serve`` of several processes (ONTHEDOT_PROCESSES): each one's own /metrics
    # port (the API port's /metrics answers for whichever process took the connection).
    metrics_ports: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def last_line(self) -> str:
        lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines()
                 if ln.strip()]
        return lines[-1].strip() if lines else f"exit code {self.proc.returncode}"

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_SECONDS)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not end within the timeout."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.kill()


def spawn(name: str, argv: list[str], logs: Path, env: Mapping[str, str] | None = None) -> Child:
    log_path = logs / f"{name}-{secrets.token_hex(2)}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Child(name, proc, log_path)


def spawn_listening(name: str, argv: list[str], logs: Path,
                    env: Mapping[str, str] | None = None) -> tuple[Child, int]:
    """A child that prints ``listening PORT`` as its first line (the tiny servers); its
    stderr goes to its log."""
    log_path = logs / f"{name}-{secrets.token_hex(2)}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                                stderr=log, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().split()
    if len(line) != 2 or line[0] != "listening":
        proc.kill()
        raise RuntimeError(f"{name} did not start: {log_path.read_text(errors='replace')}")
    return Child(name, proc, log_path), int(line[1])


def tiny_server(mode: str, logs: Path) -> tuple[Child, int]:
    return spawn_listening(f"tiny-{mode}", [sys.executable, "-m", "bench.tinyhttp", mode], logs)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- backends --------------------------------------------------------------------------------
@dataclass
class Backend:
    """Where one onthedot configuration keeps its data: ``env`` is its ONTHEDOT_* settings."""

    name: str
    label: str
    env: dict[str, str]
    schema: str | None = None
    prefix: str | None = None
    cleaned: bool = field(default=False, repr=False)

    def settings_env(self, **extra: object) -> dict[str, str]:
        return {**self.env, **{f"ONTHEDOT_{k.upper()}": str(v) for k, v in extra.items()}}

    async def cleanup(self) -> None:
        if self.cleaned:
            return
        self.cleaned = True
        if self.schema:
            import psycopg
            from psycopg import sql

            async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
                await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(self.schema)))
        if self.prefix:
            from onthedot.queue.nats import delete_streams

            await delete_streams(NATS_URL, self.prefix)


CONFIG_LABELS = {"sqlite": "SQLite", "pg+nats": "PostgreSQL + NATS", "pg": "PostgreSQL alone"}


def make_backend(name: str, folder: Path) -> Backend:
    tag = secrets.token_hex(3)
    # ONTHEDOT_QUEUE_URL from the caller's environment must not leak into a configuration.
    base = {"ONTHEDOT_QUEUE_URL": "", "ONTHEDOT_EGRESS_ALLOW": LOOPBACK_ALLOW}
    if name == "sqlite":
        return Backend(name, CONFIG_LABELS[name], {
            **base, "ONTHEDOT_DATABASE_URL": f"sqlite:///{folder}/onthedot-{tag}.db"})
    if name in ("pg+nats", "pg"):
        schema = f"bench_{tag}"
        env = {**base, "ONTHEDOT_DATABASE_URL": PG_DSN, "ONTHEDOT_DATABASE_SCHEMA": schema}
        prefix = None
        if name == "pg+nats":
            prefix = f"bench{tag}"
            env |= {"ONTHEDOT_QUEUE_URL": NATS_URL, "ONTHEDOT_QUEUE_PREFIX": prefix}
        return Backend(name, CONFIG_LABELS[name], env, schema=schema, prefix=prefix)
    raise SystemExit(f"unknown configuration {name!r}: sqlite | pg+nats | pg")


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment of a child: ours plus ``env``, where an empty value means "unset" (an
    empty ONTHEDOT_QUEUE_URL would not be "unset" to the settings parser)."""
    drop = {k for k, v in env.items() if v == ""}
    return {k: v for k, v in {**os.environ, **env}.items() if k not in drop}


def spawn_onthedot(name: str, args: list[str], logs: Path, env: Mapping[str, str]) -> Child:
    log_path = logs / f"{name}-{secrets.token_hex(2)}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(ONTHEDOT + args, env=child_env(env), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Child(name, proc, log_path)


async def wait_http(child: Child, port: int, path: str = "/healthz") -> None:
    """Until the child answers ``path`` with 200; Unavailable if it exits first."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if not child.alive():
            raise Unavailable(child.last_line())
        conn = Connection("127.0.0.1", port)
        try:
            if (await conn.request("GET", path)).status == 200:
                return
        except OSError:
            pass
        finally:
            await conn.close()
        await asyncio.sleep(0.1)
    child.kill()
    raise Unavailable(f"{child.name} did not answer {path} within {START_TIMEOUT_SECONDS:.0f} s")


async def wait_log(child: Child, needle: str, within: float = START_TIMEOUT_SECONDS) -> None:
    """Until the child's log holds ``needle``; Unavailable if it exits first."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if needle in child.log_path.read_text(errors="replace"):
            return
        if not child.alive():
            raise Unavailable(child.last_line())
        await asyncio.sleep(0.05)
    raise Unavailable(f"{child.name} did not log {needle!r} within {within:.0f} s")


@contextlib.asynccontextmanager
async def onthedot_serve(backend: Backend, logs: Path, **settings: object
                         ) -> AsyncIterator[tuple[Child, int]]:
    """``onthedot serve`` on a free port; yields (child, port), stops it afterwards."""
    port = free_port()
    # metrics_port 0: every process of a supervisor serves its /metrics on a free port
    env = backend.settings_env(port=port, **{"metrics_port": 0, **settings})
    child = spawn_onthedot(f"serve-{backend.name}", ["serve"], logs, env)
    try:
        await wait_http(child, port)
        if "processes will share" in child.log_path.read_text(errors="replace"):
            # ONTHEDOT_PROCESSES > 1: measure once every process serves, not the first alone
            await wait_log(child, "processes are ready")
            child.metrics_ports = [int(p) for p in METRICS_AT.findall(
                child.log_path.read_text(errors="replace"))]
        yield child, port
    finally:
        child.stop()
