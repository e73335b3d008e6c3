"""The JSON this server accepts in a request body: RFC 8259 as I-JSON (RFC 7493) narrows it.

Python's ``json`` is more lenient than JSON: it guesses UTF-16 and UTF-32, skips a byte order
mark, reads ``NaN`` and ``Infinity`` (and ``1e400`` as infinity), and fails with an
``OverflowError`` or a ``RecursionError`` rather than a decode error on huge integers and deep
nesting. ``parse_json`` accepts only UTF-8 JSON whose numbers are finite doubles and whose nesting
is at most ``MAX_JSON_DEPTH``; everything else is one ``json.JSONDecodeError`` whose message
says what was wrong. FastAPI turns that into ``422 invalid_json`` (the routes use
``StrictJsonRoute``); the MCP endpoint answers it as a JSON-RPC parse error.

Lone surrogates and NUL characters are valid JSON and pass here: the service refuses them with
the name of the field that holds them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from onthedot.domain.jsonvalue import MAX_JSON_DEPTH, depth_of

EXPECTED = (f"UTF-8 JSON (RFC 8259) with finite numbers and at most {MAX_JSON_DEPTH} levels of "
            "nesting")


class _NotFinite(ValueError):
    pass


def parse_json(raw: bytes) -> Any:
    """``raw`` decoded, or ``json.JSONDecodeError`` saying why it is not acceptable JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        doc = raw.decode("utf-8", "replace")
        raise json.JSONDecodeError(f"not UTF-8 (byte 0x{raw[exc.start]:02x})", doc,
                                   exc.start) from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                           parse_int=_finite_int)
    except json.JSONDecodeError:
        raise
    except _NotFinite as exc:
        raise json.JSONDecodeError(f"{exc}: numbers must be finite", text, 0) from None
    except RecursionError:
        raise _too_deep(text) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise json.JSONDecodeError(str(exc), text, 0) from None
    if depth_of(value) > MAX_JSON_DEPTH:
        raise _too_deep(text)
    return value


def _too_deep(text: str) -> json.JSONDecodeError:
    return json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0)


def _refuse_constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not a JSON number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _NotFinite(f"{literal[:20]} is out of range")
    return value


def _finite_int(literal: str) -> int:
    value = int(literal)
    try:
        float(value)
    except OverflowError:
        raise _NotFinite(f"{literal[:20]}... is out of range") from None
    return value


class StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """An APIRoute whose endpoints read their JSON body with ``parse_json``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict_handler
