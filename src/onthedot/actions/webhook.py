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
import re
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
    redirect_secrets,
)
from onthedot.actions.secret_headers import (
    check_listed,
    is_secret,
    listed_names,
    scrub,
    scrub_value,
    secret_values_of,
)
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
        self._validate_destination(host, url_port(str(url)))
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
        problem = header_problem(headers)
        if problem is not None:
            name, detail, expected = problem
            name = name[:MAX_HEADER_NAME_CHARS]  # a refused name may be as long as the action
            raise ValidationError(f"header {name!r} {detail}", code="invalid_header",
                                  field=f"action.headers.{name}", expected=expected)
        check_listed(params)

    def _validate_destination(self, host: str, port: int | None) -> None:
        reason = self.guard.refusal_without_lookup(host, port)
        if reason is not None:
            raise ValidationError(
                f"the webhook url points at {host} ({reason} address), which onthedot does "
                "not call",
                code="egress_refused", field="action.url",
                expected="an http(s) URL of a public host (an operator can allow private "
                         f"destinations with {ALLOW_SETTING})")

    async def execute(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        """One call. Whatever comes back (the answer, an error text, a library's message about
        the request) has every secret header value hidden: an endpoint may echo a credential,
        and a refused header is quoted by the HTTP library that refuses it."""
        secrets = secret_values_of(params)
        try:
            return scrub_value(await self._call(params, ctx), secrets)
        except ActionError as exc:
            raise ActionError(scrub(exc.message, secrets), code=exc.code,
                              retryable=exc.retryable) from None
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, TypeError) as exc:
            # Not raised by a call that passed validation; a job stored before a rule existed
            # can still get here. ``from None``: the traceback would quote the header.
            raise ActionError(scrub(f"webhook request failed: {type(exc).__name__}: {exc}",
                                    secrets), retryable=False) from None

    async def _call(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        given = params.get("headers", {})
        problem = header_problem(given) if isinstance(given, dict) else None
        if problem is not None:  # stored before the rule: another attempt fails the same way
            name, detail, _expected = problem
            raise ActionError(f"header {name!r} {detail}", code="invalid_header",
                              retryable=False)
        method = str(params.get("method", "POST")).upper()
        content = _request_body(params, method, ctx)
        headers = request_headers(given, content is not None, ctx.idempotency_key)
        if self.signer is not None:
            headers.update(await self.signer.headers(ctx.job.user_id, content or b""))
        secret_names = [k for k in headers if is_secret(k, listed_names(params))]
        try:
            async with ctx.http.stream(
                method, params["url"], headers=headers, content=content,
                timeout=ctx.timeout_seconds,
                extensions=redirect_secrets(params["url"], secret_names),
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


# RFC 9110 section 5.1: a field name is a token.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Section 5.5, narrowed to ASCII: visible characters, with spaces and tabs only inside.
_VALUE_CHARS = re.compile(r"[\x20-\x7e\t]*")
# Headers that frame the message or address the connection: httpx sets them from the request
# itself, and a second copy would make the request mean something else to each proxy on the way
# (a Transfer-Encoding beside a Content-Length is request smuggling; a Host points elsewhere).
FRAMING_HEADERS = frozenset({"host", "transfer-encoding", "content-length", "connection",
                             "upgrade", "te", "trailer", "keep-alive"})
MAX_HEADER_NAME_CHARS = 256
HEADER_VALUE_EXPECTED = ("visible ASCII characters, with spaces or tabs only between them "
                         "(no line breaks, control characters, non-ASCII or leading or "
                         "trailing white space)")


def header_problem(headers: Mapping[str, str]) -> tuple[str, str, str] | None:
    """The first header that cannot be sent as given: (name, what is wrong, what is expected),
    or None. The value itself is never part of the answer: it may be a credential."""
    for name, value in headers.items():
        lowered = name.lower()
        if len(name) > MAX_HEADER_NAME_CHARS or not _TOKEN.fullmatch(name):
            return (name, "is not an HTTP header name",
                    f"a name of at most {MAX_HEADER_NAME_CHARS} letters, digits and "
                    "!#$%&'*+-.^_`|~ (RFC 9110 token)")
        if lowered in FRAMING_HEADERS or lowered.startswith("proxy-"):
            return (name, "is set by onthedot from the request itself",
                    "no Host, Content-Length, Transfer-Encoding, Connection, Upgrade, TE, "
                    "Trailer, Keep-Alive or Proxy-* header")
        if not _VALUE_CHARS.fullmatch(value) or value != value.strip(" \t"):
            return name, "has a value that cannot be sent", HEADER_VALUE_EXPECTED
    return None


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


def url_port(url: str) -> int | None:
    """The port an http(s) URL connects to (its scheme's default when it names none)."""
    try:
        parsed = httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        return None
    return parsed.port or {"http": 80, "https": 443}.get(parsed.scheme)


def request_headers(given: Mapping[str, str], has_body: bool,
                    idempotency_key: str) -> httpx.Headers:
    """The user's headers over our defaults; the idempotency key and the signature are ours
    alone (a signature header the user wrote is dropped, not passed on as if we signed)."""
    headers = httpx.Headers({"User-Agent": USER_AGENT})
    headers.update({k: v for k, v in given.items() if k.lower() not in FRAMING_HEADERS})
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
