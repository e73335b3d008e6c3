"""Browser tests of the Tasks page: Debian's Chromium driven by Playwright, against a real
server (uvicorn in a thread, every background role, a fresh SQLite file per test).

Playwright's own browser download is never used (`executable_path`); `.ci/run` installs the
`chromium` package. Without it the tests are skipped on a developer's machine and fail in CI.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, sync_playwright

from onthedot.api.auth import hash_token
from onthedot.config import Settings
from onthedot.runtime import ROLES, build_store
from tests.api.live import LiveServer, live_server
from tests.support.webhook import LOOPBACK_ALLOW

CHROMIUM = Path(os.environ.get("ONTHEDOT_TEST_CHROMIUM", "/usr/bin/chromium"))
WIDE: ViewportSize = {"width": 1280, "height": 900}
NARROW: ViewportSize = {"width": 375, "height": 812}
VIEWER_ZONE = "Asia/Taipei"
# Long enough for a run to be dispatched, executed and polled (the page polls every 2 s).
LIVE_TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Module scope: one browser per file, closed before the next file's (async) tests run.
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: apt-get install chromium"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield chromium
        chromium.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "runs_jobs: the server also runs the background roles "
                            "(watcher, workers, ...), so that runs execute")


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    # Only tests that watch runs execute pay for the roles (stopping them takes about a second).
    roles = ROLES if request.node.get_closest_marker("runs_jobs") else ()
    settings = Settings(database_url=f"sqlite:///{tmp_path}/web.db", egress_allow=LOOPBACK_ALLOW)
    with live_server(settings, roles=roles) as live:
        yield live


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        yield client


NewContext = Callable[..., BrowserContext]


@pytest.fixture
def new_context(browser: Browser, server: LiveServer) -> Iterator[NewContext]:
    """Contexts of a viewer in Taipei reading English, unless told otherwise; each one fails
    its test on a JavaScript error of the page. (It takes ``server`` so that the browser is
    closed first: the server then stops without open connections.)"""
    contexts: list[BrowserContext] = []
    errors: list[str] = []

    def make(**options: Any) -> BrowserContext:
        settings = {"viewport": WIDE, "locale": "en-US", "timezone_id": VIEWER_ZONE, **options}
        context = browser.new_context(**settings)
        context.set_default_timeout(LIVE_TIMEOUT_MS)
        context.on("page", lambda page: page.on("pageerror", lambda e: errors.append(str(e))))
        contexts.append(context)
        return context

    yield make
    for context in contexts:
        context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


@pytest.fixture
def page(server: LiveServer, new_context: NewContext) -> Page:
    page = new_context().new_page()
    page.goto(server.url)
    return page


def create_job(http: httpx.Client, name: str, text: str | None = None,
               **params: Any) -> dict[str, Any]:
    job_params = params or {"type": "recurring", "schedule": "0 8 * * *",
                            "timezone": "Asia/Taipei"}
    r = http.post("/v1/jobs", json={"name": name, "job_params": job_params,
                                    "action": {"type": "message", "text": text or name}})
    assert r.status_code == 201, r.text
    job: dict[str, Any] = r.json()
    return job


def add_token(settings: Settings, user: str, token: str) -> None:
    async def add() -> None:
        store = build_store(settings)
        try:
            await store.token_add(hash_token(token), user, datetime.now(UTC))
        finally:
            await store.close()

    # In a thread of its own: Playwright's sync API keeps an event loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, add()).result()
