"""Properties over generated sentences: the parser answers or refuses, never crashes or guesses
a time in the past, and every schedule it emits compiles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from onthedot.domain.errors import ParseError
from onthedot.nl import ParseResult, parse, render_confirmation
from onthedot.schedule import compile_schedule

ZH_WORDS = [
    "每天", "每週", "每周", "一", "三", "五", "八", "十", "二十", "兩", "半", "一刻", "點", "点",
    "分", "早上", "下午", "晚上", "凌晨", "中午", "明天", "後天", "今晚", "下週", "下个月", "號",
    "月",
    "每隔", "小時", "分鐘", "後", "后", "星期", "禮拜", "天", "末", "工作日", "最後一天", "第一個",
    "提醒我", "幫我", "喝水", "開會", "25", "8", ":", "30", "年", "每月", "每年", "立刻", "稍後",
    "和", "、", "到", "一天三次", "每季", "每半年", "中秋節", "農曆", "正月", "初一", "除夕",
    "元宵節",
    "聖誕節", "國慶日", "清明", "開齋節", "午飯後", "上班時間", "找個時間", "的", "1.5", "隔週五",
    "10/6", "（", "）", "整理", "秒", "每兩週", "第二個", "最後一個", "下個月",
]  # fmt: skip
EN_WORDS = [
    "every", "day", "weekday", "monday", "friday", "and", "at", "8", "9am", "10:30", "pm", "noon",
    "midnight", "tomorrow", "tonight", "next", "in", "20", "minutes", "hours", "2", "other", "on",
    "the", "first", "15th", "of", "month", "year", "march", "remind", "me", "to", "call", "mom",
    "morning", "evening", "weekends", "half", "an", "hour", "now", "soon", "25:00", "last",
    "between", "from", "4", "quarterly", "fortnightly", "biweekly", "tuesdays", "twice", "times",
    "1.5", "past", "quarter", "christmas", "eve", "thanksgiving", "easter", "diwali", "sunset",
    "lunch", "10/6", "tue,", "oct", "second", "week's", "seconds", "40", "ish", "9am-5pm",
]  # fmt: skip
ZONES = ["Asia/Taipei", "Asia/Shanghai", "America/New_York", "Europe/London", "UTC"]
START = datetime(2026, 1, 1, tzinfo=UTC)


def _parse_or_error(text: str, now: datetime, zone: str) -> ParseResult | ParseError:
    try:
        return parse(text, now=now, timezone=zone)
    except ParseError as error:
        return error


def sentences() -> st.SearchStrategy[str]:
    zh = st.lists(st.sampled_from(ZH_WORDS), min_size=1, max_size=7).map("".join)
    en = st.lists(st.sampled_from(EN_WORDS), min_size=1, max_size=7).map(" ".join)
    return st.one_of(zh, en)


@settings(max_examples=400, deadline=None)
@given(
    text=sentences(),
    minutes=st.integers(min_value=0, max_value=2 * 366 * 24 * 60),
    zone=st.sampled_from(ZONES),
)
def test_answers_or_refuses(text: str, minutes: int, zone: str) -> None:
    now = START + timedelta(minutes=minutes)
    result = _parse_or_error(text, now, zone)
    if isinstance(result, ParseError):
        assert result.field, text
        assert result.message
        return
    params = result.job_params
    assert params.timezone == zone
    assert result.matched
    if params.type == "one-time":
        assert params.time is not None
        assert datetime.fromisoformat(params.time) > now, text
    # The minimum interval is the service's setting (ONTHEDOT_MIN_INTERVAL), enforced at
    # creation, not the parser's: "every second" is read as what was said and refused there.
    schedule = compile_schedule(params, anchor=now, now=now, min_interval_seconds=0)
    if params.type != "immediate":
        nxt = schedule.next_after(now)
        assert nxt is not None
        assert nxt > now
    assert render_confirmation(result, now)
