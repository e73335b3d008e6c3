"""The language-neutral pieces a sentence is read into, before they become JobParams.

The Chinese and English readers only recognise fragments ("每週一三五", "at 8pm", "in 20 minutes")
and describe them with these types; ``combine`` and ``resolve`` then apply one set of rules to both
languages, so that 明天下午三點 and "tomorrow at 3pm" cannot drift apart.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class Daily:
    interval: int = 1


@dataclass(frozen=True)
class Weekly:
    days: frozenset[int]  # Python weekdays: Monday = 0 ... Sunday = 6
    interval: int = 1


@dataclass(frozen=True)
class MonthlyDays:
    days: tuple[int, ...]  # 1..31; -1 is the last day of the month
    interval: int = 1


@dataclass(frozen=True)
class MonthlyNth:
    nth: int  # 1..5, or -1 for the last one
    weekday: int


@dataclass(frozen=True)
class Yearly:
    month: int
    day: int


@dataclass(frozen=True)
class Every:
    """A fixed interval aligned to the clock (every 15 minutes, every 2 hours)."""

    minutes: int
    days: frozenset[int] | None = None  # optional weekday restriction: 每個工作日每兩小時


Recurrence = Daily | Weekly | MonthlyDays | MonthlyNth | Yearly | Every


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


DateRef = RelativeDay | WeekdayRef | WeekRef | MonthRef | AbsDate | DayOfMonth


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
    # A weak piece may be ordinary prose ("看一點書", "the morning news"): it only counts when it
    # touches a strong piece, or (if ``stands_alone``) when nothing strong says the same thing.
    weak: bool = False
    stands_alone: bool = True

    @property
    def sets_clock(self) -> bool:
        return self.clock is not None or self.daypart is not None

    @property
    def sets_day(self) -> bool:
        return any(x is not None for x in (self.recurrence, self.date, self.offset))


def piece(m: re.Match[str], **fields: object) -> Piece:
    """A Piece spanning the whole match ``m``."""
    return Piece(m.start(), m.end(), m.group(0), **fields)  # type: ignore[arg-type]


def problem(
    m: re.Match[str], key: str, *, weak: bool = False, stands_alone: bool = True, **params: object
) -> Piece:
    """A Piece that is an error if it is used (25點, 每週八, every 7 minutes)."""
    text = m.group(0).strip()
    items = tuple((k, str(v)) for k, v in params.items())
    found = Problem(key, text, items)
    return Piece(
        m.start(), m.end(), m.group(0), problem=found, weak=weak, stands_alone=stands_alone
    )
