"""The CLI does what the API does: jobs update, dead letters, jobs run --wait, webhook details,
retry/timeout/misfire, the jobs table, --json everywhere; bad input is one line and exit 2.

Every client test talks to a real server on loopback; the ones that need runs to execute start
it with the watcher and a worker, and a real webhook receiver stands in for the outside world.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from onthedot.config import Settings
from tests.api.live import LiveServer, live_server
from tests.cli.test_cli import assert_one_line_error, closed_port, run_cli
from tests.support.waiting import wait_until
from tests.support.webhook import LOOPBACK_ALLOW, Received, WebhookReceiver

Capsys = pytest.CaptureFixture[str]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    """An API only: nothing executes, so what the CLI sent is all there is to see."""
    with live_server(Settings(database_url=f"sqlite:///{tmp_path}/cli.db")) as live:
        yield live


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    hook = WebhookReceiver().start()
    try:
        yield hook
    finally:
        hook.stop()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LiveServer]:
    """API, watcher and worker: runs really execute (loopback webhooks allowed)."""
    settings = Settings(database_url=f"sqlite:///{tmp_path}/engine.db", tick_seconds=0.2,
                        egress_allow=LOOPBACK_ALLOW)
    with live_server(settings, roles=("watcher", "worker")) as live:
        yield live


def ok_json(capsys: Capsys, *args: str) -> Any:
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    return json.loads(out)


# --- bad input: one line, exit 2, and nothing sent --------------------------------------------
# The URL is a closed port: an argument that slipped through to a request would fail with
# "cannot connect" instead of the fragment expected.
@pytest.mark.parametrize(("args", "fragments"), [
    (["jobs", "create", "--now", "--webhook", "https://example.com/h", "--body", "{bad"],
     ["--body", "not valid JSON"]),
    (["jobs", "create", "--now", "--webhook", "https://example.com/h", "--body", "NaN"],
     ["--body", "not valid JSON"]),
    (["jobs", "create", "--now", "--webhook", "https://example.com/h", "--body", "@/nonexistent"],
     ["--body", "cannot read /nonexistent"]),
    (["jobs", "create", "--now", "--webhook", "https://example.com/h", "--header", "NoColon"],
     ["--header", "'Name: value'"]),
    (["jobs", "create", "--now", "--webhook", "https://example.com/h", "--header", "Bad Name: x"],
     ["--header", "not a header"]),
    (["jobs", "create", "--now", "--webhook", "https://example.com/h", "--header", "X-A: 1",
      "--header", "x-a: 2"], ["--header", "given twice"]),
    (["jobs", "create", "--now", "--message", "hi", "--method", "PUT"],
     ["--method", "give --webhook URL"]),
    (["jobs", "create", "--now", "--webhook", "https://example.com/h", "--method", "TRACE"],
     ["--method"]),
    (["jobs", "create", "--in", "soon", "--message", "hi"], ["--in", "not a duration"]),
    (["jobs", "create", "--in", "10s", "--at", "2030-01-01T00:00:00Z", "--message", "hi"],
     ["--at, --in"]),
    (["jobs", "create", "--in", "99999999999d", "--message", "hi"], ["--in", "too far"]),
    (["jobs", "create", "--in", "3000000d", "--message", "hi"], ["--in", "too far"]),
    (["jobs", "create", "--in", "99999999999999999999", "--message", "hi"], ["--in", "too far"]),
    (["jobs", "create", "--in", "", "--message", "hi"], ["--in", "not a duration"]),
    (["jobs", "create", "--now", "--message", "hi", "--retries", "-1"], ["--retries"]),
    (["jobs", "create", "--now", "--message", "hi", "--retries", "100"], ["--retries"]),
    (["jobs", "create", "--now", "--message", "hi", "--timeout", "0"], ["--timeout"]),
    (["jobs", "create", "--now", "--message", "hi", "--misfire", "later"], ["--misfire"]),
    (["jobs", "update", "J1"], ["nothing to change"]),
    (["jobs", "update", "J1", "--timezone", "Mars/Base"], ["unknown timezone"]),
    (["jobs", "update", "J1", "--cron", "0 8 * * *", "--rrule", "FREQ=DAILY"],
     ["--cron, --rrule"]),
    (["jobs", "update", "J1", "--body", "{}"], ["--body", "give --webhook URL"]),
    (["jobs", "run", "J1", "--timeout", "5"], ["--timeout goes with --wait"]),
    (["jobs", "run", "J1", "--wait", "--timeout", "-1"], ["--timeout"]),
    (["dead-letters", "redrive"], ["RUN_ID"]),
    (["dead-letters", "list", "--page-size", "0"], ["--page-size"]),
])
def test_bad_input_is_one_line_exit_2_before_any_request(capsys: Capsys, args: list[str],
                                                         fragments: list[str]) -> None:
    code, _out, err = run_cli(capsys, *args, "--url", f"http://127.0.0.1:{closed_port()}")
    assert_one_line_error(code, err, *fragments)


def test_unknown_ids_are_the_servers_404_in_one_line(capsys: Capsys,
                                                     server: LiveServer) -> None:
    url = ["--url", server.url]
    missing = "01KDVDNA002NWG9HD4ZCQRTWMY"
    for args in (["jobs", "update", missing, "--name", "x"],
                 ["jobs", "update", missing, "--cron", "0 8 * * *"],
                 ["jobs", "run", missing, "--wait"],
                 ["jobs", "delete", missing, "--json"],
                 ["dead-letters", "redrive", missing]):
        code, _out, err = run_cli(capsys, *args, *url)
        assert_one_line_error(code, err, "404 not_found")


def test_the_servers_refusals_are_one_line(capsys: Capsys, server: LiveServer) -> None:
    url = ["--url", server.url]
    job = ok_json(capsys, "jobs", "create", "--cron", "0 8 * * *", "--message", "hi", *url)
    code, _out, err = run_cli(capsys, "jobs", "update", job["job_id"], "--cron", "99 8 * * *",
                              *url)
    assert_one_line_error(code, err, "422 invalid_schedule", "field job_params.schedule")
    code, _out, err = run_cli(capsys, "jobs", "create", "--now", "--webhook",
                              "http://10.0.0.1/hook", *url)
    assert_one_line_error(code, err, "egress_refused", "field action.url")
    run = ok_json(capsys, "jobs", "run", job["job_id"], *url)
    code, _out, err = run_cli(capsys, "dead-letters", "redrive", run["run_id"], *url)
    assert_one_line_error(code, err, "409 not_dead_letter")


# --- create and update: what the flags send ---------------------------------------------------
def test_create_maps_webhook_and_policy_flags_to_the_api(capsys: Capsys, server: LiveServer,
                                                         tmp_path: Path) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text('{"topic": "財經", "n": [1, 2]}', encoding="utf-8")
    job = ok_json(capsys, "jobs", "create", "--name", "news", "--cron", "0 8 * * *",
                  "--timezone", "Asia/Taipei", "--webhook", "https://example.com/hooks/news",
                  "--method", "put", "--header", "X-Note: abc: def",
                  "--header", "X-Trace:1", "--body", f"@{payload}", "--retries", "4",
                  "--timeout", "12.5", "--misfire", "skip", "--url", server.url)
    assert job["action"] == {"type": "webhook", "url": "https://example.com/hooks/news",
                             "method": "PUT",
                             "headers": {"X-Note": "abc: def", "X-Trace": "1"},
                             "body": {"topic": "財經", "n": [1, 2]}}
    assert job["retry_policy"]["max_attempts"] == 5
    assert (job["timeout_seconds"], job["misfire_policy"]) == (12.5, "skip")

    inline = ok_json(capsys, "jobs", "create", "--now", "--webhook", "https://example.com/h",
                     "--body", '"just a string"', "--url", server.url)
    assert inline["action"]["body"] == "just a string"
    assert "method" not in inline["action"]  # not given: the server's default (POST)


def test_create_in_a_duration_is_a_one_time_job_that_far_ahead(capsys: Capsys,
                                                              server: LiveServer) -> None:
    before = datetime.now(UTC)
    job = ok_json(capsys, "jobs", "create", "--in", "1h30m", "--message", "tea",
                  "--url", server.url)
    after = datetime.now(UTC)
    assert job["job_params"]["type"] == "one-time"
    due = datetime.fromisoformat(job["next_run_at"])
    span = timedelta(hours=1, minutes=30)
    assert before + span - timedelta(seconds=1) <= due <= after + span


def test_update_sends_only_what_is_given(capsys: Capsys, server: LiveServer) -> None:
    url = ["--url", server.url]
    job = ok_json(capsys, "jobs", "create", "--name", "news", "--cron", "0 8 * * *",
                  "--timezone", "Asia/Taipei", "--message", "read the news", "--retries", "4",
                  "--timeout", "30", "--misfire", "skip", *url)
    job_id = job["job_id"]

    def same_except(new: dict[str, Any], old: dict[str, Any], *changed: str) -> None:
        ignore = {"updated_at", "next_run_at", "schedule_words", *changed}
        assert {k: v for k, v in new.items() if k not in ignore} == {
            k: v for k, v in old.items() if k not in ignore}

    renamed = ok_json(capsys, "jobs", "update", job_id, "--name", "早報", *url)
    assert renamed["name"] == "早報"
    same_except(renamed, job, "name")

    # A new schedule keeps the job's own timezone (the API alone would use the server's).
    moved = ok_json(capsys, "jobs", "update", job_id, "--cron", "30 9 * * *", *url)
    assert moved["job_params"]["schedule"] == "30 9 * * *"
    assert moved["job_params"]["timezone"] == "Asia/Taipei"
    assert moved["next_run_at"].endswith("01:30:00Z")  # 09:30 in Taipei
    same_except(moved, renamed, "job_params")

    # --timezone alone moves the same schedule to another zone.
    zoned = ok_json(capsys, "jobs", "update", job_id, "--timezone", "Europe/London", *url)
    assert (zoned["job_params"]["schedule"], zoned["job_params"]["timezone"]) == (
        "30 9 * * *", "Europe/London")

    # --retries changes max_attempts only; the backoff stays.
    retried = ok_json(capsys, "jobs", "update", job_id, "--retries", "0", "--timeout", "5",
                      *url)
    assert retried["retry_policy"] == {**zoned["retry_policy"], "max_attempts": 1}
    assert retried["timeout_seconds"] == 5
    same_except(retried, zoned, "retry_policy", "timeout_seconds")

    hooked = ok_json(capsys, "jobs", "update", job_id, "--webhook", "https://example.com/v2",
                     "--method", "PATCH", "--header", "X-Mode: Bearer t",
                     "--body", '{"v": 2}', "--misfire", "run_late", *url)
    assert hooked["action"] == {"type": "webhook", "url": "https://example.com/v2",
                                "method": "PATCH", "headers": {"X-Mode": "Bearer t"},
                                "body": {"v": 2}}
    assert hooked["misfire_policy"] == "run_late"
    same_except(hooked, retried, "action", "misfire_policy")

    once = ok_json(capsys, "jobs", "update", job_id, "--in", "2h", "--message", "once", *url)
    assert once["job_params"]["type"] == "one-time"
    assert once["job_params"]["timezone"] == "Europe/London"
    assert once["action"] == {"type": "message", "text": "once"}


# --- the jobs table ----------------------------------------------------------------------------
def test_jobs_list_shows_schedule_in_words_next_run_and_last_result(
        capsys: Capsys, engine: LiveServer) -> None:
    url = ["--url", engine.url]
    daily = ok_json(capsys, "jobs", "create", "--name", "news", "--cron", "0 8 * * *",
                    "--timezone", "Asia/Taipei", "--message", "read", *url)
    once = ok_json(capsys, "jobs", "create", "--name", "tea", "--in", "1h", "--message", "tea",
                   *url)
    code, _out, err = run_cli(capsys, "jobs", "run", daily["job_id"], "--wait", *url)
    assert code == 0, err

    code, out, _err = run_cli(capsys, "jobs", "list", *url)
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["JOB_ID", "NAME", "STATUS", "SCHEDULE", "NEXT_RUN_AT",
                              "LAST_RESULT"]
    by_id = {row.split()[0]: row for row in rows}
    assert "every day at 08:00 (Asia/Taipei)" in by_id[daily["job_id"]]
    assert daily["next_run_at"] in by_id[daily["job_id"]]
    assert "SUCCEEDED: " in by_id[daily["job_id"]]
    assert '"message": "read"' in by_id[daily["job_id"]]
    assert f"once at {once['job_params']['time']}" in by_id[once["job_id"]]
    assert by_id[once["job_id"]].rstrip().endswith(" -")  # no run yet


def test_jobs_list_on_a_terminal_is_a_rich_table(capsys: Capsys, server: LiveServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    job = ok_json(capsys, "jobs", "create", "--cron", "0 8 * * *", "--message", "x",
                  "--url", server.url)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "120")  # rich sizes the table to the terminal
    code, out, err = run_cli(capsys, "jobs", "list", "--url", server.url)
    assert code == 0, err
    assert "SCHEDULE" in out
    assert job["job_id"] in out
    assert "every day at 08:00" in out
    assert "\x1b[" in out  # drawn for a terminal: the header is bold


# --- jobs run --wait ---------------------------------------------------------------------------
def test_run_wait_prints_the_output_of_a_finished_run(capsys: Capsys,
                                                      engine: LiveServer) -> None:
    url = ["--url", engine.url]
    job = ok_json(capsys, "jobs", "create", "--name", "tea", "--cron", "0 8 * * *",
                  "--message", "Tea is ready", *url)
    code, out, err = run_cli(capsys, "jobs", "run", job["job_id"], "--wait", "--timeout", "60",
                             *url)
    assert (code, err) == (0, "")
    assert json.loads(out) == {"message": "Tea is ready", "job": "tea"}

    code, out, err = run_cli(capsys, "jobs", "run", job["job_id"], "--wait", "--json", *url)
    assert code == 0, err
    run = json.loads(out)
    assert (run["status"], run["job_id"], run["kind"]) == ("SUCCEEDED", job["job_id"], "manual")
    # The server agrees that the run ended.
    runs = ok_json(capsys, "jobs", "runs", job["job_id"], "--json", *url)["runs"]
    assert {r["run_id"]: r["status"] for r in runs}[run["run_id"]] == "SUCCEEDED"


def test_webhook_flags_failure_dead_letters_and_redrive(capsys: Capsys, engine: LiveServer,
                                                        receiver: WebhookReceiver) -> None:
    url = ["--url", engine.url]
    answer = {"status": 500}
    receiver.status_for = lambda _r, _n: answer["status"]
    job = ok_json(capsys, "jobs", "create", "--name", "hook", "--cron", "0 8 * * *",
                  "--webhook", receiver.url, "--method", "PUT", "--header", "X-Api-Key: k1",
                  "--body", '{"topic": "finance"}', "--retries", "0", "--timeout", "10", *url)

    code, out, err = run_cli(capsys, "jobs", "run", job["job_id"], "--wait", *url)
    assert code == 1, err
    assert out == ""
    line = err.strip()
    assert len(err.strip().splitlines()) == 1
    assert line.startswith("run ")
    assert " FAILED (attempt 1)" in line
    assert "500" in line
    run_id = line.split()[1]

    got: Received = receiver.received[0]
    assert (got.method, got.body, got.headers["x-api-key"]) == ("PUT", {"topic": "finance"},
                                                               "k1")
    assert got.idempotency_key

    code, out, _err = run_cli(capsys, "dead-letters", "list", *url)
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["RUN_ID", "JOB_ID", "FINISHED_AT", "ATTEMPTS", "ERROR"]
    assert [row.split()[:2] for row in rows] == [[run_id, job["job_id"]]]
    listed = ok_json(capsys, "dead-letters", "list", "--json", *url)
    assert [(d["run_id"], d["status"]) for d in listed["dead_letters"]] == [(run_id, "FAILED")]

    answer["status"] = 200
    code, out, err = run_cli(capsys, "dead-letters", "redrive", run_id, *url)
    assert code == 0, err
    assert out.startswith(f"redriven {run_id} (job {job['job_id']}): ")

    def run_status() -> str:
        runs = ok_json(capsys, "jobs", "runs", job["job_id"], "--json", *url)["runs"]
        return str({r["run_id"]: r["status"] for r in runs}[run_id])

    wait_until(lambda: run_status() == "SUCCEEDED", 30, "the redriven run to succeed")
    assert ok_json(capsys, "dead-letters", "list", "--json", *url)["dead_letters"] == []
    code, _out, err = run_cli(capsys, "dead-letters", "redrive", run_id, "--json", *url)
    assert_one_line_error(code, err, "409 not_dead_letter")


def test_run_wait_timeout_is_one_line_and_the_run_goes_on(capsys: Capsys, engine: LiveServer,
                                                          receiver: WebhookReceiver) -> None:
    url = ["--url", engine.url]
    receiver.hold_all = True  # the webhook answers only when released
    job = ok_json(capsys, "jobs", "create", "--cron", "0 8 * * *", "--webhook", receiver.url,
                  "--timeout", "30", *url)
    try:
        code, out, err = run_cli(capsys, "jobs", "run", job["job_id"], "--wait",
                                 "--timeout", "0.5", *url)
        assert code == 124
        assert out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("onthedot: error: run ")
        assert "has not ended after 0.5s" in lines[0]
        assert f"onthedot jobs runs {job['job_id']}" in lines[0]
    finally:
        receiver.release()


# --- --json everywhere -------------------------------------------------------------------------
def test_every_client_command_takes_json(capsys: Capsys, engine: LiveServer,
                                         tmp_path: Path) -> None:
    url = ["--url", engine.url]
    job = ok_json(capsys, "jobs", "create", "--cron", "0 8 * * *", "--message", "hi", "-q",
                  "--json", *url)
    job_id = job["job_id"]  # --json wins over -q
    assert ok_json(capsys, "jobs", "get", job_id, "--json", *url)["job_id"] == job_id
    assert ok_json(capsys, "jobs", "update", job_id, "--name", "n", "--json", *url)["name"] == "n"
    assert ok_json(capsys, "jobs", "pause", job_id, "--json", *url)["status"] == "paused"
    assert ok_json(capsys, "jobs", "resume", job_id, "--json", *url)["status"] == "scheduled"
    assert ok_json(capsys, "jobs", "list", "--json", *url)["jobs"][0]["job_id"] == job_id
    run = ok_json(capsys, "jobs", "run", job_id, "--json", *url)
    assert run["kind"] == "manual"
    assert ok_json(capsys, "jobs", "run", job_id, "--wait", "--json", *url)["status"] == (
        "SUCCEEDED")
    assert len(ok_json(capsys, "jobs", "runs", job_id, "--json", *url)["runs"]) >= 2
    assert ok_json(capsys, "dead-letters", "list", "--json", *url) == {
        "dead_letters": [], "next_page_token": None}

    def inbox() -> list[dict[str, Any]]:
        return list(ok_json(capsys, "inbox", "--json", *url)["items"])

    wait_until(lambda: len(inbox()) >= 1, 30, "a delivered inbox item")
    item = inbox()[0]
    read = ok_json(capsys, "inbox", "read", item["item_id"], "--json", *url)
    assert (read["item_id"], read["read"]) == (item["item_id"], True)

    lines = tmp_path / "jobs.jsonl"
    lines.write_text(
        '{"action": {"type": "message", "text": "a"}, "job_params": {"type": "immediate"}}\n'
        '{"action": {"type": "message", "text": "b"}, "job_params": {"type": "recurring", '
        '"schedule": "99 8 * * *"}}\n', encoding="utf-8")
    code, out, err = run_cli(capsys, "jobs", "import", str(lines), "--json", *url)
    assert (code, err) == (1, "")
    summary = json.loads(out)
    assert {k: summary[k] for k in ("total", "created", "existed", "refused")} == {
        "total": 2, "created": 1, "existed": 0, "refused": 1}
    assert summary["problems"][0]["line"] == 2
    assert summary["problems"][0]["problem"]["code"] == "invalid_schedule"

    parsed = ok_json(capsys, "parse", "every day at 8am", "--json")
    assert parsed["job_params"]["type"] == "recurring"

    cancelled = ok_json(capsys, "jobs", "delete", job_id, "--json", *url)
    assert (cancelled["job_id"], cancelled["status"]) == (job_id, "cancelled")
