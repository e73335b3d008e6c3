"""Say a schedule back in words: "每天 08:00", "every weekday at 09:00", "每月第一個週一 10:00".

Reads the cron and RRULE forms this package produces (and the common ones it does not), and falls
back to the raw schedule text for anything else, so a confirmation is never wrong, at worst terse.
"""

from __future__ import annotations

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
# Words that differ between the scripts: (Traditional, Simplified).
_ZH: dict[str, tuple[str, str]] = {
    "week": ("週", "周"),
    "workdays": ("每個工作日", "每个工作日"),
    "minute": ("分鐘", "分钟"),
    "hour": ("小時", "小时"),
    "month_n": ("個月", "个月"),
    "last_day": ("最後一天", "最后一天"),
    "last_one": ("最後一個", "最后一个"),
    "nth": ("第{n}個", "第{n}个"),
}


def zh_word(key: str, language: Language) -> str:
    hant, hans = _ZH[key]
    return hant if language == "zh-Hant" else hans


def describe(schedule: str, language: Language) -> str:
    try:
        if schedule.upper().startswith("RRULE:"):
            return _rrule(schedule, language)
        fields = schedule.split()
        if len(fields) == 5:
            return _cron(fields, language)
    except (ValueError, IndexError, KeyError):
        pass
    return schedule


def _hhmm(hour: str | int, minute: str | int) -> str:
    return f"{int(hour):02d}:{int(minute):02d}"


def _cron_days(dow: str) -> list[int]:
    """Cron day-of-week field to Python weekdays (Monday = 0)."""
    days: set[int] = set()
    for part in dow.split(","):
        lo, _, hi = part.partition("-")
        for n in range(int(lo), int(hi or lo) + 1):
            days.add((n - 1) % 7)
    return sorted(days)


def _weekdays(days: list[int], language: Language) -> str:
    """every Monday and Friday / 每週一、五; Monday..Friday is 'every weekday' / 每個工作日."""
    if language == "en":
        if days == [0, 1, 2, 3, 4]:
            return "every weekday"
        names = [_EN_DAYS[d] for d in days]
        joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        return f"every {joined}"
    if days == [0, 1, 2, 3, 4]:
        return zh_word("workdays", language)
    return "每" + zh_word("week", language) + "、".join(_ZH_DAYS[d] for d in days)


def _cron(fields: list[str], language: Language) -> str:
    minute, hour, dom, month, dow = fields
    en = language == "en"
    on_days = "" if dow == "*" else _weekdays(_cron_days(dow), language)
    if hour == "*" or hour.startswith("*/"):
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
    at = _hhmm(hour, minute)
    if dom == "*" and month == "*":
        if dow == "*":
            return f"every day at {at}" if en else f"每天 {at}"
        return f"{on_days} at {at}" if en else f"{on_days} {at}"
    if dow != "*":
        raise ValueError(dow)
    days = [int(d) for d in dom.split(",")]
    if month == "*":
        if en:
            return f"on {_day_word(days)} {_and(days)} of every month at {at}"
        return f"每月{'、'.join(map(str, days))}日 {at}"
    m = int(month)
    if en:
        return f"every year on {days[0]} {_EN_MONTHS[m - 1]} at {at}"
    return f"每年{m}月{days[0]}日 {at}"


def _plural_days(days: list[int]) -> str:
    """weekdays / Mondays and Fridays, for "every 2 hours on ..."."""
    if days == [0, 1, 2, 3, 4]:
        return "weekdays"
    names = [_EN_DAYS[d] + "s" for d in days]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _day_word(days: list[int]) -> str:
    return "day" if len(days) == 1 else "days"


def _and(items: list[int]) -> str:
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _rrule(schedule: str, language: Language) -> str:
    rule = dict(part.split("=", 1) for part in schedule[6:].split(";") if part)
    freq = rule["FREQ"].upper()
    n = int(rule.get("INTERVAL", "1"))
    at = _hhmm(rule.get("BYHOUR", "0"), rule.get("BYMINUTE", "0"))
    en = language == "en"
    if freq == "DAILY":
        if en:
            return f"every day at {at}" if n == 1 else f"every {n} days at {at}"
        return f"每天 {at}" if n == 1 else f"每 {n} 天 {at}"
    if freq == "WEEKLY":
        days = sorted(_RRULE_DAYS.index(d) for d in rule["BYDAY"].split(","))
        if n == 1:
            return f"{_weekdays(days, language)} {'at ' if en else ''}{at}"
        if en:
            return f"every {n} weeks on {_weekdays(days, language)[6:]} at {at}"
        return f"每 {n} {zh_word('week', language)}的{_weekdays(days, language)[1:]} {at}"
    if freq == "MONTHLY":
        return _monthly(rule, n, at, language)
    raise ValueError(freq)


def _monthly(rule: dict[str, str], n: int, at: str, language: Language) -> str:
    en = language == "en"
    if en:
        every = "every month" if n == 1 else f"every {n} months"
    else:
        every = "每月" if n == 1 else f"每 {n} {zh_word('month_n', language)}的"
    if "BYDAY" in rule:
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
    days = [int(d) for d in rule["BYMONTHDAY"].split(",")]
    if days == [-1]:
        if en:
            return f"on the last day of {every} at {at}"
        return f"{every}{zh_word('last_day', language)} {at}"
    if en:
        return f"on {_day_word(days)} {_and(days)} of {every} at {at}"
    return f"{every}{'、'.join(map(str, days))}日 {at}"
