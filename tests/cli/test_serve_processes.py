"""``onthedot serve --processes 2`` as real processes on SQLite and PostgreSQL: one supervisor,
two children that both accept on the one port, every job's webhook called once, a child
SIGKILLed is replaced while the port keeps answering, SIGTERM stops them all within the grace,
each child's metrics on its own port, and start-up failures still end in one line, exit 2."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from onthedot.supervisor import Supervisor, SupervisorError
from tests.cli.test_cli import assert_one_line_error, run_cli
from tests.cli.test_serve import onthedot_command
from tests.support.cluster import SHARED_PG_DSN, drop_schema, new_schema, tcp_peer_ports
from tests.support.dying_child import exit_at_start
from tests.support.waiting import wait_until
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver

pytestmark = pytest.mark.slow
SHARED = re.compile(r"processes will share (http://127\.0\.0\.1:(\d+))")
GRACE_SECONDS = 3
JOBS = 12


@dataclass
class Supervised:
    proc: subprocess.Popen[bytes]
    log_path: Path
    url: str = ""
    metrics_port: int = 0

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def children(self) -> set[int]:
        """The live serving children (not multiprocessing's resource tracker), from /proc."""
        found = set()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text()
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == self.proc.pid and state != "Z" and b"spawn_main" in cmdline:
                found.add(int(proc.name))
        return found

    def wait_ready(self, times: int = 1) -> None:
        wait_until(lambda: self.log().count("processes are ready") >= times
                   or self.proc.poll() is not None, 60, "every child to be ready")
        assert self.proc.poll() is None, self.log()


def gone(pid: int) -> bool:
    """Ended: no such process, or a zombie nobody reaped yet (an orphan's init may be slow)."""
    try:
        return (Path(f"/proc/{pid}") / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def pair_of_free_ports() -> int:
    """A port p with p and p + 1 both free a moment ago."""
    for _ in range(100):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port: int = first.getsockname()[1]
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise AssertionError("no two adjacent free ports")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":
        yield {"ONTHEDOT_DATABASE_URL": f"sqlite:///{tmp_path}/procs.db"}
        return
    schema = new_schema()
    try:
        yield {"ONTHEDOT_DATABASE_URL": SHARED_PG_DSN, "ONTHEDOT_DATABASE_SCHEMA": schema,
               "ONTHEDOT_PARTITION_AHEAD_DAYS": "1", "ONTHEDOT_PARTITION_FAR_MONTHS": "0",
               "ONTHEDOT_DATABASE_POOL_SIZE": "4"}
    finally:
        drop_schema(SHARED_PG_DSN, schema)


def start(tmp_path: Path, args: list[str], **env: str) -> Supervised:
    full = {k: v for k, v in os.environ.items() if not k.startswith("ONTHEDOT_")}
    full.update({"ONTHEDOT_SHUTDOWN_GRACE": str(GRACE_SECONDS), "ONTHEDOT_LOG_LEVEL": "INFO",
                 "ONTHEDOT_EGRESS_ALLOW": LOOPBACK_ALLOW, "ONTHEDOT_WORKERS": "8", **env})
    log_path = tmp_path / "supervisor.log"
    with open(log_path, "wb") as log:
        # A session of its own: a test can signal the whole group, as a terminal's Ctrl-C does.
        proc = subprocess.Popen([*onthedot_command(), *args], env=full, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return Supervised(proc, log_path)


@pytest.fixture
def served(tmp_path: Path, database_env: dict[str, str]) -> Iterator[Supervised]:
    metrics = pair_of_free_ports()
    sup = start(tmp_path, ["serve", "--port", "0", "--processes", "2"],
                ONTHEDOT_METRICS_PORT=str(metrics), **database_env)
    try:
        sup.wait_ready()
        match = SHARED.search(sup.log())
        assert match, sup.log()
        sup.url, sup.metrics_port = match.group(1), metrics
        yield sup
    finally:
        if sup.proc.poll() is None:
            sup.proc.kill()  # the children follow it (PR_SET_PDEATHSIG)
            sup.proc.wait(timeout=10)


def served_by(sup: Supervised, port: int, children: set[int]) -> tuple[socket.socket, int]:
    """A new keep-alive connection that got an answer, and the child that accepted it."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    assert conn.recv(4096).startswith(b"HTTP/1.1 200"), sup.log()
    mine = conn.getsockname()[1]
    owners = [pid for pid in children if mine in tcp_peer_ports(pid)]
    assert len(owners) == 1, (owners, children)
    return conn, owners[0]


def test_two_children_share_the_port_and_run_each_job_once(served: Supervised) -> None:
    children = served.children()
    assert len(children) == 2, served.log()
    port = int(served.url.rsplit(":", 1)[1])
    seen: set[int] = set()
    conns: list[socket.socket] = []
    try:
        def both_accept() -> bool:
            conn, pid = served_by(served, port, children)
            conns.append(conn)  # held open, so the next one is a new connection
            seen.add(pid)
            return seen == children

        wait_until(both_accept, 30, "both children to accept a connection")
    finally:
        for conn in conns:
            conn.close()

    # Child i serves its own /metrics on ONTHEDOT_METRICS_PORT + i.
    for metrics in (served.metrics_port, served.metrics_port + 1):
        scraped = httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=5)
        assert scraped.status_code == 200, metrics
        assert "onthedot_" in scraped.text

    receiver = WebhookReceiver().start()
    try:
        with httpx.Client(base_url=served.url, timeout=10) as http:
            ids = []
            for i in range(JOBS):
                created = http.post("/v1/jobs", json={
                    "name": f"once {i}", "action": {"type": "webhook", "url": receiver.url},
                    "job_params": {"type": "immediate"}})
                assert created.status_code == 201, created.text
                ids.append(created.json()["job_id"])

            def all_succeeded() -> bool:
                return all([r["status"] for r in http.get(f"/v1/jobs/{j}/runs").json()["runs"]]
                           == ["SUCCEEDED"] for j in ids)

            wait_until(all_succeeded, 30, "every job's run to succeed")
        assert receiver.count() == JOBS, receiver.received
        assert set(receiver.keys.values()) == {1}, receiver.keys
    finally:
        receiver.stop()

    # kill -9 of the supervisor is kill -9 of all (PR_SET_PDEATHSIG): no orphan keeps serving.
    served.proc.kill()
    served.proc.wait(timeout=10)
    wait_until(lambda: all(gone(pid) for pid in children), 10,
               "the children to die with their supervisor")


def test_a_killed_child_is_replaced_and_sigterm_stops_all(served: Supervised) -> None:
    before = served.children()
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    served.wait_ready(times=2)  # the replacement is ready: every slot is again
    after = served.children()
    assert len(after) == 2, served.log()
    assert victim not in after
    assert after - before  # a new process took the victim's place
    assert "exited unexpectedly with code -9" in served.log()
    assert httpx.get(f"{served.url}/healthz", timeout=5).status_code == 200

    served.proc.send_signal(signal.SIGTERM)
    code = served.proc.wait(timeout=2 * GRACE_SECONDS + 10)
    assert code == 0, served.log()
    assert all(gone(pid) for pid in after), served.log()
    assert "Traceback" not in served.log()


def test_ctrl_c_to_the_whole_group_is_one_graceful_stop(tmp_path: Path) -> None:
    sup = start(tmp_path, ["serve", "--port", "0", "--processes", "2"],
                ONTHEDOT_DATABASE_URL=f"sqlite:///{tmp_path}/ctrl-c.db")
    try:
        sup.wait_ready()
        children = sup.children()
        # The children get SIGINT from the terminal and SIGTERM from the supervisor, and here
        # a second Ctrl-C while they drain: one graceful stop each, not uvicorn's forced exit
        # on a second SIGINT, and not a death the supervisor would answer.
        os.killpg(sup.proc.pid, signal.SIGINT)
        wait_until(lambda: sup.log().count("Shutting down") == 2, 20, "both to drain")
        os.killpg(sup.proc.pid, signal.SIGINT)
        assert sup.proc.wait(timeout=2 * GRACE_SECONDS + 10) == 0, sup.log()
    finally:
        if sup.proc.poll() is None:
            sup.proc.kill()
            sup.proc.wait(timeout=10)
    log = sup.log()
    for pid in children:
        assert f"(pid {pid}) stopped with code 0" in log, log
    assert "unexpectedly" not in log
    assert "Traceback" not in log
    assert log.count("Application shutdown complete") == 2, log


def test_a_bad_setting_is_one_line_before_any_child(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    code, _out, err = run_cli(capsys, "serve", "--processes", "2", "--port", "0",
                              "--database-url", "mysql://nowhere/db")
    assert_one_line_error(code, err, "unsupported database url")
    code, _out, err = run_cli(capsys, "worker", "--processes", "0", "--database-url",
                              f"sqlite:///{tmp_path}/x.db")
    assert_one_line_error(code, err, "ONTHEDOT_PROCESSES")


def test_busy_metrics_port_is_one_line_before_any_child(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        monkeypatch.setenv("ONTHEDOT_METRICS_PORT", str(port))
        code, _out, err = run_cli(capsys, "worker", "--processes", "2", "--database-url",
                                  f"sqlite:///{tmp_path}/m.db")
    assert_one_line_error(code, err, f"cannot serve metrics on 127.0.0.1:{port}")
    assert "started process" not in err


def test_an_unusable_feeds_file_is_one_line_before_any_child(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("ONTHEDOT_NEWS_FEEDS_FILE", str(tmp_path / "missing.json"))
    code, _out, err = run_cli(capsys, "worker", "--processes", "2", "--database-url",
                              f"sqlite:///{tmp_path}/f.db")
    assert_one_line_error(code, err, "cannot read the news feeds file")


def test_children_that_die_at_start_end_the_supervisor() -> None:
    supervisor = Supervisor(2, exit_at_start, (), stop_seconds=1)
    with pytest.raises(SupervisorError, match=r"exited with code 2 before it was ready, 3 times"):
        supervisor.run()
