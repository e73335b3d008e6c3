"""axe-core finds no serious or critical accessibility problem on any view of the page, wide or
375 px narrow, in English and Chinese.

``axe.min.js`` is axe-core 4.14.1 from the npm registry, vendored unchanged with its MPL-2.0
notice (the tests only run it; it is not shipped in the package).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.api.live import LiveServer
from tests.web.conftest import NARROW, NewContext, add_token, create_job

AXE = (Path(__file__).parent / "axe.min.js").read_text(encoding="utf-8")
BLOCKING = {"serious", "critical"}


def violations(page: Page) -> list[dict[str, Any]]:
    """axe's findings of impact serious or critical, with the elements they concern."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE)  # evaluated through DevTools: the page's CSP does not apply
    found: list[dict[str, Any]] = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    return [{"id": v["id"], "impact": v["impact"], "help": v["help"],
             "nodes": [n["target"] for n in v["nodes"]]}
            for v in found if v["impact"] in BLOCKING]


@pytest.mark.runs_jobs
def test_tasks_view_wide_and_narrow(page: Page, http: httpx.Client) -> None:
    job = create_job(http, "water the plants")
    assert http.post(f"/v1/jobs/{job['job_id']}:run").status_code == 201
    page.reload()
    page.get_by_label("What to do, and when").fill("every day at 8am stand up")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#preview-runs li")).to_have_count(3)
    page.locator("#task-rows [data-act=open]").click()
    expect(page.locator("#runs li.run pre.output")).to_have_count(1)
    assert violations(page) == []

    page.set_viewport_size(NARROW)
    assert violations(page) == []

    page.get_by_label("With a form").check()
    page.get_by_role("button", name="Create task").click()  # a field error on show
    expect(page.locator("#form-error")).not_to_be_empty()
    page.locator("#task-rows [data-act=delete]").click()
    expect(page.get_by_role("dialog")).to_be_visible()
    assert violations(page) == []


@pytest.mark.runs_jobs
def test_chinese_inbox_and_dead_letters(new_context: NewContext, server: LiveServer,
                                        http: httpx.Client) -> None:
    job = create_job(http, "喝水", "記得喝水")
    assert http.post(f"/v1/jobs/{job['job_id']}:run").status_code == 201
    page = new_context(locale="zh-TW").new_page()
    page.goto(server.url + "/#inbox")
    expect(page.locator("#inbox-items li")).to_have_count(1)
    assert violations(page) == []

    page.get_by_role("link", name="死信").click()
    expect(page.locator("#dead-empty")).to_be_visible()
    assert violations(page) == []


def test_sign_in(new_context: NewContext, server: LiveServer) -> None:
    add_token(server.settings, "alice", "otd_a11y-secret")
    page = new_context(viewport=NARROW).new_page()
    page.goto(server.url)
    expect(page.get_by_label("API token")).to_be_visible()
    assert violations(page) == []

    # The check can fail: an input without a label is a critical finding.
    page.evaluate("document.querySelector('main').append(document.createElement('input'))")
    assert [v["id"] for v in violations(page)] == ["label"]
