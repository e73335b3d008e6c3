"""Rules for Chinese time expressions, Traditional and Simplified alike (點/点, 週/周, 後/后)."""

from __future__ import annotations

import re

from onthedot.nl import common
from onthedot.nl.numbers import ZH_NUM, zh_to_int
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

WEEK = r"(?:週|周|星期|禮拜|礼拜)"
_DAY_CHARS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
# A weekday numeral is not one when a clock marker follows: 每週一三點 is Monday at 3.
_DAYC = r"[一二三四五六日天](?![點点時时:])"
_DAYC_NO_TIAN = r"[一二三四五六日](?![點点時时:])"  # 每週六天 is "six days a week", not Sunday
DAYLIST = rf"{_DAYC}(?:(?:[、,，和及與与跟/]|到|至|-|~)?(?:{WEEK}{_DAYC}|{_DAYC_NO_TIAN}))*"
HOUR = r"(?:\d{1,2}|[零〇一二兩两三四五六七八九十]{1,3})"
MINNUM = r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})"
DAYNUM = r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})"
MONTHNUM = r"(?:\d{1,2}|十[一二]?|[一二三四五六七八九])"
MARK = r"(?:點鐘|点钟|點|点|時|时)"
_UNITS = r"(?:分鐘|分钟|分|小時|小时|鐘頭|钟头|天|日|週|周|星期|禮拜|礼拜|個月|个月|月)"

DAYPARTS: dict[str, tuple[Daypart, int | None]] = {
    "早上": (Daypart.MORNING, None), "早晨": (Daypart.MORNING, None),
    "清晨": (Daypart.MORNING, None), "上午": (Daypart.FORENOON, None),
    "中午": (Daypart.NOON, None), "下午": (Daypart.AFTERNOON, None),
    "傍晚": (Daypart.DUSK, None), "晚上": (Daypart.EVENING, None),
    "晚間": (Daypart.EVENING, None), "晚间": (Daypart.EVENING, None),
    "夜裡": (Daypart.EVENING, None), "夜里": (Daypart.EVENING, None),
    "夜間": (Daypart.EVENING, None), "夜间": (Daypart.EVENING, None),
    "凌晨": (Daypart.EARLY, None), "半夜": (Daypart.EARLY, None),
    "午夜": (Daypart.MIDNIGHT, None),
    "今早": (Daypart.MORNING, 0), "今晨": (Daypart.MORNING, 0),
    "明早": (Daypart.MORNING, 1), "明晨": (Daypart.MORNING, 1),
    "今晚": (Daypart.EVENING, 0), "今夜": (Daypart.EVENING, 0),
    "明晚": (Daypart.EVENING, 1), "明夜": (Daypart.EVENING, 1),
}  # fmt: skip
DP = "(?:" + "|".join(sorted(DAYPARTS, key=len, reverse=True)) + ")"

_fixed = common.fixed_builder
_fail = common.fail_builder


def _num(text: str | None) -> int | None:
    return None if text is None else zh_to_int(text)


def _daypart_fields(word: str | None) -> dict[str, object]:
    if not word:
        return {}
    daypart, days = DAYPARTS[word]
    fields: dict[str, object] = {"daypart": daypart}
    if days is not None:
        fields["date"] = RelativeDay(days)
    return fields


def _minutes(text: str | None) -> int | None:
    """Minutes after 點: 半, 一刻, 三刻, 整, 十五(分), 零五(分); None if unreadable."""
    if not text:
        return 0
    special = {"半": 30, "一刻": 15, "三刻": 45, "整": 0}
    if text in special:
        return special[text]
    body = text.rstrip("分").strip()
    zero_prefixed = body[:1] in ("零", "〇", "0") and len(body) > 1
    value = zh_to_int(body.lstrip("零〇") or "0") if not body.isdigit() else int(body)
    # 八點五 could mean 8:05 or 8:50; only 分, a leading 零 or two digits make it unambiguous.
    if value is None or (value < 10 and not zero_prefixed and not text.endswith("分")):
        return None
    return value


def _time(m: re.Match[str]) -> Piece | None:
    if m.group("approx"):
        return problem(m, "approximate")
    dp, hour_text, minute_text = m.group("dp"), m.group("h"), m.group("mm")
    hour = _num(hour_text)
    minute = _minutes(minute_text)
    bare = not dp and not minute_text and not m.group("mark").endswith(("鐘", "钟"))
    weak: dict[str, bool] = {"weak": True} if bare else {}
    if bare and hour_text == "一" and m.group("mark") in ("點", "点"):
        weak["stands_alone"] = False  # 一點 alone is "a little" (看一點書), not 01:00
    if hour is None or hour > 23:
        return problem(m, "bad_hour", **weak)
    if minute is None or minute > 59:
        return problem(m, "bad_minute", **weak)
    return piece(m, clock=Clock(hour, minute), **_daypart_fields(dp), **weak)


def _colon_time(m: re.Match[str]) -> Piece | None:
    if m.group("approx"):
        return problem(m, "approximate")
    hour, minute = int(m.group("h")), int(m.group("m"))
    if hour > 23:
        return problem(m, "bad_hour")
    if minute > 59:
        return problem(m, "bad_minute")
    return piece(m, clock=Clock(hour, minute), **_daypart_fields(m.group("dp")))


def _daypart(m: re.Match[str]) -> Piece:
    fields = _daypart_fields(m.group(0))
    # 早上/下午 alone may be prose (早上的新聞); 今晚/明早 carry a day and always count.
    return piece(m, weak="date" not in fields, **fields)


def _relative_day(m: re.Match[str]) -> Piece:
    word = m.group(0)
    days = {"今": 0, "明": 1, "後": 2, "后": 2, "大": 3}[word[0]]
    return piece(m, date=RelativeDay(days))


def _weekday(m: re.Match[str]) -> Piece:
    pre = m.group("pre")
    weekday = _DAY_CHARS[m.group("d")]
    if pre == "上":
        return problem(m, "passed")
    week = {None: None, "這": 0, "这": 0, "本": 0, "下": 1, "下下": 2}[pre]
    return piece(m, date=WeekdayRef(weekday, week), weak=pre is None)


def _next_week(m: re.Match[str]) -> Piece:
    return piece(m, date=WeekRef(2 if m.group("pre") == "下下" else 1))


def _month_ref(m: re.Match[str]) -> Piece:
    pre = m.group("pre")
    months = {"下下": 2, "下": 1}.get(pre, 0)
    day = _num(m.group("d"))
    if m.group("d") and (day is None or not 1 <= day <= 31):
        return problem(m, "bad_date")
    # 這個月 / 下個月 without a day may be prose (這個月的報告); with a day they always count.
    if months == 0 and day is None:
        return problem(m, "need_day", weak=True)
    return piece(m, date=MonthRef(months, day), weak=day is None)


def _abs_date(m: re.Match[str]) -> Piece:
    month, day = _num(m.group("m")), _num(m.group("d"))
    year = _num(m.group("y")) if m.group("y") else None
    ypre = m.group("ypre")
    if month is None or day is None or not common.valid_month_day(month, day):
        return problem(m, "bad_date")
    offset = None if not ypre else (0 if ypre == "今年" else 1)
    return piece(m, date=AbsDate(month, day, year, offset))


def _iso_date(m: re.Match[str]) -> Piece:
    year, month, day = int(m.group("y")), int(m.group("m")), int(m.group("d"))
    if not common.valid_month_day(month, day):
        return problem(m, "bad_date")
    return piece(m, date=AbsDate(month, day, year))


def _day_of_month(m: re.Match[str]) -> Piece:
    day = _num(m.group("d"))
    if day is None or not 1 <= day <= 31:
        return problem(m, "bad_date", weak=True)
    return piece(m, date=DayOfMonth(day), weak=True)


def _offset(m: re.Match[str]) -> Piece | None:
    n_text, half, unit_text = m.group("n"), m.group("half") or m.group("half2"), m.group("u")
    if n_text is None and not half:
        return None  # 過日子, 天後: no count, so not an offset
    amount = _num(n_text) if n_text else 0
    unit = common.offset_unit(common.zh_unit(unit_text))
    if amount is None or unit is None:
        return problem(m, "unparsed")
    if half:
        if unit != "hour":
            return problem(m, "unparsed")
        return piece(m, offset=Offset(amount * 60 + 30, "minute"))
    return piece(m, offset=Offset(amount, unit))


def _interval(m: re.Match[str]) -> Piece:
    """每N分鐘/小時/天/週/月/年 and 每隔N ...; 每天 is the N = 1 case."""
    unit = common.zh_unit(m.group("u"))
    n = _num(m.group("n")) if m.group("n") else 1
    if n is None or n == 0:
        return problem(m, "unparsed")
    if m.group("gap") and n == 1 and unit in ("day", "week", "month", None):
        return problem(m, "every_other")  # 每隔一天: every day, or every other day?
    if m.group(
        "half"
    ):  # 每半小時 = 30 minutes, 每一個半小時 = 90 (refused later: not on the clock)
        minutes = 30 + (60 * n if m.group("n") else 0)
        return piece(m, recurrence=Every(minutes)) if unit == "hour" else problem(m, "unparsed")
    return common.interval_piece(m, n, unit)


def day_list(text: str) -> frozenset[int]:
    """一三五 -> Mon, Wed, Fri; 一到五 / 一至週五 -> Monday..Friday."""
    items: list[int | None] = []
    for ch in text:
        if ch in _DAY_CHARS:
            items.append(_DAY_CHARS[ch])
        elif ch in "到至-~":
            items.append(None)
    return common.expand_days(items)


def _weekly(m: re.Match[str]) -> Piece:
    n = _num(m.group("n")) if m.group("n") else 1
    if n is None or n == 0:
        return problem(m, "unparsed")
    if m.group("gap") and n == 1:
        return problem(m, "every_other")
    days = day_list(m.group("days"))
    return piece(m, recurrence=Weekly(days, n))


def _weekday_range(m: re.Match[str]) -> Piece:
    days = day_list(m.group("days"))
    return piece(m, recurrence=Weekly(days))


def _monthly(m: re.Match[str]) -> Piece:
    n = _num(m.group("n")) if m.group("n") else 1
    days = [_num(d) for d in re.findall(DAYNUM, m.group("days"))]
    if n is None or n == 0 or any(d is None or not 1 <= d <= 31 for d in days):
        return problem(m, "bad_date")
    if m.group("gap") and n == 1:
        return problem(m, "every_other")
    return piece(m, recurrence=MonthlyDays(tuple(sorted({d for d in days if d})), n))


def _monthly_nth(m: re.Match[str]) -> Piece:
    nth = -1 if m.group("last") else _num(m.group("nth"))
    if nth is None or nth == 0 or nth > 5:
        return problem(m, "bad_date")
    return piece(m, recurrence=MonthlyNth(nth, _DAY_CHARS[m.group("d")]))


def _yearly(m: re.Match[str]) -> Piece:
    month, day = _num(m.group("m")), _num(m.group("d"))
    if month is None or day is None or not common.valid_month_day(month, day):
        return problem(m, "bad_date")
    return piece(m, recurrence=Yearly(month, day))


# 八點多, 三點左右, 五點前: not a time to fire at, so refused rather than rounded.
_APPROX = r"多|左右|前後|前后|上下|以前|之前|前|以後|之後|之后|以后"
# Words that start a day reference, to tell 從明天開始 (a bound) from 從頭開始 (prose).
_WHEN = rf"今天|明天|後天|后天|下|本|這|这|{WEEK}|\d|[一二三四五六七八九十]+[月號号日]"
_EVERY = rf"每(?P<gap>隔)?\s*(?P<n>{ZH_NUM})?(?:個|个)?"
_OFFSET = rf"(?P<n>{ZH_NUM})?(?P<half>個半|个半|半)?(?:個|个)?(?P<u>{_UNITS})(?P<half2>半)?"
_WORKDAY = r"(?:每(?:一)?(?:個|个)?)?(?:工作日|上班日)"

RULES: list[Rule] = [
    # Recurrence
    rule(rf"{_EVERY}(?P<half>半)?(?:個|个)?(?P<u>{_UNITS}|年)", _interval),
    rule(r"天天|每一天", _fixed(recurrence=Daily())),
    rule(
        r"每晚|每夜|每(?:一)?(?:個|个)?晚上",
        _fixed(recurrence=Daily(), daypart=Daypart.EVENING),
    ),
    rule(
        r"每(?:一)?(?:個|个)?早上|每早",
        _fixed(recurrence=Daily(), daypart=Daypart.MORNING),
    ),
    rule(rf"{_EVERY}{WEEK}(?:的)?(?:{WEEK})?(?P<days>{DAYLIST})", _weekly),
    rule(rf"{WEEK}(?P<days>{_DAYC}(?:到|至|-|~){WEEK}?{_DAYC})", _weekday_range),
    rule(
        r"每(?:一)?(?:個|个)?(?:週|周)末",
        _fixed(recurrence=Weekly(frozenset({5, 6}))),
    ),
    rule(_WORKDAY, _fixed(recurrence=Weekly(frozenset(range(5))))),
    rule(r"每(?:個|个)?平日", _fixed(recurrence=Weekly(frozenset(range(5))))),
    rule(
        rf"{_EVERY}月(?:的)?(?P<days>(?:{DAYNUM}(?:號|号|日)?[、,，和及與与跟])*{DAYNUM})(?:號|号|日)",
        _monthly,
    ),
    rule(
        r"每(?:一)?(?:個|个)?月(?:的)?(?:最後一天|最后一天|最後一日|最后一日|底|月底)",
        _fixed(recurrence=MonthlyDays((-1,))),
    ),
    rule(
        r"每(?:一)?(?:個|个)?月(?:的)?(?:第(?P<nth>[一二三四五1-5])(?:個|个)?"
        rf"|(?P<last>最後一個|最后一个|最後一|最后一|最後|最后))\s*{WEEK}(?P<d>[一二三四五六日天])",
        _monthly_nth,
    ),
    rule(rf"每(?:一)?年(?:的)?(?P<m>{MONTHNUM})月(?P<d>{DAYNUM})(?:日|號|号)?", _yearly),
    # One-time dates
    rule(r"今天|今日|明天|明日|後天|后天|大後天|大后天", _relative_day),
    rule(r"昨天|昨日|前天|昨晚", _fail("passed")),
    rule(rf"(?P<pre>這|这|本|下下|下|上)?(?:個|个)?{WEEK}(?P<d>[一二三四五六日天])", _weekday),
    rule(rf"(?P<pre>下下|下)(?:個|个)?{WEEK}(?![一二三四五六日天末])", _next_week),
    rule(
        rf"(?P<pre>下下|下|這|这|本)(?:個|个)?月(?:的)?(?:(?P<d>{DAYNUM})(?:號|号|日))?", _month_ref
    ),
    rule(
        rf"(?:(?P<ypre>今年|明年)|(?P<y>\d{{4}}|[〇零一二三四五六七八九]{{4}})年)?"
        rf"(?P<m>{MONTHNUM})月(?P<d>{DAYNUM})(?:日|號|号)?",
        _abs_date,
    ),
    rule(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})", _iso_date),
    rule(rf"(?P<d>{DAYNUM})(?:號|号|日)", _day_of_month),
    rule(rf"(?:再)?(?:過|过){_OFFSET}(?:之?後|之?后|以後|以后)?", _offset),
    rule(rf"{_OFFSET}(?:之?後|之?后|以後|以后)", _offset),
    # Times of day
    rule(
        rf"(?P<dp>{DP})?\s*(?P<h>{HOUR})\s*(?P<mark>{MARK})"
        rf"(?P<mm>半|一刻|三刻|整|(?:零|〇|0)?{MINNUM}\s*分(?!鐘|钟)|(?:零|〇|0)?{MINNUM}(?![分\d]))?"
        rf"(?P<approx>{_APPROX})?",
        _time,
    ),
    rule(
        rf"(?P<dp>{DP})?\s*(?<!\d)(?P<h>\d{{1,2}})[:：](?P<m>\d{{2}})(?!\d)(?P<approx>{_APPROX})?",
        _colon_time,
    ),
    rule(DP, _daypart),
    rule(
        r"立刻|立即|馬上|马上|即刻|立馬|立马|現在就|现在就|^\s*(?:現在|现在)|(?:現在|现在)\s*[。！!.]?\s*$",
        _fixed(immediate=True),
    ),
    # Fragments that look like times but are not readable: reported, never guessed.
    rule(rf"(?:每(?:個|个)?)?{WEEK}[七八九十零〇]", _fail("bad_weekday")),
    rule(r"(?:這|这|本|下|上)?(?:個|个)?(?:週|周)末", _fail("unparsed", weak=True)),
    # Bounds (從明天開始, 到月底為止, 連續三天) are not supported: refusing beats ignoring them.
    rule(rf"(?:從|从|自)(?:{_WHEN})\S{{0,6}}?(?:開始|开始|起)", _fail("unparsed")),
    rule(rf"(?:直到|到)(?:{_WHEN}|月底|年底)\S{{0,6}}?(?:為止|为止|結束|结束)", _fail("unparsed")),
    rule(rf"(?:連續|连续|持續|持续)\s*{ZH_NUM}\s*(?:天|週|周|個月|个月|次)", _fail("unparsed")),
    rule(rf"\d+\.\d+\s*{_UNITS}", _fail("unparsed")),
    rule(
        r"稍後|稍后|待會兒?|待会儿?|等一下|等會兒?|等会儿?|一會兒|一会儿|改天|有空的?時候|有空的?时候"
        r"|過幾天|过几天|晚點|晚点|晚一點|晚一点|遲些|迟些|過一陣子|过一阵子|將來|将来|哪天|早晚",
        _fail("vague"),
    ),
    *common.AMPM_RULES,
]
