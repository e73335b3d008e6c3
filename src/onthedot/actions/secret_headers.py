"""Secret headers of an action (a webhook's ``Authorization``, ``X-Api-Key``, ...): stored and
sent, never shown again (docs/actions.md, "Secret headers").

Every view of a job (REST, MCP, chat) shows such a header with the value ``***``. A change that
sends ``***`` back for a header keeps the stored secret: a client (or a model) that edits the
job it read cannot wipe a credential it was never shown.
"""

from __future__ import annotations

from typing import Any

from onthedot.domain.errors import ValidationError

REDACTED = "***"
SECRET_NAMES = frozenset({"authorization", "proxy-authorization", "cookie"})
SECRET_SUFFIXES = ("-token", "-key", "-secret")
LISTED_FIELD = "secret_headers"  # an action's own list of further header names to hide


def is_secret(name: str, listed: frozenset[str]) -> bool:
    lowered = name.lower()
    return lowered in SECRET_NAMES or lowered.endswith(SECRET_SUFFIXES) or lowered in listed


def _listed(action: dict[str, Any]) -> frozenset[str]:
    names = action.get(LISTED_FIELD)
    if not isinstance(names, list):
        return frozenset()
    return frozenset(n.lower() for n in names if isinstance(n, str))


def _headers(action: dict[str, Any]) -> dict[str, Any] | None:
    headers = action.get("headers")
    return headers if isinstance(headers, dict) else None


def redact(action: dict[str, Any]) -> dict[str, Any]:
    """The action as users and models may see it: secret header values replaced."""
    headers = _headers(action)
    if not headers:
        return action
    listed = _listed(action)
    shown = {k: REDACTED if is_secret(k, listed) else v for k, v in headers.items()}
    return action if shown == headers else {**action, "headers": shown}


def restore(changed: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """``changed`` with every ``***`` header value replaced by the stored value of that header
    (names compared case-insensitively). A ``***`` with nothing stored to keep is refused."""
    headers = _headers(changed)
    if not headers or REDACTED not in headers.values():
        return changed
    kept = {k.lower(): v for k, v in (_headers(stored) or {}).items()}
    restored: dict[str, Any] = {}
    for name, value in headers.items():
        if value == REDACTED:
            if name.lower() not in kept:
                raise ValidationError(
                    f"header {name} is {REDACTED!r}, which stands for a stored secret, but the "
                    "job has no such header", field=f"action.headers.{name}",
                    expected="the header's real value (or leave the header out)")
            value = kept[name.lower()]
        restored[name] = value
    return {**changed, "headers": restored}


def check_not_redacted(action: dict[str, Any]) -> None:
    """A new job cannot keep a secret it never had: ``***`` as a secret header's value is
    what a copied view holds, not a credential."""
    headers = _headers(action) or {}
    listed = _listed(action)
    for name, value in headers.items():
        if value == REDACTED and is_secret(name, listed):
            raise ValidationError(
                f"header {name} is {REDACTED!r}: a hidden value copied from a job, not the "
                "secret itself", field=f"action.headers.{name}",
                expected="the header's real value")


def check_listed(action: dict[str, Any]) -> None:
    names = action.get(LISTED_FIELD)
    if names is not None and not (isinstance(names, list)
                                  and all(isinstance(n, str) and n for n in names)):
        raise ValidationError(f"{LISTED_FIELD} must list header names",
                              field=f"action.{LISTED_FIELD}",
                              expected='a list of header names, e.g. ["X-Signature"]')
