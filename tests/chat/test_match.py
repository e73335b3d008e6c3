"""chat.match (which task the words name), chat.confirm (the signed confirmation token) and
keeping a recurring task's days when only a new time of day is said."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from onthedot.chat.confirm import Confirmation, issue, verify
from onthedot.chat.manage import at_time_of_day
from onthedot.chat.match import best_matches, task_words, words
from onthedot.domain.models import JobParams

TASKS = {
    "water": ("喝水", {"type": "message", "text": "記得喝水"}),
    "coffee": ("喝咖啡", {"type": "message", "text": "喝咖啡"}),
    "sport": ("每週運動", {"type": "message", "text": "去運動"}),
    "backup": ("backup task", {"type": "message", "text": "run the backup"}),
    "call": ("call mom", {"type": "message", "text": "call mom"}),
    "call_trip": ("call mom about the trip",
                  {"type": "message", "text": "call mom about the trip"}),
    "plants": ("water the plants", {"type": "message", "text": "water the plants"}),
    "drink": ("drink water", {"type": "message", "text": "drink water"}),
    "news": ("總結財經新聞", {"type": "news_digest", "topic": "finance", "language": "zh-Hant"}),
    "meeting": ("週會", {"type": "message", "text": "開週會"}),
}


def named(target: str) -> list[str]:
    return best_matches(target, [(key, task_words(name, action))
                                 for key, (name, action) in TASKS.items()])


@pytest.mark.parametrize(("target", "found"), [
    ("每週的運動提醒", ["sport"]),  # time words and 提醒 name nothing
    ("那个运动提醒", ["sport"]),  # Simplified finds Traditional
    ("那個喝水提醒", ["water"]),
    ("喝水", ["water"]),
    ("喝", ["water", "coffee"]),  # one shared character: a question, not a guess
    ("the backup task", ["backup"]),
    ("tomorrow's call reminder", ["call", "call_trip"]),
    ("the call mom reminder", ["call"]),  # the exact name wins the tie
    ("the daily water reminder", ["plants", "drink"]),
    ("drink water", ["drink"]),
    ("the news digest", ["news"]),
    ("財經新聞", ["news"]),
    ("财经新闻摘要", ["news"]),
    ("the finance digest", ["news"]),
    ("開會", ["meeting"]),  # 開 and 會 of "開週會": two of three units
    ("會", ["meeting"]),
    ("跑步", []),
    ("咖喱", []),  # one unit of three (咖): not enough
    ("the garden", []),
    ("gym", []),
])
def test_best_matches(target: str, found: list[str]) -> None:
    assert named(target) == found


@pytest.mark.parametrize("target", ["", "it", "那個提醒", "the reminder", "my tasks", "它",
                                    "my 8am reminder", "所有提醒", "那些提醒都", "all of them"])
def test_words_that_name_nothing_leave_every_task(target: str) -> None:
    assert words(target) == frozenset()
    assert named(target) == list(TASKS)


@pytest.mark.parametrize(("target", "found"), [
    ("the standup reminder", ["stand"]),  # "stand up" written as one word
    ("the Stand-Up reminder", ["stand"]),
    ("up stand", ["stand"]),  # word order
    ("STAND UPS", ["stand"]),  # case and plurals
    ("the checkin", ["checkin"]),
    ("the check in", ["checkin"]),  # two words of the message, one word of the task
    ("the boxes", ["boxes"]),
    ("the box", ["boxes"]),
    ("the stories", ["story"]),
    ("喝 水", ["water"]),  # Chinese split by a space
])
def test_names_are_matched_whatever_the_spacing(target: str, found: list[str]) -> None:
    tasks = {**TASKS, "stand": ("stand up", {"type": "message", "text": "stand up"}),
             "checkin": ("checkin", {"type": "message", "text": "checkin"}),
             "boxes": ("move boxes", {"type": "message", "text": "move boxes"}),
             "story": ("bedtime story", {"type": "message", "text": "read a story"})}
    assert best_matches(target, [(key, task_words(name, action))
                                 for key, (name, action) in tasks.items()]) == found


def test_words_fold_scripts_and_plurals() -> None:
    assert words("運動") == words("运动") == {"运", "动", "运动"}
    assert words("Reminders about the Plants") == {"plant"}
    assert words("tomorrow's calls") == {"call"}


# --- confirmation tokens --------------------------------------------------------------------
NOW = datetime(2026, 6, 22, 2, 0, tzinfo=UTC)
KEY = b"k" * 32


def confirmation(**changes: object) -> Confirmation:
    values: dict[str, object] = {
        "user_id": "alice", "intent": "change_time", "job_id": "01JOB", "version": 3,
        "expires_at": int(NOW.timestamp()) + 600, "language": "zh-Hant",
        "params": JobParams("recurring", schedule="0 22 * * *", timezone="Asia/Taipei")}
    values.update(changes)
    return Confirmation(**values)  # type: ignore[arg-type]


def test_a_token_round_trips() -> None:
    token = issue(confirmation(), KEY)
    assert token.startswith("c1.")
    assert verify(token, KEY, user_id="alice") == confirmation()
    deletion = confirmation(intent="delete", params=None)
    assert verify(issue(deletion, KEY), KEY, user_id="alice") == deletion


def test_a_token_is_bound_to_its_user_and_key() -> None:
    token = issue(confirmation(), KEY)
    assert verify(token, KEY, user_id="bob") is None
    assert verify(token, b"another key", user_id="alice") is None


@pytest.mark.parametrize("forge", [
    lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"),  # another signature
    lambda t: t.replace("c1.", "c2."),  # another format
    lambda t: t.split(".")[0] + "." + t.split(".")[1],  # no signature
    lambda t: "c1.e30." + t.split(".")[2],  # claims swapped for {}
    lambda t: t + "x" * 5000,  # too long to be ours
    lambda t: "not a token",
    lambda t: "c1.!!!.???",
])
def test_an_altered_token_is_refused(forge: object) -> None:
    token = issue(confirmation(), KEY)
    assert verify(forge(token), KEY, user_id="alice") is None  # type: ignore[operator]


def test_changed_claims_break_the_signature() -> None:
    prefix, claims, mac = issue(confirmation(version=3), KEY).split(".")
    other_claims = issue(confirmation(version=4), KEY).split(".")[1]
    assert verify(f"{prefix}.{other_claims}.{mac}", KEY, user_id="alice") is None
    assert verify(f"{prefix}.{claims}.{mac}", KEY, user_id="alice") is not None


def test_expiry() -> None:
    token = confirmation(expires_at=int(NOW.timestamp()) + 600)
    assert not token.expired(NOW)
    assert token.expired(datetime.fromtimestamp(token.expires_at, UTC))


# --- a new time of day keeps a recurring task's days -----------------------------------------
def at(time: str, tz: str = "Asia/Taipei") -> JobParams:
    return JobParams("one-time", time=time, timezone=tz)


@pytest.mark.parametrize(("schedule", "schedule_after"), [
    ("0 9 * * 1-5", "30 7 * * 1-5"),
    ("0 7 * * 1", "30 7 * * 1"),
    ("15 8 1 * *", "30 7 1 * *"),
    ("RRULE:FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9;BYMINUTE=0",
     "RRULE:FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=7;BYMINUTE=30"),
    ("RRULE:FREQ=DAILY;INTERVAL=2;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
     "RRULE:FREQ=DAILY;INTERVAL=2;BYHOUR=7;BYMINUTE=30;BYSECOND=0"),
])
def test_a_time_of_day_keeps_the_days(schedule: str, schedule_after: str) -> None:
    current = JobParams("recurring", schedule=schedule, timezone="Asia/Taipei")
    assert at_time_of_day(current, at("2026-06-23T07:30:00+08:00")) == JobParams(
        "recurring", schedule=schedule_after, timezone="Asia/Taipei")


@pytest.mark.parametrize("current", [
    JobParams("recurring", schedule="*/30 * * * *"),  # not once a day
    JobParams("recurring", schedule="0 7,19 * * *"),  # two times a day
    JobParams("recurring", schedule="RRULE:FREQ=HOURLY;BYMINUTE=0"),
    JobParams("one-time", time="2026-06-23T09:00:00+08:00"),
    JobParams("immediate"),
])
def test_no_time_of_day_to_move(current: JobParams) -> None:
    assert at_time_of_day(current, at("2026-06-23T07:30:00+08:00")) is None
