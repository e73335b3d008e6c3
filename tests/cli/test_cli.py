"""The command line: administration commands, the API client, and one-line errors (exit 2)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from onthedot.api.auth import hash_token
from onthedot.cli import main
from onthedot.config import Settings
from onthedot.runtime import build_store
from tests.api.live import LiveServer, live_server


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("onthedot: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.db"


@pytest.fixture
def server(db_url: str) -> Iterator[LiveServer]:
    with live_server(Settings(database_url=db_url)) as live:
        yield live


# --- bad input: one line, exit 2, never a traceback --------------------------------------
@pytest.mark.parametrize(("args", "fragments"), [
    (["frobnicate"], ["No such command"]),
    (["jobs", "create", "--bogus"], ["--bogus"]),
    (["jobs", "create", "--message", "hi"], ["exactly one of --cron"]),
    (["jobs", "create", "--now", "--cron", "0 8 * * *", "--message", "hi"], ["--cron, --now"]),
    (["jobs", "create", "--now"], ["--message TEXT or --webhook URL"]),
    (["jobs", "create", "--at", "tomorrow-ish", "--message", "hi"], ["--at", "ISO 8601"]),
    (["jobs", "create", "--now", "--timezone", "Mars/Base", "--message", "hi"],
     ["unknown timezone"]),
    (["jobs", "list", "--page-size", "500"], ["--page-size"]),
    (["token", "create"], ["--user"]),
    (["token", "create", "--user", "bad name!"], ["invalid user name"]),
    (["serve", "--port", "eighty"], ["--port"]),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                          fragments: list[str]) -> None:
    code, _out, err = run_cli(capsys, *args)
    assert_one_line_error(code, err, *fragments)


def test_connection_refused_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    code, _out, err = run_cli(capsys, "jobs", "list", "--url", url)
    assert_one_line_error(code, err, "cannot connect", url)


def test_bad_setting_from_the_environment_is_one_line(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONTHEDOT_WORKERS", "many")
    code, _out, err = run_cli(capsys, "migrate")
    assert_one_line_error(code, err, "ONTHEDOT_WORKERS")


def test_public_bind_without_tokens_is_refused(capsys: pytest.CaptureFixture[str],
                                               db_url: str) -> None:
    code, _out, err = run_cli(capsys, "serve", "--host", "0.0.0.0", "--port", "0",
                              "--database-url", db_url)
    assert_one_line_error(code, err, "refusing to listen on 0.0.0.0", "token create")


def test_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _out, err = run_cli(capsys, "api", "--port", str(port), "--database-url", db_url)
    assert_one_line_error(code, err, f"cannot listen on 127.0.0.1:{port}")


def test_the_installed_command_never_prints_a_traceback(tmp_path: Path) -> None:
    for args in (["jobs", "create", "--now", "--message", "hi", "--url",
                  f"http://127.0.0.1:{closed_port()}"],
                 ["jobs", "get"],
                 ["serve", "--host", "0.0.0.0", "--database-url",
                  f"sqlite:///{tmp_path}/sub.db"]):
        proc = subprocess.run([sys.executable, "-m", "onthedot.cli", *args], capture_output=True,
                              text=True, timeout=60, env={**os.environ, "ONTHEDOT_LOG_LEVEL":
                                                          "WARNING"})
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(capsys, "--help")
    assert code == 0
    for command in ("serve", "api", "migrate", "token", "jobs", "watcher", "worker",
                    "recurring", "rescuer"):
        assert command in out
    code, out, _err = run_cli(capsys, "--version")
    assert code == 0
    assert "onthedot" in out


# --- administration ----------------------------------------------------------------------
def test_a_process_with_another_shard_count_is_one_line_and_exit_2(
        capsys: pytest.CaptureFixture[str], db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _out, err = run_cli(capsys, "migrate", "--database-url", db_url)
    assert code == 0, err
    monkeypatch.setenv("ONTHEDOT_SHARDS", "64")

    code, _out, err = run_cli(capsys, "migrate", "--database-url", db_url)

    assert_one_line_error(code, err, "set up with 32 shards", "ONTHEDOT_SHARDS=64")


def test_migrate_and_token_create(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    code, out, _err = run_cli(capsys, "migrate", "--database-url", db_url)
    assert code == 0
    assert out.startswith("database migrated from schema version 0 to "), out
    assert "(applied 0001, 0002," in out
    code, out, _err = run_cli(capsys, "migrate", "--database-url", db_url)
    assert code == 0
    assert out.startswith("database is up to date at schema version "), out
    code, out, err = run_cli(capsys, "token", "create", "--user", "alice",
                             "--database-url", db_url)
    assert code == 0, err
    token = out.strip()
    assert token.startswith("otd_")
    assert "\n" not in token
    assert "cannot be shown again" in err

    async def lookup() -> tuple[str | None, str | None]:
        store = build_store(Settings(database_url=db_url))
        try:
            return (await store.token_user(hash_token(token)),
                    await store.token_user(token))  # the token itself is not stored
        finally:
            await store.close()

    assert asyncio.run(lookup()) == ("alice", None)


# --- the API client against a real server ------------------------------------------------
def test_jobs_commands_against_a_server(capsys: pytest.CaptureFixture[str],
                                        server: LiveServer) -> None:
    url = ["--url", server.url]
    code, out, err = run_cli(capsys, "jobs", "create", "--now", "--message", "hi", *url)
    assert code == 0, err
    job = json.loads(out)
    job_id = job["job_id"]
    assert (job["action"], job["job_params"]["type"]) == ({"type": "message", "text": "hi"},
                                                           "immediate")

    code, out, err = run_cli(capsys, "jobs", "create", "--name", "news", "--cron", "0 8 * * *",
                             "--timezone", "Asia/Taipei", "--webhook", "https://example.com/h",
                             "-q", *url)
    assert code == 0, err
    news_id = out.strip()

    code, out, _err = run_cli(capsys, "jobs", "list", *url)
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split() == ["JOB_ID", "NAME", "STATUS", "SCHEDULE", "NEXT_RUN_AT",
                                "LAST_RESULT"]
    assert [line.split()[0] for line in lines[1:]] == [news_id, job_id]

    code, out, _err = run_cli(capsys, "jobs", "list", "--json", "--all", "--page-size", "1",
                              *url)
    assert [j["job_id"] for j in json.loads(out)["jobs"]] == [news_id, job_id]

    code, out, _err = run_cli(capsys, "jobs", "get", news_id, *url)
    assert json.loads(out)["job_params"]["timezone"] == "Asia/Taipei"
    code, out, _err = run_cli(capsys, "jobs", "pause", news_id, *url)
    assert json.loads(out)["status"] == "paused"
    code, out, _err = run_cli(capsys, "jobs", "resume", news_id, *url)
    assert json.loads(out)["status"] == "scheduled"
    code, out, _err = run_cli(capsys, "jobs", "skip-next", news_id, *url)
    skipped = json.loads(out)
    assert (skipped["skipped"]["status"], skipped["job"]["status"]) == ("SKIPPED", "scheduled")
    assert skipped["job"]["next_run_at"] > skipped["skipped"]["scheduled_at"]
    code, _out, err = run_cli(capsys, "jobs", "skip-next", job_id, *url)  # not recurring
    assert_one_line_error(code, err, "not_recurring")
    # The news runs at 00:00 UTC (08:00 Taipei): none between 01:00 and 12:00 yesterday.
    yesterday = datetime.now(UTC).replace(hour=0, minute=0, second=0,
                                          microsecond=0) - timedelta(days=1)
    code, out, err = run_cli(capsys, "jobs", "backfill", news_id, "--from",
                             (yesterday + timedelta(hours=1)).isoformat(), "--to",
                             (yesterday + timedelta(hours=12)).isoformat(), *url)
    assert (code, out.strip()) == (0, "no occurrence in that range"), err
    code, _out, err = run_cli(capsys, "jobs", "backfill", news_id, "--from",
                              (yesterday - timedelta(days=200)).isoformat(), "--to",
                              yesterday.isoformat(), *url)
    assert_one_line_error(code, err, "too_many_runs")
    code, out, _err = run_cli(capsys, "jobs", "run", news_id, *url)
    assert json.loads(out)["kind"] == "manual"
    code, out, _err = run_cli(capsys, "jobs", "runs", news_id, *url)
    assert code == 0
    assert len(out.strip().splitlines()) == 4
    code, out, _err = run_cli(capsys, "jobs", "runs", news_id, "--json", *url)
    runs = json.loads(out)["runs"]
    assert [r["status"] for r in runs[:2]] == ["PENDING", "SKIPPED"]  # then the run-now run
    assert runs[2]["kind"] == "manual"
    code, out, _err = run_cli(capsys, "jobs", "delete", news_id, *url)
    assert (code, out.strip()) == (0, f"deleted {news_id}")


def test_server_problems_are_one_line(capsys: pytest.CaptureFixture[str],
                                      server: LiveServer) -> None:
    url = ["--url", server.url]
    code, _out, err = run_cli(capsys, "jobs", "create", "--cron", "99 8 * * *", "--message",
                              "hi", *url)
    assert_one_line_error(code, err, "422 invalid_schedule", "field job_params.schedule")
    code, _out, err = run_cli(capsys, "jobs", "create", "--at", "2020-01-01T00:00:00Z",
                              "--message", "hi", *url)
    assert_one_line_error(code, err, "time_in_past")
    code, _out, err = run_cli(capsys, "jobs", "get", "01KDVDNA002NWG9HD4ZCQRTWMY", *url)
    assert_one_line_error(code, err, "404 not_found")


def test_token_from_the_environment(capsys: pytest.CaptureFixture[str], server: LiveServer,
                                    db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _err = run_cli(capsys, "token", "create", "--user", "alice",
                              "--database-url", db_url)
    token = out.strip()
    code, _out, err = run_cli(capsys, "jobs", "list", "--url", server.url)
    assert_one_line_error(code, err, "401 missing_token")
    monkeypatch.setenv("ONTHEDOT_TOKEN", token)
    monkeypatch.setenv("ONTHEDOT_URL", server.url)
    code, out, err = run_cli(capsys, "jobs", "create", "--now", "--message", "hi", "-q")
    assert code == 0, err
    job_id = out.strip()
    code, out, _err = run_cli(capsys, "jobs", "list", "--json")
    assert [j["job_id"] for j in json.loads(out)["jobs"]] == [job_id]
