"""Helpers shared by the Chinese and English rules."""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from datetime import date
from typing import Literal, cast

from onthedot.nl.numbers import en_to_int
from onthedot.nl.parts import (
    AbsDate,
    Anchored,
    Clock,
    Daily,
    Every,
    MonthlyDays,
    MonthlyWorkday,
    Piece,
    Unit,
    piece,
    problem,
)
from onthedot.nl.scan import Builder, Rule, rule

_ZH_UNITS: dict[str, str] = {
    "秒鐘": "second", "秒钟": "second", "秒": "second",
    "分鐘": "minute", "分钟": "minute", "分": "minute",
    "小時": "hour", "小时": "hour", "鐘頭": "hour", "钟头": "hour",
    "天": "day", "日": "day",
    "週": "week", "周": "week", "星期": "week", "禮拜": "week", "礼拜": "week",
    "個月": "month", "个月": "month", "月": "month", "年": "year",
}  # fmt: skip


def zh_unit(text: str) -> str | None:
    return _ZH_UNITS.get(text)


def offset_unit(unit: str | None) -> Unit | None:
    """The unit of a one-time offset ("in 3 days"); years are not offered."""
    if unit in ("minute", "hour", "day", "week", "month"):
        return cast(Unit, unit)
    return None


def fail_builder(
    key: str, *, weak: bool = False, guards: Literal["clock", "day"] | None = None
) -> Builder:
    """A rule builder for fragments that are reported instead of read (每週八, sometime)."""

    def build(m: re.Match[str]) -> Piece:
        return problem(m, key, weak=weak, guards=guards)

    return build


def fixed_builder(**fields: object) -> Builder:
    """A rule builder for fragments with one meaning (每週末, hourly, noon)."""

    def build(m: re.Match[str]) -> Piece:
        return piece(m, **fields)

    return build


def en_unit(text: str) -> str | None:
    word = text.lower().rstrip("s")
    return {
        "second": "second", "sec": "second",
        "minute": "minute", "min": "minute", "hour": "hour", "hr": "hour", "day": "day",
        "week": "week", "month": "month", "year": "year",
    }.get(word)  # fmt: skip


def fraction_minutes(amount: float, unit: str | None) -> int | None:
    """1.5 hours -> 90; a fraction of a minute, a week or a month has no exact answer: None."""
    per = {"minute": 1, "hour": 60, "day": 1440}.get(unit or "")
    if per is None:
        return None
    minutes = amount * per
    return int(minutes) if minutes == int(minutes) and minutes > 0 else None


def valid_month_day(month: int, day: int) -> bool:
    """True if the day exists in the month in some year (2月29日 is valid: leap years)."""
    return 1 <= month <= 12 and 1 <= day <= calendar.monthrange(2024, month)[1]


def interval_piece(m: re.Match[str], n: int, unit: str | None) -> Piece:
    """每N<unit> / every N <unit>. Every week or month needs the day; every 2 weeks or 3 months
    without one counts from the day of the request (``Anchored``); years need the date."""
    if unit == "second":
        return piece(m, recurrence=Every(n))
    if unit == "minute":
        return piece(m, recurrence=Every.minutes(n))
    if unit == "hour":
        return piece(m, recurrence=Every.minutes(60 * n))
    if unit == "day":
        return piece(m, recurrence=Daily(n))
    if unit in ("week", "month") and n >= 2:
        return piece(m, recurrence=Anchored("week" if unit == "week" else "month", n))
    if unit in ("week", "month"):
        return problem(m, "need_day", weak=True)
    if unit == "year" and n == 1:
        return piece(m, recurrence=Anchored("year", 1))
    if unit == "year":
        return problem(m, "need_date", weak=True)
    return problem(m, "unparsed")


def expand_days(items: Iterable[int | None]) -> frozenset[int]:
    """Weekday numbers in order, ``None`` marking a range: [0, None, 4] -> Monday..Friday."""
    days: set[int] = set()
    previous: int | None = None
    in_range = False
    for item in items:
        if item is None:
            in_range = previous is not None
            continue
        if in_range and previous is not None:
            span = (item - previous) % 7
            days.update((previous + k) % 7 for k in range(span + 1))
        days.add(item)
        previous, in_range = item, False
    return frozenset(days)


def ampm_piece(m: re.Match[str]) -> Piece:
    hour = en_to_int(m.group("h"))
    minute = int(m.groupdict().get("m") or 0)
    meridiem: Literal["am", "pm"] = "am" if m.group("mer").lower().startswith("a") else "pm"
    if hour is None or not 1 <= hour <= 12:
        return problem(m, "bad_hour")
    if minute > 59:
        return problem(m, "bad_minute")
    return piece(m, clock=Clock(hour, minute, meridiem))


AMPM = r"(?P<mer>a\.?m\.?|p\.?m\.?)(?![a-z])"
AMPM_RULES: list[Rule] = [
    rule(rf"(?<![\d:])(?P<h>\d{{1,2}})(?::(?P<m>\d{{2}}))?\s*{AMPM}", ampm_piece),
]


QUARTER_STARTS = (1, 4, 7, 10)
QUARTER_ENDS = (3, 6, 9, 12)


def month_end_piece(m: re.Match[str], back: int, quarter: bool) -> Piece:
    """A day counted back from the end of every month or quarter: ``back`` = 1 is the last
    day, 3 the third-to-last (BYMONTHDAY=-3); a month has at least 28 days."""
    if not 1 <= back <= 28:
        return problem(m, "bad_date")
    return piece(m, recurrence=MonthlyDays((-back,), months=QUARTER_ENDS if quarter else ()))


def workday_piece(m: re.Match[str], nth: int | None, quarter: bool) -> Piece:
    """The nth (or, negative, nth-to-last) working day, Monday to Friday, of every month or
    quarter: the first of a quarter is in its first month, the last in its last month."""
    if nth is None or nth == 0 or not -5 <= nth <= 5:
        return problem(m, "bad_date")
    months = (QUARTER_ENDS if nth < 0 else QUARTER_STARTS) if quarter else ()
    return piece(m, recurrence=MonthlyWorkday(nth, months))


def start_piece(m: re.Match[str]) -> Piece:
    """"starting 2026-12-04", 從 2026-12-04 起 (ISO dates only, as the confirmation writes)."""
    try:
        day = date(int(m.group("y")), int(m.group("m")), int(m.group("d")))
    except ValueError:
        return problem(m, "bad_date")
    return piece(m, first_day=day)


def except_piece(m: re.Match[str], days: frozenset[int]) -> Piece:
    """"except weekends", 週六週日除外: weekdays the recurrence leaves out (see resolve)."""
    return piece(m, exclude=days)


def same_time_piece(m: re.Match[str]) -> Piece:
    """"this time", 這個時候: the clock of the request; it needs a day next to it ("this time
    tomorrow"), so it is weak: prose ("do it right this time") once a time is said elsewhere."""
    return piece(m, clock=Clock(0, 0, same_as_now=True), weak=True)


def month_list(m: re.Match[str], days: list[int], months: list[int], every: bool) -> Piece:
    """The days named in each month named ("on days 1 and 15 of January and April", 每年1、4月的
    1日): every year, one rule over those days and months; without every year, the first date
    and the others (``more_dates``), which a one-time job refuses."""
    if not all(valid_month_day(month, day) for month in months for day in days):
        return problem(m, "bad_date")
    if every:
        return piece(m, recurrence=MonthlyDays(tuple(sorted(set(days))),
                                               months=tuple(sorted(set(months)))))
    dates = [(month, day) for month in months for day in days]
    return piece(m, date=AbsDate(*dates[0]), more_dates=tuple(dates[1:]))
