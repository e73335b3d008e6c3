"""The Tasks page shows each delivery of a run as it stands: a channel being retried with the
time of its next try, one failed for good with its error (issue 20 §2). A real browser, a real
server running every role, a real webhook receiver on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.api.live import LiveServer
from tests.support.webhook import WebhookReceiver
from tests.web.conftest import LIVE_TIMEOUT_MS


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    hooks = WebhookReceiver().start()
    # /hook?down answers 503 (worth retrying), /hook?gone 404 (not).
    hooks.status_for = lambda received, _n: 503 if received.path.endswith("down") else 404
    yield hooks
    hooks.stop()


@pytest.mark.runs_jobs
def test_a_run_shows_a_retrying_and_a_failed_delivery(
        page: Page, http: httpx.Client, server: LiveServer, receiver: WebhookReceiver) -> None:
    down, gone = f"{receiver.url}?down", f"{receiver.url}?gone"
    created = http.post("/v1/jobs", json={
        "name": "ping", "job_params": {"type": "immediate"},
        "action": {"type": "message", "text": "ping"},
        "notify": [{"channel": "inbox"}, {"channel": "webhook", "url": down},
                   {"channel": "webhook", "url": gone}]})
    assert created.status_code == 201, created.text

    page.goto(server.url)
    task = page.locator("#task-rows tr").filter(has=page.get_by_role("button", name="ping"))
    task.locator("[data-act=open]").click()
    deliveries = page.locator("#details li.run .deliveries li")
    expect(deliveries).to_have_count(3, timeout=LIVE_TIMEOUT_MS)
    retrying = deliveries.filter(has_text=down)
    expect(retrying.locator(".badge")).to_have_text("retrying", timeout=LIVE_TIMEOUT_MS)
    expect(retrying).to_contain_text("next try:")
    expect(retrying).to_contain_text("the webhook answered HTTP 503")
    failed = deliveries.filter(has_text=gone)
    expect(failed.locator(".badge")).to_have_text("failed for good")
    expect(failed).to_contain_text("the webhook answered HTTP 404")
    expect(failed).not_to_contain_text("next try")
    expect(deliveries.filter(has_text="Inbox").locator(".badge")).to_have_text("delivered")

    [run] = http.get(f"/v1/jobs/{created.json()['job_id']}/runs").json()["runs"]
    shown = {d["target"]: d for d in run["deliveries"]}
    assert shown[down]["status"] == "retrying"
    assert shown[down]["next_attempt_at"] is not None
    assert (shown[gone]["status"], shown[gone]["next_attempt_at"]) == ("failed", None)
