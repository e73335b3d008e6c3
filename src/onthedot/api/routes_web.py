"""What a browser loads: the Tasks page at ``/``, and the API browsers ``/docs`` and ``/redoc``.

Everything is served from installed packages, never from a CDN, so the pages work on a machine
without internet access:

* the Tasks page is ``onthedot.web``'s ``static/`` folder (plain HTML, CSS and JavaScript
  modules; no build step) and talks to the REST API like any other client;
* Swagger UI and ReDoc come from the ``fastapi-offline`` package's copies of their bundles,
  rendered by FastAPI's own page templates.

None of these routes carry user data, so none needs a token; the page asks for one when the
API does.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

PAGE_DIR = Path(str(files("onthedot.web") / "static"))
DOCS_ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))
PAGE_ASSETS = "/web"
DOCS_ASSETS = "/docs-assets"

# The page loads only its own files and talks only to its own origin; it is never framed.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                               "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

# Swagger UI and ReDoc need inline script and style, and ReDoc searches in a blob: worker; the
# policy still keeps every request on this server (ReDoc's footer would fetch a logo from its
# vendor: it is blocked, and the footer shows the text alone).
DOCS_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                               "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                               "worker-src 'self' blob:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


def install(app: FastAPI) -> None:
    """Serve the page and the offline API browsers on ``app`` (created with ``docs_url=None``
    and ``redoc_url=None``, so FastAPI's CDN-backed pages are not there too)."""
    router = APIRouter(include_in_schema=False)
    title = app.title
    openapi_url = app.openapi_url or "/openapi.json"

    @router.get("/")
    async def tasks_page() -> FileResponse:
        return FileResponse(PAGE_DIR / "index.html", media_type="text/html; charset=utf-8",
                            headers=PAGE_HEADERS)

    @router.get("/docs")
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = _root(request)
        # No validator badge: it would send the document to an outside service.
        page = get_swagger_ui_html(
            openapi_url=root + openapi_url, title=f"{title} - Swagger UI",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{PAGE_ASSETS}/favicon.svg",
            swagger_ui_parameters={"validatorUrl": None})
        page.headers.update(DOCS_HEADERS)
        return page

    @router.get("/redoc")
    async def redoc(request: Request) -> HTMLResponse:
        root = _root(request)
        page = get_redoc_html(
            openapi_url=root + openapi_url, title=f"{title} - ReDoc",
            redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{PAGE_ASSETS}/favicon.svg", with_google_fonts=False)
        page.headers.update(DOCS_HEADERS)
        return page

    app.include_router(router)
    app.mount(PAGE_ASSETS, _Revalidated(directory=PAGE_DIR), name="web")
    app.mount(DOCS_ASSETS, StaticFiles(directory=DOCS_ASSETS_DIR), name="docs-assets")


class _Revalidated(StaticFiles):
    """The page's files, checked with the server (ETag) before each use: after an upgrade a
    browser must not mix a cached module with the new page."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.setdefault("Cache-Control", "no-cache")
        return response


def _root(request: Request) -> str:
    """The path prefix a reverse proxy serves the app under (as FastAPI's own pages use it)."""
    return str(request.scope.get("root_path", "")).rstrip("/")
