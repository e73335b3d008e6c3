"""The FastAPI application of the REST API.

``create_app(runtime)`` serves an already opened runtime (tests, ``onthedot serve``);
``create_app(settings=...)`` opens one in the lifespan and closes it on shutdown. Either way the
lifespan starts the requested background ``roles`` and, on shutdown (SIGTERM/SIGINT under
uvicorn), stops them with the configured grace period.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from onthedot import __version__
from onthedot.api import problems, routes_chat, routes_inbox, routes_jobs, routes_ops
from onthedot.api.auth import LOCAL_USER, check_bind_allowed, is_loopback
from onthedot.api.mcp_http import McpEndpoint
from onthedot.api.models import JobBatchItem
from onthedot.api.problems import PROBLEM_MEDIA_TYPE
from onthedot.api.routes_parse import router as parse_router
from onthedot.api.routes_web import install as install_web_pages
from onthedot.config import Settings, load_settings
from onthedot.runtime import Runtime

log = logging.getLogger("onthedot.api")

DESCRIPTION = """Scheduled tasks as a service: immediate, one-time and recurring jobs that fire
on time, are never lost and are safe to retry.

Errors are RFC 9457 `application/problem+json` with `code`, `field` and `expected`.
Authenticate with `Authorization: Bearer <token>` (see `onthedot token create`)."""


def create_app(runtime: Runtime | None = None, *, settings: Settings | None = None,
               roles: Iterable[str] = ()) -> FastAPI:
    roles = tuple(roles)
    settings = runtime.settings if runtime is not None else settings or load_settings()
    mcp_endpoint = McpEndpoint(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        rt = runtime if runtime is not None else await Runtime.open(settings)
        app.state.runtime = rt
        try:
            await _check_identity_mode(rt)
            if roles:
                await rt.start(roles)
            async with mcp_endpoint.running():
                yield
        finally:
            if roles:
                await rt.stop()
            if runtime is None:
                await rt.close()

    app = FastAPI(title="onthedot", version=__version__, description=DESCRIPTION,
                  lifespan=lifespan, docs_url=None, redoc_url=None)  # offline ones: routes_web
    if runtime is not None:
        # Available without the lifespan too (ASGI transports in tests do not run it).
        app.state.runtime = runtime
    problems.install(app, max_body_bytes=settings.max_body_bytes,
                     path_body_limits={routes_jobs.BATCH_PATH: settings.max_batch_body_bytes})
    app.include_router(routes_jobs.router)
    app.include_router(routes_inbox.router)
    app.include_router(routes_ops.router)
    app.include_router(routes_chat.router)
    app.include_router(parse_router)
    install_web_pages(app)  # the Tasks page at /, /docs and /redoc, all offline
    mcp_endpoint.mount(app)
    app.add_middleware(routes_jobs.ChannelMiddleware)  # names the edge in job histories
    app.openapi = functools.partial(_openapi_document, app)  # type: ignore[method-assign]
    return app


def _openapi_document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, corrected where it would say something untrue:

    * it documents every response model as application/json; error responses are
      application/problem+json, so their schema moves there;
    * it marks the bearer token as required; a loopback server without any token serves
      requests without one (as the single user ``local``), so no token is an alternative;
    * it cannot describe the items of a batch: they are read one by one (an invalid one is
      answered in its place, not with a 422 for the request), so the route's model takes any
      item and its schema points at JobBatchItem, added here.
    """
    if app.openapi_schema is None:
        schema = FastAPI.openapi(app)
        _add_component(schema, JobBatchItem)
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                for response in operation.get("responses", {}).values():
                    content = response.get("content", {})
                    if PROBLEM_MEDIA_TYPE in content and "application/json" in content:
                        content[PROBLEM_MEDIA_TYPE] = content.pop("application/json")
                security = operation.get("security")
                if security and {} not in security:
                    security.append({})
    return app.openapi_schema or {}


def _add_component(schema: dict[str, Any], model: type[BaseModel]) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    own = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in own.pop("$defs", {}).items():
        components.setdefault(name, definition)
    components[model.__name__] = own


async def _check_identity_mode(rt: Runtime) -> None:
    tokens_exist = await rt.store.tokens_exist()
    check_bind_allowed(rt.settings.host, tokens_exist)
    if not tokens_exist and is_loopback(rt.settings.host):
        log.warning("no API token exists: every request acts as the single user %r; create "
                    "tokens with `onthedot token create --user NAME`", LOCAL_USER)
