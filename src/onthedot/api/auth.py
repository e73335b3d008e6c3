"""Who is calling: bearer tokens, stored only as their SHA-256, mapped to a user id.

Modes, decided per request from the store (so a token created while the server runs takes
effect at once):

* tokens exist: every request needs ``Authorization: Bearer <token>``; a missing or unknown token
  is 401;
* no token exists and the server is bound to loopback: every request acts as the single user
  ``local`` (a warning is logged at startup);
* no token exists and the server is bound elsewhere: refuse to start (``check_bind_allowed``).

The REST API and the MCP server share ``resolve_user``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import secrets
from urllib.parse import urlsplit

from onthedot.config import Settings
from onthedot.domain.errors import AuthError, ConfigError, ForbiddenError, ValidationError
from onthedot.store.base import Store

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
    if authorization:
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError("the Authorization header must be 'Bearer <token>'",
                            field="Authorization", expected="Bearer <token>")
        user = await store.token_user(hash_token(token))
        if user is None:
            raise AuthError("unknown or revoked token", code="invalid_token",
                            field="Authorization",
                            expected="a token printed by `onthedot token create`")
        return user
    if not await store.tokens_exist() and is_loopback(settings.host):
        return LOCAL_USER
    raise AuthError("a bearer token is required", code="missing_token", field="Authorization",
                    expected="Authorization: Bearer <token>")


async def resolve_request_user(store: Store, settings: Settings, authorization: str | None,
                               host: str, origin: str | None) -> str:
    """``resolve_user`` for an HTTP request. In token-less local mode the request must also be
    addressed to a loopback host (and come from a loopback origin, if it names one): otherwise
    a web page that rebinds its DNS name to 127.0.0.1 could act as ``local``."""
    user = await resolve_user(store, settings, authorization)
    if user == LOCAL_USER and not authorization and not _loopback_request(host, origin):
        raise ForbiddenError("without a token, only requests addressed to a loopback host are "
                             "served", code="untrusted_origin", field="Host",
                             expected="Host and Origin on 127.0.0.1, localhost or ::1, or "
                                      "Authorization: Bearer <token>")
    return user


def _loopback_request(host: str, origin: str | None) -> bool:
    origin_host = urlsplit(origin).hostname if origin else None
    return is_loopback(host) and (origin is None or is_loopback(origin_host or ""))
