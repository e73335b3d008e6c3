"""What the browser routes answer, without a browser: the page and its files come from the
package, with a policy that keeps the page on its own origin; an unknown file is a problem."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from onthedot.api.app import create_app
from onthedot.api.routes_web import PAGE_DIR
from onthedot.config import Settings
from onthedot.runtime import Runtime


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    runtime = await Runtime.open(Settings(database_url=f"sqlite:///{tmp_path}/r.db"))
    try:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c
    finally:
        await runtime.close()


async def test_the_page_and_its_modules(client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.text == (PAGE_DIR / "index.html").read_text(encoding="utf-8")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "'unsafe-inline'" not in policy
    for name in ("app.js", "api.js", "dom.js", "i18n.js", "tasks.js", "inbox.js",
                 "dead.js"):
        module = await client.get(f"/web/{name}")
        assert module.status_code == 200, name
        assert "javascript" in module.headers["content-type"], name
        assert module.headers["cache-control"] == "no-cache", name  # revalidated, never stale
    assert (await client.get("/web/app.css")).headers["content-type"].startswith("text/css")


async def test_an_unknown_file_is_a_problem(client: httpx.AsyncClient) -> None:
    r = await client.get("/web/nothing.js")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "not_found"


async def test_browser_routes_stay_out_of_the_api_document(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/v1/parse" in paths
    assert not {"/", "/docs", "/redoc"} & paths.keys()
