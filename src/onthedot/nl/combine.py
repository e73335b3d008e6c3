"""From recognised pieces to one consistent reading of the sentence.

Two steps: ``select`` decides which pieces are part of the time expression (weak pieces such as
the 一點 of 看一點書 or the "morning" of "the morning news" only count when they touch a strong
piece, or stand alone with nothing else saying the same thing), then ``merge`` folds them into a
``Spec``, refusing contradictions (明天 ... 每天, 早上 ... 8pm) instead of picking one.

Times of day joined by a list word (and, 和, 、, a comma) are several times: "at 8am and 8pm",
每天中午和傍晚六點. A vague word (sometime, 改天) is refused even when another word gives a day.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field, replace

from onthedot.nl.holidays import yearly_holiday
from onthedot.nl.parts import (
    AbsDate,
    Anchored,
    Daily,
    DateRef,
    DayOfMonth,
    Every,
    HolidayRef,
    MonthlyDays,
    MonthRef,
    NthWeekdayRef,
    Offset,
    Piece,
    Problem,
    Recurrence,
    SlashDate,
    Slot,
    WeekdayRef,
    Weekly,
    WeekRef,
    Yearly,
    YearlyDates,
    YearlyNth,
)

# What may sit between two pieces of one time expression: 明天 下午三點, "tomorrow, at 3pm",
# 12月4日（週五）.
_JOINER = re.compile(
    r"^(?:\s|[,，、()（）&]|的|在|於|于|和|及|與|与|跟|\b(?:at|on|in|of|by|and|again|also)\b)*$",
    re.IGNORECASE,
)
# What joins two times of day into a list: "at 8am and 8pm", 早上八點、中午十二點和晚上六點.
_LIST = re.compile(
    r"^\s*(?:(?:[,，、&]|\band\b|\bagain\b|\balso\b|\bthen\b|和|及|與|与|跟|以及|還有|还有|再)\s*)+$",
    re.IGNORECASE,
)
# Dates a weekday may be said with ("Tue, Oct 6", 12月4日（週五）): the weekday is then checked.
_DATED = (AbsDate, SlashDate, NthWeekdayRef, HolidayRef, DayOfMonth, MonthRef)


# A word that makes the time words after it an exception or a contrast ("but on weekends at 9",
# 但週末九點, 除了): such time words belong to the time expression, so if they were not read the
# request is refused; they never drop into the task text.
_CONTRAST_BEFORE = re.compile(
    r"(?:\b(?:but|except(?:\s+for)?|excluding|apart\s+from|other\s+than|not|never)"
    r"|但是?|不過|不过|可是|除了|除開|除开|除去|不含|不包括)[\s,，、:：(（]*$",
    re.IGNORECASE,
)
_CONTRAST_AFTER = re.compile(
    r"^[\s,，、)）]*(?:都|也)?(?:除外|不要|不用|休息|跳過|跳过|excluded|excepted)", re.IGNORECASE
)
_BUT = re.compile(r"but\b|但|不過|不过|可是", re.IGNORECASE)
_EXCEPT_WORD = re.compile(r"除外|除了|\bexcept\b|\bexcluding\b", re.IGNORECASE)


class Unreadable(Exception):
    """Raised with the Problem to report; ``parse`` turns it into a ParseError in the user's
    language."""

    def __init__(self, found: Problem) -> None:
        super().__init__(found.key)
        self.problem = found


def fail(key: str, text: str, **params: object) -> Unreadable:
    return Unreadable(Problem(key, text, tuple((k, str(v)) for k, v in params.items())))


@dataclass
class Spec:
    recurrence: Recurrence | None = None
    date: DateRef | None = None
    offset: Offset | None = None
    slots: list[Slot] = field(default_factory=list)  # the times of day, in the order said
    slot_texts: list[str] = field(default_factory=list)  # where each came from, for errors
    window: tuple[Slot, Slot] | None = None
    count: int | None = None  # 一天三次: the number of times of day the sentence must give
    weekday_check: int | None = None  # "Tue, Oct 6": the weekday the date must fall on
    exclude: frozenset[int] = frozenset()  # "except weekends": weekdays the recurrence leaves out
    exclude_text: str = ""  # the words that said so, for errors
    start: datetime.date | None = None  # "starting 2026-12-04": first day of an every-N rule
    start_text: str = ""
    # Dates after the first in one list (1 January and 1 July): (month, day), and their words.
    more_dates: list[tuple[int, int]] = field(default_factory=list)
    more_dates_text: str = ""
    immediate: bool = False
    pieces: list[Piece] = field(default_factory=list)
    matched: str = ""

    @property
    def sets_time(self) -> bool:
        return bool(self.slots)


def touching(a: Piece, b: Piece, text: str) -> bool:
    first, second = (a, b) if a.start <= b.start else (b, a)
    return first.end <= second.start and bool(_JOINER.match(text[first.end : second.start]))


def matched_text(text: str, kept: list[Piece]) -> str:
    """The recognised expression: runs of touching pieces as written, runs joined by a space."""
    runs: list[tuple[int, int]] = []
    previous: Piece | None = None
    for p in sorted(kept, key=lambda p: p.start):
        if previous is not None and touching(previous, p, text):
            runs[-1] = (runs[-1][0], p.end)
        else:
            runs.append((p.start, p.end))
        previous = p
    return " ".join(text[a:b].strip() for a, b in runs)


def select(pieces: list[Piece], text: str) -> tuple[list[Piece], list[Piece]]:
    """Split pieces into (kept, dropped); dropped ones are read as part of the task."""
    vague = [p for p in pieces if p.problem is not None and p.problem.key == "vague"]
    if vague:  # "sometime next week": a day is given, but when in it? Ask, never pick.
        found = vague[0].problem
        assert found is not None
        raise Unreadable(found)
    kept = [p for p in pieces if not p.weak]
    weak = [p for p in pieces if p.weak]
    # A weak piece touching a kept one joins it, and may bring its neighbour: each newly kept
    # piece is compared once with the weak ones left (a work list, not a loop until nothing
    # changes, which was cubic in the number of pieces).
    joined: set[int] = set()
    todo = list(kept)
    while todo:
        k = todo.pop()
        for index, p in enumerate(weak):
            if index not in joined and touching(p, k, text):
                joined.add(index)
                kept.append(p)
                todo.append(p)
    weak = [p for index, p in enumerate(weak) if index not in joined]
    strong = list(kept)
    for p in weak:
        if p.stands_alone and not _said_elsewhere(p, strong):
            kept.append(p)
    kept.sort(key=lambda p: p.start)
    kept_ids = {id(p) for p in kept}
    return kept, [p for p in pieces if id(p) not in kept_ids]


def guard_exceptions(dropped: list[Piece], kept: list[Piece], text: str) -> None:
    """Refuse a time word left out of the expression right after "but" / "except" / 但 / 除了
    (or before 除外), and an exception word left over next to the expression: an exception or
    a contrast that was not read is never dropped into the task."""
    for p in dropped:
        before = text[max(0, p.start - 24) : p.start]
        after = text[p.end : p.end + 12]
        found = _CONTRAST_BEFORE.search(before)
        if found is not None:
            key = "contrast" if _BUT.match(found.group(0)) else "exception"
            raise fail(key, text[p.start - len(found.group(0)) : p.end].strip())
        found = _CONTRAST_AFTER.match(after)
        if found is not None:
            raise fail("exception", text[p.start : p.end + found.end()].strip())
    for word in _EXCEPT_WORD.finditer(text):
        if any(k.start <= word.start() < k.end for k in kept):
            continue
        # Next to a piece of the time expression (only spaces and commas between): unread.
        for k in kept:
            a, b = (k.end, word.start()) if k.end <= word.start() else (word.end(), k.start)
            gap = text[a:b]
            if len(gap) <= 3 and not gap.strip(" ,，、（()）"):
                start, end = min(k.start, word.start()), max(k.end, word.end())
                raise fail("exception", text[start:end].strip())


# A month, a weekday or a clock time (the words a date or time list is made of) ...
_LEFT_WORD = (
    r"(?:(?i:january|february|march|april|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec|monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday|mon|tue|tues|wed|thu|thur|thurs|fri|sat)(?![a-z])|May\b"
    r"|\d{1,2}:\d{2}|\d{1,2}\s*(?i:a\.?m\.?|p\.?m\.?)(?![a-z])"
    r"|(?:\d{1,2}|十[一二]?|[一二三四五六七八九])月|(?:週|周|星期|禮拜|礼拜)[一二三四五六日天]"
    r"|(?:\d{1,2}|[零一二兩两三四五六七八九十]{1,3})(?:點|点))"
)
# ... joined to the time expression by a list word: "on 1 January at 9am and July".
_LEFT_JOIN = r"(?:\s*(?:,|，|、|&|\band\b|和|及|與|与)\s*)"
_LEFT_AFTER = re.compile(rf"{_LEFT_JOIN}(?P<w>{_LEFT_WORD})")
_LEFT_BEFORE = re.compile(rf"(?P<w>{_LEFT_WORD}){_LEFT_JOIN}$")


def guard_leftovers(kept: list[Piece], text: str) -> None:
    """Refuse a month name, weekday name or clock time left out of the expression right next to
    it after a list word ("on 1 January at 9am and July", 一月和 ... ): the list it belongs to
    was not read, and it must never stay in the task as if it were."""
    starts = {p.start for p in kept}
    ends = {p.end for p in kept}
    for p in kept:
        found = _LEFT_AFTER.match(text, p.end)
        if found is not None and not _inside(kept, found.start("w")) and not any(
                p.end < s <= found.start("w") for s in starts):
            raise fail("leftover", found.group("w"))
        before = _LEFT_BEFORE.search(text[max(0, p.start - 24) : p.start])
        if before is not None:
            at = p.start - len(before.group(0))
            if not _inside(kept, at) and not any(at <= e < p.start for e in ends):
                raise fail("leftover", before.group("w"))


def _inside(kept: list[Piece], at: int) -> bool:
    return any(k.start <= at < k.end for k in kept)


def _said_elsewhere(p: Piece, strong: list[Piece]) -> bool:
    if p.problem is None and p.guards == "day":
        # "the quarterly figures": the day said elsewhere wins, unless it completes the rule
        # ("send the quarterly report on the 15th": quarterly on the 15th).
        return any(s.sets_day and not _completes(p, s) for s in strong)
    if p.problem is not None:
        # "after lunch" away from the time expression is the task's, once a time is said; an
        # unknown holiday once a day is said. Until then it could change the time: refused.
        if p.guards == "clock":
            return any(s.sets_clock for s in strong)
        if p.guards == "day":
            return any(s.sets_day for s in strong)
        return bool(strong)
    if p.sets_clock and any(s.sets_clock for s in strong):
        return True
    return p.sets_day and any(s.sets_day for s in strong)


def _completes(p: Piece, day: Piece) -> bool:
    """Whether ``day`` only names the day of the month ``p``'s quarterly rule lacks."""
    rec = p.recurrence
    return (isinstance(rec, MonthlyDays) and not rec.day_given and isinstance(day.date, DayOfMonth)
            and day.recurrence is None and day.offset is None and not day.immediate)


def merge(kept: list[Piece], text: str) -> Spec:
    spec = Spec(pieces=kept, matched=matched_text(text, kept))
    has_window = any(p.window is not None for p in kept)
    for p in kept:
        if p.problem is not None:
            if p.problem.key == "need_hours" and has_window:
                continue  # 上班時間 ... 九點到六點: the hours are said
            raise Unreadable(p.problem)
    previous: Piece | None = None  # the last piece that gave a time of day
    last_date: Piece | None = None  # the last piece that gave a date
    counted = any(p.count is not None for p in kept)
    for p in kept:
        if p.problem is not None:
            continue
        if last_date is not None and _listed_date(spec, last_date, p, text):
            assert isinstance(p.date, AbsDate)
            _add_dates(spec, ((p.date.month, p.date.day), *p.more_dates), p.text)
            last_date = p
            continue
        _merge_one(spec, p)
        if p.more_dates:
            _add_dates(spec, p.more_dates, p.text)
        if p.date is not None or isinstance(p.recurrence, Yearly):
            last_date = p
        if p.clock is not None or p.daypart is not None:
            _merge_slot(spec, p, previous, text, counted)
            previous = p
    if spec.more_dates:
        _fold_dates(spec)
    return spec


def _listed_date(spec: Spec, last: Piece, p: Piece, text: str) -> bool:
    """Whether ``p`` is a further date in a list after ``last``: "1 January and 1 July",
    每年1月1日和7月1日 (a plain month and day, joined by a list word)."""
    day = p.date
    if not isinstance(day, AbsDate) or day.year is not None or day.year_offset is not None:
        return False
    if p.recurrence is not None or p.clock is not None or p.daypart is not None:
        return False
    if not isinstance(spec.date, AbsDate) and not isinstance(spec.recurrence, Yearly):
        return False
    return last.end <= p.start and bool(_LIST.match(text[last.end : p.start]))


def _add_dates(spec: Spec, dates: tuple[tuple[int, int], ...], said: str) -> None:
    spec.more_dates.extend(dates)
    spec.more_dates_text = spec.more_dates_text or said


def _fold_dates(spec: Spec) -> None:
    """Several dates in one list: every year on them (one rule over the months when they share
    the day of the month, else one rule per date), or refused: a one-time job has one date."""
    rec, said = spec.recurrence, spec.more_dates_text
    if rec is None and isinstance(spec.date, AbsDate) and spec.date.year is None:
        raise fail("several_dates", said)
    if not isinstance(rec, Yearly):
        raise fail("conflict", said)
    dates = {(rec.month, rec.day), *spec.more_dates}
    days = {d for _, d in dates}
    if len(days) != 1:
        spec.recurrence = YearlyDates(tuple(sorted(dates)))
        return
    months = tuple(sorted(m for m, _ in dates))
    spec.recurrence = MonthlyDays((days.pop(),), months=months)


def _merge_one(spec: Spec, p: Piece) -> None:
    if p.immediate:
        if spec.immediate:
            return
        spec.immediate = True
    if p.recurrence is not None:
        spec.recurrence = _merge_recurrence(spec.recurrence, p.recurrence, p)
    if p.date is not None:
        _merge_date(spec, p.date, p)
    for name in ("offset", "window", "count"):
        value = getattr(p, name)
        if value is None:
            continue
        current = getattr(spec, name)
        if current is not None and current != value:
            raise fail("conflict", p.text)
        setattr(spec, name, value)
    if p.first_day is not None:
        if spec.start not in (None, p.first_day):
            raise fail("conflict", p.text)
        spec.start, spec.start_text = p.first_day, p.text
    if p.exclude is not None:
        spec.exclude |= p.exclude
        spec.exclude_text = spec.exclude_text or p.text
    _fold_day_into_recurrence(spec, p)
    # At most one of: now, a recurrence, a day, an offset; "now" takes no time of day either.
    kinds = [spec.recurrence, spec.date, spec.offset]
    used = sum(k is not None for k in kinds) + spec.immediate
    gives_clock = p.clock is not None or p.daypart is not None or p.window is not None
    if used > 1 or (spec.immediate and (spec.slots or gives_clock)):
        raise fail("conflict", p.text)


def _merge_slot(
    spec: Spec, p: Piece, previous: Piece | None, text: str, counted: bool
) -> None:
    """A piece's time of day opens a new slot after a list word, else completes the open one
    (tomorrow morning ... at 8); "at 8, 12 and 18" brings its further times along. After 一天兩次
    two clocks are two times even without a list word (早上八點晚上八點)."""
    new = Slot(p.clock, p.daypart)
    listed = previous is not None and bool(_LIST.match(text[previous.end : p.start]))
    if counted and spec.slots and spec.slots[-1].clock is not None and new.clock is not None:
        listed = True
    if not spec.slots or listed:
        spec.slots.append(new)
        spec.slot_texts.append(p.text)
    else:
        last = spec.slots[-1]
        clock = _same_or_none(last.clock, new.clock)
        daypart = _same_or_none(last.daypart, new.daypart)
        if clock is False or daypart is False:
            raise fail("conflict", p.text)
        spec.slots[-1] = Slot(clock or None, daypart or None)  # type: ignore[arg-type]
        if new.clock is not None:  # an error about this time names the clock (9pm), not 早上
            spec.slot_texts[-1] = p.text
    for extra in p.more:
        spec.slots.append(Slot(extra, p.daypart))
        spec.slot_texts.append(p.text)


def _same_or_none(a: object, b: object) -> object:
    """The one of two values that is set; False when both are set and differ."""
    if a is None or b is None or a == b:
        return a if a is not None else b
    return False


def _merge_date(spec: Spec, new: DateRef, p: Piece) -> None:
    """Two day words may narrow each other: "next week on Tuesday", "next month on the 3rd",
    "Tue, Oct 6" (the weekday is checked against the date); anything else contradicts."""
    current = spec.date
    if current is None or current == new:
        spec.date = new
        return
    for a, b in ((current, new), (new, current)):
        if isinstance(a, WeekdayRef) and a.week is None and isinstance(b, _DATED):
            if spec.weekday_check not in (None, a.weekday):
                raise fail("conflict", p.text)
            spec.weekday_check, spec.date = a.weekday, b
            return
        if isinstance(a, WeekRef) and isinstance(b, WeekdayRef) and b.week is None:
            spec.date = WeekdayRef(b.weekday, a.weeks)
            return
        if isinstance(a, MonthRef) and a.day is None and isinstance(b, DayOfMonth):
            spec.date = MonthRef(a.months, b.day)
            return
    raise fail("conflict", p.text)


def _fold_day_into_recurrence(spec: Spec, p: Piece) -> None:
    """"every 2 weeks ... on Monday", "quarterly on the 15th": the day completes the rule."""
    rec, day = spec.recurrence, spec.date
    if rec is None or day is None:
        return
    if isinstance(rec, Anchored) and rec.unit == "week" and isinstance(day, WeekdayRef):
        if day.week is None:
            spec.recurrence, spec.date = Weekly(frozenset({day.weekday}), rec.interval), None
    elif isinstance(rec, Anchored) and rec.unit == "month" and isinstance(day, DayOfMonth):
        spec.recurrence, spec.date = MonthlyDays((day.day,), rec.interval), None
    elif isinstance(rec, MonthlyDays) and not rec.day_given and isinstance(day, DayOfMonth):
        spec.recurrence = replace(rec, days=(day.day,), day_given=True)
        spec.date = None
    elif isinstance(rec, Anchored) and rec.unit == "year":
        # 每年 + a date: 每年的農曆三月初三, every year on Christmas, annually on March 8.
        if isinstance(day, AbsDate) and day.year is None and day.year_offset is None:
            spec.recurrence, spec.date = Yearly(day.month, day.day), None
        elif isinstance(day, HolidayRef):
            spec.recurrence, spec.date = yearly_holiday(day.holiday), None
        elif isinstance(day, NthWeekdayRef) and day.month is not None and day.year_offset is None:
            spec.recurrence, spec.date = YearlyNth(day.month, day.nth, day.weekday), None


def _merge_recurrence(current: Recurrence | None, new: Recurrence, p: Piece) -> Recurrence:
    """每個工作日 + 每兩小時, 每天 + 週一到週五: compatible readings narrow each other."""
    if current is None or current == new:
        return new
    pair = (current, new)
    for a, b in (pair, pair[::-1]):
        if isinstance(a, Daily) and a.interval == 1 and isinstance(b, Weekly | Every):
            return b
        if isinstance(a, Every) and a.days is None and isinstance(b, Weekly) and b.interval == 1:
            return replace(a, days=b.days)
        if isinstance(a, Daily) and a.interval == 1 and isinstance(b, MonthlyDays):
            return b  # 一天三次 ... 每月1號
    raise fail("conflict", p.text)
