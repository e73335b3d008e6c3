"""Rules for English time expressions."""

from __future__ import annotations

import re

from onthedot.nl import common
from onthedot.nl.numbers import EN_NUM, EN_ORD, en_ordinal, en_to_int
from onthedot.nl.parts import (
    AbsDate,
    Clock,
    Daily,
    DayOfMonth,
    Daypart,
    Every,
    MonthlyDays,
    MonthlyNth,
    MonthRef,
    Offset,
    Piece,
    RelativeDay,
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
DAYLIST = rf"\b{DAY_ANY}\b(?:(?:{_SEP}|{_RANGE}){DAY_ANY}\b)*"
PLURALS = rf"\b{DAY_FULL}s\b(?:(?:{_SEP}|{_RANGE}){DAY_FULL}s\b)*"
MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
MD = (
    rf"(?:(?P<mon>{MONTH})\s+(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b"
    rf"|(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon2>{MONTH})(?![a-z]))"
)
ORDLIST = rf"(?:the\s+)?{EN_ORD}\b(?:\s*(?:,|\band\b|&)\s*(?:the\s+)?{EN_ORD}\b)*"
NTH = r"(?:first|second|third|fourth|fifth|last|1st|2nd|3rd|4th|5th)"
UNIT = r"(?:minutes?|mins?|hours?|hrs?|days?|weeks?|months?)"
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
    return 2 if text.lower() == "other" else en_to_int(text)


def _month_day(m: re.Match[str]) -> tuple[int, int] | None:
    mon = m.group("mon") or m.group("mon2")
    day = int(m.group("d") or m.group("d2"))
    month = MONTHS.index(mon.lower()[:3]) + 1
    return (month, day) if common.valid_month_day(month, day) else None


def _daily_part(m: re.Match[str]) -> Piece:
    return piece(m, recurrence=Daily(), daypart=DAYPARTS[m.group("dp").lower()])


def _interval(m: re.Match[str]) -> Piece:
    n = _n(m.groupdict().get("n"))
    if n is None or n == 0:
        return problem(m, "unparsed")
    return common.interval_piece(m, n, common.en_unit(m.group("u")))


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
    n = en_to_int(m.group("n")) if m.group("n") else 1
    unit = common.offset_unit(common.en_unit(m.group("u")))
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
    hour = en_to_int(m.group("h"))
    if hour is None or not 1 <= hour <= 12:
        return problem(m, "bad_hour")
    kind = m.group("k").lower()
    if kind.startswith("half"):
        return piece(m, clock=Clock(hour, 30))
    if "past" in kind or "after" in kind:
        return piece(m, clock=Clock(hour, 15))
    return piece(m, clock=Clock(hour - 1, 45))


def _daypart(m: re.Match[str]) -> Piece:
    word = m.group("dp").lower()
    phrase = m.group(0).lower()
    # A bare "morning" is often prose (the morning news); "in the morning" never is.
    weak = not (phrase.startswith("in") or phrase.startswith("at"))
    return piece(m, daypart=DAYPARTS[word], weak=weak, stands_alone=not weak)


_EVERY = r"\b(?:every|each)\s+"
_ON = r"\b(?:on\s+)?"
RULES: list[Rule] = [
    # Recurrence
    rule(
        r"\b(?:every\s*day|each\s+day|daily|every\s+single\s+day)\b",
        _fixed(recurrence=Daily()),
    ),
    rule(rf"{_EVERY}(?:single\s+)?(?P<dp>morning|afternoon|evening|night)\b", _daily_part),
    rule(r"\bnightly\b", _fixed(recurrence=Daily(), daypart=Daypart.EVENING)),
    rule(rf"\bevery\s+(?P<n>other|{EN_NUM})\s+(?P<u>{UNIT})\b", _interval),
    rule(rf"{_EVERY}(?P<u>minute|min|hour|day)\b", _interval),
    rule(r"\bhourly\b|\bevery\s+sixty\s+minutes\b", _fixed(recurrence=Every(60))),
    rule(r"\bevery\s+half\s+(?:an\s+)?hour\b", _fixed(recurrence=Every(30))),
    rule(r"\bevery\s+quarter\s+(?:of\s+an\s+)?hour\b", _fixed(recurrence=Every(15))),
    rule(rf"{_EVERY}(?P<u>week|month|year)\b", _fail("need_day")),
    rule(r"\b(?:weekly|monthly|fortnightly)\b", _fail("need_day", weak=True)),
    rule(r"\b(?:yearly|annually)\b", _fail("need_date", weak=True)),
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
    rule(rf"{_EVERY}(?:(?P<n>other|{EN_NUM})\s+)?weeks?\s+on\s+(?P<days>{DAYLIST})", _weekly),
    rule(rf"\bweekly\s+on\s+(?P<days>{DAYLIST})", _weekly),
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
    # One-time dates
    rule(
        r"\b(?:today|tonight|tomorrow|tmrw|tmr|(?:the\s+)?day\s+after\s+tomorrow)\b", _relative_day
    ),
    rule(r"\byesterday\b", _fail("passed")),
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
        rf"\b(?:in|after)\s+(?P<n>{EN_NUM}|an?|a\s+couple\s+of)\s+(?P<u>{UNIT})"
        rf"(?P<half>\s+and\s+a\s+half)?(?:\s+from\s+now)?\b",
        _offset,
    ),
    rule(
        rf"\b(?P<n>{EN_NUM}|an?)\s+(?P<u>{UNIT})(?P<half>\s+and\s+a\s+half)?\s+(?:from\s+now|later)\b",
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
        rf"\b(?:at\s+)?(?P<k>half\s+past|quarter\s+past|quarter\s+after|quarter\s+to)\s+"
        rf"(?P<h>{EN_NUM})\b",
        _past,
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
        r"\b(?:every|each)\s+(?:\d+\w*|other|few|couple(?:\s+of)?|second|third)\b(?:\s+\w+)?",
        _fail("unparsed"),
    ),
    rule(rf"\b\d+\s*{UNIT}\b", _fail("unparsed", weak=True)),
    rule(rf"\b(?:(?:in|every)\s+)?\d+\.\d+\s*{UNIT}\b", _fail("unparsed")),
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
