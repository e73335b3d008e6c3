"""The Tasks page in a real browser against a real server: create from a sentence, act on a
task, see a run's output arrive without a reload, the form, the language, the timezone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from tests.api.live import LiveServer
from tests.support.waiting import wait_until
from tests.web.conftest import NARROW, NewContext, create_job
from tests.web.test_accessibility import violations


def row(page: Page, name: str) -> Locator:
    """The table row of the task called ``name``."""
    return page.locator("#task-rows tr").filter(has=page.get_by_role("button", name=name))


def only_job(http: httpx.Client) -> dict[str, Any]:
    jobs: list[dict[str, Any]] = http.get("/v1/jobs").json()["jobs"]
    assert len(jobs) == 1, jobs
    return jobs[0]


@pytest.mark.runs_jobs
def test_a_task_from_one_sentence_to_its_output(page: Page, http: httpx.Client,
                                                tmp_path: Path) -> None:
    sentence = page.get_by_label("What to do, and when")
    sentence.fill("every day at 8am remind me to water the plants")
    page.get_by_role("button", name="Preview").click()

    # The parser's answer, in the page's language and the viewer's timezone, before saving.
    preview = page.locator("#preview")
    expect(preview).to_be_visible()
    expect(page.locator("#preview-when")).to_have_text("every day at 08:00 (Asia/Taipei)")
    expect(page.locator("#preview-task")).to_have_text("water the plants (a reminder)")
    expect(page.locator("#preview-runs li")).to_have_count(3)
    expect(page.locator("#preview-runs li").first).to_contain_text("8:00 AM")
    assert http.get("/v1/jobs").json()["jobs"] == []  # a preview creates nothing

    page.get_by_role("button", name="Create task").click()
    expect(page.locator("#notice")).to_have_text("Created “water the plants”.")
    expect(preview).to_be_hidden()
    task = row(page, "water the plants")
    expect(task).to_contain_text("every day at 08:00 (Asia/Taipei)")
    expect(task).to_contain_text("scheduled")
    job = only_job(http)
    assert job["job_params"]["schedule"] == "0 8 * * *"
    assert job["action"] == {"type": "message", "text": "water the plants"}

    task.get_by_role("button", name="Pause").click()
    expect(task.locator("[data-label=Status]")).to_have_text("paused")
    assert only_job(http)["status"] == "paused"
    expect(task.get_by_role("button", name="Resume")).to_be_focused()  # focus kept in the row
    task.get_by_role("button", name="Resume").click()
    expect(task.locator("[data-label=Status]")).to_have_text("scheduled")
    assert only_job(http)["status"] == "scheduled"

    # Run it now and watch the output arrive: no reload, the page polls.
    task.locator("[data-act=open]").click()
    details = page.locator("#details")
    expect(page.get_by_role("heading", name="Runs of “water the plants”")).to_be_focused()
    task.get_by_role("button", name="Run now").click()
    manual = details.locator("li.run").filter(has_text="run now")
    expect(manual.locator(".badge").first).to_have_text("succeeded")
    expect(manual.locator("pre.output")).to_contain_text('"message": "water the plants"')
    expect(manual.locator(".deliveries")).to_contain_text("Inbox: delivered")
    expect(task.locator("[data-label='Last result']")).to_contain_text("succeeded")
    expect(page.locator("#inbox-count")).to_contain_text("1")

    page.screenshot(path=tmp_path / "tasks-1280.png", full_page=True)
    page.set_viewport_size(NARROW)
    expect(task.get_by_role("button", name="Pause")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than a 375px screen"
    page.screenshot(path=tmp_path / "tasks-375.png", full_page=True)
    for name in ("tasks-1280.png", "tasks-375.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")


def test_a_news_sentence_becomes_a_digest_task(page: Page, http: httpx.Client) -> None:
    """The page creates what the words ask for, as /v1/chat and MCP create_task do."""
    page.get_by_label("What to do, and when").fill("every day at 8am summarize the finance news")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#preview-task")).to_have_text(
        "summarize the finance news (a news digest)")
    page.get_by_role("button", name="Create task").click()
    expect(row(page, "summarize the finance news")).to_be_visible()
    assert only_job(http)["action"] == {"type": "news_digest", "topic": "finance",
                                        "language": "en"}


def test_delete_asks_first(page: Page, http: httpx.Client) -> None:
    job = create_job(http, "stretch")
    page.reload()
    task = row(page, "stretch")
    dialog = page.get_by_role("dialog")

    task.get_by_role("button", name="Delete").click()
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading")).to_have_text("Delete “stretch”?")
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_be_hidden()
    assert http.get(f"/v1/jobs/{job['job_id']}").json()["status"] == "scheduled"

    task.get_by_role("button", name="Delete").click()
    page.keyboard.press("Escape")  # Escape keeps it too
    expect(dialog).to_be_hidden()
    assert http.get(f"/v1/jobs/{job['job_id']}").json()["status"] == "scheduled"

    task.get_by_role("button", name="Delete").click()
    dialog.get_by_role("button", name="Delete").click()
    expect(task.locator("[data-label=Status]")).to_have_text("deleted")
    expect(task.get_by_role("button", name="Run now")).to_have_count(0)
    assert http.get(f"/v1/jobs/{job['job_id']}").json()["status"] == "cancelled"


def test_skip_next_run_keeps_the_task_scheduled(page: Page, http: httpx.Client) -> None:
    job = create_job(http, "stretch")
    once = create_job(http, "dentist", type="one-time", time="2030-01-02T09:00:00",
                      timezone="Asia/Taipei")
    page.reload()
    task = row(page, "stretch")
    next_run = job["next_run_at"]

    task.get_by_role("button", name="Skip next run").click()

    expect(page.get_by_role("status")).to_contain_text("Skipped the next run of “stretch”.")
    wait_until(lambda: http.get(f"/v1/jobs/{job['job_id']}").json()["next_run_at"] != next_run,
               10, "the next run to move on")
    runs = http.get(f"/v1/jobs/{job['job_id']}/runs").json()["runs"]
    assert [(r["status"], r["scheduled_at"]) for r in runs][1] == ("SKIPPED", next_run)
    expect(task.locator("[data-label=Status]")).to_have_text("scheduled")
    # A one-time task has no next run to skip: no such button.
    expect(row(page, "dentist").get_by_role("button", name="Skip next run")).to_have_count(0)
    assert http.get(f"/v1/jobs/{once['job_id']}").json()["status"] == "scheduled"


def test_edit_a_task_where_it_is_listed(page: Page, http: httpx.Client) -> None:
    job = create_job(http, "stretch", "stretch your legs")
    page.reload()
    task = row(page, "stretch")
    dialog = page.get_by_role("dialog")

    task.get_by_role("button", name="Edit").click()
    expect(dialog.get_by_role("heading")).to_have_text("Edit “stretch”")
    expect(dialog.get_by_label("Name")).to_be_focused()
    expect(dialog.get_by_label("Schedule (cron or RRULE)")).to_have_value("0 8 * * *")
    expect(dialog.get_by_label("Message")).to_have_value("stretch your legs")
    expect(dialog.get_by_label("the inbox")).to_be_checked()
    # A schedule the server refuses: the error is at the field, nothing is saved.
    dialog.get_by_label("Schedule (cron or RRULE)").fill("0 25 * * *")
    dialog.get_by_role("button", name="Save").click()
    schedule = dialog.get_by_label("Schedule (cron or RRULE)")
    expect(schedule).to_have_attribute("aria-invalid", "true")
    expect(schedule).to_be_focused()
    expect(dialog.locator("#edit-error")).not_to_be_empty()
    assert http.get(f"/v1/jobs/{job['job_id']}").json()["job_params"]["schedule"] == "0 8 * * *"

    dialog.get_by_label("Name").fill("stand and stretch")
    schedule.fill("30 9 * * 1-5")
    dialog.get_by_label("Message").fill("stand up and stretch")
    dialog.get_by_role("button", name="Save").click()

    expect(dialog).to_be_hidden()
    edited = row(page, "stand and stretch")
    expect(edited.locator("[data-label=Schedule]")).to_contain_text("09:30")
    saved = http.get(f"/v1/jobs/{job['job_id']}").json()
    assert (saved["name"], saved["job_params"]["schedule"], saved["action"]["text"]) == (
        "stand and stretch", "30 9 * * 1-5", "stand up and stretch")
    assert saved["notify"] == [{"channel": "inbox"}]
    expect(edited.get_by_role("button", name="Edit")).to_be_focused()


def test_the_list_poll_is_answered_304_while_nothing_changes(page: Page,
                                                             http: httpx.Client) -> None:
    create_job(http, "stretch")
    with page.expect_response(lambda r: "/v1/jobs?" in r.url and r.status == 304,
                              timeout=15000) as unchanged:
        page.reload()
    assert unchanged.value.request.headers["if-none-match"] == unchanged.value.headers["etag"]
    expect(row(page, "stretch")).to_be_visible()  # the page kept the list it had


def test_keyboard_alone_creates_and_pauses(page: Page, http: httpx.Client) -> None:
    page.get_by_label("What to do, and when").focus()
    page.keyboard.type("every monday at 9:30 call the bank")
    page.keyboard.press("Enter")
    expect(page.locator("#preview-title")).to_be_focused()
    expect(page.locator("#preview-when")).to_have_text("every Monday at 09:30 (Asia/Taipei)")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Create task")).to_be_focused()
    page.keyboard.press("Enter")
    task = row(page, "call the bank")
    expect(task).to_be_visible()

    task.get_by_role("button", name="Pause").focus()
    page.keyboard.press("Enter")
    wait_until(lambda: only_job(http)["status"] == "paused", 10, "the job to be paused")


def test_status_filter(page: Page, http: httpx.Client) -> None:
    create_job(http, "kept")
    paused = create_job(http, "resting")
    assert http.post(f"/v1/jobs/{paused['job_id']}:pause").status_code == 200
    page.reload()
    expect(page.locator("#task-rows tr")).to_have_count(2)
    page.get_by_label("Status").select_option("paused")
    expect(page.locator("#task-rows tr")).to_have_count(1)
    expect(row(page, "resting")).to_be_visible()
    page.get_by_label("Status").select_option("failed")
    expect(page.locator("#task-rows tr")).to_have_count(0)
    expect(page.locator("#tasks-empty")).to_have_text("No tasks with this status.")


def test_the_form_shows_the_field_to_fix(page: Page, http: httpx.Client) -> None:
    page.get_by_label("With a form").check()
    form = page.locator("#job-form")  # the edit dialog has fields of the same names
    form.get_by_label("Name (optional)").fill("report")
    form.get_by_label("Runs").select_option("recurring")
    schedule = form.get_by_label("Schedule (cron or RRULE)")
    schedule.fill("every tuesday")
    form.get_by_label("Message").fill("send the weekly report")
    page.get_by_role("button", name="Create task").click()

    expect(schedule).to_have_attribute("aria-invalid", "true")
    expect(schedule).to_be_focused()
    expect(page.locator("#form-error")).not_to_be_empty()
    assert http.get("/v1/jobs").json()["jobs"] == []

    schedule.fill("RRULE:FREQ=WEEKLY;BYDAY=TU;BYHOUR=10;BYMINUTE=0")
    form.get_by_label("Timezone").fill("Europe/Berlin")
    page.get_by_role("button", name="Create task").click()
    task = row(page, "report")
    expect(task).to_contain_text("every Tuesday at 10:00 (Europe/Berlin)")
    expect(schedule).not_to_have_attribute("aria-invalid", "true")
    job = only_job(http)
    assert job["job_params"]["timezone"] == "Europe/Berlin"
    assert job["action"] == {"type": "message", "text": "send the weekly report"}


def test_language_from_the_browser_and_switchable(new_context: NewContext, server: LiveServer,
                                                   http: httpx.Client) -> None:
    create_job(http, "news")
    page = new_context(locale="zh-TW").new_page()
    page.goto(server.url)
    expect(page.locator("html")).to_have_attribute("lang", "zh-Hant")
    expect(page.get_by_role("link", name="任務")).to_be_visible()
    task = row(page, "news")
    expect(task.locator("[data-label=排程]")).to_have_text("每天 08:00（Asia/Taipei）")
    expect(task.locator("[data-label=狀態]")).to_have_text("已排定")

    page.get_by_label("語言", exact=True).select_option("zh-Hans")
    expect(page.locator("html")).to_have_attribute("lang", "zh-Hans")
    expect(page.get_by_role("heading", name="你的任务")).to_be_visible()
    expect(task.locator("[data-label=状态]")).to_have_text("已安排")
    expect(task.get_by_role("button", name="暂停")).to_be_visible()

    page.get_by_label("语言", exact=True).select_option("en")
    expect(task.locator("[data-label=Schedule]")).to_have_text("every day at 08:00 (Asia/Taipei)")
    page.reload()  # the choice is remembered
    expect(page.locator("html")).to_have_attribute("lang", "en")

    simplified = new_context(locale="zh-CN").new_page()
    simplified.goto(server.url)
    expect(simplified.locator("html")).to_have_attribute("lang", "zh-Hans")


def test_times_are_in_the_viewers_timezone(new_context: NewContext, server: LiveServer,
                                           http: httpx.Client) -> None:
    create_job(http, "launch", type="one-time", time="2031-01-02T00:00:00Z", timezone="UTC")
    for zone, shown in (("America/New_York", "Jan 1, 2031, 7:00 PM"),
                        ("Asia/Taipei", "Jan 2, 2031, 8:00 AM")):
        page = new_context(timezone_id=zone).new_page()
        page.goto(server.url)
        expect(page.locator("#zone-note")).to_contain_text(zone)
        next_run = row(page, "launch").locator("[data-label='Next run'] time")
        expect(next_run).to_have_text(shown)
        expect(next_run).to_have_attribute("datetime", "2031-01-02T00:00:00Z")


OVERLAP = "If a run is still going when the next one is due"


def test_overlap_policy_from_the_form_and_the_edit_dialog(page: Page,
                                                          http: httpx.Client) -> None:
    """overlap_policy (docs/schedules.md#overlapping-runs) is chosen in the form, shown in the
    list and the details, and changed in the edit dialog, through POST and PATCH /v1/jobs."""
    create_job(http, "plain")  # the default policy: nothing said beside its schedule
    page.get_by_label("With a form").check()
    form = page.locator("#job-form")
    overlap = form.get_by_label(OVERLAP)
    expect(overlap).to_be_hidden()  # a task that runs once never overlaps itself
    form.get_by_label("Name (optional)").fill("report")
    form.get_by_label("Runs").select_option("recurring")
    expect(overlap).to_have_value("skip")
    expect(overlap.locator("option")).to_have_text([
        "skip it (default)", "run it when the running one ends", "run it at its time, alongside"])
    hint = form.locator("#f-overlap-hint")
    expect(overlap).to_have_attribute("aria-describedby", "f-overlap-hint")
    expect(hint).to_contain_text("the task next runs at its first time after the running one")
    overlap.select_option("buffer_one")
    expect(hint).to_have_text("It runs as soon as the running one ends, so a little late. If "
                              "several came due meanwhile, only the latest one runs.")
    form.get_by_label("Schedule (cron or RRULE)").fill("0 * * * *")
    form.get_by_label("Message").fill("the hourly report")
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/v1/jobs")) as sent:
        page.get_by_role("button", name="Create task").click()
    assert sent.value.post_data_json["overlap_policy"] == "buffer_one"

    task = row(page, "report")
    expect(task.locator("[data-label=Schedule] [data-overlap]")).to_have_text(
        "a run due while one runs waits for it")
    expect(row(page, "plain").locator("[data-overlap]")).to_have_count(0)
    job = next(j for j in http.get("/v1/jobs").json()["jobs"] if j["name"] == "report")
    assert job["overlap_policy"] == "buffer_one"
    expect(overlap).to_have_value("skip")  # the form is ready for the next task

    task.get_by_role("button", name="Edit").click()
    dialog = page.get_by_role("dialog")
    chosen = dialog.get_by_label(OVERLAP)
    expect(chosen).to_have_value("buffer_one")
    expect(dialog.locator("#e-overlap-hint")).to_contain_text("only the latest one runs")
    chosen.select_option("allow_all")
    expect(dialog.locator("#e-overlap-hint")).to_have_text(
        "Every run starts at its time, even while earlier ones are still going, so runs can "
        "overlap.")
    assert violations(page) == []
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden()
    expect(task.locator("[data-overlap]")).to_have_text("runs may overlap")
    saved = http.get(f"/v1/jobs/{job['job_id']}").json()
    assert (saved["overlap_policy"], saved["job_params"]["schedule"]) == ("allow_all",
                                                                          "0 * * * *")

    task.locator("[data-act=open]").click()
    expect(page.locator("#details-facts")).to_contain_text(
        "If a run is still goingrun it at its time, alongside")
    page.get_by_label("Language", exact=True).select_option("zh-Hant")
    expect(task.locator("[data-overlap]")).to_have_text("執行可能重疊")
    expect(form.locator("#f-overlap-hint")).to_contain_text("到期的那一次不執行")  # skip, reset


def test_a_one_time_task_has_no_overlap_policy_to_edit(page: Page, http: httpx.Client) -> None:
    once = create_job(http, "dentist", type="one-time", time="2030-01-02T09:00:00",
                      timezone="Asia/Taipei")
    page.reload()
    row(page, "dentist").get_by_role("button", name="Edit").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_label(OVERLAP)).to_be_hidden()
    with page.expect_request(lambda r: r.method == "PATCH") as sent:
        dialog.get_by_role("button", name="Save").click()
    assert "overlap_policy" not in sent.value.post_data_json
    expect(dialog).to_be_hidden()
    assert http.get(f"/v1/jobs/{once['job_id']}").json()["overlap_policy"] == "skip"
