"""The compiled-schedule caches (schedule/compiler.py): a form whose schedule does not depend
on the job's creation instant is compiled once and shared by every job created with it. The
cache is bounded, keyed so that two timezones never share an entry, and a shared schedule
answers exactly what a freshly built one answers, asked in any order."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from onthedot.domain.errors import ScheduleError
from onthedot.domain.models import JobParams
from onthedot.schedule import Schedule, compile_schedule
from onthedot.schedule.compiler import SHARED_CACHE_SIZE, _compile_shared
from onthedot.schedule.cron import CronSchedule

ANCHOR = datetime(2026, 3, 1, 12, 0, 17, tzinfo=UTC)


def compiled(params: JobParams, anchor: datetime = ANCHOR) -> Schedule:
    return compile_schedule(params, anchor=anchor, now=anchor)


def test_jobs_created_at_different_instants_share_one_compile() -> None:
    params = JobParams("recurring", schedule="0 9 * * 1-5", timezone="Asia/Taipei")
    first = compiled(params)
    later = compiled(params, ANCHOR + timedelta(minutes=7, microseconds=3))
    assert later is first
    once = JobParams("one-time", time="2026-06-22T08:00:00", timezone="Asia/Taipei")
    assert compiled(once, ANCHOR + timedelta(seconds=1)) is compiled(once)


def test_the_same_text_in_two_timezones_is_two_schedules() -> None:
    taipei = compiled(JobParams("recurring", schedule="0 8 * * *", timezone="Asia/Taipei"))
    new_york = compiled(JobParams("recurring", schedule="0 8 * * *",
                                  timezone="America/New_York"))
    assert taipei is not new_york
    assert taipei.next_after(ANCHOR) == datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
    assert new_york.next_after(ANCHOR) == datetime(2026, 3, 1, 13, 0, tzinfo=UTC)
    wall = "2026-06-22T08:00:00"
    at_taipei = compiled(JobParams("one-time", time=wall, timezone="Asia/Taipei"))
    at_utc = compiled(JobParams("one-time", time=wall, timezone="UTC"))
    assert at_taipei.next_after(ANCHOR) == datetime(2026, 6, 22, 0, 0, tzinfo=UTC)
    assert at_utc.next_after(ANCHOR) == datetime(2026, 6, 22, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(("expr", "tz"), [
    ("30 2 * * *", "America/New_York"),   # a time in the spring-forward gap
    ("30 1 * * *", "America/New_York"),   # a time that happens twice in the fall
    ("*/15 * * * *", "Europe/Berlin"),
    ("0 9 * * 1-5", "Asia/Taipei"),
    ("0 0 29 2 *", "UTC"),                # leap days only
])
def test_a_shared_schedule_answers_what_a_fresh_one_answers(expr: str, tz: str) -> None:
    shared = compiled(JobParams("recurring", schedule=expr, timezone=tz))
    start = datetime(2026, 3, 7, tzinfo=UTC)
    instants = [start + timedelta(minutes=613 * i, microseconds=i) for i in range(500)]
    for shift in (datetime(2026, 3, 8, 5, tzinfo=UTC), datetime(2026, 3, 29, 0, tzinfo=UTC),
                  datetime(2026, 10, 25, 0, tzinfo=UTC), datetime(2026, 11, 1, 4, tzinfo=UTC)):
        instants += [shift + timedelta(minutes=7 * i) for i in range(60)]  # DST changes
    instants += random.Random(7).sample(instants, len(instants))  # and in any order
    for at in instants:
        fresh = CronSchedule(expr, ZoneInfo(tz))
        assert shared.next_after(at) == fresh.next_after(at), at
        assert shared.next_at_or_after(at) == fresh.next_at_or_after(at), at
    assert shared.upcoming(start, 50) == CronSchedule(expr, ZoneInfo(tz)).upcoming(start, 50)


def test_a_rule_that_takes_its_start_from_the_anchor_is_not_shared() -> None:
    rule = JobParams("recurring", schedule="FREQ=DAILY", timezone="UTC")
    at_noon = compiled(rule)
    an_hour_later = compiled(rule, ANCHOR + timedelta(hours=1))
    assert at_noon.next_after(ANCHOR) == datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert an_hour_later.next_after(ANCHOR) == datetime(2026, 3, 1, 13, 0, tzinfo=UTC)


def test_a_form_that_fails_is_refused_every_time_and_not_cached() -> None:
    bad = JobParams("recurring", schedule="*/30 * * * * *", timezone="UTC")
    for _ in range(2):
        with pytest.raises(ScheduleError) as caught:
            compiled(bad)
        assert caught.value.code == "schedule_too_frequent"
    # The same text under another minimum interval is another entry, and fine there.
    assert compile_schedule(bad, anchor=ANCHOR, min_interval_seconds=0) is not None


def test_the_shared_cache_is_bounded() -> None:
    info = _compile_shared.cache_info()
    assert info.maxsize == SHARED_CACHE_SIZE
    base = datetime(2030, 1, 1, tzinfo=UTC)
    for n in range(SHARED_CACHE_SIZE + 100):
        at = (base + timedelta(minutes=n)).isoformat()
        compiled(JobParams("one-time", time=at, timezone="UTC"))
    assert _compile_shared.cache_info().currsize == SHARED_CACHE_SIZE
