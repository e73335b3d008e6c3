"""``webhook``: an HTTP request to a user's endpoint, with ``Idempotency-Key: <run id>``.

The request goes out through the worker's guarded client (see ``egress.py``): a destination the
guard refuses is a validation error at job creation when the URL alone shows it (an IP literal,
``localhost``), and a run error without retries when only DNS shows it. The answer is streamed
and only its first bytes are read.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import httpx

from onthedot.actions.base import ActionContext
from onthedot.actions.egress import (
    ALLOW_SETTING,
    MAX_READ_BYTES,
    EgressGuard,
    body_text,
    read_capped,
)
from onthedot.domain.errors import ActionError, ValidationError

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
RESPONSE_PREVIEW_CHARS = 2_000  # outputs are kept with the run; bodies can be huge
ERROR_PREVIEW_CHARS = 200  # of a non-2xx answer, kept in the run's error
ERROR_READ_BYTES = 4 * 1024


class WebhookAction:
    name = "webhook"
    param_names: tuple[str, ...] = ("url", "method", "headers", "body")

    def __init__(self, guard: EgressGuard) -> None:
        self.guard = guard

    def validate(self, params: dict[str, Any]) -> None:
        url = params.get("url")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValidationError("a webhook action needs an http(s) url", field="action.url",
                                  expected="an absolute http:// or https:// URL")
        self._validate_destination(str(url))
        method = str(params.get("method", "POST")).upper()
        if method not in METHODS:
            raise ValidationError(f"unsupported method {method}", field="action.method",
                                  expected=" | ".join(METHODS))
        headers = params.get("headers", {})
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise ValidationError("headers must map names to strings", field="action.headers",
                                  expected='an object like {"X-Token": "..."}')

    def _validate_destination(self, url: str) -> None:
        # Parsed the way the request will be sent, so the host judged is the host connected to.
        try:
            host = httpx.URL(url).raw_host.decode("ascii")
        except (httpx.InvalidURL, UnicodeDecodeError):
            host = ""
        if not host:
            raise ValidationError("the webhook url has no valid host", field="action.url",
                                  expected="an absolute http:// or https:// URL with a host name")
        reason = self.guard.refusal_without_lookup(host)
        if reason is not None:
            raise ValidationError(
                f"the webhook url points at {host} ({reason} address), which onthedot does "
                "not call",
                code="egress_refused", field="action.url",
                expected="an http(s) URL of a public host (an operator can allow private "
                         f"destinations with {ALLOW_SETTING})")

    async def execute(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        method = str(params.get("method", "POST")).upper()
        headers = {**params.get("headers", {}), "Idempotency-Key": ctx.idempotency_key}
        body = params.get("body")
        try:
            async with ctx.http.stream(
                method, params["url"], headers=headers,
                json=body if method not in ("GET", "DELETE") else None,
                timeout=ctx.timeout_seconds,
            ) as response:
                ok = 200 <= response.status_code < 300
                # Leaving the block closes the connection without reading the rest.
                answer = await read_capped(response, MAX_READ_BYTES if ok else ERROR_READ_BYTES)
        except httpx.TimeoutException as exc:
            raise ActionError(f"webhook timed out after {ctx.timeout_seconds:g}s") from exc
        except httpx.HTTPError as exc:
            raise ActionError(f"webhook request failed: {type(exc).__name__}: {exc}") from exc
        text = body_text(response, answer)
        if not ok:
            detail = " ".join(text[:ERROR_PREVIEW_CHARS].split())
            raise ActionError(f"webhook answered HTTP {response.status_code}"
                              + (f": {detail}" if detail else ""))
        return {"status_code": response.status_code,
                "body": _preview(response, text, complete=answer.complete)}


def _preview(response: httpx.Response, text: str, *, complete: bool) -> Any:
    """A JSON answer that was read whole and fits the preview is kept as JSON; anything else as
    its first ``RESPONSE_PREVIEW_CHARS`` characters."""
    is_json = response.headers.get("content-type", "").startswith("application/json")
    if is_json and complete and len(text) <= RESPONSE_PREVIEW_CHARS:
        try:
            return json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past what Python reads
            return text
    return text[:RESPONSE_PREVIEW_CHARS]
