"""No schedule can make validation or a lookup run long: caps, the search horizon, the
validation budget, the inline-or-thread policy, and times that overflow near years 1 and 9999."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from itertools import islice

import pytest
from dateutil.rrule import rrulestr

from onthedot.domain.errors import ScheduleError
from onthedot.domain.models import Job, JobParams, JobStatus
from onthedot.schedule import Schedule, compile_schedule
from onthedot.schedule.compiler import compile_schedule_async, job_next_after, job_schedule
from onthedot.schedule.limits import (
    INLINE_STEPS,
    MAX_COUNT_TOTAL,
    MAX_DATES,
    MAX_RULES,
    MAX_SCHEDULE_CHARS,
    MAX_TIMES_OF_DAY,
    VALIDATION_STEPS,
    budget,
    current_budget,
    run_bounded,
)

NOW = datetime(2026, 6, 22, tzinfo=UTC)  # a Monday
QUICK = 1.0  # seconds; the work itself takes milliseconds, the rest is slack for a loaded CI
SCHEDULE = "job_params.schedule"


def recurring(text: str, tz: str = "UTC", now: datetime | None = NOW) -> Schedule:
    params = JobParams("recurring", schedule=text, timezone=tz)
    return compile_schedule(params, anchor=NOW, now=now)


def refused(text: str, tz: str = "UTC") -> tuple[ScheduleError, float]:
    began = time.perf_counter()
    with pytest.raises(ScheduleError) as info:
        recurring(text, tz)
    return info.value, time.perf_counter() - began


def vevent(*lines: str) -> str:
    return "\n".join(["BEGIN:VEVENT", "DTSTART:20260622T080000Z", *lines, "END:VEVENT"])


def assert_too_complex(err: ScheduleError, elapsed: float) -> None:
    assert err.code == "schedule_too_complex", err.to_dict()
    assert err.field == SCHEDULE
    assert err.expected is not None
    assert f"{MAX_RULES} RRULE" in err.expected
    assert f"{MAX_DATES} RDATE" in err.expected
    assert elapsed < QUICK


# --- caps ----------------------------------------------------------------------------------------


def test_the_reported_vevent_of_twenty_never_matching_rules_is_refused_at_once() -> None:
    rules = [f"RRULE:FREQ=YEARLY;BYWEEKNO={20 + i};BYMONTH=12;BYMONTHDAY=1" for i in range(20)]
    assert_too_complex(*refused(vevent(*rules)))


def test_more_rrule_lines_than_the_cap_are_refused_and_the_cap_itself_is_fine() -> None:
    daily = [f"RRULE:FREQ=DAILY;BYHOUR={h};BYMINUTE=0" for h in range(MAX_RULES + 1)]
    assert_too_complex(*refused(vevent(*daily)))
    assert recurring(vevent(*daily[:MAX_RULES])).next_after(NOW) == NOW.replace(hour=8)


@pytest.mark.parametrize("name", ["RDATE", "EXDATE"])
def test_more_dates_than_the_cap_are_refused(name: str) -> None:
    days = [(NOW + timedelta(days=i)).strftime("%Y%m%dT090000Z") for i in range(MAX_DATES + 1)]
    text = vevent("RRULE:FREQ=DAILY", f"{name}:" + ",".join(days))
    err, elapsed = refused(text)
    assert_too_complex(err, elapsed)
    assert name in err.message
    within = vevent("RRULE:FREQ=DAILY", f"{name}:" + ",".join(days[:MAX_DATES]))
    assert recurring(within).next_after(NOW) is not None


def test_counts_adding_up_past_the_cap_are_refused() -> None:
    half = MAX_COUNT_TOTAL // 2 + 1
    text = vevent(f"RRULE:FREQ=DAILY;COUNT={half}", f"RRULE:FREQ=WEEKLY;COUNT={half}")
    err, elapsed = refused(text)
    assert_too_complex(err, elapsed)
    assert str(MAX_COUNT_TOTAL) in err.message


def test_more_times_of_day_than_one_a_minute_are_refused_in_a_daily_or_longer_rule() -> None:
    every = ",".join(map(str, range(60)))
    hours = ",".join(map(str, range(24)))
    err, elapsed = refused(f"FREQ=WEEKLY;BYDAY=MO;BYHOUR={hours};BYMINUTE={every};BYSECOND=0,30")
    assert_too_complex(err, elapsed)
    assert str(MAX_TIMES_OF_DAY) in err.message
    daily = recurring(f"FREQ=DAILY;BYHOUR={hours};BYMINUTE={every}")  # exactly one a minute
    assert daily.upcoming(NOW, 3) == [NOW + timedelta(minutes=m) for m in (1, 2, 3)]
    secondly = compile_schedule(  # the sub-daily forms are the way to fire more often
        JobParams("recurring", schedule=f"FREQ=SECONDLY;BYSECOND={every}"),
        anchor=NOW, min_interval_seconds=0,
    )
    assert secondly.upcoming(NOW, 2) == [NOW + timedelta(seconds=s) for s in (1, 2)]


def test_fifty_minutely_rules_with_the_largest_count_are_refused_at_once() -> None:
    text = vevent(*["RRULE:FREQ=MINUTELY;COUNT=100000"] * 50)
    assert_too_complex(*refused(text))


# --- never-matching rules: refused, exactly and fast ---------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=YEARLY;BYWEEKNO=53;BYMONTH=6",  # week 53 is never in June
        "FREQ=YEARLY;BYWEEKNO=1;BYMONTH=7",
        "FREQ=YEARLY;BYWEEKNO=20;BYYEARDAY=1",
        "FREQ=YEARLY;BYYEARDAY=366;BYMONTH=1",
        "FREQ=MONTHLY;BYDAY=MO;BYMONTHDAY=1,2,3,4,5,6,7;BYSETPOS=2",  # one Monday a week
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=28,29;BYDAY=MO;BYSETPOS=2",
        "FREQ=MONTHLY;INTERVAL=12;BYMONTHDAY=31;BYMONTH=6",  # every June: never a 31st
        "FREQ=WEEKLY;INTERVAL=52;BYMONTH=1;BYDAY=MO",  # from a June Monday: January comes too late
        "FREQ=MINUTELY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=30;BYHOUR=0",
        "FREQ=HOURLY;INTERVAL=24;BYHOUR=5",  # DTSTART is at hour 0: every 24 hours stays there
        "FREQ=SECONDLY;INTERVAL=2;BYSECOND=1",  # even seconds only
    ],
)
def test_a_rule_that_never_matches_is_refused_quickly(text: str) -> None:
    err, elapsed = refused(text)
    assert err.code == "invalid_schedule", err.to_dict()
    assert err.field == SCHEDULE
    assert elapsed < QUICK


def test_a_numbered_weekday_beyond_a_month_is_refused_not_a_crash() -> None:
    for text in ("FREQ=MONTHLY;BYDAY=20MO", "FREQ=YEARLY;BYMONTH=3;BYDAY=-6FR"):
        err, _ = refused(text)
        assert err.code == "invalid_schedule"
    assert recurring("FREQ=YEARLY;BYDAY=53MO").next_after(NOW) is not None  # a year has 53


# --- sparse but valid: accepted, correct, cheap to look up ---------------------------------------


def test_a_minutely_rule_matching_every_few_years_is_found_quickly() -> None:
    # Every 7 minutes from 2026-06-22 00:00, but only at 00:01 on a 29 February: dateutil walked
    # ten years of minutes (32 s) to find it.
    began = time.perf_counter()
    schedule = recurring("FREQ=MINUTELY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=29;BYHOUR=0;BYMINUTE=1")
    found = schedule.next_after(NOW)
    assert time.perf_counter() - began < QUICK
    assert found is not None

    def in_phase(year: int) -> bool:
        return (datetime(year, 2, 29, 0, 1, tzinfo=UTC) - NOW) // timedelta(minutes=1) % 7 == 0

    first = next(year for year in range(2028, 2100, 4) if in_phase(year))
    assert found == datetime(first, 2, 29, 0, 1, tzinfo=UTC)


def test_sparse_rules_agree_with_dateutil() -> None:
    dtstart = datetime(2026, 6, 22)
    texts = [
        "FREQ=HOURLY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=29;BYHOUR=0",
        "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
        "FREQ=WEEKLY;INTERVAL=3;BYMONTH=2;BYDAY=MO,TU;BYSETPOS=-1",
        "FREQ=YEARLY;BYWEEKNO=53;BYDAY=TH",
        "FREQ=MONTHLY;BYMONTHDAY=29,30,31;BYDAY=FR;BYSETPOS=1",
    ]
    for text in texts:
        schedule = recurring(f"DTSTART:{dtstart:%Y%m%dT%H%M%S}Z\nRRULE:{text}")
        reference = list(islice(rrulestr("RRULE:" + text, dtstart=dtstart).xafter(dtstart), 4))
        got = schedule.upcoming(NOW - timedelta(seconds=1), 4)
        assert [t.replace(tzinfo=None) for t in got] == reference, text


def test_lookups_of_a_stored_sparse_schedule_are_bounded() -> None:
    job = stored_job("FREQ=SECONDLY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=29;BYHOUR=0;BYMINUTE=0")
    schedule = job_schedule(job)
    began = time.perf_counter()
    for year in range(2026, 2046, 2):
        found = schedule.next_after(datetime(year, 3, 1, tzinfo=UTC))
        assert found is not None
        assert (found.month, found.day, found.hour, found.minute) == (2, 29, 0, 0)
    assert time.perf_counter() - began < QUICK


def test_a_lookup_ends_at_the_horizon_instead_of_walking_to_year_9999() -> None:
    # Matches every year until 2030 only (UNTIL), then a lookup past it must end at once.
    schedule = recurring("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;UNTIL=20300101T000000Z", now=None)
    began = time.perf_counter()
    assert schedule.next_after(datetime(2030, 1, 1, tzinfo=UTC)) is None
    assert schedule.next_after(datetime(9000, 1, 1, tzinfo=UTC)) is None
    assert time.perf_counter() - began < QUICK


# --- the validation budget -----------------------------------------------------------------------


def test_validation_that_runs_out_of_budget_is_refused_as_too_complex() -> None:
    # Ten sparse SECONDLY rules: cheap to look up once, but the frequency check wants 200
    # occurrences of them and a zero budget allows none of that work.
    rules = [f"RRULE:FREQ=SECONDLY;INTERVAL={61 + i};BYHOUR=0" for i in range(10)]
    began = time.perf_counter()
    with budget(0), pytest.raises(ScheduleError) as info:
        recurring(vevent(*rules))
    assert_too_complex(info.value, time.perf_counter() - began)
    assert "work" in info.value.message


def spin_until_refused() -> None:
    while True:
        current_budget().check()


def test_the_budget_is_a_count_of_steps_checked_while_walking() -> None:
    with budget(50) as opened:
        assert current_budget() is opened
        with pytest.raises(ScheduleError) as info:
            spin_until_refused()
    assert info.value.code == "schedule_too_complex"
    assert opened.steps == 51  # the step past the budget is the one refused
    assert current_budget().limit is None  # outside any block: no limit (stored jobs)


def test_the_same_schedule_gets_the_same_answer_however_busy_the_machine() -> None:
    # Five rules whose check takes about 100,000 steps (a good part of the old 0.5 s deadline on
    # an idle machine, far more on a busy one): checked alone and while other threads keep the
    # interpreter busy, the same work and the same answer; the budget is exact, whatever the
    # load, and ten such rules are over it.
    def rules(count: int) -> str:
        return vevent(*[f"RRULE:FREQ=MINUTELY;INTERVAL={7 + i};BYMONTH=2;BYMONTHDAY=29;"
                        "COUNT=10000" for i in range(count)])

    def steps_of(text: str, interval: float) -> int:
        params = JobParams("recurring", schedule=text, timezone="UTC")
        with budget(VALIDATION_STEPS) as opened:  # the interval keeps the cache out of it
            compile_schedule(params, anchor=NOW, now=NOW, min_interval_seconds=interval)
        return opened.steps

    alone = steps_of(rules(5), 60.0)
    stop = threading.Event()

    def hog() -> None:
        while not stop.is_set():
            sum(range(1000))

    hogs = [threading.Thread(target=hog) for _ in range(3)]
    for thread in hogs:
        thread.start()
    try:
        assert steps_of(rules(5), 59.999) == alone  # the same work under load
        with budget(alone - 1), pytest.raises(ScheduleError) as info:  # one step short
            compile_schedule(JobParams("recurring", schedule=rules(5), timezone="UTC"),
                             anchor=NOW, now=NOW, min_interval_seconds=59.998)
        assert info.value.code == "schedule_too_complex"
        with pytest.raises(ScheduleError) as info:  # over the budget: refused, under load too
            steps_of(rules(MAX_RULES), 59.997)
        assert info.value.code == "schedule_too_complex"
        assert f"{VALIDATION_STEPS} steps" in info.value.message
    finally:
        stop.set()
        for thread in hogs:
            thread.join()


def test_a_schedule_longer_than_the_cap_is_refused_before_it_is_read() -> None:
    text = "FREQ=DAILY;BYHOUR=8" + ";" * MAX_SCHEDULE_CHARS
    err, elapsed = refused(text)
    assert_too_complex(err, elapsed)
    assert f"{MAX_SCHEDULE_CHARS} characters" in (err.expected or "")
    recurring("FREQ=DAILY;BYHOUR=8" + ";" * (MAX_SCHEDULE_CHARS - 40))  # the cap itself is fine


def test_stored_schedules_have_no_deadline() -> None:
    job = stored_job("FREQ=MINUTELY;INTERVAL=15")
    with budget(None):
        assert job_schedule(job).next_after(NOW) == NOW + timedelta(minutes=15)


# --- inline when cheap, in the schedule thread otherwise ------------------------------------------


async def test_cheap_work_runs_inline_and_costly_work_in_the_schedule_thread() -> None:
    def where() -> str:
        return threading.current_thread().name

    assert await run_bounded(where) == threading.current_thread().name

    def costly() -> str:
        for _ in range(INLINE_STEPS + 1):
            current_budget().check()
        return threading.current_thread().name

    assert (await run_bounded(costly)).startswith("onthedot-schedule")


async def test_a_costly_validation_in_the_thread_leaves_the_event_loop_free() -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    def hold_the_cpu_then_run_out() -> None:
        # CPU-bound work that ends only once the loop has ticked five times (or after a
        # deadline it never reaches unless the loop is blocked), then spends the budget: how
        # fast the machine is does not matter, only whether the loop runs meanwhile.
        deadline = time.perf_counter() + 10 * QUICK
        while ticks < 5 and time.perf_counter() < deadline:
            sum(range(40))
        while True:
            current_budget().check()

    ticker = asyncio.create_task(tick())
    try:
        with pytest.raises(ScheduleError) as info:
            await run_bounded(hold_the_cpu_then_run_out)
    finally:
        ticker.cancel()
    assert info.value.code == "schedule_too_complex"
    assert ticks >= 5  # the loop kept running while the thread held the CPU


async def test_compile_async_gives_the_same_schedule_and_answers() -> None:
    params = JobParams("recurring", schedule="0 8 * * *", timezone="Asia/Taipei")
    schedule = await compile_schedule_async(params, anchor=NOW, now=NOW)
    assert schedule is compile_schedule(params, anchor=NOW, now=NOW)  # the same cached object
    assert schedule.next_at_or_after(NOW) == NOW  # 08:00 in Taipei
    with pytest.raises(ScheduleError) as info:
        await compile_schedule_async(
            JobParams("recurring", schedule=vevent(*["RRULE:FREQ=DAILY"] * 11)), anchor=NOW
        )
    assert info.value.code == "schedule_too_complex"
    job = stored_job("FREQ=DAILY;BYHOUR=9;BYMINUTE=0")
    assert await job_next_after(job, NOW) == NOW.replace(hour=9)


# --- overflow near years 1 and 9999 --------------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "tz"),
    [
        ("9999-12-31T23:59:59-14:00", "UTC"),
        ("0001-01-01T00:00:00+14:00", "UTC"),
        ("9999-12-31T23:00:00", "America/New_York"),
        ("0001-01-01T00:30:00", "Asia/Tokyo"),
    ],
)
def test_a_one_time_time_outside_the_years_1_to_9999_in_utc_is_invalid(when: str, tz: str) -> None:
    params = JobParams("one-time", time=when, timezone=tz)
    with pytest.raises(ScheduleError) as info:
        compile_schedule(params, anchor=NOW, now=NOW)
    assert info.value.code == "invalid_time"
    assert info.value.field == "job_params.time"
    assert "9999" in info.value.message


@pytest.mark.parametrize(
    "text",
    [
        "DTSTART;TZID=Pacific/Kiritimati:99991231T230000\nRRULE:FREQ=HOURLY",
        "DTSTART:99991231T235800Z\nRRULE:FREQ=MINUTELY",
        "DTSTART:99991225T000000Z\nRRULE:FREQ=WEEKLY;BYMONTH=12;BYDAY=MO,SU;BYSETPOS=-1",
        "DTSTART:99991201T000000Z\nRRULE:FREQ=MONTHLY;BYMONTHDAY=31;BYDAY=FR",
        "DTSTART:99990101T000000Z\nRRULE:FREQ=YEARLY;BYWEEKNO=52",
        "DTSTART:99991231T000000Z\nRRULE:FREQ=DAILY;BYMONTH=12",
        "DTSTART;TZID=Pacific/Kiritimati:99991231T000000\nRRULE:FREQ=DAILY;"
        "UNTIL=99991231T235959Z",
    ],
)
def test_a_rule_running_past_year_9999_just_ends(text: str) -> None:
    schedule = recurring(text, now=None)
    occurrences = schedule.upcoming(datetime(9999, 12, 1, tzinfo=UTC), 1000)
    assert len(occurrences) < 1000
    assert schedule.next_after(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)) is None


@pytest.mark.parametrize("expr", ["* * * * *", "0 0 * * *", "0 0 0 * * *", "@yearly"])
def test_cron_past_year_9999_just_ends(expr: str) -> None:
    schedule = compile_schedule(
        JobParams("recurring", schedule=expr, timezone="Pacific/Kiritimati"), anchor=NOW
    )
    assert schedule.next_after(datetime(9999, 12, 31, 12, tzinfo=UTC)) is None


KIRITIMATI_DAILY = "DTSTART;TZID=Pacific/Kiritimati:20260622T080000\nRRULE:FREQ=DAILY"


@pytest.mark.parametrize("name", ["RDATE", "EXDATE"])
def test_a_date_that_overflows_in_the_events_zone_is_invalid(name: str) -> None:
    # 23:00 UTC on the last day is already year 10000 on the clocks of Kiritimati (UTC+14).
    text = f"{KIRITIMATI_DAILY}\n{name}:99991231T230000Z"
    err, _ = refused(text)
    assert err.code == "invalid_schedule"
    assert name in err.message


def test_an_until_that_overflows_in_the_events_zone_means_no_end() -> None:
    text = f"{KIRITIMATI_DAILY};UNTIL=99991231T230000Z"
    assert recurring(text).next_after(NOW) == datetime(2026, 6, 22, 18, tzinfo=UTC)


# --- helpers -------------------------------------------------------------------------------------


def stored_job(text: str, tz: str = "UTC") -> Job:
    params = JobParams("recurring", schedule=text, timezone=tz)
    return Job(
        job_id="01J0000000000000000000TEST",
        user_id="u",
        name="n",
        action={"type": "message", "text": "x"},
        params=params,
        status=JobStatus.SCHEDULED,
        created_at=NOW,
        updated_at=NOW,
    )
