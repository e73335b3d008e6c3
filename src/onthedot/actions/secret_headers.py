"""Secret headers of an action (a webhook's ``Authorization``, ``X-Api-Key``, ...): stored and
sent, never shown again (docs/actions.md, "Secret headers").

Every view of a job (REST, MCP, chat) shows such a header with the value ``***``. A change that
sends ``***`` back for a header keeps the stored secret: a client (or a model) that edits the
job it read cannot wipe a credential it was never shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from onthedot.domain.errors import ValidationError

REDACTED = "***"
# A word of a secret value at least this long is hidden on its own too: a server that echoes
# "Bearer <token>" back may quote only the token.
SCRUB_WORD_CHARS = 8
SCRUB_MAX_DEPTH = 64  # of an output walked for echoed secrets; deeper parts are left as they are
SECRET_NAMES = frozenset({"authorization", "proxy-authorization", "cookie"})
SECRET_SUFFIXES = ("-token", "-key", "-secret")
LISTED_FIELD = "secret_headers"  # an action's own list of further header names to hide


def is_secret(name: str, listed: frozenset[str]) -> bool:
    lowered = name.lower()
    return lowered in SECRET_NAMES or lowered.endswith(SECRET_SUFFIXES) or lowered in listed


def listed_names(action: dict[str, Any]) -> frozenset[str]:
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
    listed = listed_names(action)
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
    listed = listed_names(action)
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


def secret_values(headers: Mapping[str, str], listed: Iterable[str] = ()) -> list[str]:
    """The values of the secret headers among ``headers``, as stored."""
    names = frozenset(n.lower() for n in listed)
    return [v for k, v in headers.items() if isinstance(v, str) and is_secret(k, names)]


def secret_values_of(action: dict[str, Any]) -> list[str]:
    return secret_values(_headers(action) or {}, listed_names(action))


def _spellings(secret: str) -> set[str]:
    """The ways an error text can carry a value: as given, without its surrounding white space
    (a trailing newline or space must not make it escape), escaped as Python writes a str or a
    bytes (``'...\\n'``, ``b'...'``, how HTTP libraries quote a header they refuse), and its
    long words alone."""
    forms = {secret, secret.strip()}
    for form in list(forms):
        forms.add(repr(form)[1:-1])
        forms.add(repr(form.encode("utf-8", "backslashreplace"))[2:-1])
    forms.update(w for w in secret.split() if len(w) >= SCRUB_WORD_CHARS)
    return {f for f in forms if f.strip()}


def _forms(secrets: Iterable[str]) -> list[str]:
    forms = set[str]().union(*(_spellings(s) for s in secrets))
    return sorted(forms, key=len, reverse=True)  # longest first: no half-hidden value


def _replace(text: str, forms: list[str]) -> str:
    for form in forms:
        text = text.replace(form, REDACTED)
    return text


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every spelling of every secret replaced by ``***``."""
    return _replace(text, _forms(secrets))


def scrub_value(value: Any, secrets: Iterable[str]) -> Any:
    """A JSON value (an action's output) with every string and key scrubbed."""
    forms = _forms(secrets)
    return _scrub_walk(value, forms, 0) if forms else value


def _scrub_walk(value: Any, forms: list[str], depth: int) -> Any:
    if depth > SCRUB_MAX_DEPTH:
        return value
    if isinstance(value, str):
        return _replace(value, forms)
    if isinstance(value, list):
        return [_scrub_walk(v, forms, depth + 1) for v in value]
    if isinstance(value, dict):
        return {_replace(k, forms) if isinstance(k, str) else k:
                _scrub_walk(v, forms, depth + 1) for k, v in value.items()}
    return value
