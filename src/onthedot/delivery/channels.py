"""A job's ``notify`` list: which channels exist, what each takes, and how one is named.

    [{"channel": "inbox"},
     {"channel": "email", "to": "me@example.com"},
     {"channel": "webhook", "url": "https://hooks.example.com/x", "format": "slack"}]

Validated strictly on every write (REST, MCP and CLI go through the service, which calls
``validate_notify``): an unknown channel or key, a malformed address, a webhook URL the egress
guard refuses by its look alone, or an e-mail channel on a deployment without SMTP is a
ValidationError naming the entry (``notify[1].to``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from onthedot.actions.egress import ALLOW_SETTING, EgressGuard
from onthedot.actions.webhook import url_host
from onthedot.config import Settings
from onthedot.domain.errors import ValidationError
from onthedot.domain.jsonvalue import TEXT_EXPECTED, is_storable_text

MAX_CHANNELS = 5
MAX_ADDRESS_CHARS = 254  # RFC 5321's limit of a forward path
MAX_URL_CHARS = 2000
WEBHOOK_FORMATS = ("json", "slack")
# Every key a channel takes, ``channel`` included.
CHANNEL_KEYS: dict[str, tuple[str, ...]] = {
    "inbox": ("channel",),
    "email": ("channel", "to"),
    "webhook": ("channel", "url", "format"),
}
KINDS_EXPECTED = " | ".join(CHANNEL_KEYS)
NOTIFY_EXPECTED = (f'a list of at most {MAX_CHANNELS} channels, e.g. [{{"channel": "inbox"}}, '
                   '{"channel": "email", "to": "me@example.com"}, {"channel": "webhook", '
                   '"url": "https://...", "format": "slack"}]')
# A plain address: no display name, no comments, no quoted local part, an ASCII domain with a dot.
_ADDRESS = re.compile(
    r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$")


def smtp_missing(settings: Settings) -> str | None:
    """The setting an e-mail channel still needs on this deployment, or None."""
    if settings.smtp_url is None:
        return "ONTHEDOT_SMTP_URL"
    if not settings.smtp_from:
        return "ONTHEDOT_SMTP_FROM"
    return None


def channel_key(channel: dict[str, Any]) -> str:
    """Names the channel within a run: one delivery per (run, key)."""
    kind = str(channel.get("channel"))
    if kind == "email":
        return f"email:{str(channel.get('to', '')).lower()}"
    if kind == "webhook":
        return f"webhook:{channel.get('url', '')}"
    return kind


def delivery_id(run_id: str, key: str) -> str:
    """The same on every send of one run to one channel: the e-mail's Message-ID and the
    webhook's Idempotency-Key are made of it, so a receiver can drop a repeated send."""
    return f"{run_id}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def channel_target(channel: dict[str, Any]) -> str:
    """What the user recognises the channel by."""
    kind = str(channel.get("channel"))
    if kind == "email":
        return str(channel.get("to", ""))
    if kind == "webhook":
        return str(channel.get("url", ""))
    return kind


def validate_notify(raw: Any, *, settings: Settings, guard: EgressGuard) -> list[dict[str, Any]]:
    """The channels as they will be stored, or a ValidationError naming the first bad entry."""
    if not isinstance(raw, list):
        raise ValidationError("notify must be a list of channels", field="notify",
                              expected=NOTIFY_EXPECTED)
    if len(raw) > MAX_CHANNELS:
        raise ValidationError(f"notify lists {len(raw)} channels", code="too_many_channels",
                              field="notify", expected=f"at most {MAX_CHANNELS} channels")
    channels: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        channel = _validated(entry, f"notify[{index}]", settings, guard)
        key = channel_key(channel)
        if key in seen:
            raise ValidationError(f"notify[{index}] repeats a channel", code="duplicate_channel",
                                  field=f"notify[{index}]",
                                  expected="each channel (and each address or URL) once")
        seen.add(key)
        channels.append(channel)
    return channels


def _validated(entry: Any, where: str, settings: Settings,
               guard: EgressGuard) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ValidationError(f"{where} must be an object", field=where,
                              expected='an object such as {"channel": "inbox"}')
    kind = entry.get("channel")
    if kind is None:
        raise ValidationError(f"{where} needs a channel", code="missing_field",
                              field=f"{where}.channel", expected=KINDS_EXPECTED)
    if kind not in CHANNEL_KEYS:
        raise ValidationError(f"unknown channel {kind!r}", code="unknown_channel",
                              field=f"{where}.channel", expected=KINDS_EXPECTED)
    allowed = CHANNEL_KEYS[kind]
    for key in entry:
        if key not in allowed:
            raise ValidationError(f"a {kind} channel has no {key!r}", code="unknown_field",
                                  field=f"{where}.{key}",
                                  expected=f"only the keys of a {kind} channel: "
                                           + ", ".join(allowed))
    if kind == "email":
        return {"channel": "email", "to": _address(entry.get("to"), f"{where}.to", settings)}
    if kind == "webhook":
        channel = {"channel": "webhook", "url": _url(entry.get("url"), f"{where}.url", guard)}
        if "format" in entry:
            if entry["format"] not in WEBHOOK_FORMATS:
                raise ValidationError("unknown webhook format", field=f"{where}.format",
                                      expected=" | ".join(WEBHOOK_FORMATS))
            channel["format"] = entry["format"]
        return channel
    return {"channel": "inbox"}


def _address(value: Any, where: str, settings: Settings) -> str:
    if value is None:
        raise ValidationError("an email channel needs a recipient", code="missing_field",
                              field=where, expected="an e-mail address such as me@example.com")
    if not isinstance(value, str) or not is_storable_text(value):
        raise ValidationError("the recipient must be text", field=where, expected=TEXT_EXPECTED)
    address = value.strip()
    if len(address) > MAX_ADDRESS_CHARS or not _ADDRESS.match(address):
        raise ValidationError(f"{address[:80]!r} is not an e-mail address", code="invalid_email",
                              field=where, expected="a plain address such as me@example.com "
                                                    "(no name, no angle brackets)")
    missing = smtp_missing(settings)
    if missing is not None:
        raise ValidationError(
            f"this server sends no e-mail: {missing} is not set", code="email_not_configured",
            field=where, expected=f"another channel, or an operator to set {missing}")
    return address


def _url(value: Any, where: str, guard: EgressGuard) -> str:
    expected = "an absolute http:// or https:// URL of a public host"
    if value is None:
        raise ValidationError("a webhook channel needs a url", code="missing_field", field=where,
                              expected=expected)
    if not isinstance(value, str) or not is_storable_text(value):
        raise ValidationError("the url must be text", field=where, expected=TEXT_EXPECTED)
    if len(value) > MAX_URL_CHARS:
        raise ValidationError("the url is too long", field=where,
                              expected=f"a URL of at most {MAX_URL_CHARS} characters")
    host = url_host(value)
    if host is None:
        raise ValidationError("a webhook channel needs an http(s) url", field=where,
                              expected=expected)
    reason = guard.refusal_without_lookup(host)
    if reason is not None:
        raise ValidationError(
            f"the webhook url points at {host} ({reason} address), which onthedot does not call",
            code="egress_refused", field=where,
            expected=f"{expected} (an operator can allow private destinations with "
                     f"{ALLOW_SETTING})")
    return value
