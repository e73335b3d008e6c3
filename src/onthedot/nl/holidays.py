"""Holidays and Chinese lunar dates: which Gregorian day each falls on, year by year.

A holiday is named by a key (``christmas_eve``, ``mid_autumn``) or, for a lunar date said as
such (農曆八月十五), by ``lunar:M:D``. Gregorian holidays are a fixed date or the nth weekday of
a month; Easter comes from dateutil; lunar dates from ``lunardate`` (a maintained table of the
Chinese calendar, 1900-2099). Holidays whose date differs between the regions a request may come
from (國慶日, 兒童節, 教師節) are not listed: the parser refuses them rather than pick a country.
"""

from __future__ import annotations

import calendar
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from dateutil.easter import easter
from lunardate import LunarDate

from onthedot.nl.parts import Yearly, YearlyComputed, YearlyNth

# lunardate's table ends with lunar year 2099; yearly lunar dates are listed up to it.
LUNAR_LAST_YEAR = 2099
LUNAR_FIRST_YEAR = 1901


@dataclass(frozen=True)
class Holiday:
    on: Callable[[int], date | None]  # the day in a Gregorian year, None if none that year
    lunar: tuple[int, int] | None = None  # (month, day) for the confirmation: 每年農曆八月十五


def _fixed(month: int, day: int) -> Holiday:
    return Holiday(lambda y: date(y, month, day))


def nth_weekday(year: int, month: int, nth: int, weekday: int) -> date | None:
    """The ``nth`` (1..5, or -1 for the last) ``weekday`` of a month; None if it has none."""
    days = [
        date(year, month, d)
        for d in range(1, calendar.monthrange(year, month)[1] + 1)
        if date(year, month, d).weekday() == weekday
    ]
    if nth == -1:
        return days[-1]
    return days[nth - 1] if nth <= len(days) else None


def _nth(month: int, nth: int, weekday: int) -> Holiday:
    return Holiday(lambda y: nth_weekday(y, month, nth, weekday))


def _easter(offset: int) -> Holiday:
    return Holiday(lambda y: easter(y) + timedelta(days=offset))


def lunar_to_solar(lunar_year: int, month: int, day: int) -> date | None:
    """The Gregorian day of a lunar date (never a leap month); None if the month is short."""
    if not LUNAR_FIRST_YEAR <= lunar_year <= LUNAR_LAST_YEAR:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            solar: date = LunarDate(lunar_year, month, day).to_solar_date()
    except ValueError:  # day 30 of a 29-day month
        return None
    return solar


def _lunar_in(year: int, month: int, day: int) -> date | None:
    """The lunar date that falls in Gregorian ``year`` (臘月 dates of lunar year Y fall in Y+1)."""
    for lunar_year in (year, year - 1):
        solar = lunar_to_solar(lunar_year, month, day)
        if solar is not None and solar.year == year:
            return solar
    return None


def _lunar(month: int, day: int) -> Holiday:
    return Holiday(lambda y: _lunar_in(y, month, day), lunar=(month, day))


def _lunar_eve(year: int) -> date | None:
    new_year = lunar_to_solar(year + 1, 1, 1)
    if new_year is not None and (new_year - timedelta(days=1)).year == year:
        return new_year - timedelta(days=1)
    new_year = lunar_to_solar(year, 1, 1)
    return None if new_year is None else new_year - timedelta(days=1)


HOLIDAYS: dict[str, Holiday] = {
    "new_year": _fixed(1, 1),
    "valentine": _fixed(2, 14),
    "womens_day": _fixed(3, 8),
    "st_patrick": _fixed(3, 17),
    "labour_day_may": _fixed(5, 1),
    "independence_day": _fixed(7, 4),
    "halloween": _fixed(10, 31),
    "christmas_eve": _fixed(12, 24),
    "christmas": _fixed(12, 25),
    "boxing_day": _fixed(12, 26),
    "new_year_eve": _fixed(12, 31),
    "mothers_day": _nth(5, 2, 6),
    "fathers_day": _nth(6, 3, 6),
    "memorial_day": _nth(5, -1, 0),
    "labor_day_us": _nth(9, 1, 0),
    "thanksgiving": _nth(11, 4, 3),
    "easter": _easter(0),
    "good_friday": _easter(-2),
    "easter_monday": _easter(1),
    "lunar_new_year": _lunar(1, 1),
    "lunar_new_year_eve": Holiday(_lunar_eve, lunar=(12, 0)),
    "lantern": _lunar(1, 15),
    "dragon_boat": _lunar(5, 5),
    "qixi": _lunar(7, 7),
    "ghost": _lunar(7, 15),
    "mid_autumn": _lunar(8, 15),
    "double_ninth": _lunar(9, 9),
    "laba": _lunar(12, 8),
}


def shifted(key: str, days: int) -> str:
    """The key of the day ``days`` after (before, if negative) a holiday: "christmas@+1"."""
    return key if days == 0 else f"{key}@{days:+d}"


def holiday(key: str) -> Holiday:
    """The holiday for a key, including ``lunar:M:D`` for a lunar date said as such and
    ``<key>@+N`` / ``<key>@-N`` for the day N days after / before it."""
    base, _, shift = key.partition("@")
    if shift:
        of = holiday(base)
        days = int(shift)

        def moved(y: int) -> date | None:
            # The holiday of the same year, moved: the day after New Year's Eve is next year's.
            found = of.on(y)
            return None if found is None else found + timedelta(days=days)

        return Holiday(moved)
    if key.startswith("lunar:"):
        _, month, day = key.split(":")
        return _lunar(int(month), int(day))
    return HOLIDAYS[key]


def days_from(key: str, first_year: int, last_year: int) -> list[date]:
    """The holiday's days in Gregorian years ``first_year``..``last_year``, in order (a moved
    holiday's days may fall one year further)."""
    found = (holiday(key).on(y) for y in range(first_year, last_year + 1))
    return sorted(d for d in found if d is not None)


def yearly_holiday(key: str) -> Yearly | YearlyNth | YearlyComputed:
    """The recurrence of a holiday: a cron date, an RRULE weekday, or listed dates."""
    fixed = {
        "new_year": (1, 1), "valentine": (2, 14), "womens_day": (3, 8), "st_patrick": (3, 17),
        "labour_day_may": (5, 1), "independence_day": (7, 4), "halloween": (10, 31),
        "christmas_eve": (12, 24), "christmas": (12, 25), "boxing_day": (12, 26),
        "new_year_eve": (12, 31),
    }  # fmt: skip
    nth = {
        "mothers_day": (5, 2, 6), "fathers_day": (6, 3, 6), "memorial_day": (5, -1, 0),
        "labor_day_us": (9, 1, 0), "thanksgiving": (11, 4, 3),
    }  # fmt: skip
    base, _, shift = key.partition("@")
    if base in fixed and shift:
        # A fixed date moved by whole days is a fixed date (checked in a common year: no
        # holiday here is near 29 February).
        month, day = fixed[base]
        moved = date(2025, month, day) + timedelta(days=int(shift))
        return Yearly(moved.month, moved.day)
    if key in fixed:
        return Yearly(*fixed[key])
    if key in nth:
        return YearlyNth(*nth[key])
    return YearlyComputed(key)
