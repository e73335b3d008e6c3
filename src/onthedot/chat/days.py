"""The day a chat message names for one run of a task: "skip tomorrow's news digest",
"跳過明天的健身", "skip the standup on Friday".

``today``/``tonight``/今天/今晚 is the user's today, ``tomorrow``/明天/明早/明晚 the day after,
後天 the one after that; a weekday ("friday", "this friday", 週五, 星期五, 這週五) is the first
such day from today on, today included; "next friday" and 下週五 are that day of next week
(weeks start on Monday). Pure: the caller gives now and the user's timezone.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

_EN_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ZH_WEEKDAYS = "一二三四五六"  # 日 and 天 are Sunday
_EN_OFFSETS = {"today": 0, "tonight": 0, "tomorrow": 1}
_ZH_OFFSETS = {"今天": 0, "今晚": 0, "明天": 1, "明早": 1, "明晚": 1, "後天": 2, "后天": 2}
_ZH_WEEKDAY = re.compile(
    r"(?P<next>下)?(?:這|这)?(?:週|周|星期|禮拜|礼拜)(?P<d>[一二三四五六日天])")


def day_named(words: str, now: datetime, timezone: str) -> date | None:
    """The date ``words`` name, in ``timezone``; None when they name no day."""
    today = now.astimezone(ZoneInfo(timezone)).date()
    text = words.strip().lower()
    offset = _EN_OFFSETS.get(text, _ZH_OFFSETS.get(text))
    if offset is not None:
        return today + timedelta(days=offset)
    next_week = False
    weekday: int | None = None
    if m := _ZH_WEEKDAY.fullmatch(text):
        next_week = m["next"] is not None
        weekday = 6 if m["d"] in "日天" else _ZH_WEEKDAYS.index(m["d"])
    else:
        first, _, rest = text.partition(" ")
        if first in ("this", "next") and rest:
            next_week, text = first == "next", rest
        if text in _EN_WEEKDAYS:
            weekday = _EN_WEEKDAYS.index(text)
    if weekday is None:
        return None
    if next_week:  # next week's: from next Monday on
        return today + timedelta(days=7 - today.weekday() + weekday)
    return today + timedelta(days=(weekday - today.weekday()) % 7)
