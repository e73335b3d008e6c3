"""``webhook``: an HTTP request to a user's endpoint, with ``Idempotency-Key: <run id>``."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import httpx

from onthedot.actions.base import ActionContext
from onthedot.domain.errors import ActionError, ValidationError

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
RESPONSE_PREVIEW_CHARS = 2_000  # outputs are kept with the run; bodies can be huge


class WebhookAction:
    name = "webhook"
    param_names: tuple[str, ...] = ("url", "method", "headers", "body")

    def validate(self, params: dict[str, Any]) -> None:
        url = params.get("url")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValidationError("a webhook action needs an http(s) url", field="action.url",
                                  expected="an absolute http:// or https:// URL")
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

    async def execute(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        method = str(params.get("method", "POST")).upper()
        headers = {**params.get("headers", {}), "Idempotency-Key": ctx.idempotency_key}
        body = params.get("body")
        try:
            response = await ctx.http.request(
                method, params["url"], headers=headers,
                json=body if method not in ("GET", "DELETE") else None,
                timeout=ctx.timeout_seconds,
            )
        except httpx.TimeoutException as exc:
            raise ActionError(f"webhook timed out after {ctx.timeout_seconds:g}s") from exc
        except httpx.HTTPError as exc:
            raise ActionError(f"webhook request failed: {type(exc).__name__}: {exc}") from exc
        if not 200 <= response.status_code < 300:
            raise ActionError(f"webhook answered HTTP {response.status_code}")
        return {"status_code": response.status_code, "body": _preview(response)}


def _preview(response: httpx.Response) -> Any:
    text = response.text[:RESPONSE_PREVIEW_CHARS]
    if response.headers.get("content-type", "").startswith("application/json"):
        try:
            return json.loads(response.text) if len(response.text) <= RESPONSE_PREVIEW_CHARS \
                else text
        except ValueError:
            return text
    return text
