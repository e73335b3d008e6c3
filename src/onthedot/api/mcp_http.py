"""Streamable HTTP at ``/mcp`` on the API server (the HTTP edge serves the MCP edge's server).

Stateless, with JSON responses: every POST is answered on its own, so any API process behind a
load balancer can serve any call and there is no session to lose or to hijack. The tools send no
server-initiated messages, so there is no GET stream (405) and no session to DELETE (405).

Identity is checked at this edge for every HTTP request, with ``resolve_user`` as for ``/v1``:
a bearer token, or the ``local`` user on a loopback server without tokens. A missing or unknown
token is a ``401`` problem before the MCP layer sees the request. In ``local`` mode a request
whose ``Host`` or ``Origin`` is not loopback is refused (``403``): a web page that rebinds its DNS
name to 127.0.0.1 must not act as the local user.

A JSON body is read with the REST API's parser (``onthedot.api.jsonbody``) before the SDK sees
it; one it refuses (not UTF-8, NaN, nested too deeply, malformed) is a JSON-RPC parse error.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import PARSE_ERROR
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from onthedot.api.auth import Principal, resolve_principal, resolve_request_principal
from onthedot.api.jsonbody import EXPECTED as JSON_EXPECTED
from onthedot.api.jsonbody import parse_json
from onthedot.api.problems import error_problem, problem
from onthedot.config import Settings
from onthedot.domain.errors import AuthError, OnTheDotError
from onthedot.mcp.registry import Caller, ToolRegistry
from onthedot.mcp.server import build_server
from onthedot.runtime import Runtime

MCP_PATH = "/mcp"
USER_STATE = "onthedot_user"  # request.state attribute: the Principal resolved at the edge
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
        request = Request(scope, receive)
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
            principal = await resolve_request_principal(
                runtime.store, runtime.settings, authorization, request.url.hostname or "",
                request.headers.get("origin"), runtime.clock.now())
        except OnTheDotError as exc:
            await error_problem(exc)(scope, receive, send)
            return
        setattr(request.state, USER_STATE, principal)  # the same scope reaches the tool call
        if _is_json(request):
            body = await request.body()
            try:
                parse_json(body)
            except json.JSONDecodeError as exc:
                await _parse_error(exc)(scope, receive, send)
                return
            receive = _replaying(body, receive)
        await self.sessions.handle_request(scope, receive, send)


def _is_json(request: Request) -> bool:
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media_type == "application/json"


def _parse_error(exc: json.JSONDecodeError) -> JSONResponse:
    """What the SDK answers to JSON it cannot parse (HTTP 400, JSON-RPC -32700), for every body
    ``parse_json`` refuses: the SDK's own ``json.loads`` would raise something other than a
    decode error on non-UTF-8 or deeply nested bodies (a 500), and accept NaN. ``data`` carries
    the same correctable error object as a tool error."""
    error = {"code": "invalid_json", "message": f"the body is not valid JSON: {exc.msg}",
             "field": "body", "expected": JSON_EXPECTED}
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
        "code": PARSE_ERROR, "message": f"Parse error: {exc.msg}", "data": error}},
        status_code=400)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` for an app that has not seen the body this edge already read."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def caller_of_request(request: Any) -> Caller:
    """The caller of a tool call over HTTP: the user the edge resolved for its request."""
    if not isinstance(request, Request):
        raise AuthError("this MCP server identifies callers by their HTTP request",
                        field="Authorization", expected="a call over Streamable HTTP")
    runtime = cast(Runtime, request.app.state.runtime)
    principal = getattr(request.state, USER_STATE, None)
    if not isinstance(principal, Principal):
        principal = await resolve_principal(runtime.store, runtime.settings,
                                            request.headers.get("authorization"),
                                            runtime.clock.now())
    return Caller(service=runtime.service, user_id=principal.user_id,
                  timezone=runtime.settings.default_timezone, scopes=principal.scopes)

