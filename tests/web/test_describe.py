"""The page says schedules in words with web/static/describe.js, a port of the server's
onthedot.nl.describe: both must give the same words for the same schedule in every language."""

from __future__ import annotations

from datetime import UTC, datetime

from playwright.sync_api import Page

from onthedot import nl
from onthedot.nl.describe import describe
from onthedot.nl.parts import Language

LANGUAGES: list[Language] = ["en", "zh-Hant", "zh-Hans"]
CRON = [
    "0 8 * * *", "30 9 * * 1-5", "0 9 * * 1,3,5", "0 21 * * 0", "0 10 * * 6,0", "0 8 * * 7",
    "0 8 * * 0-6", "15 8 * * 5-1", "*/15 * * * *", "* * * * *", "0 * * * *", "0 */2 * * *",
    "0 */3 * * 1-5", "*/5 * * * 1", "0 8 1 * *", "0 8 1,15 * *", "30 7 25 12 *", "5 4 3 2 1",
    "0 8 1 0 *", "0 8 1 13 *", "0 25 * * *", "0 8 * * MON-FRI", "0 8,20 * * *", "*/0 * * * *",
    "0 8 * *", "@daily", "",
]
RRULE = [
    "RRULE:FREQ=DAILY;BYHOUR=8;BYMINUTE=0;BYSECOND=0",
    "RRULE:FREQ=DAILY;INTERVAL=3;BYHOUR=7;BYMINUTE=30",
    "RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=21;BYMINUTE=30",
    "RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9",
    "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO;BYHOUR=10;BYMINUTE=0",
    "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TU,WE,TH,FR;BYHOUR=10",
    "RRULE:FREQ=MONTHLY;BYDAY=1MO;BYHOUR=10;BYMINUTE=0",
    "RRULE:FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17",
    "RRULE:FREQ=MONTHLY;INTERVAL=3;BYDAY=+2TU;BYHOUR=9",
    "RRULE:FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=18;BYMINUTE=0",
    "RRULE:FREQ=MONTHLY;BYMONTHDAY=1,15;BYHOUR=8",
    "RRULE:FREQ=MONTHLY;INTERVAL=2;BYMONTHDAY=10;BYHOUR=8",
    "rrule:FREQ=daily;BYHOUR=6",
    # not read: shown as written
    "RRULE:FREQ=YEARLY;BYMONTH=1", "RRULE:FREQ=MONTHLY;BYDAY=6MO", "RRULE:FREQ=MONTHLY;BYDAY=-2MO",
    "RRULE:FREQ=WEEKLY;BYDAY=XX", "RRULE:BYHOUR=8", "RRULE:FREQ=DAILY;BYHOUR",
    "RRULE:FREQ=MONTHLY;BYDAY=MO", "FREQ=DAILY;BYHOUR=8",
    "BEGIN:VEVENT\nDTSTART:20260101T080000\nRRULE:FREQ=DAILY\nEND:VEVENT",
]
# What the parser itself produces from everyday sentences.
SENTENCES = [
    "每天早上八點幫我總結財經新聞", "每周一三五晚上九点半提醒我运动",
    "每個月第一個週一早上十點開會",
    "每兩週的週二下午三點", "每隔三天早上七點半", "每月最後一天晚上六點", "每小時", "每隔十五分鐘",
    "every weekday at 9am stand up", "every other monday at 10am", "every 2 hours",
    "on the last friday of every month at 5pm", "every day at noon", "every sunday at 9pm",
]


def _parsed() -> list[str]:
    now = datetime(2026, 6, 22, 2, 0, tzinfo=UTC)
    schedules = []
    for sentence in SENTENCES:
        params = nl.parse(sentence, now=now, timezone="Asia/Taipei").job_params
        assert params.type == "recurring", sentence
        assert params.schedule, sentence
        schedules.append(params.schedule)
    return schedules


def test_page_and_server_say_the_same_words(page: Page) -> None:
    schedules = CRON + RRULE + _parsed()
    in_browser = page.evaluate(
        """async ([schedules, languages]) => {
             const { describe } = await import("./web/describe.js");
             return schedules.map((s) => languages.map((l) => describe(s, l)));
           }""", [schedules, LANGUAGES])
    on_server = [[describe(s, lang) for lang in LANGUAGES] for s in schedules]
    mismatches = [(s, b, p) for s, b, p in zip(schedules, in_browser, on_server, strict=True)
                  if b != p]
    assert mismatches == []
    # Not a vacuous comparison: most schedules are put in words, not shown as written.
    worded = sum(words[0] != s for s, words in zip(schedules, on_server, strict=True))
    assert worded >= 40
