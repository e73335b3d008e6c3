"""Rules for English time expressions."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal

from onthedot.nl import common
from onthedot.nl.holidays import shifted, yearly_holiday
from onthedot.nl.numbers import EN_NUM, EN_ORD, en_ordinal, en_to_int
from onthedot.nl.parts import (
    AbsDate,
    Anchored,
    Clock,
    Daily,
    DayOfMonth,
    Daypart,
    Every,
    HolidayRef,
    MonthlyDays,
    MonthlyNth,
    MonthRef,
    NthWeekdayRef,
    Offset,
    Piece,
    Problem,
    RelativeDay,
    SlashDate,
    Slot,
    WeekdayRef,
    Weekly,
    WeekRef,
    Yearly,
    piece,
    problem,
)
from onthedot.nl.scan import Rule, rule

DAY_FULL = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
DAY_ANY = (
    r"(?:mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:rs?(?:day)?)?|fri(?:day)?"
    r"|sat(?:urday)?|sun(?:day)?)"
)
_SEP = r"\s*(?:,\s*(?:and\s+)?|\band\b|&|/|\bor\b)\s*"
_RANGE = r"\s*(?:-|\bto\b|\bthrough\b|\bthru\b|\buntil\b|\btill\b)\s*"
# Lists are bounded (a week has seven days, a month 31): a list followed by a word it needs
# ("... excluded") is then tried in constant time at each position, not to the end of the text.
DAYLIST = rf"\b{DAY_ANY}s?\b(?:(?:{_SEP}|{_RANGE}){DAY_ANY}s?\b){{0,13}}"
PLURALS = rf"\b{DAY_FULL}s\b(?:(?:{_SEP}|{_RANGE}){DAY_FULL}s\b){{0,13}}"
MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
MD = (
    rf"(?:(?P<mon>{MONTH})\s+(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b"
    rf"|(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon2>{MONTH})(?![a-z]))"
)
ORDLIST = rf"(?:the\s+)?{EN_ORD}\b(?:\s*(?:,|\band\b|&)\s*(?:the\s+)?{EN_ORD}\b){{0,30}}"
NTH = r"(?:first|second|third|fourth|fifth|last|1st|2nd|3rd|4th|5th)"
UNIT = r"(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?)"
NUMBER = rf"(?:\d+\.\d+|{EN_NUM})"  # 1.5 hours
# A time of day inside a list or a window: 8, 7:30, 9am, 5 pm, noon.
TIME = r"(?:\d{1,2}(?::\d{2})?(?:\s*(?:a\.?m\.?|p\.?m\.?)(?![a-z]))?|noon|midnight)"
QUARTERS = (1, 4, 7, 10)
DAYPARTS = {
    "morning": Daypart.MORNING, "afternoon": Daypart.AFTERNOON,
    "evening": Daypart.EVENING, "night": Daypart.EVENING, "tonight": Daypart.EVENING,
}  # fmt: skip
_DAY_NAMES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

_fixed = common.fixed_builder
_fail = common.fail_builder


def weekday(word: str) -> int:
    return _DAY_NAMES.index(word.lower()[:3])


def day_list(text: str) -> frozenset[int]:
    items: list[int | None] = []
    for token in re.finditer(rf"{DAY_ANY}|{_RANGE}", text.lower()):
        word = token.group(0).strip()
        items.append(weekday(word) if word[:1].isalpha() and word[:3] in _DAY_NAMES else None)
    return common.expand_days(items)


def _n(text: str | None) -> int | None:
    if not text:
        return 1
    return 2 if text.lower() in ("other", "second") else en_to_int(text)


def _amount(text: str, unit: str | None) -> tuple[int, str] | None:
    """("1.5", "hour") -> (90, "minute"); ("3", "day") -> (3, "day"); None if unreadable."""
    if "." in text:
        minutes = common.fraction_minutes(float(text), unit)
        return None if minutes is None else (minutes, "minute")
    n = en_to_int(text)
    return None if n is None or unit is None else (n, unit)


def _month_day(m: re.Match[str]) -> tuple[int, int] | None:
    mon = m.group("mon") or m.group("mon2")
    day = int(m.group("d") or m.group("d2"))
    month = MONTHS.index(mon.lower()[:3]) + 1
    return (month, day) if common.valid_month_day(month, day) else None


def _daily_part(m: re.Match[str]) -> Piece:
    return piece(m, recurrence=Daily(), daypart=DAYPARTS[m.group("dp").lower()])


def _interval(m: re.Match[str]) -> Piece:
    text = m.groupdict().get("n")
    unit = common.en_unit(m.group("u"))
    if text and "." in text:  # every 1.5 hours
        minutes = common.fraction_minutes(float(text), unit)
        if minutes is None or unit == "day":
            return problem(m, "unparsed")
        return piece(m, recurrence=Every.minutes(minutes))
    n = _n(text)
    if n is None or n == 0:
        return problem(m, "unparsed")
    return common.interval_piece(m, n, unit)


def _weekly(m: re.Match[str]) -> Piece:
    n = _n(m.groupdict().get("n"))
    if n is None or n == 0:
        return problem(m, "unparsed")
    return piece(m, recurrence=Weekly(day_list(m.group("days")), n))


def _monthly(m: re.Match[str]) -> Piece:
    n = _n(m.groupdict().get("n"))
    days = [en_ordinal(d) for d in re.findall(EN_ORD, m.group("days"), re.IGNORECASE)]
    if n is None or n == 0 or any(d is None or not 1 <= d <= 31 for d in days):
        return problem(m, "bad_date")
    return piece(m, recurrence=MonthlyDays(tuple(sorted({d for d in days if d})), n))


def _monthly_nth(m: re.Match[str]) -> Piece:
    nth = en_ordinal(m.group("nth"))
    # "every second Tuesday" is fortnightly in British usage: only "of the month" settles it.
    if nth is None or (nth == 2 and "month" not in m.group(0).lower()):
        return problem(m, "unparsed")
    return piece(m, recurrence=MonthlyNth(nth, weekday(m.group("d"))))


def _yearly(m: re.Match[str]) -> Piece:
    md = _month_day(m)
    return problem(m, "bad_date") if md is None else piece(m, recurrence=Yearly(*md))


def _month_list(m: re.Match[str]) -> Piece:
    """"on day 1 of January and July", "every year on days 1 and 15 of January and April": the
    days named in each month named, every year with every / each / yearly / annually."""
    days = [int(x) for x in re.findall(r"\d+", (m.group("ds") or m.group("ds2")))]
    months = [MONTHS.index(w.lower()[:3]) + 1 for w in re.findall(MONTH, m.group("mons"), re.I)]
    return common.month_list(m, days, months, bool(m.group("every") or m.group("every2")))


def _relative_day(m: re.Match[str]) -> Piece:
    word = m.group(0).lower()
    if m.string[m.end() : m.end() + 2] in ("'s", "’s"):
        # "today's news" names a topic; it is a time only if nothing else says when.
        return piece(m, date=RelativeDay(1 if word.startswith("tom") else 0), weak=True)
    if "after" in word:
        return piece(m, date=RelativeDay(2))
    if word.startswith("to") and "night" in word:
        return piece(m, date=RelativeDay(0), daypart=Daypart.EVENING)
    return piece(m, date=RelativeDay(0 if word.startswith("today") else 1))


def _this_daypart(m: re.Match[str]) -> Piece:
    return piece(m, date=RelativeDay(0), daypart=DAYPARTS[m.group("dp").lower()])


def _weekday_ref(m: re.Match[str]) -> Piece:
    pre = " ".join((m.groupdict().get("pre") or "").lower().split())
    if pre == "last":
        return problem(m, "passed")
    week = 1 if pre == "next" or m.groupdict().get("nextweek") else None
    bare = not pre and not m.group(0).lower().startswith("on")
    return piece(m, date=WeekdayRef(weekday(m.group("d")), week), weak=bare)


def _abs_date(m: re.Match[str]) -> Piece:
    md = _month_day(m)
    if md is None:
        return problem(m, "bad_date")
    year = int(m.group("y")) if m.group("y") else None
    return piece(m, date=AbsDate(md[0], md[1], year))


def _iso(m: re.Match[str]) -> Piece:
    month, day = int(m.group("m")), int(m.group("d"))
    if not common.valid_month_day(month, day):
        return problem(m, "bad_date")
    date = AbsDate(month, day, int(m.group("y")))
    if m.group("hh") is None:
        return piece(m, date=date)
    hour, minute = int(m.group("hh")), int(m.group("mm"))
    if hour > 23 or minute > 59:
        return problem(m, "bad_hour")
    return piece(m, date=date, clock=Clock(hour, minute))


def _offset(m: re.Match[str]) -> Piece | None:
    unit = common.offset_unit(common.en_unit(m.group("u")))
    text = m.group("n") or "1"
    if "." in text:  # in 1.5 hours
        minutes = common.fraction_minutes(float(text), unit)
        if minutes is None or m.groupdict().get("half"):
            return problem(m, "unparsed")
        return piece(m, offset=Offset(minutes, "minute"))
    n = en_to_int(text)
    if n is None or unit is None:
        return problem(m, "unparsed")
    if m.groupdict().get("half"):
        if unit != "hour":
            return problem(m, "unparsed")
        return piece(m, offset=Offset(60 * n + 30, "minute"))
    return piece(m, offset=Offset(n, unit))


def _offset_hm(m: re.Match[str]) -> Piece:
    hours, minutes = en_to_int(m.group("h")), en_to_int(m.group("mi"))
    if hours is None or minutes is None:
        return problem(m, "unparsed")
    return piece(m, offset=Offset(60 * hours + minutes, "minute"))


def _clock(m: re.Match[str]) -> Piece:
    hour = en_to_int(m.group("h"))
    minute = int(m.groupdict().get("m") or 0)
    if m.groupdict().get("mer"):
        return common.ampm_piece(m)
    if hour is None or hour > 23:
        return problem(m, "bad_hour")
    if minute > 59:
        return problem(m, "bad_minute")
    return piece(m, clock=Clock(hour, minute))


def _past(m: re.Match[str]) -> Piece:
    """half past nine, a quarter to 5pm, ten past eight, twenty to nine, a quarter to noon."""
    word = m.group("h").lower()
    kind = " ".join(m.group("k").lower().split())
    mer = m.groupdict().get("mer")
    meridiem: Literal["am", "pm"] | None = None
    hour: int | None = 12
    if word in ("noon", "midday", "midnight"):
        # 12 on the clock, with its half of the day: a quarter to noon is 11:45 am, ten past
        # midnight 00:10, a quarter to midnight 23:45.
        before = kind.endswith(("to", "of"))
        meridiem = "am" if (word == "midnight") != before else "pm"
    else:
        hour = en_to_int(word)
    if hour is None or not 1 <= hour <= 12:
        return problem(m, "bad_hour")
    if mer:
        meridiem = "am" if mer.lower().startswith("a") else "pm"
    if kind.startswith("half"):
        minutes = 30
    elif kind.startswith("quarter"):
        minutes = 15
    else:
        count = en_to_int(kind.split()[0])
        if count is None or not 1 <= count <= 30:
            return problem(m, "bad_minute")
        minutes = count
    if kind.endswith(("to", "of")):
        # A quarter to 5pm is 16:45: the hour before, same half of the day (12 -> 11).
        return piece(m, clock=Clock(hour - 1 if hour > 1 else 12, 60 - minutes, meridiem))
    return piece(m, clock=Clock(hour, minutes, meridiem))


def _time_slot(text: str) -> Slot | None:
    """One time of a list or window: "9am", "7:30", "noon"; None when not a time of day."""
    word = text.strip().lower()
    if word == "noon":
        return Slot(Clock(12, 0))
    if word == "midnight":
        return Slot(Clock(0, 0, end_of_day=True))
    found = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?\s*(?:(a|p)\.?m\.?)?", word)
    if found is None:
        return None
    hour, minute = int(found.group(1)), int(found.group(2) or 0)
    meridiem = {"a": "am", "p": "pm"}.get(found.group(3) or "")
    if minute > 59 or hour > (12 if meridiem else 23) or (meridiem and hour == 0):
        return None
    return Slot(Clock(hour, minute, meridiem))  # type: ignore[arg-type]


def _time_list(m: re.Match[str]) -> Piece:
    """at 8, 12 and 18 / at 7:30 and 22:00 / at 7 and 9 pm (the last am/pm covers bare hours)."""
    texts = re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", m.group("list").strip())
    slots = [_time_slot(t) for t in texts if t]
    if any(s is None or s.clock is None for s in slots):
        return problem(m, "bad_hour")
    clocks = [s.clock for s in slots if s is not None and s.clock is not None]
    last = clocks[-1].meridiem
    if last is not None and all(c.meridiem is None and 1 <= c.hour <= 12 for c in clocks[:-1]):
        clocks = [Clock(c.hour, c.minute, last) for c in clocks[:-1]] + [clocks[-1]]
    return piece(m, clock=clocks[0], more=tuple(clocks[1:]))


def _window(m: re.Match[str]) -> Piece:
    first, last = _time_slot(m.group("a")), _time_slot(m.group("b"))
    if first is None or last is None:
        return problem(m, "bad_hour")
    return piece(m, window=(first, last))


def _slash(m: re.Match[str]) -> Piece:
    year = int(m.group("y")) if m.group("y") else None
    return piece(m, date=SlashDate(int(m.group("a")), int(m.group("b")), year))


def _nth_of_month(m: re.Match[str]) -> Piece:
    nth = en_ordinal(m.group("nth"))
    if nth is None:
        return problem(m, "bad_date")
    when = " ".join(m.group("when").lower().split())
    wd = weekday(m.group("d"))
    if when in ("next month", "this month"):
        return piece(m, date=NthWeekdayRef(nth, wd, months_ahead=1 if "next" in when else 0))
    month = MONTHS.index(when[:3]) + 1
    year = int(m.group("y")) - 0 if m.group("y") else None
    if year is not None:
        return piece(m, date=NthWeekdayRef(nth, wd, month=month, year_offset=None))
    return piece(m, date=NthWeekdayRef(nth, wd, month=month))


def _day_of_rel_month(m: re.Match[str]) -> Piece:
    day = en_ordinal(m.group("d"))
    if day is None or not 1 <= day <= 31:
        return problem(m, "bad_date")
    return piece(m, date=MonthRef(1 if m.group("rel").lower() == "next" else 0, day))


def _holiday(m: re.Match[str]) -> Piece:
    key = holiday_key(m.group("name"))
    if key is None:
        return problem(m, "unknown_holiday")
    if m.groupdict().get("dir"):  # the day after Christmas, two days before Mother's Day
        count = en_to_int(m.group("sn")) if m.group("sn") else 1
        if count is None or count == 0:
            return problem(m, "unparsed")
        days = count * (7 if (m.group("su") or "").lower().startswith("week") else 1)
        after = m.group("dir").lower().startswith(("after", "following"))
        key = shifted(key, days if after else -days)
    if m.groupdict().get("every"):
        return piece(m, recurrence=yearly_holiday(key))
    return piece(m, date=HolidayRef(key))


def _lunar(m: re.Match[str]) -> Piece:
    month, day = int(m.group("m")), int(m.group("d"))
    if not (1 <= month <= 12 and 1 <= day <= 30):
        return problem(m, "bad_date")
    return piece(m, date=HolidayRef(f"lunar:{month}:{day}"))


def _unknown_holiday(m: re.Match[str]) -> Piece | None:
    if holiday_key(m.group("name")) is not None:
        return None  # a holiday we know: its own rule reads it
    found = problem(m, "unknown_holiday", weak=True, guards="day")
    return replace(found, problem=replace_problem_text(found, m.group("name")))


def _from_end(m: re.Match[str]) -> Piece:
    """the 3rd-to-last day / 3 days before the end / the last working day, of every month or
    quarter."""
    quarter = "quarter" in m.group(0).lower()
    if m.group("wn"):
        word = " ".join(m.group("wn").lower().replace("-", " ").split())
        nth = -2 if word in ("second last", "second to last", "penultimate") else (
            -1 if word == "final" else en_ordinal(word))
        return common.workday_piece(m, nth, quarter)
    if m.group("pen"):
        return common.month_end_piece(m, 2, quarter)
    if m.group("k"):
        back = 2 if m.group("k").lower() == "second" else en_ordinal(m.group("k"))
    else:
        count = en_to_int(m.group("n"))
        back = None if count is None else count + 1  # 3 days before the last day: 4th-to-last
    return common.month_end_piece(m, back or 0, quarter)


def _adjective(m: re.Match[str]) -> Piece:
    """hourly/daily/nightly/quarterly before a noun: the repetition unless another word gives
    the day (guards="day": "on 1 May send the quarterly figures" keeps it in the task)."""
    word = m.group(0).lower()
    if word == "hourly":
        return piece(m, recurrence=Every.minutes(60), weak=True, guards="day")
    if word == "nightly":
        return piece(m, recurrence=Daily(), daypart=Daypart.EVENING, weak=True, guards="day")
    if word == "quarterly":
        found = MonthlyDays((1,), months=QUARTERS, day_given=False)
        return piece(m, recurrence=found, weak=True, guards="day")
    return piece(m, recurrence=Daily(), weak=True, guards="day")


def _except(m: re.Match[str]) -> Piece:
    words = " ".join(m.group("off").lower().split())
    if words.startswith("weekend"):
        days = frozenset({5, 6})
    elif words.startswith(("weekday", "work", "business")):
        days = frozenset(range(5))
    else:
        days = day_list(words)
    return common.except_piece(m, days)


def _same_time_offset(m: re.Match[str]) -> Piece:
    return piece(m, offset=Offset(1, "month" if "month" in m.group(0).lower() else "week"))


def _daypart(m: re.Match[str]) -> Piece:
    word = m.group("dp").lower()
    phrase = m.group(0).lower()
    # A bare "morning" is often prose (the morning news); "in the morning" never is.
    weak = not (phrase.startswith("in") or phrase.startswith("at"))
    return piece(m, daypart=DAYPARTS[word], weak=weak, stands_alone=not weak)


_APOS = r"['’]?"
_HOLIDAY_NAMES: dict[str, str] = {
    "christmas eve": "christmas_eve", "christmas": "christmas", "christmas day": "christmas",
    "xmas": "christmas", "new year's eve": "new_year_eve", "new year's day": "new_year",
    "new year's": "new_year", "new year": "new_year", "valentine's day": "valentine",
    "valentine's": "valentine", "halloween": "halloween", "thanksgiving": "thanksgiving",
    "thanksgiving day": "thanksgiving", "mother's day": "mothers_day",
    "father's day": "fathers_day", "memorial day": "memorial_day", "labor day": "labor_day_us",
    "labour day": "labour_day_may", "easter": "easter", "easter sunday": "easter",
    "easter monday": "easter_monday", "good friday": "good_friday", "boxing day": "boxing_day",
    "st patrick's day": "st_patrick", "st. patrick's day": "st_patrick",
    "saint patrick's day": "st_patrick", "independence day": "independence_day",
    "the fourth of july": "independence_day", "fourth of july": "independence_day",
    "chinese new year": "lunar_new_year", "lunar new year": "lunar_new_year",
    "chinese new year's eve": "lunar_new_year_eve", "lunar new year's eve": "lunar_new_year_eve",
    "lantern festival": "lantern", "dragon boat festival": "dragon_boat",
    "mid-autumn festival": "mid_autumn", "mid autumn festival": "mid_autumn",
    "moon festival": "mid_autumn", "double ninth festival": "double_ninth",
    "double ninth": "double_ninth", "qixi festival": "qixi", "qixi": "qixi",
    "international women's day": "womens_day", "women's day": "womens_day",
}  # fmt: skip
HOLIDAY = (
    r"(?P<name>christmas\s+eve|christmas(?:\s+day)?|xmas|new\s+year'?s\s+eve"
    r"|new\s+year'?s(?:\s+day)?|new\s+year|valentine'?s(?:\s+day)?|halloween"
    r"|thanksgiving(?:\s+day)?|mother'?s\s+day|father'?s\s+day|memorial\s+day|labou?r\s+day"
    r"|easter(?:\s+sunday|\s+monday)?|good\s+friday|boxing\s+day"
    r"|(?:st\.?|saint)\s+patrick'?s\s+day|independence\s+day|(?:the\s+)?fourth\s+of\s+july"
    r"|(?:chinese|lunar)\s+new\s+year(?:'?s\s+eve)?|lantern\s+festival|dragon\s+boat\s+festival"
    r"|mid[-\s]?autumn\s+festival|moon\s+festival|double\s+ninth(?:\s+festival)?"
    r"|qixi(?:\s+festival)?|(?:international\s+)?women'?s\s+day)\b"
)
# Holidays whose dates we do not know, and any "<Capitalised> Day/Eve/Festival": refused.
_OTHER_HOLIDAY = (
    r"(?P<name>diwali|deepavali|hanukk?ah|chanukah|ramadan|eid(?:\s+al[-\s]\w+)?|passover"
    r"|yom\s+kippur|rosh\s+hashanah|holi|vesak|songkran|purim|lent|ash\s+wednesday|pentecost"
    r"|whitsun|ascension\s+day|mothering\s+sunday|(?-i:[A-Z][\w.']{0,30}(?:\s+[A-Z][\w.']{0,30}){0,4}"
    r"\s+(?:Day|Eve|Festival)))\b"
)


def holiday_key(name: str) -> str | None:
    word = " ".join(name.lower().replace("’", "'").replace("-", " ").split())
    word = word.replace("mid autumn", "mid-autumn")
    return _HOLIDAY_NAMES.get(word) or _HOLIDAY_NAMES.get(word.replace("'", ""))


def replace_problem_text(p: Piece, text: str) -> Problem:
    assert p.problem is not None
    return replace(p.problem, text=text)


_EVERY = r"\b(?:every|each)\s+"
_ON = r"\b(?:on\s+)?"
_ITEM = r"(?:\s*,\s*(?:and\s+)?|\s*&\s*|\s+and\s+)"  # between the items of a short list
# Days counted from a holiday: "the day after", "two days before", "a week before".
_SHIFT = (
    rf"(?:(?:the\s+)?(?:(?P<sn>{EN_NUM}|a|one)\s+(?P<su>days?|weeks?)|day)\s+"
    r"(?P<dir>before|after|following|prior\s+to)\s+)?"
)
# The day of a month counted from its end, or its nth working day (Monday to Friday).
_FROM_END = (
    rf"(?:the\s+)?(?:(?P<k>{EN_ORD}|second)[\s-]+(?:to[\s-]+)?last\s+day|(?P<pen>penultimate)\s+day"
    rf"|(?P<n>{EN_NUM}|a|one)\s+days?\s+before\s+the\s+(?:end|last\s+day)"
    r"|(?P<wn>first|second|third|fourth|fifth|1st|2nd|3rd|4th|5th|last|final"
    r"|second[\s-]+(?:to[\s-]+)?last|penultimate)\s+(?:working|work|business|week)\s*day)"
)
# Followed by a word that is not part of a time expression: an adjective ("the daily report").
_ADJECTIVE = (
    r"(?=\s+(?!(?:on|at|in|from|between|every|each|and|or|starting|until|till|for|by|during"
    r"|except|excluding|but|apart|other|save|not|never|no|basis|then|after|before|around|through"
    r"|the|a|an|to|please|with|without|except)\b)[a-z])"
)
_EXCEPT = (
    r"\b(?:except(?:\s+for)?|excluding|exclusive\s+of|other\s+than|apart\s+from|save\s+for"
    r"|but\s+not|but\s+never|not|never|skip(?:ping)?|no)"
)
_OFF_DAYS = rf"(?:{DAYLIST}|weekends?|weekend\s+days|weekdays|work(?:ing)?\s*days|business\s+days)"
RULES: list[Rule] = [
    # Words that name a kind of thing, not when ("review the hourly logs", "send the quarterly
    # figures", "daily standup"): weak, so a day said elsewhere wins and they stay in the task.
    rule(rf"\b(?:hourly|daily|nightly|quarterly){_ADJECTIVE}",
         lambda m: _adjective(m)),
    # Exceptions: "except weekends", "but not on Saturdays and Sundays", "weekends excluded".
    rule(rf"{_EXCEPT}\s+(?:on\s+|for\s+)?(?:the\s+)?(?P<off>{_OFF_DAYS})", _except),
    rule(rf"\b(?P<off>{_OFF_DAYS})\s+(?:excluded|excepted|skipped|off|not\s+included)\b", _except),
    # Exceptions the schedule cannot say (holidays, dates, conditions): refused, never dropped.
    rule(
        rf"{_EXCEPT}\s+(?:on\s+|for\s+|during\s+|in\s+|when\s+|if\s+)?(?:the\s+|a\s+)?"
        r"(?:(?:public|bank|national|federal|school|company|official|statutory|legal)\s+)?"
        rf"(?:holidays?|vacations?|{HOLIDAY}|{MONTH}(?![a-z])|\d+\w*|{EN_ORD}\b|first\b|last\b"
        r"|it\b|there\b|days?\b|weeks?\b|months?\b|every\b|each\b|today\b|tomorrow\b)",
        _fail("exception"),
    ),
    rule(r"\b(?:(?:public|bank|national|federal)\s+)?holidays\s+(?:excluded|excepted|off|skipped)\b",
         _fail("exception")),
    # "except weekends and holidays": the days are read only if all of the exception is.
    rule(
        rf"{_EXCEPT}\s+(?:on\s+|for\s+)?(?:the\s+)?{_OFF_DAYS}\s*(?:,\s*|\band\s+|\bor\s+|&\s*)"
        r"(?:on\s+|the\s+)?(?:(?:public|bank|national|federal|school|company)\s+)?"
        r"(?:holidays?|vacations?)\b",
        _fail("exception"),
    ),
    # Days counted from the end of the month, working days.
    rule(rf"{_ON}{_FROM_END}\s+(?:of|in)\s+(?:every|each)\s+(?P<per>month|quarter)\b", _from_end),
    rule(
        rf"(?:{_EVERY}(?P<per2>month|quarter)|\b(?:monthly|quarterly))\s*,?\s+(?:on\s+)?{_FROM_END}"
        r"(?:\s+of\s+the\s+(?:month|quarter))?",
        _from_end,
    ),
    # Said of one month ("the last working day of the month"): not read yet, never dropped.
    rule(rf"{_ON}{_FROM_END}\s+(?:of|in)\s+(?:the|this|next)\s+(?:month|quarter)\b",
         _fail("unparsed")),
    # "starting 2026-12-04": the first day of an every-N-weeks or -months rule.
    rule(r"\bstarting\s+(?:on\s+|from\s+)?(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b",
         lambda m: common.start_piece(m)),
    # "this time tomorrow", "same time next week": the clock of the request.
    rule(
        r"\b(?:at\s+)?(?:this|the\s+same|same)\s+time\s+next\s+(?:week|month)\b"
        r"|\bnext\s+(?:week|month),?\s+(?:at\s+)?(?:this|the\s+same|same)\s+time\b",
        _same_time_offset,
    ),
    rule(r"\b(?:at\s+)?(?:this|the\s+same|same)\s+time(?:\s+of\s+(?:the\s+)?day)?\b",
         common.same_time_piece),
    # "every first of the month", "each 15th of the month".
    rule(
        rf"{_EVERY}(?P<days>{ORDLIST})\s+(?:day\s+)?of\s+(?:the|every|each|a)\s+month\b",
        _monthly,
    ),
    # Recurrence
    rule(
        r"\b(?:every\s*day|each\s+day|daily|every\s+single\s+day)\b",
        _fixed(recurrence=Daily()),
    ),
    rule(rf"{_EVERY}(?:single\s+)?(?P<dp>morning|afternoon|evening|night)\b", _daily_part),
    rule(r"\bnightly\b", _fixed(recurrence=Daily(), daypart=Daypart.EVENING)),
    rule(rf"\bevery\s+(?P<n>other|{NUMBER})\s+(?P<u>{UNIT})\b", _interval),
    rule(rf"{_EVERY}(?P<u>second|sec|minute|min|hour|day)\b", _interval),
    rule(r"\bhourly\b|\bevery\s+sixty\s+minutes\b", _fixed(recurrence=Every.minutes(60))),
    rule(r"\bevery\s+half\s+(?:an\s+)?hour\b", _fixed(recurrence=Every.minutes(30))),
    rule(r"\bevery\s+quarter\s+(?:of\s+an\s+)?hour\b", _fixed(recurrence=Every.minutes(15))),
    rule(r"\bevery\s+fortnight\b", _fail("need_day", weak=True)),
    rule(
        r"\b(?:quarterly|(?:every|each)\s+quarter|once\s+a\s+quarter)\b(?!\s+(?:of\s+an\s+)?hour)",
        _fixed(recurrence=MonthlyDays((1,), months=QUARTERS, day_given=False)),
    ),
    rule(
        r"\b(?:on\s+)?the\s+last\s+day\s+of\s+(?:every|each|the)\s+quarter\b"
        r"|\b(?:at\s+)?(?:the\s+)?end\s+of\s+(?:every|each)\s+quarter\b",
        _fixed(recurrence=MonthlyDays((-1,), months=(3, 6, 9, 12))),
    ),
    rule(
        r"\b(?:half[-\s]?yearly|semi[-\s]?annually|(?:every|each)\s+half[-\s]year)\b",
        _fixed(recurrence=MonthlyDays((1,), months=(1, 7), day_given=False)),
    ),
    rule(
        rf"\b(?P<n>once|twice|thrice|{EN_NUM}\s+times)\s+(?:a|per|each)\s+day\b"
        rf"|\b(?P<n2>twice|{EN_NUM}\s+times)\s+daily\b",
        lambda m: _times_a_day_any(m),
    ),
    rule(rf"{_EVERY}(?P<u>week|month)\b", _fail("need_day")),
    rule(rf"{_EVERY}year\b", _fixed(recurrence=Anchored("year", 1))),
    rule(r"\b(?:weekly|monthly|fortnightly|bi-?weekly)\b", _fail("need_day", weak=True)),
    rule(r"\b(?:yearly|annually)\b", _fixed(recurrence=Anchored("year", 1), weak=True)),
    rule(
        rf"{_ON}{_EVERY}(?:single\s+)?(?:week\s*day|work(?:ing)?\s*day|business\s+day)\b"
        rf"|{_ON}(?:weekdays|work(?:ing)?\s*days|business\s+days)\b",
        _fixed(recurrence=Weekly(frozenset(range(5)))),
    ),
    rule(
        rf"{_ON}{_EVERY}weekend(?:\s+day)?\b|{_ON}weekends\b",
        _fixed(recurrence=Weekly(frozenset({5, 6}))),
    ),
    rule(rf"{_ON}{_EVERY}(?:(?P<n>other)\s+)?(?P<days>{DAYLIST})", _weekly),
    rule(
        rf"{_EVERY}(?:(?P<n>other|second|{EN_NUM})\s+)?weeks?\s+on\s+(?P<days>{DAYLIST})", _weekly
    ),
    rule(rf"\bonce\s+a\s+week\s+on\s+(?P<days>{DAYLIST})", _weekly),
    rule(rf"\bonce\s+a\s+month\s+on\s+(?P<days>{ORDLIST})(?:\s+day)?", _monthly),
    rule(r"\bonce\s+a\s+(?:week|month)\b", _fail("need_day")),
    rule(r"\bonce\s+a\s+year\b", _fail("need_date")),
    rule(rf"\b(?:twice|thrice|{EN_NUM}\s+times)\s+(?:a|per|each)\s+(?:week|month|year)\b",
         _fail("unparsed")),
    rule(r"\bevery\s+second\s+week\b", lambda m: piece(m, recurrence=Anchored("week", 2))),
    rule(rf"\bweekly\s+on\s+(?P<days>{DAYLIST})", _weekly),
    rule(
        rf"\b(?:fortnightly|bi-?weekly|every\s+fortnight)\s+(?:on\s+)?(?P<days>{DAYLIST})",
        lambda m: piece(m, recurrence=Weekly(day_list(m.group("days")), 2)),
    ),
    rule(rf"{_ON}(?P<days>{PLURALS})", _weekly),
    rule(rf"\b(?:from\s+)?(?P<days>\b{DAY_ANY}{_RANGE}{DAY_ANY}\b)", _weekly),
    rule(
        rf"{_EVERY}(?:(?P<n>other|{EN_NUM})\s+)?months?\s+on\s+(?P<days>{ORDLIST})(?:\s+day)?",
        _monthly,
    ),
    rule(rf"\bmonthly\s+on\s+(?P<days>{ORDLIST})", _monthly),
    rule(
        rf"{_ON}(?P<days>{ORDLIST})\s+(?:day\s+)?of\s+(?:every|each)\s+"
        rf"(?:(?P<n>other|{EN_NUM})\s+)?months?\b",
        _monthly,
    ),
    rule(
        rf"{_ON}the\s+last\s+day\s+of\s+(?:every|each)\s+month\b"
        rf"|{_EVERY}month\s+on\s+the\s+last\s+day\b|\bmonthly\s+on\s+the\s+last\s+day\b"
        rf"|\b(?:at\s+the\s+)?end\s+of\s+(?:every|each)\s+month\b",
        _fixed(recurrence=MonthlyDays((-1,))),
    ),
    rule(
        rf"{_ON}(?:every\s+)?the\s+(?P<nth>{NTH})\s+(?P<d>{DAY_ANY})\s+(?:of|in)\s+"
        rf"(?:every|each)\s+month\b",
        _monthly_nth,
    ),
    rule(
        rf"{_EVERY}(?P<nth>{NTH})\s+(?P<d>{DAY_ANY})(?:\s+(?:of|in)\s+(?:the|every|each)\s+month)?\b",
        _monthly_nth,
    ),
    rule(
        rf"(?:{_EVERY}month|\bmonthly)\s+on\s+the\s+(?P<nth>{NTH})\s+(?P<d>{DAY_ANY})\b",
        _monthly_nth,
    ),
    rule(
        rf"\b(?:(?:every|each)\s+year\s+on|(?:yearly|annually)\s+on|every|each)\s+(?:the\s+)?{MD}",
        _yearly,
    ),
    rule(rf"{_ON}(?:the\s+)?{MD}\s+(?:every\s+year|each\s+year|yearly|annually)\b", _yearly),
    # A day of the month in a list of months, as the confirmation says it: "on day 1 of January
    # and April", "every year on the 1st of January, April and July".
    rule(
        rf"(?:\b(?P<every>(?:every|each)\s+year|yearly|annually)\s+)?{_ON}"
        rf"(?:days?\s+(?P<ds>\d{{1,2}}(?:{_ITEM}\d{{1,2}}){{0,30}})"
        rf"|(?P<ds2>(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)(?:{_ITEM}(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th))"
        rf"{{0,30}}))\s+of\s+(?P<mons>{MONTH}(?:{_ITEM}{MONTH}){{0,11}})(?![a-z])"
        rf"(?:\s+(?P<every2>every\s+year|each\s+year|yearly|annually)\b)?",
        _month_list,
    ),
    rule(
        rf"\b(?P<every>(?:every|each)\s+(?:year\s+on\s+|year,?\s+)?|(?:yearly|annually)\s+on\s+)"
        rf"{_SHIFT}(?:the\s+)?{HOLIDAY}",
        _holiday,
    ),
    rule(rf"{_ON}{_SHIFT}(?:the\s+)?{HOLIDAY}(?P<every>\s+(?:every|each)\s+year)?", _holiday),
    # "lunar 8/15" (month/day of the Chinese calendar), as the confirmation says a lunar date.
    rule(r"\b(?:on\s+)?lunar\s+(?P<m>\d{1,2})/(?P<d>\d{1,2})\b", lambda m: _lunar(m)),
    # "before Christmas", "by Thanksgiving": a bound, not a day; refused rather than read as it.
    rule(rf"\b(?:before|after|by|until|till|around|prior\s+to)\s+(?:the\s+)?{HOLIDAY}",
         _fail("approximate")),
    rule(rf"\b(?:on|for|at|before|after|until|by|during)\s+(?:the\s+)?{_OTHER_HOLIDAY}",
         _unknown_holiday),
    # One-time dates
    rule(
        r"\b(?:today|tonight|tomorrow|tmrw|tmr|(?:the\s+)?day\s+after\s+tomorrow)\b", _relative_day
    ),
    rule(r"\byesterday\b(?!['’]s)", _fail("passed")),
    rule(r"\byesterday['’]s\b", _fail("passed", weak=True)),  # "review yesterday's notes"
    rule(r"\bthis\s+(?P<dp>morning|afternoon|evening)\b", _this_daypart),
    rule(
        rf"{_ON}(?P<pre>this|next|coming|this\s+coming|the\s+following|last)\s+(?P<d>{DAY_ANY})\b",
        _weekday_ref,
    ),
    rule(rf"\bon\s+(?P<d>{DAY_ANY})\b", _weekday_ref),
    rule(rf"{_ON}(?P<d>{DAY_ANY})\s+(?P<nextweek>(?:of\s+)?next\s+week)\b", _weekday_ref),
    rule(rf"\b(?P<d>{DAY_FULL})\b", _weekday_ref),
    rule(r"\bnext\s+week\b", lambda m: piece(m, date=WeekRef(1), weak=True)),
    rule(r"\bnext\s+month\b", lambda m: piece(m, date=MonthRef(1), weak=True)),
    rule(r"\bthis\s+month\b", lambda m: piece(m, date=MonthRef(0), weak=True)),
    rule(
        rf"{_ON}(?:the\s+)?(?P<nth>{NTH})\s+(?P<d>{DAY_ANY})\s+(?:of|in)\s+"
        rf"(?P<when>next\s+month|this\s+month|{MONTH})(?:\s+(?P<y>\d{{4}}))?\b",
        _nth_of_month,
    ),
    rule(
        rf"{_ON}the\s+(?P<d>{EN_ORD})\s+(?:day\s+)?of\s+(?P<rel>next|this)\s+month\b",
        _day_of_rel_month,
    ),
    rule(
        rf"\b(?:on\s+)?(?P<d>{DAY_ANY})\.?,?(?=\s+(?:the\s+)?(?:\d{{1,2}}\b|{MONTH}))",
        lambda m: piece(m, date=WeekdayRef(weekday(m.group("d")))),
    ),
    rule(
        r"\b(?:on\s+)?(?<![\d/.])(?P<a>\d{1,2})/(?P<b>\d{1,2})(?:/(?P<y>\d{4}|\d{2}))?"
        r"(?![\d/]|\s*(?:of\s+an?\s+)?(?:hours?|minutes?|days?|cups?))(?<!24/7)",
        _slash,
    ),
    rule(rf"{_ON}{MD}(?:,?\s+(?P<y>\d{{4}}))?", _abs_date),
    rule(
        r"\b(?:on\s+)?(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"
        r"(?:[t\s](?P<hh>\d{2}):(?P<mm>\d{2})(?::\d{2})?)?\b",
        _iso,
    ),
    rule(
        rf"\bon\s+the\s+(?P<d>{EN_ORD})\b|\bthe\s+(?P<d2>\d{{1,2}}(?:st|nd|rd|th))\b",
        lambda m: _day_of_month_any(m),
    ),
    rule(
        rf"\b(?:in|after)\s+(?P<n>{NUMBER}|an?|a\s+couple\s+of)\s+(?P<u>{UNIT})"
        rf"(?P<half>\s+and\s+a\s+half)?(?:\s+from\s+now)?\b",
        _offset,
    ),
    rule(
        rf"\b(?P<n>{NUMBER}|an?)\s+(?P<u>{UNIT})(?P<half>\s+and\s+a\s+half)?\s+(?:from\s+now|later)\b",
        _offset,
    ),
    rule(r"\bin\s+half\s+an\s+hour\b", _fixed(offset=Offset(30, "minute"))),
    rule(
        rf"\bin\s+(?P<h>{EN_NUM}|an?)\s+hours?\s+(?:and\s+)?(?P<mi>{EN_NUM})\s+min(?:ute)?s?\b",
        _offset_hm,
    ),
    # Times of day
    rule(
        r"\b(?:at\s+|@\s*)?(?<![\d:])(?P<h>\d{1,2}):(?P<m>\d{2})(?![\d:])"
        rf"(?:\s*{common.AMPM})?",
        _clock,
    ),
    rule(rf"\b(?:at\s+|@\s*)?(?P<h>{EN_NUM})\s*{common.AMPM}", _clock),
    rule(rf"\b(?:at\s+)?(?P<h>{EN_NUM})\s*o'?clock\b", _clock),
    rule(
        rf"\bat\s+(?P<h>{EN_NUM})\b(?![:.]\d|\s*(?:%|percent|{UNIT}|people|times|items)\b)",
        _clock,
    ),
    rule(r"\b(?:at\s+)?(?:12\s+)?(?:noon|midday)\b", _fixed(clock=Clock(12, 0))),
    rule(
        r"\b(?:at\s+)?(?:12\s+)?midnight\b",
        _fixed(clock=Clock(0, 0, end_of_day=True)),
    ),
    rule(
        rf"\b(?:at\s+)?(?:a\s+)?(?P<k>half\s+past|quarter\s+(?:past|after|to|of)"
        rf"|(?:{EN_NUM})\s+(?:minutes?\s+)?(?:past|after|to))\s+(?P<h>{EN_NUM}|noon|midday|midnight)"
        rf"(?:\s*{common.AMPM}|\b)",
        _past,
    ),
    rule(rf"\bat\s+(?P<list>{TIME}(?:\s*,\s*{TIME}){{0,23}}(?:\s*,)?\s+and\s+{TIME})", _time_list),
    rule(rf"\bbetween\s+(?P<a>{TIME})\s+and\s+(?P<b>{TIME})", _window),
    rule(rf"\bfrom\s+(?P<a>{TIME})\s+(?:to|till|until|through|-)\s+(?P<b>{TIME})", _window),
    # "9 tonight", "8 tomorrow morning": a bare hour right before the day that places it.
    rule(
        rf"\b(?:at\s+)?(?P<h>{EN_NUM})(?::(?P<m>\d{{2}}))?"
        r"(?=\s+(?:tonight|tomorrow|today|this\s+(?:morning|afternoon|evening)"
        r"|in\s+the\s+(?:morning|afternoon|evening)|at\s+night))",
        _clock,
    ),
    # British "at half nine" is 09:30.
    rule(rf"\bat\s+half\s+(?P<h>{EN_NUM})\b", lambda m: _half_british(m)),
    rule(
        r"\b(?P<a>\d{1,2}(?::\d{2})?\s*(?:[ap]\.?m\.?)?)\s*[-–]\s*"
        r"(?P<b>\d{1,2}(?::\d{2})?\s*[ap]\.?m\.?)(?![a-z])"
        r"|\b(?P<a2>\d{1,2}:\d{2})\s*[-–]\s*(?P<b2>\d{1,2}:\d{2})\b",
        lambda m: _dash_window(m),
    ),
    rule(r"\b(?:in\s+the\s+|at\s+)?(?P<dp>morning|afternoon|evening|night)\b", _daypart),
    rule(
        r"\b(?:right\s+now|right\s+away|immediately|asap|as\s+soon\s+as\s+possible"
        r"|straight\s+away)\b|^\s*now\b|\bnow\s*[.!]?\s*$",
        _fixed(immediate=True),
    ),
    # Fragments that look like times but are not readable: reported, never guessed.
    rule(
        r"\b(?:some\s*time\s+soon|sometime|some\s+time|soon|later(?:\s+on)?|someday|some\s+day"
        r"|one\s+day|eventually|at\s+some\s+point|in\s+a\s+(?:while|bit|few\s+\w+)|whenever"
        r"|every\s+so\s+often|(?:every\s+)?now\s+and\s+then|once\s+in\s+a\s+while|shortly"
        r"|in\s+the\s+future|one\s+of\s+these\s+days)\b",
        _fail("vague"),
    ),
    rule(r"\b(?:(?:this|next|coming)\s+)?weekend\b", _fail("unparsed", weak=True)),
    rule(rf"\blast\s+(?:week|month|year|night|{DAY_ANY})\b", _fail("passed", weak=True)),
    rule(
        r"\b(?:every|each)\s+(?:\d+\w*|other|few|couple(?:\s+of)?|first|second|third|fourth"
        r"|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|fifteenth|twentieth|thirtieth"
        r"|last)\b(?:\s+\w+)?",
        _fail("unparsed"),
    ),
    rule(rf"\b\d+\s*{UNIT}\b", _fail("unparsed", weak=True)),
    rule(rf"\b(?:(?:in|every)\s+)?\d+\.\d+\s*{UNIT}\b", _fail("unparsed")),
    # Times set by an event or the sun, and ends of periods: never dropped while they could
    # give the time ("after lunch tomorrow"); left in the task once a time is said.
    rule(
        r"\b(?:at|after|before|around|by|until|till|during|over|for)\s+(?:the\s+)?(?:sunrise|sunset"
        r"|dawn|dusk|daybreak|nightfall|lunch(?:time)?|dinner(?:time)?|breakfast|supper|brunch"
        r"|bedtime|work|school|class)\b",
        _fail("unparsed", weak=True, guards="clock"),
    ),
    rule(
        r"\b(?:(?:at|by|before|until)\s+)?(?:the\s+)?(?:end|close)\s+of\s+(?:the\s+)?"
        r"(?:business\s+)?day\b|\b(?:eod|cob)\b",
        _fail("unparsed", weak=True, guards="clock"),
    ),
    rule(
        r"\b(?:(?:during|in|within|over)\s+)?(?:the\s+)?(?:business|working|office|work)\s+hours\b",
        _fail("need_hours"),
    ),
    rule(r"\b\d{1,2}(?::\d{2})?\s*(?:[ap]\.?m\.?)?-?ish\b", _fail("approximate")),
    # Approximate times and bounds are refused rather than rounded or ignored.
    rule(
        rf"\b(?:around|about|approximately|roughly|circa|before|after)\s+"
        rf"(?:\d{{1,2}}(?::\d{{2}})?(?:\s*{common.AMPM})?|{EN_NUM}|noon|midnight)",
        _fail("approximate"),
    ),
    rule(
        rf"\b(?:until|till|starting|beginning|ending|from)\s+(?:on\s+|from\s+)?"
        rf"(?:{DAY_ANY}|tomorrow|next\s+\w+|{MONTH}\s+\d{{1,2}}|the\s+\d{{1,2}}\w*)\b"
        rf"|\bfor\s+(?:the\s+next\s+)?(?:{EN_NUM}|a)\s+(?:days?|weeks?|months?|times)\b",
        _fail("unparsed"),
    ),
    *common.AMPM_RULES,
]


def _day_of_month_any(m: re.Match[str]) -> Piece:
    day = en_ordinal(m.group("d") or m.group("d2"))
    if day is None or not 1 <= day <= 31:
        return problem(m, "bad_date")
    return piece(m, date=DayOfMonth(day), weak=not m.group(0).lower().startswith("on"))


def _times_a_day_any(m: re.Match[str]) -> Piece:
    word = (m.group("n") or m.group("n2")).lower()
    count = {"once": 1, "twice": 2, "thrice": 3}.get(word) or en_to_int(word.split()[0])
    if count is None or count == 0:
        return problem(m, "unparsed")
    return piece(m, recurrence=Daily(), count=count)


def _half_british(m: re.Match[str]) -> Piece:
    hour = en_to_int(m.group("h"))
    if hour is None or not 1 <= hour <= 12:
        return problem(m, "bad_hour")
    return piece(m, clock=Clock(hour, 30))


def _dash_window(m: re.Match[str]) -> Piece:
    """9am-5pm, 9-5pm, 09:00-17:00."""
    first = _time_slot(m.group("a") or m.group("a2"))
    last = _time_slot(m.group("b") or m.group("b2"))
    if first is None or last is None:
        return problem(m, "bad_hour")
    return piece(m, window=(first, last))
