"""Schedules in words: the server says them (``schedule_words`` of a job and of /v1/parse, by
onthedot.nl.describe) and the page shows those words in its language, so every form the parser
writes (lists of times, spans, lunar dates) reads the same in the page as in a confirmation."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
from playwright.sync_api import expect

from onthedot import nl
from onthedot.nl.describe import describe
from tests.api.live import LiveServer
from tests.web.conftest import NewContext, create_job

# What the parser itself produces from everyday sentences.
SENTENCES = [
    "每天早上八點幫我總結財經新聞", "每周一三五晚上九点半提醒我运动",
    "每個月第一個週一早上十點開會", "每天早上八點和晚上八點量血壓",
    "每兩週的週二下午三點", "每隔三天早上七點半", "每月最後一天晚上六點", "每小時", "每隔十五分鐘",
    "every weekday at 9am stand up", "every other monday at 10am", "every 2 hours",
    "on the last friday of every month at 5pm", "every day at noon", "every sunday at 9pm",
    "every 30 minutes between 10 and 4 on weekdays check the queue",
]
LANGUAGES = ("en", "zh-Hant", "zh-Hans")


def test_jobs_and_previews_carry_the_servers_words(http: httpx.Client) -> None:
    now = datetime(2026, 6, 22, 2, 0, tzinfo=UTC)
    worded = 0
    for sentence in SENTENCES:
        schedule = nl.parse(sentence, now=now, timezone="Asia/Taipei").job_params.schedule
        assert schedule, sentence
        expected = {lang: describe(schedule, lang) for lang in LANGUAGES}
        worded += expected["en"] != schedule
        preview = http.post("/v1/parse", json={"text": sentence, "timezone": "Asia/Taipei"})
        assert preview.status_code == 200, preview.text
        assert preview.json()["schedule_words"] == {
            lang: describe(preview.json()["job_params"]["schedule"], lang) for lang in LANGUAGES}
        job = create_job(http, sentence, type="recurring", schedule=schedule,
                         timezone="Asia/Taipei")
        assert job["schedule_words"] == expected, sentence
    assert worded >= len(SENTENCES) - 1  # words, not the schedule as written
    once = create_job(http, "once", type="one-time", time="2030-01-01T08:00:00Z")
    assert once["schedule_words"] is None


def test_the_page_shows_the_servers_words_in_its_language(
        new_context: NewContext, server: LiveServer, http: httpx.Client) -> None:
    job = create_job(http, "blood pressure", type="recurring", schedule="0 8,20 * * *",
                     timezone="Asia/Taipei")
    page = new_context(locale="zh-TW").new_page()
    page.goto(server.url)
    cell = page.locator("#task-rows tr").filter(has_text="blood pressure").locator("td").nth(1)
    expect(cell).to_have_text(f"{job['schedule_words']['zh-Hant']}（Asia/Taipei）")
    page.get_by_label("語言", exact=True).select_option("en")
    expect(cell).to_have_text(f"{job['schedule_words']['en']} (Asia/Taipei)")
    assert job["schedule_words"]["en"] == "every day at 08:00 and 20:00"
