"""The one place where errors become HTTP responses: RFC 9457 ``application/problem+json``.

Every error body has ``type, title, status, detail`` plus ``code``, ``field`` and ``expected``, so
a client (or a language model) can correct its request. Sources, each mapped here and nowhere else:

* ``OnTheDotError`` (the service's validation, not-found, conflict, auth, backend errors);
* FastAPI's ``RequestValidationError`` (malformed JSON, a wrong type, an unknown field, ...);
* Starlette's ``HTTPException`` (404 for an unknown path, 405 for a wrong method, whose ``Allow``
  lists every method of the path; ``OPTIONS`` on a known path is a 204 with that ``Allow``);
* a request body over the limit (413), checked on ``Content-Length`` and on the bytes received;
* anything unexpected (500): logged with its traceback, answered without one.
"""

from __future__ import annotations

import http
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onthedot.api.jsonbody import EXPECTED as JSON_EXPECTED
from onthedot.domain.errors import AuthError, OnTheDotError, QuotaError

log = logging.getLogger("onthedot.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_PREFIX = "urn:onthedot:problem:"  # + code; a stable identifier, not a web page

# pydantic error types -> our codes (anything else is "invalid_value")
_PYDANTIC_CODES = {
    "extra_forbidden": "unknown_field",
    "missing": "missing_field",
    "json_invalid": "invalid_json",
}
_PROBED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_HTTP_CODES = {
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}


class ProblemResponse(JSONResponse):
    media_type = PROBLEM_MEDIA_TYPE


def problem_body(status: int, code: str, detail: str, *, field: str | None = None,
                 expected: str | None = None,
                 extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_PREFIX + code,
        "title": _title(status),
        "status": status,
        "detail": detail,
        "code": code,
        "field": field,
        "expected": expected,
    }
    body.update(extra or {})
    return body


def problem(status: int, code: str, detail: str, *, field: str | None = None,
            expected: str | None = None, headers: Mapping[str, str] | None = None,
            extra: Mapping[str, Any] | None = None) -> ProblemResponse:
    body = problem_body(status, code, detail, field=field, expected=expected, extra=extra)
    return ProblemResponse(body, status_code=status, headers=dict(headers or {}))


def error_problem(exc: OnTheDotError) -> ProblemResponse:
    headers = None
    if isinstance(exc, AuthError):
        headers = {"WWW-Authenticate": 'Bearer realm="onthedot"'}
    if isinstance(exc, QuotaError) and exc.retry_after_seconds is not None:
        headers = {"Retry-After": str(exc.retry_after_seconds)}  # a rate, not a hard cap
    return problem(exc.http_status, exc.code, exc.message, field=exc.field, expected=exc.expected,
                   headers=headers, extra=_extra(exc))


def error_body(exc: OnTheDotError, field: str | None) -> dict[str, Any]:
    """The problem of ``exc`` as a plain object (one item of a batch), naming ``field``."""
    return problem_body(exc.http_status, exc.code, exc.message, field=field,
                        expected=exc.expected, extra=_extra(exc))


def _extra(exc: OnTheDotError) -> dict[str, Any] | None:
    """A rate's 429 says when to try again in the body too (a batch item has no header of its
    own); a hard cap's says nothing of the kind."""
    if isinstance(exc, QuotaError) and exc.retry_after_seconds is not None:
        return {"retry_after_seconds": exc.retry_after_seconds}
    return None


def validation_body(errors: Sequence[Any]) -> dict[str, Any]:
    """The first error names the field; all of them are listed under ``errors``."""
    items = [_pydantic_item(e) for e in errors] or [
        {"code": "invalid_value", "field": None, "detail": "invalid request", "expected": None}]
    first = items[0]
    return problem_body(422, first["code"], first["detail"], field=first["field"],
                        expected=first["expected"], extra={"errors": items})


def validation_problem(errors: Sequence[Any]) -> ProblemResponse:
    return ProblemResponse(validation_body(errors), status_code=422)


def body_too_large_problem(limit: int) -> ProblemResponse:
    return problem(413, "body_too_large", f"the request body is larger than {limit} bytes",
                   field="body", expected=f"a body of at most {limit} bytes")


def install(app: FastAPI, *, max_body_bytes: int,
            path_body_limits: Mapping[str, int] | None = None) -> None:
    """Register the handlers and the edge middleware on ``app``. ``path_body_limits`` gives
    paths (such as the batch create) a body limit of their own."""
    limits = dict(path_body_limits or {})

    async def on_error(_request: Request, exc: Exception) -> ProblemResponse:
        assert isinstance(exc, OnTheDotError)
        if exc.http_status >= 500:
            log.error("%s: %s", type(exc).__name__, exc.message, exc_info=exc.__cause__)
        return error_problem(exc)

    async def on_validation(_request: Request, exc: Exception) -> ProblemResponse:
        assert isinstance(exc, RequestValidationError)
        return validation_problem(exc.errors())

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        headers = dict(exc.headers or {})
        if status == 413:
            return body_too_large_problem(limits.get(request.url.path, max_body_bytes))
        if status == 404:
            detail = f"no such resource: {request.url.path}"
        elif status == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
            if request.method == "OPTIONS":
                return Response(status_code=204, headers=headers)
            detail = f"{request.method} is not allowed on {request.url.path}"
        else:
            detail = str(exc.detail)
        return problem(status, _HTTP_CODES.get(status, "http_error"), detail, headers=headers)

    app.add_exception_handler(OnTheDotError, on_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    app.add_middleware(ProblemMiddleware, max_body_bytes=max_body_bytes,
                       path_body_limits=limits)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path, OPTIONS included.

    Starlette's own 405 names only the methods of the first route that matched the path, but
    GET and POST of /v1/jobs are two routes; so each method is tried against every route.
    """
    allowed = {"OPTIONS"}
    for method in _PROBED_METHODS:
        probe = {**request.scope, "method": method}
        if any(route.matches(probe)[0] is Match.FULL for route in request.app.router.routes):
            allowed.add(method)
    return sorted(allowed)


class BodyTooLarge(HTTPException):
    def __init__(self) -> None:
        super().__init__(413)


class ProblemMiddleware:
    """Outermost edge: the body size limit, and a 500 problem for anything unexpected.

    It sits outside FastAPI's exception handlers, so what reaches it is either the body
    limit tripping while something read the body, or a bug.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int,
                 path_body_limits: Mapping[str, int] | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.path_body_limits = dict(path_body_limits or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.path_body_limits.get(scope.get("path", ""), self.max_body_bytes)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await body_too_large_problem(limit)(scope, receive, send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if started:
                raise
            await body_too_large_problem(limit)(scope, receive, send)
        except Exception:
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            await problem(500, "internal_error", "an unexpected error occurred; it has been "
                          "logged on the server")(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


# RFC 9110 names; older Pythons' http.HTTPStatus still has the RFC 7231 ones.
_TITLES = {413: "Content Too Large", 422: "Unprocessable Content"}


def _title(status: int) -> str:
    if status in _TITLES:
        return _TITLES[status]
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def _pydantic_item(error: Any) -> dict[str, Any]:
    kind = str(error.get("type", ""))
    loc = list(error.get("loc", ()))
    source = loc.pop(0) if loc and loc[0] in ("body", "query", "path", "header") else None
    # The body as a whole (missing, not an object, not JSON) is reported as field "body".
    field = "body" if kind == "json_invalid" or (source == "body" and not loc) else _dotted(loc)
    ctx = error.get("ctx") or {}
    code = _PYDANTIC_CODES.get(kind, "invalid_value")
    expected: str | None
    if code == "unknown_field":
        detail = f"unknown field {field!r}"
        expected = "only the fields documented in /openapi.json"
    elif code == "missing_field" and field == "body":
        detail = "a JSON request body is required"
        expected = "a JSON object (Content-Type: application/json)"
    elif code == "missing_field":
        detail = f"{field} is required"
        expected = "a value"
    elif code == "invalid_json":
        detail = f"the body is not valid JSON: {ctx.get('error', 'decode error')}"
        expected = f"a JSON object: {JSON_EXPECTED}"
    else:
        detail = f"{field}: {error.get('msg', 'invalid value')}" if field else str(
            error.get("msg", "invalid value"))
        expected = _expected(kind, ctx)
        if field == "body" and expected == "a JSON object":
            expected += " (Content-Type: application/json)"
    return {"code": code, "field": field, "detail": detail, "expected": expected}


def _expected(kind: str, ctx: Mapping[str, Any]) -> str | None:
    if "expected" in ctx:
        return f"one of {ctx['expected']}"
    if kind in ("too_long", "too_short") and ctx.get("field_type") == "List":
        bound = ctx.get("max_length") if kind == "too_long" else ctx.get("min_length")
        return f"{'at most' if kind == 'too_long' else 'at least'} {bound} items"
    for key, words in (("ge", "a number >= {}"), ("gt", "a number > {}"),
                       ("le", "a number <= {}"), ("lt", "a number < {}"),
                       ("max_length", "at most {} characters"),
                       ("min_length", "at least {} characters")):
        if key in ctx:
            return words.format(ctx[key])
    return {
        "int_parsing": "an integer", "int_type": "an integer", "float_parsing": "a number",
        "float_type": "a number", "string_type": "a string", "bool_type": "true or false",
        "dict_type": "a JSON object", "model_type": "a JSON object",
        "model_attributes_type": "a JSON object",
        "datetime_parsing": "an ISO 8601 date-time with an offset, e.g. 2026-06-22T08:00:00Z",
        "datetime_from_date_parsing": "an ISO 8601 date-time with an offset, e.g. "
                                      "2026-06-22T08:00:00Z",
        "timezone_aware": "an ISO 8601 date-time with an offset, e.g. 2026-06-22T08:00:00+08:00",
        "datetime_type": "an ISO 8601 date-time",
    }.get(kind)


def _dotted(loc: Sequence[Any]) -> str | None:
    out: str = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or None
