"""`onthedot parse` (offline) and `onthedot chat` (against a running server)."""

from __future__ import annotations

import io
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
    assert reply.endswith(" 15:00 (Asia/Taipei), delivered to your inbox.")
    assert job_line.split()[1:3] == ["scheduled", "message"]
    code, out, _ = run_cli(capsys, "chat", "every weekday at 9am stand up", "--dry-run",
                           "--json", "--url", server.url)
    assert code == 0
    assert json.loads(out)["jobs"] == []
    assert json.loads(out)["action"] == {"type": "message", "text": "stand up"}
    code, out, err = run_cli(capsys, "chat", "每週八提醒我喝水", "--url", server.url)
    assert_one_line_error(code, err, "422 could_not_understand", "field 每週八")


def seed_task(capsys: pytest.CaptureFixture[str], server: LiveServer, name: str) -> str:
    code, out, err = run_cli(capsys, "jobs", "create", "--name", name, "--cron", "0 9 * * *",
                             "--message", name, "-q", "--url", server.url)
    assert code == 0, err
    return out.strip()


def status_of(capsys: pytest.CaptureFixture[str], server: LiveServer, job_id: str) -> str:
    code, out, err = run_cli(capsys, "jobs", "get", job_id, "--url", server.url)
    assert code == 0, err
    status: str = json.loads(out)["status"]
    return status


def test_chat_asks_before_deleting(capsys: pytest.CaptureFixture[str], server: LiveServer,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    water = seed_task(capsys, server, "喝水")
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, out, err = run_cli(capsys, "chat", "刪除喝水提醒", "--url", server.url)
    assert code == 0, err
    question, answer = out.strip().splitlines()
    assert question.startswith("確定要刪除「喝水」嗎？")
    assert "Confirm? [y/N]" in err
    assert answer == "好的，沒有做任何變更。"
    assert status_of(capsys, server, water) == "scheduled"

    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no answer at all is no
    code, out, err = run_cli(capsys, "chat", "刪除喝水提醒", "--url", server.url)
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "好的，沒有做任何變更。"
    assert status_of(capsys, server, water) == "scheduled"

    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, err = run_cli(capsys, "chat", "刪除喝水提醒", "--url", server.url)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[1] == "好的，已刪除「喝水」。"
    assert lines[2].split()[:2] == [water, "cancelled"]
    assert status_of(capsys, server, water) == "cancelled"


def test_chat_yes_confirms_without_asking(capsys: pytest.CaptureFixture[str],
                                         server: LiveServer) -> None:
    standup = seed_task(capsys, server, "standup")
    code, out, err = run_cli(capsys, "chat", "move the standup reminder to 7am", "--yes",
                             "--url", server.url)
    assert code == 0, err
    assert "Confirm?" not in err
    question, done, job_line = out.strip().splitlines()
    assert question.startswith("Change “standup” from every day at 09:00 (Asia/Taipei) to "
                               "every day at 07:00 (Asia/Taipei)?")
    assert done.startswith("OK, “standup” now runs every day at 07:00 (Asia/Taipei)")
    assert job_line.split()[:2] == [standup, "scheduled"]


def test_chat_confirm_flag_answers_an_earlier_question(capsys: pytest.CaptureFixture[str],
                                                       server: LiveServer,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    backup = seed_task(capsys, server, "backup")
    code, out, err = run_cli(capsys, "chat", "delete the backup reminder", "--dry-run",
                             "--json", "--url", server.url)
    assert code == 0, err
    assert json.loads(out)["confirmation_token"] is None  # a dry run asks nothing
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not answered here: no, for now
    code, out, err = run_cli(capsys, "chat", "delete the backup reminder", "--json",
                             "--url", server.url)
    assert code == 0, err
    question, end = json.JSONDecoder().raw_decode(out)
    assert json.loads(out[end:])["reply"] == "OK, nothing was changed."
    token = question["confirmation_token"]
    code, out, err = run_cli(capsys, "chat", "--confirm", token, "--url", server.url)
    assert code == 0, err
    assert out.splitlines()[0] == "OK, deleted “backup”."
    assert status_of(capsys, server, backup) == "cancelled"
    code, out, err = run_cli(capsys, "chat", "--confirm", token, "--url", server.url)
    assert_one_line_error(code, err, "409 confirmation_stale", "field confirm")
    code, _, err = run_cli(capsys, "chat", "--url", server.url)
    assert_one_line_error(code, err, "MESSAGE")


def test_chat_asks_which_one_then_confirms(capsys: pytest.CaptureFixture[str],
                                           server: LiveServer,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    seed_task(capsys, server, "喝水")
    seed_task(capsys, server, "喝水")  # two tasks with one name
    monkeypatch.setattr("sys.stdin", io.StringIO("2\ny\n"))
    code, out, err = run_cli(capsys, "chat", "刪除喝水提醒", "--json", "--url", server.url)
    assert code == 0, err
    decoder = json.JSONDecoder()
    answers, at = [], 0
    while out[at:].strip():
        answer, end = decoder.raw_decode(out[at:].lstrip())
        at = len(out) - len(out[at:].lstrip()) + end
        answers.append(answer)
    which, question, done = answers
    assert "Which one?" in err
    assert "Confirm? [y/N]" in err
    assert which["needs_choice"]
    second = which["candidates"][1]["job_id"]
    assert question["candidates"][0]["job_id"] == second
    assert question["needs_confirmation"]
    assert done["jobs"][0]["job_id"] == second
    assert status_of(capsys, server, second) == "cancelled"
    assert status_of(capsys, server, which["candidates"][0]["job_id"]) == "scheduled"


def test_chat_lists_and_runs(capsys: pytest.CaptureFixture[str], server: LiveServer) -> None:
    backup = seed_task(capsys, server, "backup")
    code, out, err = run_cli(capsys, "chat", "what tasks do I have?", "--url", server.url)
    assert code == 0, err
    assert out.splitlines()[:2] == ["You have 1 task(s):", out.splitlines()[1]]
    assert out.splitlines()[1].startswith("1. “backup” every day at 09:00 (Asia/Taipei)")
    code, out, err = run_cli(capsys, "chat", "run the backup task now", "--url", server.url)
    assert code == 0, err
    reply, job_line, run_line = out.strip().splitlines()
    assert reply.startswith("OK, running “backup” now")
    assert job_line.split()[0] == backup
    assert run_line.split()[0] == "run"


def test_mcp_command_refuses_a_bad_user(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "mcp", "--user", "bad user!")
    assert_one_line_error(code, err, "invalid user name")
