"""Signed webhooks: ``X-Onthedot-Signature: t=<unix>,v1=<hex>`` on every request onthedot
sends to a user's URL (the ``webhook`` action and the webhook delivery channel).

``v1`` is the hex HMAC-SHA256 of ``"<t>." + body`` (the exact bytes sent) under one of the
user's secrets. The newest secret always signs; for ``ROTATION_GRACE_SECONDS`` after a new one
is created, the previous one signs as well (a second ``v1``), so a receiver can switch secrets
without dropping a request. A user without a secret gets no signature header. Secrets are
made by ``onthedot webhook-secret create --user NAME`` and shown once; they are stored as they
are, because signing needs them (docs/delivery.md).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from onthedot import __version__
from onthedot.domain.clock import Clock
from onthedot.domain.delivery import WebhookSecret
from onthedot.domain.ids import new_ulid

SIGNATURE_HEADER = "X-Onthedot-Signature"
USER_AGENT = f"onthedot/{__version__}"
SECRET_PREFIX = "whsec_"  # makes a leaked secret easy to recognise
SECRET_RANDOM_BYTES = 32
ROTATION_GRACE_SECONDS = 86_400.0  # the previous secret keeps signing this long after a new one


class SecretSource(Protocol):
    async def webhook_secrets_recent(self, user_id: str, limit: int) -> list[WebhookSecret]: ...


class SecretSink(Protocol):
    async def webhook_secret_add(self, secret: WebhookSecret) -> None: ...


def signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signature_header(keys: Sequence[str], timestamp: int, body: bytes) -> str:
    return ",".join([f"t={timestamp}", *(f"v1={signature(k, timestamp, body)}" for k in keys)])


def signing_keys(recent: Sequence[WebhookSecret], now: datetime) -> list[str]:
    """The secrets that sign now, given the user's newest secrets (newest first)."""
    if not recent:
        return []
    keys = [recent[0].secret]
    if len(recent) > 1 and (now - recent[0].created_at).total_seconds() < ROTATION_GRACE_SECONDS:
        keys.append(recent[1].secret)
    return keys


class WebhookSigner:
    """Signs outgoing requests with the secrets of the job's user."""

    def __init__(self, source: SecretSource, clock: Clock) -> None:
        self._source = source
        self._clock = clock

    async def headers(self, user_id: str, body: bytes) -> dict[str, str]:
        now = self._clock.now()
        keys = signing_keys(await self._source.webhook_secrets_recent(user_id, 2), now)
        if not keys:
            return {}
        return {SIGNATURE_HEADER: signature_header(keys, int(now.timestamp()), body)}


async def create_secret(sink: SecretSink, user_id: str, now: datetime) -> str:
    """Store a new secret for ``user_id`` (it signs from now on) and return it."""
    value = SECRET_PREFIX + secrets.token_urlsafe(SECRET_RANDOM_BYTES)
    await sink.webhook_secret_add(WebhookSecret(secret_id=new_ulid(now), user_id=user_id,
                                                secret=value, created_at=now))
    return value
