"""``webhook``: an HTTP request to a user's endpoint, with ``Idempotency-Key: <run id>``,
``User-Agent: onthedot/<version>`` and, when the job's user has a webhook secret, an
``X-Onthedot-Signature`` over the exact body sent (``signing.py``). A POST, PUT or PATCH without
a ``body`` sends the run's identity as JSON: job id and name, run id, scheduled time, attempt.

The request goes out through the worker's guarded client (see ``egress.py``): a destination the
guard refuses is a validation error at job creation when the URL alone shows it (an IP literal,
``localhost``), and a run error without retries when only DNS shows it. The answer is streamed
and only its first bytes are read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
from onthedot.actions.secret_headers import check_listed
from onthedot.actions.signing import SIGNATURE_HEADER, USER_AGENT, WebhookSigner
from onthedot.domain.errors import ActionError, ValidationError

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
RESPONSE_PREVIEW_CHARS = 2_000  # outputs are kept with the run; bodies can be huge
ERROR_PREVIEW_CHARS = 200  # of a non-2xx answer, kept in the run's error
ERROR_READ_BYTES = 4 * 1024


class WebhookAction:
    name = "webhook"
    uses_previous = False
    # secret_headers: further header names to hide in every view (actions/secret_headers.py)
    param_names: tuple[str, ...] = ("url", "method", "headers", "body", "secret_headers")

    def __init__(self, guard: EgressGuard, signer: WebhookSigner | None = None) -> None:
        self.guard = guard
        self.signer = signer

    def validate(self, params: dict[str, Any]) -> None:
        url = params.get("url")
        host = url_host(url) if isinstance(url, str) else None
        if host is None:
            raise ValidationError("a webhook action needs an http(s) url", field="action.url",
                                  expected="an absolute http:// or https:// URL with a host name")
        self._validate_destination(host)
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
        check_listed(params)

    def _validate_destination(self, host: str) -> None:
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
        content = _request_body(params, method, ctx)
        headers = request_headers(params.get("headers", {}), content is not None,
                                  ctx.idempotency_key)
        if self.signer is not None:
            headers.update(await self.signer.headers(ctx.job.user_id, content or b""))
        try:
            async with ctx.http.stream(
                method, params["url"], headers=headers, content=content,
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


def url_host(url: str) -> str | None:
    """The host an http(s) URL connects to, parsed the way the request will be sent (so the
    host judged is the host connected to); None for anything that is not such a URL: another
    scheme, no host, a port out of range, white space, a broken IPv6 literal."""
    if any(ch.isspace() for ch in url):
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading it checks the port's range
        host = httpx.URL(url).raw_host.decode("ascii")
    except (ValueError, httpx.InvalidURL):  # UnicodeDecodeError is a ValueError
        return None
    return host if parts.scheme in ("http", "https") and host else None


def request_headers(given: Mapping[str, str], has_body: bool,
                    idempotency_key: str) -> httpx.Headers:
    """The user's headers over our defaults; the idempotency key and the signature are ours
    alone (a signature header the user wrote is dropped, not passed on as if we signed)."""
    headers = httpx.Headers({"User-Agent": USER_AGENT})
    headers.update(dict(given))
    headers.pop(SIGNATURE_HEADER, None)
    if has_body and "content-type" not in headers:
        headers["Content-Type"] = "application/json"
    headers["Idempotency-Key"] = idempotency_key
    return headers


def json_bytes(value: Any) -> bytes:
    """JSON as sent (the signature covers these exact bytes)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode()


def _request_body(params: dict[str, Any], method: str, ctx: ActionContext) -> bytes | None:
    if method in ("GET", "DELETE"):
        return None
    if "body" in params:  # an explicit null sends no body, as before bodies had a default
        return None if params["body"] is None else json_bytes(params["body"])
    return json_bytes({"job_id": ctx.job.job_id, "job_name": ctx.job.name,
                       "run_id": ctx.run.run_id,
                       "scheduled_at": ctx.run.scheduled_at.isoformat(),
                       "attempt": ctx.run.attempt})


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
