"""Streamable HTTP at ``/mcp`` on the API server.

Stateless, with JSON responses: every POST is answered on its own, so any API process behind a
load balancer can serve any call and there is no session to lose or to hijack. The tools send no
server-initiated messages, so there is no GET stream (405) and no session to DELETE (405).

Identity is checked at this edge for every HTTP request, with ``resolve_user`` as for ``/v1``:
a bearer token, or the ``local`` user on a loopback server without tokens. A missing or unknown
token is a ``401`` problem before the MCP layer sees the request. In ``local`` mode a request
whose ``Host`` or ``Origin`` is not loopback is refused (``403``): a web page that rebinds its DNS
name to 127.0.0.1 must not act as the local user.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from onthedot.api.auth import resolve_request_user, resolve_user
from onthedot.api.problems import error_problem, problem
from onthedot.config import Settings
from onthedot.domain.errors import AuthError, OnTheDotError
from onthedot.mcp.registry import Caller, ToolRegistry
from onthedot.mcp.server import build_server
from onthedot.runtime import Runtime

MCP_PATH = "/mcp"
USER_STATE = "onthedot_user"  # request.state attribute: the user resolved at the edge
# Stateless transport: the SDK logs two INFO lines per call (its request type, and "terminating"
# the per-request session). The access log already has the request; keep those at WARNING unless
# the deployment configured these loggers itself.
_CHATTY_SDK_LOGGERS = ("mcp.server.lowlevel.server", "mcp.server.streamable_http")


class McpEndpoint:
    """The ASGI app served at ``/mcp`` and ``/mcp/`` (no redirect between them)."""

    def __init__(self, settings: Settings, registry: ToolRegistry | None = None) -> None:
        for name in _CHATTY_SDK_LOGGERS:
            sdk_log = logging.getLogger(name)
            if sdk_log.level == logging.NOTSET:
                sdk_log.setLevel(logging.WARNING)
        self.server = build_server(settings.default_timezone, caller_of_request, registry)
        self.sessions = StreamableHTTPSessionManager(self.server, json_response=True,
                                                     stateless=True)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Must wrap the app's lifespan: the transport runs its calls in this task group."""
        async with self.sessions.run():
            yield

    def mount(self, app: Starlette) -> None:
        for path in (MCP_PATH, MCP_PATH + "/"):
            app.router.routes.append(Route(path, endpoint=self, include_in_schema=False))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        if request.method != "POST":
            # Stateless: no session to DELETE and no server-initiated messages to stream on a
            # GET, for which the spec asks a 405 rather than an SSE stream that stays silent.
            await problem(405, "method_not_allowed", f"{request.method} is not allowed on "
                          f"{request.url.path}; MCP calls are POSTs", headers={"Allow": "POST"},
                          field="method", expected="POST")(scope, receive, send)
            return
        runtime = cast(Runtime, request.app.state.runtime)
        authorization = request.headers.get("authorization")
        try:
            user = await resolve_request_user(runtime.store, runtime.settings, authorization,
                                              request.url.hostname or "",
                                              request.headers.get("origin"))
        except OnTheDotError as exc:
            await error_problem(exc)(scope, receive, send)
            return
        setattr(request.state, USER_STATE, user)  # the same scope reaches the tool call
        await self.sessions.handle_request(scope, receive, send)


async def caller_of_request(request: Any) -> Caller:
    """The caller of a tool call over HTTP: the user the edge resolved for its request."""
    if not isinstance(request, Request):
        raise AuthError("this MCP server identifies callers by their HTTP request",
                        field="Authorization", expected="a call over Streamable HTTP")
    runtime = cast(Runtime, request.app.state.runtime)
    user = getattr(request.state, USER_STATE, None)
    if not isinstance(user, str):
        user = await resolve_user(runtime.store, runtime.settings,
                                  request.headers.get("authorization"))
    return Caller(service=runtime.service, user_id=user,
                  timezone=runtime.settings.default_timezone)

