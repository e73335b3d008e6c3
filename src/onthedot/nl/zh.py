"""Rules for Chinese time expressions, Traditional and Simplified alike (點/点, 週/周, 後/后)."""

from __future__ import annotations

import re
from dataclasses import replace

from onthedot.nl import common
from onthedot.nl.holidays import shifted, yearly_holiday
from onthedot.nl.numbers import ZH_NUM, zh_to_int
from onthedot.nl.parts import (
    AbsDate,
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
    RelativeDay,
    Slot,
    WeekdayRef,
    Weekly,
    WeekRef,
    Yearly,
    YearlyComputed,
    piece,
    problem,
)
from onthedot.nl.scan import Rule, rule

WEEK = r"(?:週|周|星期|禮拜|礼拜)"
# Spaces inside an expression are bounded: a rule that may start at a space and take any number
# of them before failing is tried again at every space (quadratic in a run of 3,900 spaces).
_SP = r"\s{0,3}"
_DAY_CHARS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
# A weekday numeral is not one when a clock marker follows: 每週一三點 is Monday at 3.
_DAYC = r"[一二三四五六日天](?![點点時时:次])"  # 每三週一次 is "once every three weeks"
_DAYC_NO_TIAN = r"[一二三四五六日](?![點点時时:次])"  # 每週六天 is "six days a week", not Sunday
# Bounded, as in English: a list followed by a word it needs (除外) is tried in constant time.
DAYLIST = rf"{_DAYC}(?:(?:[、,，和及與与跟/]|到|至|-|~)?(?:{WEEK}{_DAYC}|{_DAYC_NO_TIAN})){{0,13}}"
HOUR = r"(?:\d{1,2}|[零〇一二兩两三四五六七八九十]{1,3})"
MINNUM = r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})"
DAYNUM = r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})"
MONTHNUM = r"(?:\d{1,2}|十[一二]?|[一二三四五六七八九])"
MARK = r"(?:點鐘|点钟|點|点|時|时)"
_UNITS = (
    r"(?:秒鐘|秒钟|秒|分鐘|分钟|分|小時|小时|鐘頭|钟头|天|日|週|周|星期|禮拜|礼拜|個月|个月|月)"
)
QUARTERS = (1, 4, 7, 10)
# 五點整 is 05:00 sharp, but 五點整理報告 is "at five, tidy up the report".
_SHARP = r"整(?!理|個|个|天|齊|齐|合|頓|顿|修|套|體|体|點|点|年|月)"

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

HOLIDAYS: dict[str, str] = {
    "聖誕節": "christmas", "圣诞节": "christmas", "耶誕節": "christmas", "耶诞节": "christmas",
    "聖誕": "christmas", "圣诞": "christmas", "平安夜": "christmas_eve",
    "聖誕夜": "christmas_eve", "圣诞夜": "christmas_eve", "元旦": "new_year",
    "跨年夜": "new_year_eve", "情人節": "valentine", "情人节": "valentine",
    "萬聖節": "halloween", "万圣节": "halloween", "萬聖夜": "halloween", "万圣夜": "halloween",
    "感恩節": "thanksgiving", "感恩节": "thanksgiving", "母親節": "mothers_day",
    "母亲节": "mothers_day", "復活節": "easter", "复活节": "easter", "婦女節": "womens_day",
    "妇女节": "womens_day", "勞動節": "labour_day_may", "劳动节": "labour_day_may",
    "春節": "lunar_new_year", "春节": "lunar_new_year", "農曆新年": "lunar_new_year",
    "农历新年": "lunar_new_year", "農曆年": "lunar_new_year", "农历年": "lunar_new_year",
    "大年初一": "lunar_new_year", "除夕": "lunar_new_year_eve", "大年夜": "lunar_new_year_eve",
    "年三十": "lunar_new_year_eve", "元宵節": "lantern", "元宵节": "lantern", "元宵": "lantern",
    "端午節": "dragon_boat", "端午节": "dragon_boat", "端午": "dragon_boat", "七夕": "qixi",
    "中元節": "ghost", "中元节": "ghost", "中秋節": "mid_autumn", "中秋节": "mid_autumn",
    "中秋": "mid_autumn", "重陽節": "double_ninth", "重阳节": "double_ninth",
    "重陽": "double_ninth", "重阳": "double_ninth", "臘八": "laba", "腊八": "laba",
}  # fmt: skip
_HOLIDAY = "(?P<name>" + "|".join(sorted(HOLIDAYS, key=len, reverse=True)) + ")"
# Their date depends on where one lives (國慶日: 10月10日 in Taiwan, 10月1日 in China).
_REGIONAL = (
    r"國慶日|國慶節|國慶|国庆节|国庆日|国庆|兒童節|儿童节|教師節|教师节|青年節|青年节|父親節|父亲节"
)
_SOLAR_TERMS = (
    r"清明節|清明节|清明|冬至|夏至|立春|立夏|立秋|立冬|春分|秋分|小寒|大寒|驚蟄|惊蛰|穀雨|谷雨"
    r"|小滿|小满|芒種|芒种|小暑|大暑|處暑|处暑|白露|寒露|霜降"
)
# Words ending in 節 that are not days: 季節 (season), 細節 (detail), 環節, 章節, 關節 ...
_NOT_FESTIVALS = {
    "季節", "季节", "細節", "细节", "環節", "环节", "章節", "章节", "關節", "关节", "調節", "调节",
    "過節", "过节", "禮節", "礼节", "情節", "情节", "音節", "音节", "小節", "小节", "節節", "节节",
    "時節", "时节", "氣節", "气节", "使節", "使节", "脫節", "脱节",
}  # fmt: skip
LUNAR_MONTHS = {"正": 1, "冬": 11, "臘": 12, "腊": 12}
_LUNAR_MONTH = r"(?:正|冬|臘|腊|十[一二]|[一二三四五六七八九十]|\d{1,2})"
_LUNAR_DAY = (
    r"(?:初[一二三四五六七八九十]|廿[一二三四五六七八九]?|[二三]十|十[一二三四五六七八九]?|\d{1,2})"
)

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
    is_weak, alone = weak.get("weak", False), weak.get("stands_alone", True)
    if hour is None or hour > 23:
        return problem(m, "bad_hour", weak=is_weak, stands_alone=alone)
    if minute is None or minute > 59:
        return problem(m, "bad_minute", weak=is_weak, stands_alone=alone)
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


def _topic(m: re.Match[str]) -> bool:
    """明天的便當, 下週的會議: a day word followed by 的 names a topic unless nothing else
    says when."""
    return m.string[m.end() : m.end() + 1] == "的"


def _relative_day(m: re.Match[str]) -> Piece:
    word = m.group(0)
    days = {"今": 0, "明": 1, "後": 2, "后": 2, "大": 3}[word[0]]
    return piece(m, date=RelativeDay(days), weak=_topic(m))


def _weekday(m: re.Match[str]) -> Piece:
    pre = m.group("pre")
    weekday = _DAY_CHARS[m.group("d")]
    if pre == "上":
        return problem(m, "passed")
    week = {None: None, "這": 0, "这": 0, "本": 0, "下": 1, "下下": 2}[pre]
    return piece(m, date=WeekdayRef(weekday, week), weak=pre is None)


def _next_week(m: re.Match[str]) -> Piece:
    return piece(m, date=WeekRef(2 if m.group("pre") == "下下" else 1), weak=_topic(m))


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
    if n_text and "." in n_text:  # 1.5小時後
        minutes = common.fraction_minutes(float(n_text), common.zh_unit(unit_text))
        if minutes is None or half:
            return problem(m, "unparsed")
        return piece(m, offset=Offset(minutes, "minute"))
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
        if unit == "hour":
            return piece(m, recurrence=Every.minutes(minutes))
        return problem(m, "unparsed")
    return common.interval_piece(m, n, unit)


def _clock_of(hour_text: str, minute_text: str | None, dp: str | None) -> Slot | None:
    hour, minute = _num(hour_text), _minutes(minute_text)
    if hour is None or hour > 23 or minute is None or minute > 59:
        return None
    return Slot(Clock(hour, minute), DAYPARTS[dp][0] if dp else None)


def _window(m: re.Match[str]) -> Piece:
    """九點到五點, 早上9點至下午5點, 9:00-17:00: both ends are times of day."""
    first = _clock_of(m.group("h1"), m.group("m1"), m.group("dp1"))
    last = _clock_of(m.group("h2"), m.group("m2"), m.group("dp2"))
    if first is None or last is None:
        return problem(m, "bad_hour")
    return piece(m, window=(first, last))


def _times_a_day(m: re.Match[str]) -> Piece:
    count = _num(m.group("n"))
    if count is None or count == 0:
        return problem(m, "unparsed")
    return piece(m, recurrence=Daily(), count=count)


def _nth_of_month(m: re.Match[str]) -> Piece:
    nth = -1 if m.group("last") else _num(m.group("nth"))
    if nth is None or nth == 0 or nth > 5:
        return problem(m, "bad_date")
    wd = _DAY_CHARS[m.group("d")]
    rel = m.group("rel")
    if rel:
        ahead = {"下下": 2, "下": 1}.get(rel, 0)
        return piece(m, date=NthWeekdayRef(nth, wd, months_ahead=ahead))
    month = _num(m.group("m"))
    if month is None or not 1 <= month <= 12:
        return problem(m, "bad_date")
    ypre = m.group("ypre")
    offset = None if not ypre else (0 if ypre == "今年" else 1)
    return piece(m, date=NthWeekdayRef(nth, wd, month=month, year_offset=offset))


def _slash_date(m: re.Match[str]) -> Piece:
    month, day = int(m.group("m")), int(m.group("d"))
    if not common.valid_month_day(month, day):
        return problem(m, "bad_date")
    return piece(m, date=AbsDate(month, day))


def _holiday(m: re.Match[str]) -> Piece:
    key = HOLIDAYS[m.group("name")]
    if m.group("dir") or m.group("next"):  # 聖誕節後一天, 母親節前兩天, 聖誕節隔天
        count = _num(m.group("sn")) if m.group("sn") else 1
        if count is None or count == 0:
            return problem(m, "unparsed")
        days = count * (7 if m.group("su") in ("週", "周", "星期", "禮拜", "礼拜") else 1)
        key = shifted(key, -days if m.group("dir") == "前" else days)
        if not m.group("every"):
            return piece(m, date=HolidayRef(key))  # the count makes it a day, not a topic
    if m.group("every"):
        return piece(m, recurrence=yearly_holiday(key))
    # 準備母親節禮物: a holiday is the day only when nothing else gives one.
    return piece(m, date=HolidayRef(key), weak=True)


def _lunar(m: re.Match[str]) -> Piece:
    """農曆八月十五, 农历正月初一, 臘月初八: a lunar date, every year with 每年."""
    if m.groupdict().get("leap"):
        return problem(m, "lunar_leap")
    month_text, day_text = m.group("m"), m.group("d")
    month = LUNAR_MONTHS.get(month_text) or _num(month_text)
    day = _lunar_day(day_text)
    if month is None or day is None or not 1 <= month <= 12 or not 1 <= day <= 30:
        return problem(m, "bad_date")
    key = f"lunar:{month}:{day}"
    if m.group("every"):
        return piece(m, recurrence=YearlyComputed(key))
    return piece(m, date=HolidayRef(key))


def _lunar_day(text: str) -> int | None:
    """初一 -> 1, 初十 -> 10, 十五 -> 15, 廿三 -> 23, 三十 -> 30, 15 -> 15."""
    text = text.rstrip("日號号")
    if text.startswith("初"):
        value = zh_to_int(text[1:])
        return value if value is not None and 1 <= value <= 10 else None
    if text.startswith("廿"):
        rest = zh_to_int(text[1:]) if len(text) > 1 else 0
        return None if rest is None else 20 + rest
    return zh_to_int(text)


def _unknown_festival(m: re.Match[str]) -> Piece | None:
    """<名>節 we do not know (開齋節): refused while it could be the day, never dropped."""
    name = m.group("name")
    if name in _NOT_FESTIVALS or any(name.endswith(k) for k in HOLIDAYS):
        return None
    found = problem(m, "unknown_holiday", weak=True, guards="day")
    assert found.problem is not None
    return replace(found, problem=replace(found.problem, text=name))


def _colon_window(m: re.Match[str]) -> Piece:
    first = _colon_slot(m.group("h1"), m.group("m1"), m.group("dp1"))
    last = _colon_slot(m.group("h2"), m.group("m2"), m.group("dp2"))
    if first is None or last is None:
        return problem(m, "bad_hour")
    return piece(m, window=(first, last))


def _colon_slot(hour_text: str, minute_text: str, dp: str | None) -> Slot | None:
    hour, minute = int(hour_text), int(minute_text)
    if hour > 23 or minute > 59:
        return None
    return Slot(Clock(hour, minute), DAYPARTS[dp][0] if dp else None)


def _lunar_plain(m: re.Match[str]) -> Piece:
    month_text = m.group("m") or m.group("m2")
    day_text = m.group("d") or m.group("d2")
    every = m.group("every") or m.group("every2")
    month = LUNAR_MONTHS.get(month_text) or _num(month_text)
    day = _lunar_day(day_text)
    if month is None or day is None or not 1 <= month <= 12 or not 1 <= day <= 30:
        return problem(m, "bad_date")
    key = f"lunar:{month}:{day}"
    return piece(m, recurrence=YearlyComputed(key)) if every else piece(m, date=HolidayRef(key))


def _from_end(m: re.Match[str]) -> Piece:
    """每月倒數第三天, 每月最後一個工作日, 每季第一個工作日, 每月月底前三天."""
    g = m.groupdict()
    quarter = (g.get("per") or g.get("per_") or "").startswith("季")
    if g.get("wn") or g.get("wlast"):
        nth: int | None = -1
        if g.get("wback"):
            nth = -(_num(g["wback"]) or 0)
        elif g.get("wn"):
            nth = _num(g["wn"])
        return common.workday_piece(m, nth, quarter)
    if g.get("k"):
        return common.month_end_piece(m, _num(g["k"]) or 0, quarter)
    count = _num(g.get("n"))
    return common.month_end_piece(m, 0 if count is None else count + 1, quarter)


def _to_hour(m: re.Match[str]) -> Piece:
    """八點差一刻 = 07:45, 差五分八點 = 07:55: the hour before, with its part of the day."""
    hour = _num(m.group("h") or m.group("h2"))
    kind = (m.group("k") or m.group("k2")).replace("鐘", "").replace("钟", "").strip()
    minutes = {"一刻": 15, "三刻": 45}.get(kind)
    if minutes is None:
        minutes = _num(kind.rstrip("分").strip())
    if hour is None or hour > 24 or hour == 0:
        return problem(m, "bad_hour")
    if minutes is None or not 1 <= minutes <= 59:
        return problem(m, "bad_minute")
    dp = m.group("dp") or m.group("dp2")
    return piece(m, clock=Clock(hour - 1, 60 - minutes), **_daypart_fields(dp))


def _nth_day_of_month(m: re.Match[str]) -> Piece:
    """每月第一天 = 每月1號."""
    day = _num(m.group("k"))
    if day is None or not 1 <= day <= 31:
        return problem(m, "bad_date")
    return piece(m, recurrence=MonthlyDays((day,)))


def _except(m: re.Match[str]) -> Piece:
    words = m.group("off")
    if "末" in words:
        days = frozenset({5, 6}) | day_list(words.replace("末", ""))
    elif "工作日" in words or "平日" in words:
        days = frozenset(range(5))
    else:
        days = day_list(words)
    return common.except_piece(m, days)


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


def _month_list(m: re.Match[str]) -> Piece:
    """一月及七月的1號, 每年1、4月的1、15日: the days named in each month named; every year
    with 每年."""
    months = [_num(x) for x in re.findall(MONTHNUM, m.group("ms"))]
    days = [_num(x) for x in re.findall(DAYNUM, m.group("ds"))]
    if None in months or None in days:
        return problem(m, "bad_date")
    return common.month_list(m, [d for d in days if d is not None],
                             [x for x in months if x is not None], bool(m.group("every")))


# 八點多, 三點左右, 五點前: not a time to fire at, so refused rather than rounded.
_APPROX = r"多|左右|前後|前后|上下|以前|之前|前|以後|之後|之后|以后"
# Words that start a day reference, to tell 從明天開始 (a bound) from 從頭開始 (prose).
_WHEN = rf"今天|明天|後天|后天|下|本|這|这|{WEEK}|\d|[一二三四五六七八九十]+[月號号日]"
# 每 3 天, 每 2 週的週五: the confirmation writes the count with spaces, and reads back.
_EVERY = rf"每(?P<gap>隔)?{_SP}(?P<n>{ZH_NUM})?{_SP}(?:個|个)?"
_OFFSET = (
    rf"(?P<n>\d{{1,3}}\.\d{{1,3}}|{ZH_NUM})?(?P<half>個半|个半|半)?(?:個|个)?(?P<u>{_UNITS})(?P<half2>半)?"
)
_WORKDAY = r"(?:每(?:一)?(?:個|个)?)?(?:工作日|上班日)"
_BUT = r"但是?|不過|不过|可是|只是"
_EXCEPT_PRE = r"(?:除了|除開|除开|除去|不含|不包括|不包含|排除)"
_EXCEPT_POST = (
    r"(?:除外|不要|不用|不必|休息|跳過|跳过|不算|不執行|不执行|不提醒|暫停|暂停|不發|不发)"
)
_OFF_DAYS = (
    rf"(?:{WEEK}{DAYLIST}|(?:每(?:個|个)?)?(?:週|周)末(?:兩天|两天)?|(?:每(?:個|个)?)?(?:工作日|平日))"
)
_OFF_OTHER = (
    r"(?:國定|国定|法定|公眾|公众|國|国|例)?(?:假日|假期|節假日|节假日|連假|连假|節日|节日|颱風假|台风假)"
    r"|下雨天?|雨天"
)
_SAME_TIME = (
    r"(?:這個|这个|這|这|此|同一個|同一个|同一|相同的?|同樣的?|同样的?)\s{0,3}(?:時候|时候|時間|时间|時刻|时刻)"
)



def _time_end(i: int) -> str:
    """One end of a window: 九點, 早上9點半, 下午五點十五分 (groups dp<i>, h<i>, m<i>)."""
    minutes = rf"(?P<m{i}>半|一刻|三刻|{_SHARP}|{MINNUM}分?)?"
    return rf"(?P<dp{i}>{DP})?{_SP}(?P<h{i}>{HOUR}){_SP}{MARK}{minutes}"


_WINDOW = rf"(?:從|从|自)?{_time_end(1)}{_SP}(?:到|至|-|~|～|—){_SP}{_time_end(2)}"
_COLON_WINDOW = (
    rf"(?:從|从|自)?(?P<dp1>{DP})?{_SP}(?P<h1>\d{{1,2}})[:：](?P<m1>\d{{2}}){_SP}(?:到|至|-|~|～){_SP}"
    rf"(?P<dp2>{DP})?{_SP}(?P<h2>\d{{1,2}})[:：](?P<m2>\d{{2}})"
)

RULES: list[Rule] = [
    # Exceptions: 週六週日除外, 除了週末, 但週末不要; holidays and dates are refused, never dropped.
    rule(rf"(?:{_BUT})?{_EXCEPT_PRE}{_SP}(?P<off>{_OFF_DAYS})(?:以外|之外)?", _except),
    rule(rf"(?:{_BUT})?(?P<off>{_OFF_DAYS}){_SP}(?:都|也)?{_EXCEPT_POST}", _except),
    # 六日除外, 六、日除外: weekday numerals alone, only before 除外 (六日 may be the 6th).
    rule(rf"(?P<off>{_DAYC}(?:[、,，和及與与跟]?{_DAYC}){{0,6}}){_SP}(?:都|也)?除外", _except),
    rule(rf"(?:{_BUT})?{_EXCEPT_PRE}{_SP}(?:{_OFF_OTHER}|{_HOLIDAY}|\d|{ZH_NUM}{_SP}[月號号日])",
         _fail("exception")),
    rule(rf"(?:{_BUT})?(?:{_OFF_OTHER}|{_HOLIDAY}){_SP}(?:都|也)?{_EXCEPT_POST}",
         _fail("exception")),
    # Days counted from the end of a month or quarter; working days (Monday to Friday).
    rule(
        rf"每(?:一)?(?:個|个)?(?P<per>月|季度?)(?:的)?(?:倒數|倒数)第{_SP}(?P<k>{DAYNUM}){_SP}[天日]"
        rf"|每(?:一)?(?:個|个)?(?P<per_>月|季度?)(?:的)?(?:月底|季底|季末|最後一天|最后一天)(?:之)?前{_SP}"
        rf"(?P<n>{ZH_NUM}){_SP}[天日]",
        _from_end,
    ),
    rule(
        r"每(?:一)?(?:個|个)?(?P<per>月|季度?)(?:的)?(?:第\s{0,3}(?P<wn>[一二三四五1-5])\s{0,3}(?:個|个)?"
        r"|(?P<wlast>(?:倒數|倒数)第\s{0,3}(?P<wback>[一二三四五1-5])\s{0,3}(?:個|个)?"
        r"|最後一個|最后一个|最後|最后))\s{0,3}(?:工作日|工作天|上班日|營業日|营业日)",
        _from_end,
    ),
    rule(rf"每(?:一)?(?:個|个)?月(?:的)?第{_SP}(?P<k>{DAYNUM}){_SP}天", _nth_day_of_month),
    # 最後一天前兩天 as a count after the day it moves: read where a rule says so (月底前三天,
    # 母親節前兩天), else refused when it touches the time expression, never left in the task.
    rule(rf"(?:之|以)?(?:前|後|后){_SP}{ZH_NUM}{_SP}(?:個|个)?(?:天|日|週|周|星期|禮拜|礼拜|月)",
         _fail("unparsed", weak=True)),
    # 從 2026-12-04 起: the first day of an every-N-weeks or -months rule.
    rule(r"(?:從|从|自)\s{0,3}(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\s{0,3}(?:起|開始|开始)",
         lambda m: common.start_piece(m)),
    # 明天這個時候, 下週同一時間: the clock of the request.
    rule(rf"下(?:個|个)?(?P<u>{WEEK}|月)(?:的)?{_SP}(?:這|这)?{_SAME_TIME}",
         lambda m: piece(m, offset=Offset(1, "month" if m.group("u") == "月" else "week"))),
    rule(rf"(?:在)?{_SAME_TIME}", common.same_time_piece),
    # 八點差一刻, 差五分八點: minutes before the hour.
    rule(
        rf"(?P<dp>{DP})?{_SP}(?P<h>{HOUR}){_SP}(?:點|点)(?:鐘|钟)?{_SP}差{_SP}(?P<k>一刻|三刻|{MINNUM}{_SP}分?(?:鐘|钟)?)"
        rf"|(?P<dp2>{DP})?{_SP}差{_SP}(?P<k2>一刻|三刻|{MINNUM}{_SP}分(?:鐘|钟)?){_SP}(?P<h2>{HOUR}){_SP}(?:點|点)(?:鐘|钟)?",
        lambda m: _to_hour(m),
    ),
    # Recurrence
    rule(
        r"每(?:一)?(?:個|个)?半年",
        _fixed(recurrence=MonthlyDays((1,), months=(1, 7), day_given=False)),
    ),
    rule(
        r"每(?:一)?(?:個|个)?季度?",
        _fixed(recurrence=MonthlyDays((1,), months=QUARTERS, day_given=False)),
    ),
    rule(
        r"每(?:一)?(?:個|个)?季度?(?:的)?(?:第一天|首日|初)",
        _fixed(recurrence=MonthlyDays((1,), months=QUARTERS)),
    ),
    rule(
        r"每(?:一)?(?:個|个)?季度?(?:的)?(?:最後一天|最后一天|最後一日|最后一日|末|底)",
        _fixed(recurrence=MonthlyDays((-1,), months=(3, 6, 9, 12))),
    ),
    rule(rf"(?:一天|一日|每天|每日){_SP}(?P<n>{ZH_NUM}){_SP}次", _times_a_day),
    rule(_WINDOW, _window),
    rule(_COLON_WINDOW, _colon_window),
    rule(
        r"上班時間|上班时间|工作時間|工作时间|辦公時間|办公时间|上班時段|上班时段",
        _fail("need_hours"),
    ),
    rule(rf"{_EVERY}(?P<half>半)?(?:個|个)?{_SP}(?P<u>{_UNITS}|年)", _interval),
    rule(r"天天|每一天", _fixed(recurrence=Daily())),
    rule(
        r"每晚|每夜|每(?:一)?(?:個|个)?晚上",
        _fixed(recurrence=Daily(), daypart=Daypart.EVENING),
    ),
    rule(
        r"每(?:一)?(?:個|个)?早上|每早",
        _fixed(recurrence=Daily(), daypart=Daypart.MORNING),
    ),
    # 每週一，週二除外: the days before 除外 are the exception, not more days of the list.
    rule(rf"{_EVERY}{WEEK}(?:的)?(?:{WEEK})?(?P<days>{DAYLIST})(?!{_SP}(?:都|也)?{_EXCEPT_POST})",
         _weekly),
    rule(rf"{WEEK}(?P<days>{_DAYC}(?:到|至|-|~){WEEK}?{_DAYC})", _weekday_range),
    rule(
        r"每(?:一)?(?:個|个)?(?:週|周)末",
        _fixed(recurrence=Weekly(frozenset({5, 6}))),
    ),
    rule(_WORKDAY, _fixed(recurrence=Weekly(frozenset(range(5))))),
    rule(r"每(?:個|个)?平日", _fixed(recurrence=Weekly(frozenset(range(5))))),
    rule(
        rf"{_EVERY}月(?:的)?(?P<days>(?:{DAYNUM}(?:號|号|日)?[、,，和及與与跟]){{0,30}}{DAYNUM})(?:號|号|日)",
        _monthly,
    ),
    rule(
        r"每(?:一)?(?:個|个)?月(?:的)?(?:最後一天|最后一天|最後一日|最后一日|底|月底)",
        _fixed(recurrence=MonthlyDays((-1,))),
    ),
    rule(
        r"每(?:一)?(?:個|个)?月(?:的)?(?:第(?P<nth>[一二三四五1-5])(?:個|个)?"
        rf"|(?P<last>最後一個|最后一个|最後一|最后一|最後|最后)){_SP}{WEEK}(?P<d>[一二三四五六日天])",
        _monthly_nth,
    ),
    rule(rf"每(?:一)?年(?:的)?(?P<m>{MONTHNUM})月(?P<d>{DAYNUM})(?:日|號|号)?", _yearly),
    rule(
        rf"(?P<every>每(?:一)?年(?:的)?)?(?P<ms>{MONTHNUM}月?(?:(?:和|及|與|与|跟|、|,|，)"
        rf"{MONTHNUM}月?){{0,11}})(?<=月)的(?P<ds>{DAYNUM}(?:(?:日|號|号)?(?:和|及|與|与|、|,|，)"
        rf"{DAYNUM}){{0,30}})(?:日|號|号)",
        _month_list,
    ),
    rule(
        rf"(?P<every>每年(?:的)?|每逢)?{_HOLIDAY}(?:(?:的)?(?P<dir>前|後|后){_SP}(?P<sn>{ZH_NUM}){_SP}"
        rf"(?:(?:個|个)?(?P<su>天|日|週|周|星期|禮拜|礼拜))|(?:的)?(?P<next>隔天|翌日|次日|第二天))?",
        _holiday,
    ),
    # 聖誕節前, 母親節以後: a bound, not a day; refused rather than read as the holiday.
    rule(rf"{_HOLIDAY}(?:之|以)?(?:前|後|后)", _fail("approximate")),
    rule(
        rf"(?P<every>每年(?:的)?)?(?:農曆|农历|陰曆|阴历|舊曆|旧历)(?P<leap>閏|闰)?"
        rf"(?P<m>{_LUNAR_MONTH})月(?P<d>{_LUNAR_DAY})(?:日|號|号)?",
        _lunar,
    ),
    # 正月初一, 臘月初八: the month or day names are lunar even without 農曆.
    rule(
        rf"(?P<every>每年(?:的)?)?(?P<m>正|臘|腊|冬)月(?P<d>{_LUNAR_DAY})(?:日|號|号)?"
        rf"|(?P<every2>每年(?:的)?)?(?P<m2>{_LUNAR_MONTH})月(?P<d2>初[一二三四五六七八九十]|廿[一二三四五六七八九]?)",
        lambda m: _lunar_plain(m),
    ),
    rule(_REGIONAL, _fail("region_holiday", weak=True, guards="day")),
    rule(_SOLAR_TERMS, _fail("solar_term", weak=True, guards="day")),
    rule(r"(?P<name>[\u4e00-\u9fff]{1,3}(?:節|节))(?!假)", _unknown_festival),
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
    rule(r"(?<![\d/.])(?P<m>\d{1,2})/(?P<d>\d{1,2})(?![\d/])", _slash_date),
    rule(
        rf"(?:(?P<ypre>今年|明年)?(?P<m>{MONTHNUM})月|(?P<rel>下下|下|這|这|本)(?:個|个)?月)(?:的)?"
        rf"(?:第(?P<nth>[一二三四五1-5])(?:個|个)?|(?P<last>最後一個|最后一个|最後|最后)){_SP}"
        rf"{WEEK}(?P<d>[一二三四五六日天])",
        _nth_of_month,
    ),
    rule(rf"(?P<d>{DAYNUM})(?:號|号|日)", _day_of_month),
    rule(rf"(?:再)?(?:過|过){_OFFSET}(?:之?後|之?后|以後|以后)?", _offset),
    rule(rf"{_OFFSET}(?:之?後|之?后|以後|以后)", _offset),
    # Times of day
    rule(
        rf"(?P<dp>{DP})?{_SP}(?P<h>{HOUR}){_SP}(?P<mark>{MARK})"
        rf"(?P<mm>半|一刻|三刻|{_SHARP}|(?:零|〇|0)?{MINNUM}{_SP}分(?!鐘|钟)|(?:零|〇|0)?{MINNUM}(?![分\d]))?"
        rf"(?P<approx>{_APPROX})?",
        _time,
    ),
    rule(
        rf"(?P<dp>{DP})?{_SP}(?<!\d)(?P<h>\d{{1,2}})[:：](?P<m>\d{{2}})(?!\d)(?P<approx>{_APPROX})?",
        _colon_time,
    ),
    rule(DP, _daypart),
    rule(
        r"立刻|立即|馬上|马上|即刻|立馬|立马|現在就|现在就|^\s{0,3}(?:現在|现在)|(?:現在|现在)\s{0,3}[。！!.]?\s{0,3}$",
        _fixed(immediate=True),
    ),
    # Fragments that look like times but are not readable: reported, never guessed.
    rule(rf"(?:每(?:個|个)?)?{WEEK}[七八九十零〇]", _fail("bad_weekday")),
    # 隔週五: every other Friday, or Friday of next week? Asked, never guessed.
    rule(rf"(?<!每)隔{WEEK}[一二三四五六日天]", _fail("every_other")),
    # 每三週一次, 每季一次: "once" adds nothing to the rule it follows.
    rule(
        r"(?<=[週周月天年季日])\s{0,3}(?:一次|1次)",
        lambda m: piece(m, weak=True, stands_alone=False),
    ),
    rule(r"(?:這|这|本|下|上)?(?:個|个)?(?:週|周)末", _fail("unparsed", weak=True)),
    # Bounds (從明天開始, 到月底為止, 連續三天) are not supported: refusing beats ignoring them.
    rule(rf"(?:從|从|自)(?:{_WHEN})\S{{0,6}}?(?:開始|开始|起)", _fail("unparsed")),
    rule(rf"(?:直到|到)(?:{_WHEN}|月底|年底)\S{{0,6}}?(?:為止|为止|結束|结束)", _fail("unparsed")),
    rule(rf"(?:連續|连续|持續|持续){_SP}{ZH_NUM}{_SP}(?:天|週|周|個月|个月|次)", _fail("unparsed")),
    rule(rf"\d{{1,3}}\.\d{{1,3}}{_SP}{_UNITS}", _fail("unparsed")),
    rule(
        r"稍後|稍后|待會兒?|待会儿?|等一下|等會兒?|等会儿?|一會兒|一会儿|改天|有空的?時候|有空的?时候"
        r"|過幾天|过几天|晚點|晚点|晚一點|晚一点|遲些|迟些|過一陣子|过一阵子|將來|将来|哪天|早晚"
        r"|找(?:個|个)?(?:時間|时间|空|一天|天)|有空再|有時間的?時候|有时间的?时候",
        _fail("vague"),
    ),
    # Times set by an event or the sun: refused while they could give the time (明天午飯後),
    # left in the task once a time is said (每天早上九點提醒我開會前準備).
    rule(
        r"(?:午飯|午饭|午餐|中飯|中饭|晚飯|晚饭|晚餐|早飯|早饭|早餐|宵夜|下班|上班|放學|放学|下課|下课"
        r"|睡覺|睡觉|睡|起床|吃飯|吃饭|開會|开会)(?:以前|之前|前|以後|以后|之後|之后|後|后|時|时"
        r"|的時候|的时候)",
        _fail("unparsed", weak=True, guards="clock"),
    ),
    rule(
        r"(?:日出|日落|天亮|天黑|黃昏|黄昏)(?:時|时|的時候|的时候|前|後|后)?",
        _fail("unparsed", weak=True, guards="clock"),
    ),
    rule(
        r"月初|月中|年初|年中|年底|年末|上旬|中旬|下旬|(?<!每)(?<!每個)(?<!每个)月底",
        _fail("unparsed", weak=True, guards="day"),
    ),
    *common.AMPM_RULES,
]

