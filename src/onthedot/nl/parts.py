"""The language-neutral pieces a sentence is read into, before they become JobParams.

The Chinese and English readers only recognise fragments ("每週一三五", "at 8pm", "in 20 minutes")
and describe them with these types; ``combine`` and ``resolve`` then apply one set of rules to both
languages, so that 明天下午三點 and "tomorrow at 3pm" cannot drift apart.
"""

from __future__ import annotations

import datetime
import enum
import re
from dataclasses import dataclass
from typing import Literal

Language = Literal["en", "zh-Hant", "zh-Hans"]
Unit = Literal["minute", "hour", "day", "week", "month"]


class Daypart(enum.Enum):
    """A part of the day; each has a default hour and a rule for reading a 12-hour clock in it."""

    EARLY = "early"  # 凌晨, 半夜: small hours, never shifted to the afternoon
    MORNING = "morning"  # 早上, morning
    FORENOON = "forenoon"  # 上午
    NOON = "noon"  # 中午
    AFTERNOON = "afternoon"  # 下午, afternoon
    DUSK = "dusk"  # 傍晚
    EVENING = "evening"  # 晚上, 今晚, evening, tonight, night
    MIDNIGHT = "midnight"  # 午夜


@dataclass(frozen=True)
class Clock:
    """A time on the clock as written: ``hour`` is not yet adjusted for a daypart or am/pm."""

    hour: int
    minute: int = 0
    meridiem: Literal["am", "pm"] | None = None
    end_of_day: bool = False  # "midnight"/午夜: 00:00 at the end of the named day
    # "this time tomorrow", 明天這個時候: the hour and minute of the request, filled in by resolve.
    same_as_now: bool = False


@dataclass(frozen=True)
class Daily:
    interval: int = 1


@dataclass(frozen=True)
class Weekly:
    days: frozenset[int]  # Python weekdays: Monday = 0 ... Sunday = 6
    interval: int = 1


@dataclass(frozen=True)
class MonthlyDays:
    days: tuple[int, ...]  # 1..31; -1 is the last day of the month, -3 the third-to-last
    interval: int = 1
    months: tuple[int, ...] = ()  # only these months (quarterly: 1, 4, 7, 10); () is every month
    day_given: bool = True  # False for "quarterly" alone: "on the 15th" may still name the day


@dataclass(frozen=True)
class MonthlyNth:
    nth: int  # 1..5, or -1 for the last one
    weekday: int


@dataclass(frozen=True)
class MonthlyWorkday:
    """The nth working day (Monday to Friday) of a month: the last one of every month, the
    first one of each quarter (``months``). No holiday calendar is applied."""

    nth: int  # 1..5, or -1 for the last one, -2 for the one before it ...
    months: tuple[int, ...] = ()


@dataclass(frozen=True)
class Yearly:
    month: int
    day: int


@dataclass(frozen=True)
class YearlyDates:
    """Several dates a year on different days of the month: 1 January and 15 July."""

    dates: tuple[tuple[int, int], ...]  # (month, day), sorted


@dataclass(frozen=True)
class YearlyNth:
    """The nth weekday of a month, every year: Thanksgiving, Mother's Day."""

    month: int
    nth: int  # 1..5, or -1 for the last one
    weekday: int


@dataclass(frozen=True)
class YearlyComputed:
    """A yearly day no rule can state (a lunar date, Easter): its dates are listed one by one."""

    holiday: str  # a key of onthedot.nl.holidays (see HolidayRef)


@dataclass(frozen=True)
class Anchored:
    """Every N weeks or months with no day named: counted from the day the request was made.
    Every year (每年) needs a date, which a date word completes (每年農曆三月初三, 每年元宵節)."""

    unit: Literal["week", "month", "year"]
    interval: int


@dataclass(frozen=True)
class Slot:
    """One time of day as written: a clock, a part of the day, or both (晚上八點, "at 8pm")."""

    clock: Clock | None = None
    daypart: Daypart | None = None


@dataclass(frozen=True)
class Every:
    """A fixed interval: on the clock when it divides it (every 15 minutes, every 2 hours),
    else counted from the job's creation (every 40 minutes); with a window (九點到五點) its
    steps inside it, both ends included."""

    seconds: int
    days: frozenset[int] | None = None  # optional weekday restriction: 每個工作日每兩小時

    @classmethod
    def minutes(cls, n: int) -> Every:
        return cls(60 * n)


Recurrence = (
    Daily | Weekly | MonthlyDays | MonthlyNth | MonthlyWorkday | Yearly | YearlyDates | YearlyNth
    | YearlyComputed | Anchored | Every
)


@dataclass(frozen=True)
class RelativeDay:
    days: int  # 0 today, 1 tomorrow, ...


@dataclass(frozen=True)
class WeekdayRef:
    weekday: int
    week: int | None = None  # None: the next such day; 0 this calendar week; 1 next week ...


@dataclass(frozen=True)
class WeekRef:
    weeks: int  # 下週 / next week: Monday of that week


@dataclass(frozen=True)
class MonthRef:
    months: int  # 0 this month, 1 next month
    day: int | None = None


@dataclass(frozen=True)
class AbsDate:
    month: int
    day: int
    year: int | None = None
    year_offset: int | None = None  # 今年 = 0, 明年 = 1


@dataclass(frozen=True)
class DayOfMonth:
    day: int


@dataclass(frozen=True)
class SlashDate:
    """10/6 in English: month/day or day/month depends on the region, read from the timezone."""

    first: int
    second: int
    year: int | None = None


@dataclass(frozen=True)
class NthWeekdayRef:
    """The second Monday of next month, 六月第二個星期五."""

    nth: int  # 1..5, or -1 for the last one
    weekday: int
    month: int | None = None  # a named month (rolls to next year when passed) ...
    months_ahead: int | None = None  # ... or 0 this month, 1 next month (never rolls)
    year_offset: int | None = None  # 明年一月: 1


@dataclass(frozen=True)
class HolidayRef:
    """The next occurrence of a holiday (Christmas Eve, 中秋節) or a lunar date (農曆八月十五)."""

    # A key of onthedot.nl.holidays.HOLIDAYS, or "lunar:M:D"; "@+1" / "@-2" after it moves the
    # day (the day after Christmas: "christmas@+1"), see holidays.holiday.
    holiday: str


DateRef = (
    RelativeDay | WeekdayRef | WeekRef | MonthRef | AbsDate | DayOfMonth | SlashDate
    | NthWeekdayRef | HolidayRef
)


@dataclass(frozen=True)
class Offset:
    amount: int
    unit: Unit


@dataclass(frozen=True)
class Problem:
    """A reason a fragment cannot be used, raised only if the fragment turns out to be a time."""

    key: str
    text: str
    params: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Piece:
    """One recognised fragment of the input and what it says about the time."""

    start: int
    end: int
    text: str
    recurrence: Recurrence | None = None
    date: DateRef | None = None
    offset: Offset | None = None
    daypart: Daypart | None = None
    clock: Clock | None = None
    immediate: bool = False
    problem: Problem | None = None
    # More times of day in the same piece: "at 8, 12 and 18" (the first one is ``clock``).
    more: tuple[Clock, ...] = ()
    window: tuple[Slot, Slot] | None = None  # 九點到五點, "between 10 and 4"
    count: int | None = None  # 一天三次, "twice a day": how many times of day must be given
    # Weekdays a recurrence leaves out: "except weekends", 週六週日除外 (Monday = 0).
    exclude: frozenset[int] | None = None
    # The first day of an every-N-weeks or -months rule: "starting 2026-12-04", 從 2026-12-04 起
    # (as the confirmation says it).
    first_day: datetime.date | None = None
    # Further (month, day) dates said with ``date`` in one list: "on day 1 of January and July",
    # 每年一月及七月的1號. Read as a yearly rule with every year, refused for a one-time job.
    more_dates: tuple[tuple[int, int], ...] = ()
    # A problem that only matters if nothing else gives what it would have given: "clock" for
    # "after lunch" (moot once a time is said), "day" for an unknown holiday; None: always.
    # On a weak piece that is no problem, "day": dropped when another word gives the day
    # ("the daily report" on 1 May), kept otherwise ("daily standup at 9").
    guards: Literal["clock", "day"] | None = None
    # A weak piece may be ordinary prose ("看一點書", "the morning news"): it only counts when it
    # touches a strong piece, or (if ``stands_alone``) when nothing strong says the same thing.
    weak: bool = False
    stands_alone: bool = True

    @property
    def sets_clock(self) -> bool:
        return (self.clock is not None or self.daypart is not None or self.window is not None
                or self.immediate)

    @property
    def sets_day(self) -> bool:
        # "right now, post today's menu": now gives the day, so today's names a topic.
        return self.immediate or any(
            x is not None for x in (self.recurrence, self.date, self.offset))


def piece(m: re.Match[str], **fields: object) -> Piece:
    """A Piece spanning the whole match ``m``."""
    return Piece(m.start(), m.end(), m.group(0), **fields)  # type: ignore[arg-type]


def problem(
    m: re.Match[str],
    key: str,
    *,
    weak: bool = False,
    stands_alone: bool = True,
    guards: Literal["clock", "day"] | None = None,
    **params: object,
) -> Piece:
    """A Piece that is an error if it is used (25點, 每週八, every 0 minutes)."""
    text = m.group(0).strip()
    items = tuple((k, str(v)) for k, v in params.items())
    found = Problem(key, text, items)
    return Piece(
        m.start(), m.end(), m.group(0), problem=found, weak=weak, stands_alone=stands_alone,
        guards=guards,
    )
