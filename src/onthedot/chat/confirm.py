"""Confirmation tokens: a destructive chat request is carried out only when the next call hands
back the token its answer carried.

A token is stateless and signed, so any API process can check it and nothing is stored per
question::

    c1.<base64url(JSON claims)>.<base64url(HMAC-SHA256(key, "onthedot-chat-confirm." + claims))>

The claims bind it to the user who asked (``u``), what to do (``i``: delete | change_time |
choose), the
task (``j``), the task's version when the question was asked (``ver``) and a digest of what the
user can change about it (``f``: name, action, time, status, policies, channels; see
``job_fingerprint``); a change of the time also carries the new ``job_params`` (``p``), so what
is confirmed is exactly what was shown. It expires ``CONFIRM_TTL_SECONDS`` after it was issued
(``exp``, Unix seconds). ``l`` is the language to answer in.

A ``choose`` token answers "which one?": it carries the tasks listed, in their numbered order
(``c``, job ids), and the request that found them (``k``: its intent; ``w``: its time or day;
``n``: a new name; ``z``: the timezone the user gave, if any), so that "2" or "the second one"
carries out that request on the second task listed. It names no task of its own (``j`` is
empty) and is not used up: the user may pick again while it lasts.

The task must still be the one the question was about: the same version, or a later version
with the same digest. The engine bumps a task's version for its own bookkeeping too (every
finished run of a recurring task advances ``next_run_at``), and a task that runs every minute
must still be deletable; anything the user would notice breaks the digest. Used once: carrying
it out changes the digest (deleted, or the new time), so a replay is refused.

The key is random, made by the first process that needs it and kept in the database's
deployment settings (``chat_confirm_key``), so every API process of a deployment shares it and
nothing needs configuring. Deleting that row invalidates every outstanding token (a new key is
made on the next question).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, cast

from onthedot.domain.models import Job, JobParams
from onthedot.nl.parts import Language

CONFIRM_TTL_SECONDS = 600  # ten minutes to say yes
KEY_SETTING = "chat_confirm_key"
KEY_RANDOM_BYTES = 32
TOKEN_PREFIX = "c1"
MAX_TOKEN_CHARS = 4000  # a token with job_params is a few hundred characters
_DOMAIN = b"onthedot-chat-confirm."  # a key used for nothing else, but say what is signed

Confirmable = Literal["delete", "change_time", "choose"]
_CONFIRMABLE = ("delete", "change_time", "choose")
MAX_CHOICES = 20  # tasks a "which one?" lists and its token carries
_LANGUAGES = ("en", "zh-Hant", "zh-Hans")


class KeyStore(Protocol):
    async def deployment_pin(self, name: str, value: str) -> str: ...


async def confirm_key(store: KeyStore) -> bytes:
    """The deployment's signing key, made on first use (see the module docstring)."""
    return (await store.deployment_pin(KEY_SETTING, secrets.token_urlsafe(KEY_RANDOM_BYTES))
            ).encode()


@dataclass(frozen=True)
class Confirmation:
    user_id: str
    intent: Confirmable
    job_id: str
    version: int
    expires_at: int  # Unix seconds
    language: Language
    fingerprint: str = ""  # job_fingerprint of the task when the question was asked
    params: JobParams | None = None  # change_time: the new time
    # choose: the tasks listed, in order, and the request that found them
    choices: tuple[str, ...] = ()
    asked: str = ""  # the request's IntentKind
    when: str | None = None
    name: str | None = None
    timezone: str | None = None  # the timezone the user gave with the request, if any

    def expired(self, now: datetime) -> bool:
        return self.expires_at <= now.timestamp()

    def claims(self) -> dict[str, Any]:
        return {"u": self.user_id, "i": self.intent, "j": self.job_id, "ver": self.version,
                "f": self.fingerprint, "exp": self.expires_at, "l": self.language,
                "p": None if self.params is None else self.params.to_dict(),
                "c": list(self.choices), "k": self.asked, "w": self.when, "n": self.name,
                "z": self.timezone}


def issue(confirmation: Confirmation, key: bytes) -> str:
    raw = json.dumps(confirmation.claims(), ensure_ascii=False, sort_keys=True,
                     separators=(",", ":")).encode()
    claims = _b64(raw)
    return f"{TOKEN_PREFIX}.{claims}.{_b64(_mac(key, claims))}"


def verify(token: str, key: bytes, *, user_id: str) -> Confirmation | None:
    """The confirmation a token carries if this deployment signed it for ``user_id``; None for
    anything else (forged, altered, another user's: the caller never says which). Expiry is
    the caller's to check (``expired``), so that it can answer in the token's language."""
    if len(token) > MAX_TOKEN_CHARS:
        return None
    prefix, _, rest = token.partition(".")
    claims, _, mac = rest.partition(".")
    if prefix != TOKEN_PREFIX or not claims or not mac or not hmac.compare_digest(
            _unb64(mac), _mac(key, claims)):
        return None
    try:
        found = _confirmation(json.loads(_unb64(claims)))
    except (ValueError, KeyError, TypeError):
        return None  # signed by us, so only a token of another format gets here
    return found if found.user_id == user_id else None


def _confirmation(claims: dict[str, Any]) -> Confirmation:
    if claims["i"] not in _CONFIRMABLE or claims["l"] not in _LANGUAGES:
        raise ValueError("unknown intent or language")
    params = claims["p"]
    choices = claims.get("c") or []
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise ValueError("choices are not a list of ids")
    return Confirmation(
        choices=tuple(choices), asked=str(claims.get("k") or ""), when=_text(claims.get("w")),
        name=_text(claims.get("n")), timezone=_text(claims.get("z")),
        user_id=str(claims["u"]), intent=cast(Confirmable, claims["i"]), job_id=str(claims["j"]),
        version=int(claims["ver"]), expires_at=int(claims["exp"]),
        language=cast(Language, claims["l"]), fingerprint=str(claims["f"]),
        params=None if params is None else JobParams(
            type=params["type"], time=params.get("time"), schedule=params.get("schedule"),
            timezone=params["timezone"],
            flexible_window_seconds=int(params.get("flexible_window_seconds", 0))))


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def job_fingerprint(job: Job) -> str:
    """A digest of everything about a task its user can change or would notice changing; not
    what the engine moves on its own (next_run_at, last_run_id, updated_at, version)."""
    seen = {"name": job.name, "action": job.action, "params": job.params.to_dict(),
            "status": job.status.value, "retry": job.retry_policy.to_dict(),
            "misfire": job.misfire_policy, "timeout": job.timeout_seconds,
            "notify": job.notify}
    raw = json.dumps(seen, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    return _b64(hashlib.sha256(raw).digest()[:16])


def _mac(key: bytes, claims: str) -> bytes:
    return hmac.new(key, _DOMAIN + claims.encode(), hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return b""
