"""The ``webhook`` channel: a signed POST of the output to the user's URL.

Sent through a guarded client (the worker's, or the rescuer's for a retry), so the egress guard
judges the URL on every send and every redirect (creation only refused what the URL alone
shows). ``Idempotency-Key`` is the delivery's own key (run id and channel), the same on every
send of that delivery, so a receiver can drop a send repeated after a crash or a retry.
``"format": "slack"`` posts Slack's ``{"text": ...}``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from onthedot.actions.egress import body_text, read_capped
from onthedot.actions.signing import WebhookSigner
from onthedot.actions.webhook import json_bytes, request_headers
from onthedot.domain.errors import ActionError, DeliveryError

WEBHOOK_TIMEOUT_SECONDS = 30.0
ANSWER_READ_BYTES = 4 * 1024  # only the first bytes of an answer are kept, in the error
ERROR_PREVIEW_CHARS = 200
RETRYABLE_STATUSES = frozenset({408, 425, 429})  # and every 5xx

HttpClient = Callable[[], Awaitable[httpx.AsyncClient]]


class WebhookChannel:
    kind = "webhook"

    def __init__(self, http: HttpClient, signer: WebhookSigner | None) -> None:
        self._http = http
        self._signer = signer

    async def send(self, url: str, payload: dict[str, Any], *, user_id: str,
                   idempotency_key: str) -> None:
        async with self.sending(url, payload, user_id=user_id,
                                idempotency_key=idempotency_key):
            pass

    @contextlib.asynccontextmanager
    async def sending(self, url: str, payload: dict[str, Any], *, user_id: str,
                      idempotency_key: str) -> AsyncIterator[None]:
        """POST ``payload``; the block runs as soon as a 2xx status line arrived, before the
        answer's body is read or the connection released, so the caller records the acceptance
        without waiting for either. Any other answer raises DeliveryError before the block."""
        content = json_bytes(payload)
        headers = request_headers({}, True, idempotency_key)
        if self._signer is not None:
            headers.update(await self._signer.headers(user_id, content))
        client = await self._http()
        accepted = False
        try:
            async with client.stream("POST", url, headers=headers, content=content,
                                     timeout=WEBHOOK_TIMEOUT_SECONDS) as response:
                status = response.status_code
                if 200 <= status < 300:
                    accepted = True
                    yield
                    return
                answer = await read_capped(response, ANSWER_READ_BYTES)
        except ActionError as exc:  # the egress guard: refused, or the name does not resolve
            if accepted:
                raise
            raise DeliveryError(exc.message, retryable=exc.retryable) from exc
        except httpx.TimeoutException as exc:
            if accepted:
                raise
            raise DeliveryError(f"the webhook timed out after {WEBHOOK_TIMEOUT_SECONDS:g}s"
                                ) from exc
        except httpx.HTTPError as exc:
            if accepted:
                raise
            raise DeliveryError(f"the webhook request failed: {type(exc).__name__}: {exc}"
                                ) from exc
        detail = " ".join(body_text(response, answer)[:ERROR_PREVIEW_CHARS].split())
        raise DeliveryError(f"the webhook answered HTTP {status}" + (f": {detail}" if detail
                                                                       else ""),
                            retryable=status >= 500 or status in RETRYABLE_STATUSES)
