"""/docs and /redoc work on a machine without internet access: their pages name no outside
host, their assets come from the server, and they render with every outside request blocked."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from playwright.sync_api import Route, expect

from tests.api.live import LiveServer
from tests.web.conftest import NewContext

# src="…", href="…", spec-url="…" and Swagger UI's  url: '…'
REFERENCE = re.compile(r"""(?:\b(?:src|href|spec-url)\s*=\s*|\burl:\s*)["']([^"']+)["']""")


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_pages_reference_only_the_server(http: httpx.Client, path: str) -> None:
    page = http.get(path)
    assert page.status_code == 200
    references = REFERENCE.findall(page.text)
    assert references, page.text
    for reference in references:
        assert not urlsplit(reference).netloc, f"{path} loads {reference} from elsewhere"
        asset = http.get(urljoin(path, reference))
        assert asset.status_code == 200, reference
    assert "fonts.googleapis" not in page.text
    assert "cdn." not in page.text
    # and the browser is told to keep every request on this server
    assert "default-src 'self'" in page.headers["content-security-policy"]


def test_they_render_with_the_network_cut_off(new_context: NewContext,
                                              server: LiveServer) -> None:
    outside: list[str] = []

    def loopback_only(route: Route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort("internetdisconnected")

    context = new_context()
    context.route("**/*", loopback_only)
    page = context.new_page()
    page.goto(f"{server.url}/docs")
    expect(page.locator(".opblock-summary-path", has_text="/v1/parse")).to_be_visible()
    page.goto(f"{server.url}/redoc")
    expect(page.get_by_role("heading", name=re.compile("^onthedot"))).to_be_visible()
    expect(page.get_by_text("/v1/parse").first).to_be_attached()
    assert outside == []
