"""The rest of the page: signing in with a token, the inbox, dead letters and their redrive."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.api.live import LiveServer
from tests.support.waiting import wait_until
from tests.support.webhook import WebhookReceiver
from tests.web.conftest import NewContext, add_token, create_job

TOKEN = "otd_web-test-secret"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    # Fails a run's first delivery attempt and accepts the next one (the redrive).
    receiver = WebhookReceiver(status_for=lambda _r, nth: 500 if nth == 1 else 200).start()
    yield receiver
    receiver.stop()


def test_sign_in_with_a_token(new_context: NewContext, server: LiveServer,
                              http: httpx.Client) -> None:
    add_token(server.settings, "alice", TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert http.post("/v1/jobs", headers=auth, json={
        "name": "alice's task", "action": {"type": "message", "text": "hi"},
        "job_params": {"type": "recurring", "schedule": "0 9 * * *"}}).status_code == 201
    page = new_context().new_page()
    page.goto(server.url)

    token = page.get_by_label("API token")
    expect(token).to_be_focused()
    expect(page.get_by_role("navigation")).to_be_hidden()
    token.fill("otd_wrong")
    page.keyboard.press("Enter")
    expect(page.locator("#signin-error")).to_have_text("That token was not accepted.")

    token.fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#task-rows")).to_contain_text("alice's task")
    assert page.evaluate("sessionStorage.getItem('onthedot.token')") == TOKEN
    page.reload()  # the token outlives a reload of the tab
    expect(page.locator("#task-rows")).to_contain_text("alice's task")

    page.get_by_role("button", name="Sign out").click()
    expect(token).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('onthedot.token')") is None
    other_tab = new_context().new_page()  # a new session storage: asked again
    other_tab.goto(server.url)
    expect(other_tab.get_by_label("API token")).to_be_visible()


@pytest.mark.runs_jobs
def test_inbox_shows_results_and_marks_them_read(page: Page, http: httpx.Client) -> None:
    job = create_job(http, "tea", "the tea is ready")
    assert http.post(f"/v1/jobs/{job['job_id']}:run").status_code == 201
    badge = page.locator("#inbox-count")
    expect(badge).to_contain_text("1")  # arrives by polling

    page.get_by_role("link", name="Inbox").click()
    expect(page.get_by_role("heading", name="Inbox")).to_be_focused()
    item = page.locator("#inbox-items li").filter(has_text="tea")
    expect(item).to_contain_text("the tea is ready")
    expect(item).to_contain_text("unread")
    item.get_by_role("button", name="Mark read").click()
    expect(item).to_contain_text("read")
    expect(item.get_by_role("button", name="Mark read")).to_have_count(0)
    expect(badge).to_be_hidden()
    assert http.get("/v1/inbox", params={"unread": "true"}).json()["items"] == []


@pytest.mark.runs_jobs
def test_dead_letters_are_redriven(page: Page, http: httpx.Client,
                                   receiver: WebhookReceiver) -> None:
    r = http.post("/v1/jobs", json={
        "name": "ping", "action": {"type": "webhook", "url": receiver.url},
        "job_params": {"type": "recurring", "schedule": "0 8 * * *"},
        "retry_policy": {"max_attempts": 1}})
    assert r.status_code == 201, r.text
    run = http.post(f"/v1/jobs/{r.json()['job_id']}:run").json()

    expect(page.locator("#dead-count")).to_contain_text("1")
    page.get_by_role("link", name="Dead letters").click()
    item = page.locator("#dead-items li").filter(has_text="ping")
    expect(item).to_contain_text("500")
    item.get_by_role("button", name="Redrive").click()
    expect(page.locator("#notice")).to_have_text("Sent a run of “ping” back to the queue.")
    expect(page.locator("#dead-empty")).to_be_visible()
    expect(page.locator("#dead-count")).to_be_hidden()
    wait_until(lambda: http.get(f"/v1/runs/{run['run_id']}").json()["status"] == "SUCCEEDED",
               15, "the redriven run to succeed")
    assert receiver.count() == 2


@pytest.mark.runs_jobs
def test_a_run_is_seen_starting_and_finishing(page: Page, http: httpx.Client) -> None:
    held = WebhookReceiver(hold_all=True).start()  # the webhook answers only when released
    try:
        r = http.post("/v1/jobs", json={
            "name": "slow hook", "action": {"type": "webhook", "url": held.url},
            "job_params": {"type": "recurring", "schedule": "0 8 * * *"}})
        assert r.status_code == 201, r.text
        task = page.locator("#task-rows tr").filter(has_text="slow hook")
        expect(task).to_be_visible()
        task.get_by_role("button", name="Run now").click()
        expect(task.locator("[data-label=Status]")).to_have_text("running")
        expect(task.locator("[data-label='Last result']")).to_have_text("running")
        held.release()
        expect(task.locator("[data-label='Last result']")).to_contain_text("succeeded")
        expect(task.locator("[data-label=Status]")).to_have_text("scheduled")
        expect(page.locator("#notice")).to_have_text("“slow hook”: succeeded.")
    finally:
        held.stop()
