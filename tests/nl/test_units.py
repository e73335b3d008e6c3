"""Numbers, script detection, schedule descriptions and the confirmation sentence."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from onthedot.domain.errors import ValidationError
from onthedot.nl import Doing, ParseResult, parse, render_confirmation
from onthedot.nl.describe import describe
from onthedot.nl.lang import detect, normalise_language
from onthedot.nl.numbers import en_ordinal, en_to_int, zh_to_int
from onthedot.schedule import compile_schedule

TAIPEI_SUNDAY = datetime(2026, 11, 29, 10, 0, tzinfo=ZoneInfo("Asia/Taipei"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("一", 1), ("兩", 2), ("两", 2), ("十", 10), ("十二", 12), ("二十", 20), ("二十五", 25),
        ("三十一", 31), ("一百二十", 120), ("零五", 5), ("〇五", 5), ("二〇二六", 2026),
        ("08", 8), ("23", 23),
    ],
)  # fmt: skip
def test_chinese_numerals(text: str, value: int) -> None:
    assert zh_to_int(text) == value


@pytest.mark.parametrize("text", ["", "十十", "二三十", "十百", "八a"])
def test_malformed_chinese_numerals(text: str) -> None:
    assert zh_to_int(text) is None


def test_english_numbers() -> None:
    assert en_to_int("twenty-five") == 25
    assert en_to_int("twenty five") == 25
    assert en_to_int("an") == 1
    assert en_to_int("12") == 12
    assert en_to_int("lots") is None
    assert en_ordinal("15th") == 15
    assert en_ordinal("first") == 1
    assert en_ordinal("last") == -1
    assert en_ordinal("nope") is None


@pytest.mark.parametrize(
    ("text", "tz", "language"),
    [
        ("每天早上八點", "Asia/Shanghai", "zh-Hant"),
        ("每天早上八点", "Asia/Taipei", "zh-Hans"),
        ("每天早上", "Asia/Taipei", "zh-Hant"),  # no telling characters: the zone decides
        ("每天早上", "Asia/Shanghai", "zh-Hans"),
        ("every day at 8", "Asia/Taipei", "en"),
    ],
)
def test_language_detection(text: str, tz: str, language: str) -> None:
    assert detect(text, tz) == language


def test_language_codes() -> None:
    assert normalise_language("zh-TW", "en") == "zh-Hant"
    assert normalise_language("zh_CN", "en") == "zh-Hans"
    assert normalise_language("zh", "zh-Hant") == "zh-Hant"
    assert normalise_language("zh", "en") == "zh-Hans"
    assert normalise_language("en-GB", "zh-Hant") == "en"
    assert normalise_language(None, "zh-Hans") == "zh-Hans"
    assert normalise_language("fr", "en") == "en"


@pytest.mark.parametrize(
    ("schedule", "en", "hant", "hans"),
    [
        ("0 8 * * *", "every day at 08:00", "每天 08:00", "每天 08:00"),
        ("30 21 * * 1,3,5", "every Monday, Wednesday and Friday at 21:30",
         "每週一、三、五 21:30", "每周一、三、五 21:30"),
        ("0 17 * * 1-5", "every weekday at 17:00", "每個工作日 17:00", "每个工作日 17:00"),
        ("0 9 1,15 * *", "on the 1st and the 15th of every month at 09:00", "每月1、15日 09:00",
         "每月1、15日 09:00"),
        ("0 9 8 3 *", "every year on 8 March at 09:00", "每年3月8日 09:00", "每年3月8日 09:00"),
        ("*/15 * * * *", "every 15 minutes", "每 15 分鐘", "每 15 分钟"),
        ("* * * * *", "every minute", "每分鐘", "每分钟"),
        ("0 */2 * * 1-5", "every 2 hours on weekdays", "每個工作日每 2 小時",
         "每个工作日每 2 小时"),
        ("0 * * * *", "every hour", "每小時", "每小时"),
        ("RRULE:FREQ=MONTHLY;BYDAY=1MO;BYHOUR=10;BYMINUTE=0;BYSECOND=0",
         "on the first Monday of every month at 10:00", "每月第一個週一 10:00",
         "每月第一个周一 10:00"),
        ("RRULE:FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=16;BYMINUTE=0;BYSECOND=0",
         "on the last Friday of every month at 16:00", "每月最後一個週五 16:00",
         "每月最后一个周五 16:00"),
        ("RRULE:FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=21;BYMINUTE=0;BYSECOND=0",
         "on the last day of every month at 21:00", "每月最後一天 21:00", "每月最后一天 21:00"),
        ("RRULE:FREQ=DAILY;INTERVAL=3;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
         "every 3 days at 09:00", "每 3 天 09:00", "每 3 天 09:00"),
        ("RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
         "every 2 weeks on Monday at 09:00", "每 2 週的週一 09:00", "每 2 周的周一 09:00"),
        ("@weekly", "@weekly", "@weekly", "@weekly"),  # not ours: said back as written
        ("0 8,20 * * *", "every day at 08:00 and 20:00", "每天 08:00、20:00", "每天 08:00、20:00"),
        ("RRULE:FREQ=DAILY;BYHOUR=7;BYMINUTE=30;BYSECOND=0\n"
         "RRULE:FREQ=DAILY;BYHOUR=22;BYMINUTE=0;BYSECOND=0",
         "every day at 07:30 and 22:00", "每天 07:30、22:00", "每天 07:30、22:00"),
        ("0 9-17 * * 1-5", "every weekday, every hour from 09:00 to 17:00",
         "每個工作日 09:00 至 17:00 每小時", "每个工作日 09:00 至 17:00 每小时"),
        # A quarter's days are said so that the sentence reads back to the same schedule.
        ("0 9 1 1,4,7,10 *", "on the 1st of every quarter at 09:00",
         "每季1日 09:00", "每季1日 09:00"),
        ("0 9 15 2,5,8,11 *", "every year on day 15 of February, May, August and November at 09:00",
         "每年2、5、8、11月的15日 09:00", "每年2、5、8、11月的15日 09:00"),
        # Dates a year on different days of the month: one rule each, said as one list.
        ("RRULE:FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0;BYSECOND=0\n"
         "RRULE:FREQ=YEARLY;BYMONTH=7;BYMONTHDAY=15;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
         "every year on 1 January and 15 July at 09:00", "每年1月1日、7月15日 09:00",
         "每年1月1日、7月15日 09:00"),
        ("RRULE:FREQ=MONTHLY;BYMONTH=3,6,9,12;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18;"
         "BYMINUTE=0;BYSECOND=0", "on the last working day of every quarter at 18:00",
         "每季最後一個工作日 18:00", "每季最后一个工作日 18:00"),
        ("RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=2;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
         "on the second working day of every month at 09:00",
         "每月第二個工作日 09:00", "每月第二个工作日 09:00"),
        ("RRULE:FREQ=MONTHLY;BYMONTHDAY=-3;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
         "on the 3rd-to-last day of every month at 09:00", "每月倒數第3天 09:00",
         "每月倒数第3天 09:00"),
        # A position among other days is not what the words would say: shown as written.
        ("RRULE:FREQ=MONTHLY;BYDAY=MO,WE;BYSETPOS=-1;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
         "RRULE:FREQ=MONTHLY;BYDAY=MO,WE;BYSETPOS=-1;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
         "RRULE:FREQ=MONTHLY;BYDAY=MO,WE;BYSETPOS=-1;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
         "RRULE:FREQ=MONTHLY;BYDAY=MO,WE;BYSETPOS=-1;BYHOUR=9;BYMINUTE=0;BYSECOND=0"),
        ("DTSTART;TZID=Asia/Taipei:20261204T150000\n"
         "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=FR;BYHOUR=15;BYMINUTE=0;BYSECOND=0",
         "every 2 weeks on Friday at 15:00, starting 2026-12-04",
         "每 2 週的週五 15:00，從 2026-12-04 起", "每 2 周的周五 15:00，从 2026-12-04 起"),
        ("RRULE:FREQ=MINUTELY;INTERVAL=40", "every 40 minutes, counted from when it was created",
         "每 40 分鐘（自建立時起算）", "每 40 分钟（自创建时起算）"),
        ("RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH;BYHOUR=12;BYMINUTE=0;BYSECOND=0",
         "every year on the fourth Thursday of November at 12:00", "每年11月第四個週四 12:00",
         "每年11月第四个周四 12:00"),
        ("DTSTART;TZID=Asia/Taipei:20270915T200000\n"
         "RDATE;TZID=Asia/Taipei:20270915T200000,20281003T200000,20290922T200000",
         "every year on lunar 8/15 at 20:00 (dates listed until 2029)",
         "每年農曆八月十五 20:00（2029 年前）", "每年农历八月十五 20:00（2029 年前）"),
        # A rule part the describer does not know is never guessed at: said back as written.
        ("RRULE:FREQ=MONTHLY;BYDAY=1MO;BYSETPOS=1;BYHOUR=9;BYMINUTE=0",
         "RRULE:FREQ=MONTHLY;BYDAY=1MO;BYSETPOS=1;BYHOUR=9;BYMINUTE=0",
         "RRULE:FREQ=MONTHLY;BYDAY=1MO;BYSETPOS=1;BYHOUR=9;BYMINUTE=0",
         "RRULE:FREQ=MONTHLY;BYDAY=1MO;BYSETPOS=1;BYHOUR=9;BYMINUTE=0"),
    ],
)  # fmt: skip
def test_describe(schedule: str, en: str, hant: str, hans: str) -> None:
    assert describe(schedule, "en") == en
    assert describe(schedule, "zh-Hant") == hant
    assert describe(schedule, "zh-Hans") == hans


def test_confirmation_traditional() -> None:
    result = parse("每天早上八點幫我總結財經新聞", now=TAIPEI_SUNDAY, timezone="Asia/Taipei")
    assert render_confirmation(result, TAIPEI_SUNDAY) == (
        "好的，已排定：每天 08:00（Asia/Taipei）總結財經新聞，下次執行 2026-11-30 08:00。"
    )


def test_confirmation_simplified_and_override() -> None:
    result = parse("每天早上八点帮我总结财经新闻", now=TAIPEI_SUNDAY, timezone="Asia/Shanghai")
    assert render_confirmation(result, TAIPEI_SUNDAY) == (
        "好的，已安排：每天 08:00（Asia/Shanghai）总结财经新闻，下次执行 2026-11-30 08:00。"
    )
    assert render_confirmation(result, TAIPEI_SUNDAY, language="en") == (
        "OK, scheduled “总结财经新闻” every day at 08:00 (Asia/Shanghai); "
        "next run 2026-11-30 08:00."
    )


def test_confirmation_english_one_time_and_immediate() -> None:
    ny = "America/New_York"
    later = parse("remind me to call mom tomorrow at 3pm", now=TAIPEI_SUNDAY, timezone=ny)
    assert render_confirmation(later, TAIPEI_SUNDAY) == (
        "OK, scheduled “call mom” for 2026-11-29 15:00 (America/New_York)."
    )
    now = parse("立刻幫我查天氣", now=TAIPEI_SUNDAY, timezone="Asia/Taipei")
    assert render_confirmation(now, TAIPEI_SUNDAY) == "好的，立即執行：查天氣。"
    # The task stays as the user wrote it; only the sentence around it follows ``language``.
    assert render_confirmation(now, TAIPEI_SUNDAY, language="zh-CN") == "好的，立即执行：查天氣。"


def test_confirmation_next_run_follows_now() -> None:
    result = parse("every weekday at 9am send me the weather", now=TAIPEI_SUNDAY, timezone="UTC")
    monday_noon = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert render_confirmation(result, monday_noon) == (
        "OK, scheduled “send me the weather” every weekday at 09:00 (UTC); "
        "next run 2026-12-01 09:00."
    )


def test_to_dict() -> None:
    result = parse("每個工作日下午5點寫日報", now=TAIPEI_SUNDAY, timezone="Asia/Taipei")
    assert result.to_dict() == {
        "job_params": {"type": "recurring", "timezone": "Asia/Taipei", "schedule": "0 17 * * 1-5"},
        "task": "寫日報",
        "matched": "每個工作日下午5點",
        "next_runs": ["2026-11-30T09:00:00Z", "2026-12-01T09:00:00Z", "2026-12-02T09:00:00Z"],
    }
    one_time = parse("20分鐘後提醒我關火", now=TAIPEI_SUNDAY, timezone="Asia/Taipei")
    assert one_time.to_dict(next_runs=5)["next_runs"] == ["2026-11-29T02:20:00Z"]
    assert one_time.job_params.to_dict() == {
        "type": "one-time",
        "timezone": "Asia/Taipei",
        "time": "2026-11-29T10:20:00+08:00",
    }
    immediate = parse("right now", now=TAIPEI_SUNDAY, timezone="UTC")
    assert immediate.to_dict()["next_runs"] == ["2026-11-29T02:00:00Z"]


def test_result_is_frozen() -> None:
    result = parse("every day at 8", now=TAIPEI_SUNDAY)
    assert isinstance(result, ParseResult)
    with pytest.raises(AttributeError):
        result.task = "x"  # type: ignore[misc]


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        parse("every day at 8", now=datetime(2026, 1, 1))


def test_unknown_timezone() -> None:
    with pytest.raises(ValidationError) as caught:
        parse("every day at 8", now=TAIPEI_SUNDAY, timezone="Mars/Olympus")
    assert caught.value.field == "timezone"
    assert caught.value.code == "invalid_timezone"


def test_error_carries_expected_forms_and_language() -> None:
    with pytest.raises(ValidationError) as caught:
        parse("每隔一天提醒我", now=TAIPEI_SUNDAY, timezone="Asia/Taipei")
    error = caught.value
    assert error.field == "每隔一天"
    assert "每兩天" in error.message
    assert error.expected is not None
    assert "每兩天" in error.expected
    assert error.to_dict()["code"] == "could_not_understand"


def test_confirmation_says_what_the_job_does() -> None:
    news = parse("每天早上八點幫我總結財經新聞", now=TAIPEI_SUNDAY, timezone="Asia/Taipei")
    finance = Doing("news_digest", topic="finance")
    assert render_confirmation(news, TAIPEI_SUNDAY, doing=finance) == (
        "好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，"
        "下次執行 2026-11-30 08:00。")
    # A digest of no known topic, and the sentence in another language than the text.
    assert render_confirmation(news, TAIPEI_SUNDAY, language="zh-CN",
                               doing=Doing("news_digest")) \
        == "好的，已安排：每天 08:00（Asia/Taipei）会为你整理新闻摘要，下次执行 2026-11-30 08:00。"
    assert render_confirmation(news, TAIPEI_SUNDAY, language="en", doing=Doing("news_digest")) \
        == ("OK, scheduled a news digest every day at 08:00 (Asia/Taipei); "
            "next run 2026-11-30 08:00.")
    later = parse("remind me to call mom tomorrow at 3pm", now=TAIPEI_SUNDAY,
                  timezone="America/New_York")
    assert render_confirmation(later, TAIPEI_SUNDAY, doing=Doing("prompt", "call mom")) == (
        "OK, I will carry out “call mom” at 2026-11-29 15:00 (America/New_York).")
    # Braces in the task are text, not a template.
    assert render_confirmation(later, TAIPEI_SUNDAY, doing=Doing("message", "{when}")) == (
        "OK, scheduled a reminder “{when}” for 2026-11-29 15:00 (America/New_York).")


def test_confirmation_says_how_a_bare_hour_was_read() -> None:
    new_york = datetime(2026, 6, 15, 8, 45, tzinfo=ZoneInfo("America/New_York"))
    bare = parse("at 3 call the bank", now=new_york, timezone="America/New_York")
    assert render_confirmation(bare, new_york) == (
        "OK, scheduled “call the bank” for 2026-06-16 03:00 (America/New_York). "
        "“3” is read as 03:00 (24-hour clock); say 3pm for 15:00."
    )
    assert bare.to_dict()["notes"] == [
        {"key": "bare_hour", "said": "3", "as": "03:00", "pm": "15:00"}
    ]
    zh = parse("明天三點開會", now=TAIPEI_SUNDAY, timezone="Asia/Taipei")
    assert render_confirmation(zh, TAIPEI_SUNDAY).endswith(
        "（未說上午或下午的鐘點按 24 小時制讀作 03:00；若是下午請加「下午」）"
    )
    # With am/pm or a part of the day there is nothing to say.
    for text in ("at 3pm call the bank", "at 9 tonight call dad"):
        said = render_confirmation(parse(text, now=new_york, timezone="America/New_York"), new_york)
        assert "24-hour" not in said


def test_short_intervals_are_left_to_the_service() -> None:
    # The parser has no minimum interval; the service refuses below ONTHEDOT_MIN_INTERVAL.
    result = parse("every 30 seconds", now=TAIPEI_SUNDAY, timezone="UTC")
    assert result.job_params.schedule == "RRULE:FREQ=SECONDLY;INTERVAL=30"
    assert [t.second for t in result.next_runs(2)] == [30, 0]
    with pytest.raises(ValidationError) as caught:
        compile_schedule(result.job_params, anchor=TAIPEI_SUNDAY, now=TAIPEI_SUNDAY)
    assert caught.value.code == "schedule_too_frequent"
