"""Say a schedule back in words: "每天 08:00", "every weekday at 09:00", "每月第一個週一 10:00".

Reads the cron, RRULE, DTSTART and RDATE forms this package produces (and the common ones it does
not), and falls back to the raw schedule text for anything else: every part of a rule must be
understood or the rule is said back as written, so a confirmation is never wrong, at worst terse.
"""

from __future__ import annotations

from datetime import date
from functools import lru_cache
from itertools import pairwise

from dateutil.easter import easter

from onthedot.nl.holidays import lunar_to_solar
from onthedot.nl.parts import Language

_EN_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_ZH_DAYS = "一二三四五六日"
_RRULE_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
_EN_MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]  # fmt: skip
_EN_NTH = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", -1: "last"}
_ZH_NTH = {1: "一", 2: "二", 3: "三", 4: "四", 5: "五"}
_ZH_LUNAR_DAYS = ["初一", "初二", "初三", "初四", "初五", "初六", "初七", "初八", "初九", "初十"]
# Words that differ between the scripts: (Traditional, Simplified).
_ZH: dict[str, tuple[str, str]] = {
    "week": ("週", "周"),
    "workdays": ("每個工作日", "每个工作日"),
    "minute": ("分鐘", "分钟"),
    "hour": ("小時", "小时"),
    "second": ("秒", "秒"),
    "month_n": ("個月", "个月"),
    "last_day": ("最後一天", "最后一天"),
    "last_one": ("最後一個", "最后一个"),
    "nth": ("第{n}個", "第{n}个"),
    "lunar": ("農曆", "农历"),
    "lunar_eve": ("除夕", "除夕"),
    "from": ("從 {day} 起", "从 {day} 起"),
    "created": ("自建立時起算", "自创建时起算"),
    "dates": ("共 {n} 個日期", "共 {n} 个日期"),
    "between": ("{a} 至 {b} 每 {n} 分鐘", "{a} 至 {b} 每 {n} 分钟"),
    "between_hour": ("{a} 至 {b} 每小時", "{a} 至 {b} 每小时"),
    "twelfth": ("臘", "腊"),
    "from_end": ("倒數第{n}天", "倒数第{n}天"),
    "workday": ("第{n}個工作日", "第{n}个工作日"),
    "last_workday": ("最後一個工作日", "最后一个工作日"),
    "workday_back": ("倒數第{n}個工作日", "倒数第{n}个工作日"),
}
_RULE_PARTS = {
    "FREQ", "INTERVAL", "BYDAY", "BYMONTHDAY", "BYMONTH", "BYHOUR", "BYMINUTE", "BYSECOND",
}  # fmt: skip


def zh_word(key: str, language: Language) -> str:
    hant, hans = _ZH[key]
    return hant if language == "zh-Hant" else hans


# Every job a listing, an MCP result or the Tasks page shows is put in words in three languages,
# and a lunar-date schedule is a list of dates to read: the words of a schedule never change.
@lru_cache(maxsize=4096)
def describe(schedule: str, language: Language) -> str:
    try:
        text = schedule.strip()
        if "\n" in text or text.upper().startswith(("RRULE:", "FREQ=", "DTSTART", "RDATE")):
            return _calendar(text, language)
        fields = text.split()
        if len(fields) == 5:
            return _cron(fields, language)
    except (ValueError, IndexError, KeyError):
        pass
    return schedule


def _hhmm(hour: str | int, minute: str | int) -> str:
    return f"{int(hour):02d}:{int(minute):02d}"


def _numbers(field: str) -> list[int]:
    """A cron list ("1,15", "9-17", "0,30") as numbers; ValueError on steps or names."""
    values: list[int] = []
    for part in field.split(","):
        lo, _, hi = part.partition("-")
        values.extend(range(int(lo), int(hi or lo) + 1))
    return sorted(set(values))


def _cron_days(dow: str) -> list[int]:
    """Cron day-of-week field to Python weekdays (Monday = 0)."""
    return sorted({(n - 1) % 7 for n in _numbers(dow)})


def _weekdays(days: list[int], language: Language) -> str:
    """every Monday and Friday / 每週一、五; Monday..Friday is 'every weekday' / 每個工作日."""
    if language == "en":
        if days == [0, 1, 2, 3, 4]:
            return "every weekday"
        names = [_EN_DAYS[d] for d in days]
        return f"every {_and(names)}"
    if days == [0, 1, 2, 3, 4]:
        return zh_word("workdays", language)
    return "每" + zh_word("week", language) + "、".join(_ZH_DAYS[d] for d in days)


def _times(times: list[tuple[int, int]], language: Language) -> str:
    """08:00 / 08:00 and 20:00 / every 30 minutes from 10:00 to 16:00 (a regular run of 3+)."""
    minutes = [h * 60 + m for h, m in times]
    steps = {b - a for a, b in pairwise(minutes)}
    first, last = _hhmm(*times[0]), _hhmm(*times[-1])
    if len(times) >= 3 and len(steps) == 1:
        step = steps.pop()
        if language == "en":
            every = "every hour" if step == 60 else f"every {step} minutes"
            return f"{every} from {first} to {last}"
        if step == 60:
            return zh_word("between_hour", language).format(a=first, b=last)
        return zh_word("between", language).format(a=first, b=last, n=step)
    words = [_hhmm(h, m) for h, m in times]
    return _and(words) if language == "en" else "、".join(words)


def _at(at: str) -> str:
    """"at 08:00", but a span of times stands alone: ", every hour from 09:00 to 17:00"."""
    return f", {at}" if at.startswith("every") else f" at {at}"


def _cron(fields: list[str], language: Language) -> str:
    minute, hour, dom, month, dow = fields
    en = language == "en"
    on_days = "" if dow == "*" else _weekdays(_cron_days(dow), language)
    if hour == "*" or hour.startswith("*/"):
        if dom != "*" or month != "*":
            raise ValueError(dom)
        if hour == "*" and (minute == "*" or minute.startswith("*/")):
            n = 1 if minute == "*" else int(minute[2:])
            unit = "minute"
        elif minute == "0":
            n = 1 if hour == "*" else int(hour[2:])
            unit = "hour"
        else:
            raise ValueError(minute)
        if en:
            every = f"every {unit}" if n == 1 else f"every {n} {unit}s"
            return every + (f" on {_plural_days(_cron_days(dow))}" if on_days else "")
        every = f"每{zh_word(unit, language)}" if n == 1 else f"每 {n} {zh_word(unit, language)}"
        return on_days + every
    at = _times([(h, m) for h in _numbers(hour) for m in _numbers(minute)], language)
    if dom == "*" and month == "*":
        if dow == "*":
            return f"every day{_at(at)}" if en else f"每天 {at}"
        return f"{on_days}{_at(at)}" if en else f"{on_days} {at}"
    if dow != "*":
        raise ValueError(dow)
    days = _numbers(dom)
    if month == "*":
        if en:
            return f"on {_and([_en_ordinal(d) for d in days])} of every month at {at}"
        return f"每月{'、'.join(map(str, days))}日 {at}"
    months = _numbers(month)
    if len(months) == 1 and len(days) == 1:
        m = months[0]
        if en:
            return f"every year on {days[0]} {_EN_MONTHS[m - 1]} at {at}"
        return f"每年{m}月{days[0]}日 {at}"
    return _in_months(months, days, at, language)


def _in_months(months: list[int], days: list[int], at: str, language: Language) -> str:
    """every year on day 1 of January and April at 09:00 / 每年1、4月的1日 09:00; a
    quarter's first days and last day said as such ("on the 1st of every quarter", 每季1日),
    so that the sentence reads back to the same schedule."""
    quarter = (months == [1, 4, 7, 10] and all(d > 0 for d in days)) or (
        months == [3, 6, 9, 12] and days == [-1])
    half = months == [1, 7] and all(d > 0 for d in days)
    if quarter or half:
        if language == "en":
            which = "the last day" if days == [-1] else _and([_en_ordinal(d) for d in days])
            return f"on {which} of every {'quarter' if quarter else 'half-year'} at {at}"
        which = zh_word("last_day", language) if days == [-1] else "、".join(map(str, days)) + "日"
        return f"{'每季' if quarter else '每半年'}{which} {at}"
    if language == "en":
        names = [_EN_MONTHS[m - 1] for m in months]
        which = "the last day" if days == [-1] else f"{_day_word(days)} {_and(days)}"
        return f"every year on {which} of {_and(names)} at {at}"
    which = zh_word("last_day", language) if days == [-1] else "、".join(map(str, days)) + "日"
    return f"每年{'、'.join(map(str, months))}月的{which} {at}"


def _en_ordinal(day: int) -> str:
    """1 -> "the 1st", 22 -> "the 22nd"."""
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(day % 10 if day % 100 not in (11, 12, 13) else 0)
    return f"the {day}{suffix or 'th'}"


def _plural_days(days: list[int]) -> str:
    """weekdays / Mondays and Fridays, for "every 2 hours on ..."."""
    if days == [0, 1, 2, 3, 4]:
        return "weekdays"
    return _and([_EN_DAYS[d] + "s" for d in days])


def _day_word(days: list[int]) -> str:
    return "day" if len(days) == 1 else "days"


def _and(items: list[int] | list[str]) -> str:
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _calendar(text: str, language: Language) -> str:
    """RRULE lines (alike but for their times), an optional DTSTART, or DTSTART + RDATE."""
    start: date | None = None
    rules: list[dict[str, str]] = []
    rdates: list[date] = []
    times_of_dates: set[tuple[int, int]] = set()
    for line in text.splitlines():
        name, _, value = line.strip().partition(":")
        head = name.split(";")[0].upper()
        if head == "DTSTART":
            start = _date(value)
        elif head in ("RRULE", "FREQ"):
            body = value if head == "RRULE" else line.strip()
            rules.append(dict(part.split("=", 1) for part in body.split(";") if part))
        elif head == "RDATE":
            for item in value.split(","):
                rdates.append(_date(item))
                times_of_dates.add((int(item[9:11]), int(item[11:13])))
        else:
            raise ValueError(line)
    if rdates and not rules:
        if len(times_of_dates) != 1:
            raise ValueError(text)
        return _listed(rdates, next(iter(times_of_dates)), language)
    if not rules or rdates:
        raise ValueError(text)
    said = _rules(rules, language)
    if start is not None:
        day = start.isoformat()
        if language == "en":
            said += f", starting {day}"
        else:
            said += "，" + zh_word("from", language).format(day=day)
    return said


def _date(value: str) -> date:
    return date(int(value[0:4]), int(value[4:6]), int(value[6:8]))


def _rules(rules: list[dict[str, str]], language: Language) -> str:
    """One description for rules that differ only in their times of day."""
    if all(r.get("FREQ", "").upper() == "YEARLY" and "BYMONTHDAY" in r for r in rules):
        return _yearly_dates(rules, language)
    first = {k: v for k, v in rules[0].items() if k not in ("BYHOUR", "BYMINUTE")}
    workday: int | None = None
    if first.get("BYDAY") == "MO,TU,WE,TH,FR" and "BYSETPOS" in first:
        # The nth working day of a month (MonthlyWorkday): one position among Monday-Friday.
        workday = int(first["BYSETPOS"])
        first = {k: v for k, v in first.items() if k not in ("BYSETPOS", "BYDAY")}
        rules = [{k: v for k, v in r.items() if k not in ("BYSETPOS", "BYDAY")} for r in rules]
    if first.get("BYSETPOS") == "-1" and first.get("BYMONTHDAY", "").startswith("28,"):
        # The clamped day of "every 3 months" said on the 29th-31st: the day of creation.
        first = {k: v for k, v in first.items() if k not in ("BYSETPOS", "BYMONTHDAY")}
        rules = [{k: v for k, v in r.items() if k not in ("BYSETPOS", "BYMONTHDAY")} for r in rules]
    times: set[tuple[int, int]] = set()
    for rule in rules:
        if set(rule) - _RULE_PARTS or rule.get("BYSECOND", "0") != "0":
            raise ValueError(rule)
        if {k: v for k, v in rule.items() if k not in ("BYHOUR", "BYMINUTE")} != first:
            raise ValueError(rule)
        if "BYHOUR" in rule or "BYMINUTE" in rule:
            hours, minutes = rule["BYHOUR"].split(","), rule["BYMINUTE"].split(",")
            times.update((int(h), int(m)) for h in hours for m in minutes)
    freq = first["FREQ"].upper()
    n = int(first.get("INTERVAL", "1"))
    en = language == "en"
    if freq in ("SECONDLY", "MINUTELY", "HOURLY"):
        return _counted(freq, n, first, language)
    if not times:
        raise ValueError("no times")
    at = _times(sorted(times), language)
    if freq == "DAILY" and set(first) <= {"FREQ", "INTERVAL", "BYSECOND"}:
        if en:
            return f"every day{_at(at)}" if n == 1 else f"every {n} days{_at(at)}"
        return f"每天 {at}" if n == 1 else f"每 {n} 天 {at}"
    if freq == "WEEKLY" and set(first) <= {"FREQ", "INTERVAL", "BYSECOND", "BYDAY"}:
        return _weekly(first, n, at, language)
    if freq == "MONTHLY" and workday is not None:
        return _workday(first, n, workday, at, language)
    if freq == "MONTHLY":
        return _monthly(first, n, at, language)
    if freq == "YEARLY":
        return _yearly(first, at, language)
    raise ValueError(freq)


def _counted(freq: str, n: int, rule: dict[str, str], language: Language) -> str:
    """every 40 minutes, counted from creation (a rule with no time of day to align it)."""
    if set(rule) - {"FREQ", "INTERVAL", "BYDAY"}:
        raise ValueError(rule)
    unit = {"SECONDLY": "second", "MINUTELY": "minute", "HOURLY": "hour"}[freq]
    days = sorted(_RRULE_DAYS.index(d) for d in rule["BYDAY"].split(",")) if "BYDAY" in rule else []
    if language == "en":
        every = f"every {unit}" if n == 1 else f"every {n} {unit}s"
        on = f" on {_plural_days(days)}" if days else ""
        return f"{every}{on}, counted from when it was created"
    every = f"每{zh_word(unit, language)}" if n == 1 else f"每 {n} {zh_word(unit, language)}"
    on = _weekdays(days, language) if days else ""
    return f"{on}{every}（{zh_word('created', language)}）"


def _weekly(rule: dict[str, str], n: int, at: str, language: Language) -> str:
    en = language == "en"
    if "BYDAY" not in rule:  # every 2 weeks on the weekday it was created
        if n == 1:
            raise ValueError(rule)
        return f"every {n} weeks at {at}" if en else f"每 {n} {zh_word('week', language)} {at}"
    days = sorted(_RRULE_DAYS.index(d) for d in rule["BYDAY"].split(","))
    if n == 1:
        said = _weekdays(days, language)
        return f"{said}{_at(at)}" if en else f"{said} {at}"
    if en:
        return f"every {n} weeks on {_weekdays(days, language)[6:]} at {at}"
    return f"每 {n} {zh_word('week', language)}的{_weekdays(days, language)[1:]} {at}"


def _monthly(rule: dict[str, str], n: int, at: str, language: Language) -> str:
    en = language == "en"
    if set(rule) - {"FREQ", "INTERVAL", "BYSECOND", "BYDAY", "BYMONTHDAY", "BYMONTH"}:
        raise ValueError(rule)
    monthday = rule.get("BYMONTHDAY", "")
    if n == 1 and "BYDAY" not in rule and monthday.startswith("-") and "," not in monthday:
        return _from_end_days(rule, at, language)
    if "BYMONTH" in rule:
        if n != 1 or "BYDAY" in rule:
            raise ValueError(rule)
        days = [int(d) for d in rule["BYMONTHDAY"].split(",")]
        return _in_months([int(m) for m in rule["BYMONTH"].split(",")], days, at, language)
    if en:
        every = "every month" if n == 1 else f"every {n} months"
    else:
        every = "每月" if n == 1 else f"每 {n} {zh_word('month_n', language)}的"
    if "BYDAY" in rule:
        if "BYMONTHDAY" in rule:
            raise ValueError(rule)
        code = rule["BYDAY"]
        nth, day = int(code[:-2]), _RRULE_DAYS.index(code[-2:])
        if en:
            return f"on the {_EN_NTH[nth]} {_EN_DAYS[day]} of {every} at {at}"
        which = (
            zh_word("last_one", language)
            if nth == -1
            else zh_word("nth", language).format(n=_ZH_NTH[nth])
        )
        return f"{every}{which}{zh_word('week', language)}{_ZH_DAYS[day]} {at}"
    if "BYMONTHDAY" not in rule:  # every 3 months on the day it was created
        if n == 1:
            raise ValueError(rule)
        return f"{every} at {at}" if en else f"{every.rstrip('的')} {at}"
    days = [int(d) for d in rule["BYMONTHDAY"].split(",")]
    if days == [-1]:
        if en:
            return f"on the last day of {every} at {at}"
        return f"{every}{zh_word('last_day', language)} {at}"
    if en:  # "on the 1st and 15th of every month": as the parser reads it back
        return f"on {_and([_en_ordinal(d) for d in days])} of {every} at {at}"
    return f"{every}{'、'.join(map(str, days))}日 {at}"


def _en_from_end(back: int) -> str:
    """3 -> "3rd-to-last", 1 -> "last"."""
    if back == 1:
        return "last"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(back % 10 if back % 100 not in (11, 12, 13) else 0)
    return f"{back}{suffix or 'th'}-to-last"


def _period(months: str | None, language: Language) -> str:
    """The period a rule's days are counted in: every month, or every quarter (its first or
    last month); any other months are not said here (ValueError: the rule is shown as is)."""
    en = language == "en"
    if months is None:
        return "every month" if en else "每月"
    if months in ("1,4,7,10", "3,6,9,12"):
        return "every quarter" if en else "每季"
    raise ValueError(months)


def _workday(rule: dict[str, str], n: int, pos: int, at: str, language: Language) -> str:
    """on the last working day of every month at 18:00 / 每季第一個工作日 09:00."""
    if n != 1 or set(rule) - {"FREQ", "BYSECOND", "BYMONTH"} or not 1 <= abs(pos) <= 5:
        raise ValueError(rule)
    months = rule.get("BYMONTH")
    if months is not None and months != ("1,4,7,10" if pos > 0 else "3,6,9,12"):
        raise ValueError(months)
    every = _period(months, language)
    if language == "en":
        which = _EN_NTH[pos] if pos > 0 else _en_from_end(-pos)
        return f"on the {which} working day of {every}{_at(at)}"
    if pos > 0:
        which = zh_word("workday", language).format(n=_ZH_NTH[pos])
    elif pos == -1:
        which = zh_word("last_workday", language)
    else:
        which = zh_word("workday_back", language).format(n=_ZH_NTH[-pos])
    return f"{every}{which} {at}"


def _from_end_days(rule: dict[str, str], at: str, language: Language) -> str:
    """on the 3rd-to-last day of every month at 09:00 / 每季倒數第3天 09:00."""
    back = -int(rule["BYMONTHDAY"])
    every = _period(rule.get("BYMONTH"), language)
    if rule.get("BYMONTH") not in (None, "3,6,9,12"):
        raise ValueError(rule)
    if language == "en":
        return f"on the {_en_from_end(back)} day of {every}{_at(at)}"
    if back == 1:
        return f"{every}{zh_word('last_day', language)} {at}"
    return f"{every}{zh_word('from_end', language).format(n=back)} {at}"


def _yearly(rule: dict[str, str], at: str, language: Language) -> str:
    if set(rule) != {"FREQ", "BYMONTH", "BYDAY", "BYSECOND"} or "," in rule["BYMONTH"]:
        raise ValueError(rule)
    month, code = int(rule["BYMONTH"]), rule["BYDAY"]
    nth, day = int(code[:-2]), _RRULE_DAYS.index(code[-2:])
    if language == "en":
        which = f"the {_EN_NTH[nth]} {_EN_DAYS[day]} of {_EN_MONTHS[month - 1]}"
        return f"every year on {which} at {at}"
    which = zh_word("last_one", language) if nth == -1 else zh_word("nth", language).format(
        n=_ZH_NTH[nth]
    )
    return f"每年{month}月{which}{zh_word('week', language)}{_ZH_DAYS[day]} {at}"


def _yearly_dates(rules: list[dict[str, str]], language: Language) -> str:
    """every year on 1 January and 15 July at 09:00 / 每年1月1日、7月15日 09:00: one rule per
    date (and per group of times), every date at the same times."""
    times: dict[tuple[int, int], set[tuple[int, int]]] = {}
    for rule in rules:
        if set(rule) != {"FREQ", "BYMONTH", "BYMONTHDAY", "BYHOUR", "BYMINUTE", "BYSECOND"}:
            raise ValueError(rule)
        if rule["BYSECOND"] != "0" or "," in rule["BYMONTH"] + rule["BYMONTHDAY"]:
            raise ValueError(rule)
        hours, minutes = rule["BYHOUR"].split(","), rule["BYMINUTE"].split(",")
        said = times.setdefault((int(rule["BYMONTH"]), int(rule["BYMONTHDAY"])), set())
        said.update((int(h), int(m)) for h in hours for m in minutes)
    if len({frozenset(t) for t in times.values()}) != 1:
        raise ValueError(rules)
    dates = sorted(times)
    at = _times(sorted(times[dates[0]]), language)
    if language == "en":
        return f"every year on {_and([f'{d} {_EN_MONTHS[m - 1]}' for m, d in dates])} at {at}"
    return f"每年{'、'.join(f'{m}月{d}日' for m, d in dates)} {at}"


def _listed(days: list[date], at: tuple[int, int], language: Language) -> str:
    """Listed yearly dates: a lunar date or Easter when they all are one, else the dates."""
    hhmm = _hhmm(*at)
    en = language == "en"
    lunar = _lunar_of(days)
    if lunar is not None and len(days) > 1:
        month, day = lunar
        last = days[-1].year
        if en:
            name = "the lunar New Year's Eve" if day == 0 else f"lunar {month}/{day}"
            return f"every year on {name} at {hhmm} (dates listed until {last})"
        said = zh_word("lunar_eve", language) if day == 0 else (
            f"{zh_word('lunar', language)}"
            f"{zh_word('twelfth', language) if month == 12 else _zh_lunar_month(month)}月"
            f"{_zh_lunar_day(day)}"
        )
        return f"每年{said} {hhmm}（{last} 年前）"
    if len(days) > 1 and all(d == easter(d.year) for d in days):
        return f"every year on Easter Sunday at {hhmm}" if en else f"每年復活節 {hhmm}"
    shown = ", ".join(d.isoformat() for d in days[:3]) + (" …" if len(days) > 3 else "")
    if en:
        return f"on {shown} at {hhmm} ({len(days)} dates)"
    return f"{shown} {hhmm}（{zh_word('dates', language).format(n=len(days))}）"


def _lunar_of(days: list[date]) -> tuple[int, int] | None:
    """The (lunar month, day) every date falls on, (12, 0) for New Year's Eve; else None."""
    found: set[tuple[int, int]] = set()
    for d in days[:5]:
        for month, day in _lunar_candidates(d):
            found.add((month, day))
    for candidate in sorted(found):
        if all(_is_lunar(d, *candidate) for d in days):
            return candidate
    return None


def _lunar_candidates(d: date) -> list[tuple[int, int]]:
    out = [(12, 0)]
    for year in (d.year, d.year - 1):
        for month in range(1, 13):
            first = lunar_to_solar(year, month, 1)
            if first is not None and 0 <= (d - first).days < 30:
                out.append((month, (d - first).days + 1))
    return out


def _is_lunar(d: date, month: int, day: int) -> bool:
    if day == 0:
        new_year = lunar_to_solar(d.year, 1, 1)
        return new_year is not None and (new_year - d).days == 1
    return any(lunar_to_solar(y, month, day) == d for y in (d.year, d.year - 1))


def _zh_lunar_month(month: int) -> str:
    return {1: "正", 11: "十一"}.get(month) or "一二三四五六七八九十"[month - 1]


def _zh_lunar_day(day: int) -> str:
    if day <= 10:
        return _ZH_LUNAR_DAYS[day - 1]
    tens, ones = divmod(day, 10)
    prefix = {1: "十", 2: "廿", 3: "三十"}[tens]
    if ones == 0:
        return "二十" if tens == 2 else ("三十" if tens == 3 else "初十")
    return prefix + "一二三四五六七八九"[ones - 1]
