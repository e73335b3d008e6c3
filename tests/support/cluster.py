"""Real servers and role processes for failure tests and benchmarks.

* ``PgCluster``: a private PostgreSQL cluster (initdb into a temporary directory, started on a
  free loopback port with trust auth) that a test may stop and restart without disturbing the
  shared server. As root, initdb refuses to run, so the server runs as the ``postgres`` OS user.
* ``NatsCluster``: N nats-server processes with JetStream, routed into one cluster on loopback
  ports; ``wait_ready`` waits for a JetStream meta leader that sees every peer.
* ``Fleet``: onthedot roles started through the real CLI (``python -m onthedot.cli <role>``),
  each its own OS process with its own log, killed by PID at teardown.

Everything waits on deadline-based conditions (a log line appears, a cluster reports its
leader), never on fixed sleeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from tests.support.procs import RoleProcess
from tests.support.waiting import wait_until

SHARED_PG_DSN = os.environ.get("ONTHEDOT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
SHARED_NATS_URL = os.environ.get("ONTHEDOT_TEST_NATS_URL", "nats://127.0.0.1:4222")
PG_USER = "postgres"  # the OS user a root test runs the private cluster as
PG_START_TIMEOUT = 60  # seconds, pg_ctl -t
NATS_BINARY_CANDIDATES = ("nats-server", "/usr/sbin/nats-server", "/usr/local/bin/nats-server")
TCP_ESTABLISHED = "01"  # the st column of /proc/net/tcp
API_LISTEN_RE = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")

# A child process that creates jobs through the service layer (the API's own validation and
# the same store transaction, without HTTP), so bulk set-up does not compete with the test
# process for its one core. Reads a JSON list of REST request bodies; prints the seconds taken.
JOB_MAKER = """
import asyncio, json, sys, time
from datetime import datetime, timedelta, timezone
from onthedot.api.models import JobCreate
from onthedot.config import Settings
from onthedot.runtime import Runtime

async def main(path, user, concurrency):
    bodies = json.load(open(path))
    runtime = await Runtime.open(Settings())
    try:
        pending = iter(bodies)
        async def client():
            for body in pending:
                params = body["job_params"]
                soon = datetime.now(timezone.utc) + timedelta(seconds=1)
                if (params.get("type") == "one-time"
                        and datetime.fromisoformat(params["time"]) < soon):
                    params["time"] = soon.isoformat()  # created later than planned: due now
                spec = JobCreate.model_validate(body).to_spec(runtime.settings.default_timezone)
                await runtime.service.create_job(user, spec)
        started = time.monotonic()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        print(time.monotonic() - started)
    finally:
        await runtime.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


# --- ports ---------------------------------------------------------------------------------
def free_port() -> int:
    """A loopback port that was free a moment ago (the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tcp_peer_ports(pid: int) -> set[int]:
    """Remote ports of the established loopback TCP connections process ``pid`` holds (Linux:
    its socket inodes from /proc/<pid>/fd, looked up in /proc/<pid>/net/tcp). Tells which
    servers a process is connected to right now, whatever it logs."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:["):-1])
    ports = set()
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == TCP_ESTABLISHED and fields[9] in inodes:
                ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


# --- PostgreSQL ----------------------------------------------------------------------------
def pg_bin_dir() -> Path | None:
    """The newest installed PostgreSQL server binaries (Debian layout), or pg_ctl on PATH."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    if found:
        return found[-1].parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


@dataclass
class PgCluster:
    """A private cluster: ``create()`` runs initdb and picks a port, ``start()``/``stop()``/
    ``restart()`` drive pg_ctl, ``destroy()`` stops it and removes its files."""

    bin_dir: Path
    base: Path  # owned by the server's OS user; holds data/, the socket and the log
    port: int
    as_user: list[str]  # command prefix that runs a binary as the server's OS user

    @classmethod
    def create(cls) -> PgCluster:
        bin_dir = pg_bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL server binaries (pg_ctl, initdb) not found")
        # Not under pytest's tmp_path: its parents are private to root, so the postgres user
        # could not reach a data directory there.
        base = Path(tempfile.mkdtemp(prefix="onthedot-pg-"))
        as_user: list[str] = []
        if os.geteuid() == 0:
            entry = pwd.getpwnam(PG_USER)
            os.chown(base, entry.pw_uid, entry.pw_gid)
            as_user = ["runuser", "-u", PG_USER, "--"]
        cluster = cls(bin_dir=bin_dir, base=base, port=free_port(), as_user=as_user)
        cluster._run("initdb", "-D", str(cluster.data), "-U", "postgres", "-A", "trust",
                     "-E", "UTF8", "--locale=C", "--no-sync")
        return cluster

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def log_path(self) -> Path:
        return self.base / "server.log"

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, binary: str, *args: str) -> None:
        command = [*self.as_user, str(self.bin_dir / binary), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{binary} failed ({done.returncode}): {done.stderr.strip()}\n"
                               f"{self.log()[-2000:]}")

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories={self.base} -c max_connections=200 "
                   "-c fsync=off -c full_page_writes=off")  # a throwaway test cluster
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log_path), "-w",
                  "-t", str(PG_START_TIMEOUT), "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", str(PG_START_TIMEOUT),
                  "-m", mode, "stop")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def destroy(self) -> None:
        try:
            if self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def new_schema() -> str:
    return f"f_{secrets.token_hex(6)}"


def drop_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@dataclass(frozen=True)
class Deployment:
    """Where one test's onthedot lives: a database schema and a NATS stream prefix."""

    database_url: str
    schema: str
    queue_url: str
    prefix: str

    def settings(self) -> dict[str, object]:
        return {"database_url": self.database_url, "database_schema": self.schema,
                "queue_url": self.queue_url, "queue_prefix": self.prefix}


# --- NATS ----------------------------------------------------------------------------------
def nats_binary() -> str | None:
    for candidate in NATS_BINARY_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    return None


@dataclass
class NatsNode:
    name: str
    port: int
    cluster_port: int
    http_port: int
    config: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def monitor(self, endpoint: str) -> dict[str, Any] | None:
        """A monitoring endpoint (``jsz``, ``connz``, ...), or None if the node does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/{endpoint}",
                                        timeout=1) as reply:
                answer: dict[str, Any] = json.loads(reply.read())
                return answer
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def jsz(self) -> dict[str, Any] | None:
        return self.monitor("jsz")

    def clients(self, name: str) -> int:
        """How many client connections named ``name`` this node holds."""
        connz = self.monitor("connz?limit=1024") or {}
        return sum(c.get("name") == name for c in connz.get("connections") or [])


@dataclass
class NatsCluster:
    """``size`` JetStream servers routed into one cluster, each with its own store directory."""

    base: Path
    binary: str
    nodes: list[NatsNode] = field(default_factory=list)

    @classmethod
    def create(cls, base: Path, size: int = 3, name: str = "otd") -> NatsCluster:
        binary = nats_binary()
        if binary is None:
            raise RuntimeError("nats-server binary not found")
        base.mkdir(parents=True, exist_ok=True)
        ports = [(free_port(), free_port(), free_port()) for _ in range(size)]
        cluster = cls(base=base, binary=binary)
        for i, (port, cluster_port, http_port) in enumerate(ports):
            routes = ", ".join(f"nats-route://127.0.0.1:{c}"
                               for j, (_p, c, _h) in enumerate(ports) if j != i)
            config = base / f"n{i}.conf"
            config.write_text(
                f'server_name: "{name}-n{i}"\n'
                f"listen: 127.0.0.1:{port}\n"
                f"http: 127.0.0.1:{http_port}\n"
                f'jetstream {{ store_dir: "{base / f"store-n{i}"}" }}\n'
                f"cluster {{\n  name: {name}\n  listen: 127.0.0.1:{cluster_port}\n"
                f"  routes: [{routes}]\n}}\n")
            cluster.nodes.append(NatsNode(f"{name}-n{i}", port, cluster_port, http_port, config))
        return cluster

    @property
    def url(self) -> str:
        """Every node, comma-separated (the form ``ONTHEDOT_QUEUE_URL`` takes)."""
        return ",".join(n.url for n in self.nodes)

    def start(self) -> None:
        for i, node in enumerate(self.nodes):
            if not node.alive():
                log = open(self.base / f"n{i}.log", "ab")  # noqa: SIM115 - the child keeps it
                node.proc = subprocess.Popen([self.binary, "-c", str(node.config)],
                                             stdout=log, stderr=subprocess.STDOUT)
                log.close()

    def _ready(self) -> bool:
        """Every live node names the same meta leader, and the leader sees every other node
        as a current peer."""
        metas: dict[str, dict[str, Any]] = {}
        for node in self.nodes:
            if node.alive():
                info = node.jsz()
                meta = info.get("meta_cluster") if info else None
                if not isinstance(meta, dict) or not meta.get("leader"):
                    return False
                metas[node.name] = meta
        leaders = {str(m["leader"]) for m in metas.values()}
        if len(leaders) != 1 or (leader := leaders.pop()) not in metas:
            return False
        peers = metas[leader].get("replicas") or []
        assert isinstance(peers, list)
        return len(peers) == len(self.nodes) - 1 and all(p.get("current") for p in peers)

    def wait_ready(self, within: float = 30) -> None:
        """Every live node knows a meta leader, and the leader sees every peer."""
        wait_until(self._ready, within, "the JetStream cluster to elect a meta leader")

    def kill(self, index: int) -> None:
        proc = self.nodes[index].proc
        if proc is not None:
            _kill(proc)

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc is not None:
                if node.proc.poll() is None:
                    node.proc.send_signal(signal.SIGTERM)
                try:
                    node.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    _kill(node.proc)

    def log(self, index: int) -> str:
        path = self.base / f"n{index}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def new_prefix() -> str:
    return f"f{secrets.token_hex(5)}"


# --- onthedot roles ------------------------------------------------------------------------
@dataclass
class Fleet:
    """Role processes started through the CLI with one set of ``ONTHEDOT_*`` settings. Every
    process ever started is remembered and SIGKILLed (by PID) at ``close()``."""

    logs: Path
    settings: dict[str, object]
    started: list[RoleProcess] = field(default_factory=list)
    killed: list[RoleProcess] = field(default_factory=list)
    _count: int = 0

    def env(self, **extra: object) -> dict[str, str]:
        # One OS process per started role (ONTHEDOT_PROCESSES=1): these tests kill, count and
        # scrape processes one by one; the supervisor of several is tested on its own
        # (tests/cli/test_serve_processes.py).
        merged = {"processes": 1, **self.settings, **extra}
        return {**os.environ, **{f"ONTHEDOT_{k.upper()}": str(v) for k, v in merged.items()}}

    def start(self, role: str, **extra: object) -> RoleProcess:
        """``role`` is a CLI command: api, watcher, worker, recurring or serve."""
        self._count += 1
        log_path = self.logs / f"{role}-{self._count}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "onthedot.cli", role],
                                    env=self.env(**extra), stdout=log, stderr=subprocess.STDOUT)
        started = RoleProcess(roles=role, proc=proc, log_path=log_path)
        self.started.append(started)
        return started

    def start_api(self, within: float = 30, **extra: object) -> tuple[RoleProcess, str]:
        """An ``onthedot api`` process on a port the OS picks; returns it and its base URL."""
        # INFO: the "listening on" line is how we learn the port.
        api = self.start("api", **{"port": 0, "host": "127.0.0.1", **extra, "log_level": "INFO"})
        found: list[str] = []

        def listening() -> bool:
            if not api.alive():
                raise AssertionError(f"the API process exited:\n{api.log()[-3000:]}")
            match = API_LISTEN_RE.search(api.log())
            if match:
                found.append(match.group(1))
            return bool(match)

        wait_until(listening, within, "the API process to listen")
        return api, f"http://127.0.0.1:{found[0]}"

    def migrate(self, within: float = 60) -> None:
        """``onthedot migrate``: the schema and the streams exist before processes race to
        create them."""
        done = subprocess.run([sys.executable, "-m", "onthedot.cli", "migrate"], env=self.env(),
                              capture_output=True, text=True, timeout=within, check=False)
        if done.returncode != 0:
            raise AssertionError(f"onthedot migrate failed:\n{done.stderr[-3000:]}")

    def create_jobs(self, bodies: list[dict[str, object]], user: str = "local",
                    concurrency: int = 16, within: float = 600) -> float:
        """Create jobs from REST request bodies through the service layer in a child process
        (in list order, ``concurrency`` at a time); returns the seconds the creation took. A
        one-time job whose time passed while the list was being created (a slow machine) is
        made due now instead of failing."""
        self._count += 1
        path = self.logs / f"jobs-{self._count}.json"
        path.write_text(json.dumps(bodies))
        done = subprocess.run([sys.executable, "-c", JOB_MAKER, str(path), user,
                               str(concurrency)], env=self.env(), capture_output=True,
                              text=True, timeout=within, check=False)
        if done.returncode != 0:
            raise AssertionError(f"creating jobs failed:\n{done.stderr[-3000:]}")
        return float(done.stdout.strip().splitlines()[-1])

    def running(self, role: str) -> list[RoleProcess]:
        return [p for p in self.started if p.roles == role and p.alive()]

    def kill(self, proc: RoleProcess) -> None:
        """SIGKILL one process (by its PID) and remember that we did."""
        _kill(proc.proc)
        self.killed.append(proc)

    def wait_logged(self, proc: RoleProcess, text: str, within: float = 30) -> None:
        def logged() -> bool:
            if not proc.alive():
                raise AssertionError(f"{proc.roles} exited:\n{proc.log()[-3000:]}")
            return text in proc.log()

        wait_until(logged, within, f"{proc.roles} to log {text!r}")

    def unexpected_exits(self) -> list[RoleProcess]:
        """Processes that ended without our ``kill``: a crash, or a role that gave up."""
        return [p for p in self.started if not p.alive() and p not in self.killed]

    def stop_all(self, grace: float = 20) -> dict[str, int | None]:
        """SIGTERM every live process, wait up to ``grace`` seconds, SIGKILL the rest. Returns
        the exit code of each (None: it had to be killed), by log file name."""
        live = [p for p in self.started if p.alive()]
        for p in live:
            p.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        codes: dict[str, int | None] = {}
        for p in live:
            try:
                codes[p.log_path.name] = p.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(p.proc)
                codes[p.log_path.name] = None
        return codes

    def close(self) -> None:
        for p in self.started:
            _kill(p.proc)


@contextlib.contextmanager
def fleet(logs: Path, **settings: object) -> Iterator[Fleet]:
    logs.mkdir(parents=True, exist_ok=True)
    running = Fleet(logs=logs, settings=settings)
    try:
        yield running
    finally:
        running.close()
