"""`onthedot parse` (offline) and `onthedot chat` (against a running server)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from onthedot.config import Settings
from tests.api.live import LiveServer, live_server
from tests.chat.conftest import NEWS, TZ
from tests.cli.test_cli import assert_one_line_error, run_cli


def test_parse_prints_job_params_task_and_three_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "parse", NEWS, "--now", "2026-06-22T10:00",
                             "--timezone", TZ)
    assert code == 0, err
    assert json.loads(out) == {
        "job_params": {"type": "recurring", "schedule": "0 8 * * *", "timezone": TZ},
        "task": "總結財經新聞",
        "matched": "每天早上八點",
        "next_runs": ["2026-06-23T00:00:00Z", "2026-06-24T00:00:00Z", "2026-06-25T00:00:00Z"],
    }


def test_parse_english_one_time(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "parse", "remind me to call mom tomorrow at 3pm",
                           "--now", "2026-06-22T10:00:00+08:00", "--timezone", TZ)
    result = json.loads(out)
    assert code == 0
    assert result["job_params"] == {"type": "one-time", "time": "2026-06-23T15:00:00+08:00",
                                    "timezone": TZ}
    assert result["task"] == "call mom"
    assert result["next_runs"] == ["2026-06-23T07:00:00Z"]


def test_parse_uses_the_default_timezone(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONTHEDOT_DEFAULT_TIMEZONE", "Europe/London")
    code, out, _ = run_cli(capsys, "parse", "every day at noon", "--now", "2026-06-22T10:00")
    assert code == 0
    assert json.loads(out)["next_runs"][0] == "2026-06-22T11:00:00Z"


@pytest.mark.parametrize(("args", "fragments"), [
    (["parse", "總結財經新聞"], ["總結財經新聞"]),
    (["parse", "每週八提醒我", "--timezone", TZ], ["field 每週八"]),
    (["parse", "every day at 8am", "--timezone", "Mars/Base"], ["--timezone", "Mars/Base"]),
    (["parse", "every day at 8am", "--now", "yesterday-ish"], ["--now", "ISO 8601"]),
    (["parse"], ["TEXT"]),
])
def test_parse_failures_are_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                     fragments: list[str]) -> None:
    code, out, err = run_cli(capsys, *args)
    assert out == ""
    assert_one_line_error(code, err, *fragments)


@pytest.fixture
def server(tmp_path: object) -> Iterator[LiveServer]:
    with live_server(Settings(database_url=f"sqlite:///{tmp_path}/chat-cli.db",
                              default_timezone=TZ)) as live:
        yield live


def test_chat_command(capsys: pytest.CaptureFixture[str], server: LiveServer) -> None:
    code, out, err = run_cli(capsys, "chat", NEWS, "--url", server.url)
    assert code == 0, err
    reply, job_line = out.strip().splitlines()
    assert reply.startswith("好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，")
    assert job_line.split()[1:3] == ["scheduled", "news_digest"]
    code, out, err = run_cli(capsys, "chat", "remind me to call mom tomorrow at 3pm",
                             "--url", server.url)
    assert code == 0, err
    reply, job_line = out.strip().splitlines()
    assert reply.startswith("OK, scheduled a reminder “call mom” for ")  # the real clock's day
    assert reply.endswith(" 15:00 (Asia/Taipei).")
    assert job_line.split()[1:3] == ["scheduled", "message"]
    code, out, _ = run_cli(capsys, "chat", "every weekday at 9am stand up", "--dry-run",
                           "--json", "--url", server.url)
    assert code == 0
    assert json.loads(out)["jobs"] == []
    assert json.loads(out)["action"] == {"type": "message", "text": "stand up"}
    code, out, err = run_cli(capsys, "chat", "每週八提醒我喝水", "--url", server.url)
    assert_one_line_error(code, err, "422 could_not_understand", "field 每週八")


def test_mcp_command_refuses_a_bad_user(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "mcp", "--user", "bad user!")
    assert_one_line_error(code, err, "invalid user name")
