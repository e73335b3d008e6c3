"""Who is calling: bearer tokens, stored only as their SHA-256, mapped to a user id.

Modes, decided per request from the store (so a token created while the server runs takes
effect at once):

* tokens exist: every request needs ``Authorization: Bearer <token>``; a missing or unknown token
  is 401;
* no token exists and the server is bound to loopback: every request acts as the single user
  ``local`` (a warning is logged at startup);
* no token exists and the server is bound elsewhere: refuse to start (``check_bind_allowed``).

The REST API and the MCP server share ``resolve_principal``: who calls, and with which scopes.
A token is read from the store on every request (no cache), so a revoked or expired token is
refused by the very next request. Scopes: ``read``; ``write`` (implies read; the default);
``admin`` (implies both, and may read other users' dead letters). The token-less ``local`` user
has every scope.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote_plus, urlsplit

from onthedot.config import Settings
from onthedot.domain.errors import AuthError, ConfigError, ForbiddenError, ValidationError
from onthedot.store.base import ApiToken, Store

LOCAL_USER = "local"
TOKEN_PREFIX = "otd_"  # makes a leaked token easy to recognise (and to scan for)
TOKEN_RANDOM_BYTES = 32
USER_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_RANDOM_BYTES)


def check_user_id(user_id: str) -> str:
    if not USER_ID_PATTERN.match(user_id):
        raise ValidationError(f"invalid user name {user_id!r}", field="user",
                              expected="1-100 characters: letters, digits and . _ @ + -, "
                                       "starting with a letter or digit")
    return user_id


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind_allowed(host: str, tokens_exist: bool) -> None:
    """Refuse to serve a non-loopback address without any token: everyone could act as
    ``local``."""
    if tokens_exist or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to listen on {host} without API tokens: anyone who can reach it would "
        f"act as one shared user; create one with `onthedot token create --user NAME` "
        f"or bind to 127.0.0.1",
        field="host", expected="127.0.0.1 / ::1, or at least one token")


async def resolve_user(store: Store, settings: Settings, authorization: str | None) -> str:
    """The user id a request acts as, from its ``Authorization`` header value."""
    return (await resolve_principal(store, settings, authorization)).user_id


async def resolve_request_user(store: Store, settings: Settings, authorization: str | None,
                               host: str, origin: str | None) -> str:
    """``resolve_request_principal``'s user id."""
    principal = await resolve_request_principal(store, settings, authorization, host, origin)
    return principal.user_id


async def resolve_principal(store: Store, settings: Settings, authorization: str | None,
                            now: datetime | None = None) -> Principal:
    """Who a request acts as, and with which scopes, from its ``Authorization`` header."""
    now = now or datetime.now(UTC)
    if authorization:
        scheme, _, secret = authorization.strip().partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret:
            raise AuthError("the Authorization header must be 'Bearer <token>'",
                            field="Authorization", expected="Bearer <token>")
        token = await store.token_find(hash_token(secret), now)
        if token is None:
            raise AuthError("unknown, revoked or expired token", code="invalid_token",
                            field="Authorization",
                            expected="a live token printed by `onthedot token create` or "
                                     "`onthedot token rotate`")
        if token.last_used_at is None or token.last_used_at < now - LAST_USED_RESOLUTION:
            await store.token_touch(token.token_id, now, now - LAST_USED_RESOLUTION)
        return Principal.of(token)
    if not await store.tokens_exist() and is_loopback(settings.host):
        return Principal(LOCAL_USER, frozenset(SCOPES))
    raise AuthError("a bearer token is required", code="missing_token", field="Authorization",
                    expected="Authorization: Bearer <token>")


async def resolve_request_principal(store: Store, settings: Settings,
                                    authorization: str | None, host: str, origin: str | None,
                                    now: datetime | None = None) -> Principal:
    """``resolve_principal`` for an HTTP request. In token-less local mode the request must
    also be addressed to a loopback host (and come from a loopback origin, if it names one):
    otherwise a web page that rebinds its DNS name to 127.0.0.1 could act as ``local``."""
    principal = await resolve_principal(store, settings, authorization, now)
    if (principal.token_id is None and not authorization
            and not _loopback_request(host, origin)):
        raise ForbiddenError("without a token, only requests addressed to a loopback host are "
                             "served", code="untrusted_origin", field="Host",
                             expected="Host and Origin on 127.0.0.1, localhost or ::1, or "
                                      "Authorization: Bearer <token>")
    return principal


# --- scopes (0007) ---------------------------------------------------------------------------
SCOPES = ("read", "write", "admin")
DEFAULT_SCOPES = ("write",)
# What each scope grants: write implies read, admin implies both.
_IMPLIED = {"read": {"read"}, "write": {"read", "write"}, "admin": {"read", "write", "admin"}}
LAST_USED_RESOLUTION = timedelta(minutes=1)  # a token's last use is written at most this often
TOKEN_ID_PREFIX = "tok_"
TOKEN_ID_RANDOM_BYTES = 5  # 10 hex digits, like the ids derived for tokens made before ids


@dataclass(frozen=True)
class Principal:
    user_id: str
    scopes: frozenset[str]  # effective: implied scopes included
    token_id: str | None = None  # None: the token-less local user

    @classmethod
    def of(cls, token: ApiToken) -> Principal:
        return cls(token.user_id, effective_scopes(token.scopes), token.token_id)

    def require(self, scope: str, what: str) -> None:
        if scope not in self.scopes:
            raise ForbiddenError(f"this token may not {what}", code="insufficient_scope",
                                 field="Authorization",
                                 expected=f"a token with the {scope!r} scope "
                                          f"(`onthedot token create --scope {scope}`)")


def effective_scopes(scopes: tuple[str, ...] | list[str]) -> frozenset[str]:
    return frozenset().union(*(_IMPLIED.get(s, set()) for s in scopes))


def check_scopes(scopes: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise ValidationError(f"unknown scope {unknown[0]!r}" if unknown else "no scope given",
                              code="invalid_scope", field="scope",
                              expected="read, write or admin (write implies read, admin "
                                       "implies both)")
    return tuple(s for s in SCOPES if s in scopes)  # canonical order, no repeats


def new_token_id() -> str:
    return TOKEN_ID_PREFIX + secrets.token_hex(TOKEN_ID_RANDOM_BYTES)


def _loopback_request(host: str, origin: str | None) -> bool:
    origin_host = urlsplit(origin).hostname if origin else None
    return is_loopback(host) and (origin is None or is_loopback(origin_host or ""))


# --- credentials in the access log ------------------------------------------------------------
# Query parameters that carry a credential, by name (lower case, after percent-decoding). A
# token belongs in the Authorization header and a query one is refused, but the access log
# writes the request line before anyone refuses anything.
QUERY_SECRET_NAMES = frozenset({"token", "access_token", "id_token", "refresh_token", "auth",
                                "authorization", "bearer", "key", "api_key", "apikey",
                                "password", "passwd", "secret", "client_secret", "signature",
                                "sig", "jwt", "session"})
QUERY_SECRET_SUFFIXES = ("_token", "-token", "_key", "-key", "_secret", "-secret", "password")
QUERY_NOT_SECRET = frozenset({"page_token", "next_page_token"})  # our pagination cursors
_OUR_TOKEN = re.compile(re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_%-]+")
_QUERY_PAIR = re.compile(r"([^&;=]*)(=?)([^&;]*)")


def _secret_query_name(name: str) -> bool:
    lowered = unquote_plus(name).strip().lower()
    return lowered not in QUERY_NOT_SECRET and (
        lowered in QUERY_SECRET_NAMES or lowered.endswith(QUERY_SECRET_SUFFIXES))


def redact_request_target(target: str) -> str:
    """A request line's path and query as the access log may keep them: the value of every
    credential-named query parameter is ``***``, and so is anything shaped like one of our
    tokens (``otd_...``) wherever it appears."""
    path, question, query = target.partition("?")
    if question:
        query = _QUERY_PAIR.sub(
            lambda m: f"{m[1]}{m[2]}***" if m[2] and _secret_query_name(m[1]) else m[0], query)
    return _OUR_TOKEN.sub(TOKEN_PREFIX + "***", path + question + query)


class AccessLogRedactor(logging.Filter):
    """On uvicorn's access logger: its records carry (client, method, target, HTTP version,
    status) as arguments; the target is redacted (``redact_request_target``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_request_target(args[2]), *args[3:])
        return True
