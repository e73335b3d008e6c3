"""The egress guard: which destinations an action may reach, and how much of an answer it reads.

Every outbound call an action makes goes through one ``EgressGuard``: HTTP through the client of
``guarded_client`` (its connections are opened by the guard), other protocols (SMTP) by calling
``check_host`` and connecting to the addresses it returns. A user must not be able to make the
server call itself, its neighbours or the cloud's metadata service and read the answer.

How a host is judged (``check_host``)::

    normalise: lower case, percent-decoded, one trailing dot dropped
      |-- a trusted (host, port) of the operator's (the model) -> resolve, admit every address
      |-- a name on the allowlist ------------------------------> resolve, admit every address
      |-- an IP literal in any spelling (2130706433, 0x7f.1, ::ffff:a9fe:a9fe)
      |       refused address (loopback, private, metadata, ...) and not allowlisted -> refuse
      |-- always refused by name (localhost, *.localhost, metadata.google.internal) -> refuse
      v
    resolve once; refuse if ANY address is refused and not allowlisted
      v
    connect to exactly those addresses: no second lookup, so a DNS answer cannot change
    between the check and the connection (rebinding); TLS still verifies the original name

Redirects are followed by the client (at most ``MAX_REDIRECTS``); every hop opens its connection
through the guard, so each one is checked again. Answers are read with ``read_capped``: at most
``MAX_READ_BYTES``, then the connection is closed without downloading the rest.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import unquote

import aiohttp
import httpx
from aiohttp.abc import ResolveResult
from yarl import URL

from onthedot.config import Settings
from onthedot.domain.errors import ActionError, ConfigError, EgressRefusedError

log = logging.getLogger("onthedot.egress")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``; the default asks the system resolver (getaddrinfo)."""

MAX_REDIRECTS = 5
MAX_READ_BYTES = 64 * 1024  # of an answer body, after decompression
ALLOW_SETTING = "ONTHEDOT_EGRESS_ALLOW"

# Cloud instance metadata services. They sit inside refused ranges anyway; listing them keeps
# them refused when an operator allowlists a whole range around them (100.64.0.0/10 for a VPN):
# only an allowlist entry naming exactly one of these admits it.
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack
    "169.254.170.2",  # AWS ECS task metadata
    "169.254.170.23",  # AWS EKS pod identity
    "100.100.100.200",  # Alibaba Cloud
    "fd00:ec2::254",  # AWS IMDS over IPv6
    "fd00:ec2::23",  # AWS EKS pod identity over IPv6
))
# Names that mean "this machine" or "the metadata service" wherever they are resolved.
REFUSED_NAMES = frozenset({
    "localhost", "metadata", "metadata.google.internal", "metadata.goog",
    "instance-data", "instance-data.ec2.internal",
})
REFUSED_SUFFIXES = (".localhost",)  # RFC 6761: every *.localhost name is loopback

_REFUSED_V4 = [(ipaddress.IPv4Network(net), kind) for net, kind in (
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),  # IETF protocol assignments
    ("192.0.2.0/24", "reserved"),  # documentation
    ("192.88.99.0/24", "reserved"),  # old 6to4 relays
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved"),  # benchmarking
    ("198.51.100.0/24", "reserved"),  # documentation
    ("203.0.113.0/24", "reserved"),  # documentation
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # includes the broadcast address 255.255.255.255
)]
_REFUSED_V6 = [(ipaddress.IPv6Network(net), kind) for net, kind in (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "reserved"),  # IPv4-compatible, deprecated since 2006
    ("::ffff:0:0:0/96", "reserved"),  # IPv4-translated (SIIT)
    ("64:ff9b:1::/48", "private"),  # local-use NAT64
    ("100::/64", "reserved"),  # discard
    ("2001::/23", "reserved"),  # IETF protocol assignments, Teredo among them
    ("2001:db8::/32", "reserved"),  # documentation
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)]
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# One part of a BSD-style IPv4 literal, as inet_aton and URL parsers read it: hex, octal, decimal.
_V4_PART = re.compile(r"0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*")


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address a host string denotes by itself, in any spelling a resolver accepts:
    ``127.0.0.1``, ``2130706433``, ``0x7f.1``, ``017700000001``, ``::ffff:127.0.0.1``, ...;
    None for a name that needs a lookup."""
    host = _normalise(host)
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            return None
    return _parse_ipv4(host)


def _parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_V4_PART.fullmatch(p) for p in parts):
        return None
    values = [_v4_part_value(p) for p in parts]
    # a.b.c.d; a.b.c (c fills 16 bits); a.b (b fills 24 bits); a (32 bits)
    last_bits = 8 * (5 - len(values))
    if any(v > 255 for v in values[:-1]) or values[-1] >= 1 << last_bits:
        return None
    number = values[-1]
    for i, value in enumerate(values[:-1]):
        number |= value << (24 - 8 * i)
    return ipaddress.IPv4Address(number)


def _v4_part_value(part: str) -> int:
    if part.startswith("0x"):
        return int(part[2:] or "0", 16)
    if part.startswith("0") and len(part) > 1:
        return int(part, 8)
    return int(part)


def _normalise(host: str) -> str:
    host = unquote(host).strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host[:-1] if host.endswith(".") else host


def address_refusal(address: IPAddress) -> str | None:
    """Why this address may not be called (``"loopback"``, ``"cloud metadata"``, ...), or None.
    IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged by that address."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        return address_refusal(embedded)
    plain = _without_zone(address)
    if plain in METADATA_ADDRESSES:
        return "cloud metadata"
    if isinstance(plain, ipaddress.IPv4Address):
        return next((kind for net, kind in _REFUSED_V4 if plain in net), None)
    return next((kind for net, kind in _REFUSED_V6 if plain in net), None)


def _without_zone(address: IPAddress) -> IPAddress:
    """``fe80::1%eth0`` -> ``fe80::1``: a zone id makes an address compare unequal to its net."""
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        return ipaddress.IPv6Address(int(address))
    return address


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return None


def name_refusal(host: str) -> str | None:
    """Why this name is refused before any lookup (``localhost``, the metadata names), or None."""
    name = _normalise(host)
    if name in REFUSED_NAMES:
        return "loopback" if name == "localhost" else "cloud metadata"
    if name.endswith(REFUSED_SUFFIXES):
        return "loopback"
    return None


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


ALLOW_EXPECTED = ("comma-separated host names, addresses and CIDRs, each optionally with "
                  ":port, e.g. hooks.internal,10.1.0.0/16,127.0.0.1:8080,[::1]:8443")


def _split_port(entry: str) -> tuple[str, int | None]:
    """``host:port``, ``1.2.3.4:port``, ``[v6]:port``, ``10.0.0.0/8:port`` -> (host, port);
    an entry without a port (an IPv6 address or network has colons of its own: written bare
    or in brackets) -> (host, None)."""
    text = entry.strip()
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if bracket and (not rest or rest.startswith(":")):
            return inside, _port_of(entry, rest[1:]) if rest else None
        return text, None  # not a bracketed address: judged (and refused) as it is
    if text.count(":") != 1:
        return text, None
    host, _, port = text.partition(":")
    return host, _port_of(entry, port)


def _port_of(entry: str, text: str) -> int:
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 65535):
        raise ConfigError(f"egress allowlist entry {entry!r} has a bad port",
                          field="egress_allow", expected=ALLOW_EXPECTED)
    return int(text)


class EgressGuard:
    """Decides whether a destination may be called. ``allow`` holds host names and CIDRs (or
    single addresses) that are admitted although they would be refused, each on every port or,
    written ``entry:port``, on that port alone. ``trusted`` holds
    (host, port) endpoints the operator configured for the service itself (the model's API):
    admitted wherever they resolve, and only on that port."""

    def __init__(self, allow: Iterable[str] = (), resolve: Resolver | None = None, *,
                 trusted: Iterable[tuple[str, int]] = ()) -> None:
        # Allowed names and networks, each with the one port it admits (None: every port).
        self._names: set[tuple[str, int | None]] = set()
        self._networks: list[tuple[IPNetwork, int | None]] = []
        for entry in allow:
            self._add_allowed(entry)
        self._trusted = {(_normalise(host), port) for host, port in trusted}
        self._resolve = resolve or system_resolve

    @classmethod
    def from_settings(cls, settings: Settings, resolve: Resolver | None = None, *,
                      trusted: Iterable[tuple[str, int]] = ()) -> EgressGuard:
        """The deployment's guard (``ONTHEDOT_EGRESS_ALLOW``). Give ``trusted`` endpoints only
        to a guard whose client calls them alone (``actions/model.py``): a guard shared with
        users' URLs would let any job reach them."""
        return cls([e for e in settings.egress_allow.split(",") if e.strip()], resolve,
                   trusted=trusted)

    def _add_allowed(self, entry: str) -> None:
        text, port = _split_port(entry)
        address = parse_ip_literal(text) if "/" not in text else None
        try:
            network = ipaddress.ip_network(str(address) if address else text, strict=False)
        except ValueError:
            name = _normalise(text)
            if not re.fullmatch(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?", name):
                raise ConfigError(f"egress allowlist entry {entry!r} is neither a host name "
                                  "nor a CIDR", field="egress_allow",
                                  expected=ALLOW_EXPECTED) from None
            self._names.add((name, port))
            return
        self._networks.append((network, port))

    # --- judging -------------------------------------------------------------------------
    def _name_allowed(self, name: str, port: int | None) -> bool:
        return (name, None) in self._names or (
            (name, port) in self._names if port is not None
            else any(n == name for n, _ in self._names))

    def refusal_without_lookup(self, host: str, port: int | None = None) -> str | None:
        """Why ``host`` (on ``port``; None: on a port not known yet, so an entry for any port
        of it counts) is refused whatever DNS answers (an IP literal in a refused range, or an
        always-refused name), or None if only a lookup can tell. For checks at job creation."""
        if self._name_allowed(_normalise(host), port):
            return None
        address = parse_ip_literal(host)
        if address is not None:
            return self._address_refusal(address, port)
        return name_refusal(host)

    def _address_refusal(self, address: IPAddress, port: int | None) -> str | None:
        reason = address_refusal(address)
        if reason is None:
            return None
        embedded = _embedded_ipv4(address)
        for candidate in (_without_zone(address), *([embedded] if embedded else [])):
            for network, allowed_port in self._networks:
                exact = network.num_addresses == 1
                port_ok = allowed_port is None or port is None or allowed_port == port
                if candidate in network and port_ok and (exact or reason != "cloud metadata"):
                    return None
        return reason

    async def check_host(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` and return the addresses to connect to on ``port``, all of them
        admitted.

        Raises ``EgressRefusedError`` (not worth retrying) for a refused destination and
        ``ActionError`` (worth retrying) when the name does not resolve. Connect to the returned
        addresses, never to ``host`` again: a second lookup could answer differently."""
        name = _normalise(host)
        address = parse_ip_literal(name)
        if (name, port) in self._trusted:
            return [str(address)] if address is not None else await self._lookup(name, port)
        if self._name_allowed(name, port):
            return await self._lookup(name, port)
        if address is not None:
            self._refuse_if(self._address_refusal(address, port), host, address)
            return [str(address)]
        self._refuse_if(name_refusal(name), host, None)
        addresses = await self._lookup(name, port)
        for text in addresses:
            resolved = ipaddress.ip_address(text)
            self._refuse_if(self._address_refusal(resolved, port), host, resolved)
        return addresses

    async def _lookup(self, name: str, port: int) -> list[str]:
        try:
            addresses = await self._resolve(name, port)
        except OSError as exc:
            raise ActionError(f"could not resolve {name}: {exc}") from exc
        if not addresses:
            raise ActionError(f"could not resolve {name}: no addresses")
        return addresses

    @staticmethod
    def _refuse_if(reason: str | None, host: str, address: IPAddress | None) -> None:
        if reason is None:
            return
        # The user learns the kind of address, not which internal address a name has.
        log.warning("egress refused: %s -> %s (%s)", host, address or "-", reason)
        raise EgressRefusedError(f"refused to connect to {host} ({reason} address); an operator "
                                 f"can allow it with {ALLOW_SETTING}")


# --- HTTP ------------------------------------------------------------------------------------
# The client is httpx's (redirects, cookies, per-hop request hooks, exception types) over a
# transport of aiohttp's: httpcore's pool walked every connection several times per request
# and cost 4-6 ms of CPU per webhook call; aiohttp's connector costs a few hundred µs
# (docs/performance.md, "HTTP client").
class _GuardedConnector(aiohttp.TCPConnector):
    """Resolves every host through the guard, IP literals included: aiohttp's own
    ``_resolve_host`` hands an IP literal straight to ``connect`` without asking the resolver,
    so the check sits in that method rather than in an ``AbstractResolver``. aiohttp then
    connects to exactly the addresses returned, with the URL's host name for TLS SNI and
    certificate checks; its DNS cache is off, so every new connection is checked again, and a
    connection is only reused for the (host, port, TLS) it was opened for."""

    def __init__(self, guard: EgressGuard, **options: Any) -> None:
        super().__init__(use_dns_cache=False, **options)
        self._guard = guard

    async def _resolve_host(self, host: str, port: int,
                            traces: Sequence[Any] | None = None) -> list[ResolveResult]:
        addresses = await self._guard.check_host(host, port)
        return [{"hostname": host, "host": address, "port": port,
                 "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                 "proto": 0, "flags": 0} for address in addresses]


# aiohttp's connector has no public hook that sees IP literals; checked so an aiohttp change
# that renames it fails at import instead of quietly skipping the guard for them.
if not callable(getattr(aiohttp.TCPConnector, "_resolve_host", None)):
    raise RuntimeError("this aiohttp version resolves hosts elsewhere; the egress guard needs it")


class GuardedTransport(httpx.AsyncBaseTransport):
    """Sends each request (one hop: httpx follows redirects and calls this per hop) through one
    aiohttp session whose connections the guard opens. The session is made in the event loop
    of the first request and kept, with its keep-alive connections, until ``aclose``."""

    def __init__(self, guard: EgressGuard, ssl_context: ssl.SSLContext,
                 limits: httpx.Limits) -> None:
        self._guard = guard
        self._ssl = ssl_context
        self._limits = limits
        self._session: aiohttp.ClientSession | None = None

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            keepalive = self._limits.keepalive_expiry
            connector = _GuardedConnector(
                self._guard, ssl=self._ssl, limit=self._limits.max_connections or 0,
                limit_per_host=0, keepalive_timeout=keepalive if keepalive is not None else 15.0)
            # No cookies (httpx's jar refuses them already), no proxy from the environment (it
            # would bypass the guard), bodies left encoded (``read_capped`` bounds inflating).
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
                auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None),
                skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"))
            # aiohttp sends a PUT, DELETE or GET again by itself when a kept-alive connection
            # breaks before the answer; the server may have acted on the first. One call is one
            # send, as with httpx: whether to try again is the worker's retry policy. No public
            # switch exists; tests/actions/test_http_pool.py fails if this one stops working.
            self._session._retry_connection = False
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{request.url.scheme}://'.")
        timeouts = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(total=None, connect=timeouts.get("pool"),
                                        sock_connect=timeouts.get("connect"),
                                        sock_read=timeouts.get("read"))
        body = await request.aread()
        try:
            answer = await self._session_now().request(
                request.method, URL(str(request.url), encoded=True),
                headers=[(k.decode("latin-1"), v.decode("latin-1"))
                         for k, v in request.headers.raw],
                data=body or None, allow_redirects=False, timeout=timeout)
        except aiohttp.ClientConnectorCertificateError as exc:
            raise httpx.ConnectError(str(exc.certificate_error), request=request) from exc
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(_connect_failure(exc), request=request) from exc
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            kind = httpx.ConnectTimeout if isinstance(exc, aiohttp.ConnectionTimeoutError) \
                else httpx.ReadTimeout
            raise kind("", request=request) from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request) from exc
        except aiohttp.ClientResponseError as exc:  # the answer's head could not be parsed
            raise httpx.RemoteProtocolError(_one_line(exc.message), request=request) from exc
        except aiohttp.ClientOSError as exc:  # the connection broke while the request was sent
            raise httpx.WriteError(str(exc), request=request) from exc
        except aiohttp.ClientError as exc:
            raise httpx.NetworkError(f"{type(exc).__name__}: {exc}", request=request) from exc
        return httpx.Response(
            status_code=answer.status, headers=[(k, v) for k, v in answer.raw_headers],
            stream=_AnswerStream(answer, request),
            extensions={"http_version": b"HTTP/1.1",
                        "reason_phrase": (answer.reason or "").encode("latin-1", "replace")})

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _connect_failure(exc: aiohttp.ClientConnectorError) -> str:
    """What httpx said for the same failure: the TLS error's own text, or that every address
    refused."""
    if isinstance(exc, aiohttp.ClientSSLError):
        return str(exc.os_error)
    return "All connection attempts failed"


def _one_line(text: str) -> str:
    return " ".join(text.split())  # aiohttp's parse errors draw a caret under the bad byte


class _AnswerStream(httpx.AsyncByteStream):
    """The answer's body as it arrives. Closed before its end (``read_capped`` stopped at the
    cap), the connection is dropped instead of being read to the end for reuse."""

    def __init__(self, answer: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._answer = answer
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._answer.content.iter_any():
                yield chunk
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise httpx.ReadTimeout("", request=self._request) from exc
        except aiohttp.ClientPayloadError as exc:
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body",
                request=self._request) from exc
        except aiohttp.ClientOSError as exc:
            raise httpx.ReadError(str(exc), request=self._request) from exc
        except aiohttp.ClientError as exc:
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=self._request) from exc

    async def aclose(self) -> None:
        if self._answer.content.at_eof():
            self._answer.release()
        else:
            self._answer.close()


def guarded_transport(guard: EgressGuard, *, verify: ssl.SSLContext | bool = True,
                      limits: httpx.Limits | None = None) -> GuardedTransport:
    """An httpx transport whose connections are opened through ``guard``. ``verify``: True
    (the system's CAs), or an ``ssl.SSLContext`` (one trusting a test CA)."""
    limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
    ssl_context = verify if isinstance(verify, ssl.SSLContext) \
        else httpx.create_ssl_context(verify=verify)
    return GuardedTransport(guard, ssl_context, limits)


# Request extension naming the secret headers of a request and the origin they belong to;
# ``_drop_secrets_across_origins`` reads it on every hop of a redirect chain.
SECRETS_EXTENSION = "onthedot_redirect_secrets"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme)


def redirect_secrets(url: str, names: Iterable[str]) -> dict[str, Any]:
    """``extensions=`` of a request whose headers ``names`` are credentials for ``url``'s
    origin alone: a redirect to another origin (scheme, host or port) drops them."""
    return {SECRETS_EXTENSION: (_origin(httpx.URL(url)), tuple(names))}


async def _drop_secrets_across_origins(request: httpx.Request) -> None:
    """httpx itself drops only ``Authorization`` (and ``Cookie``) on a cross-origin redirect;
    an ``X-Api-Key`` would follow the redirect to whoever the endpoint names. Each hop's
    headers are copied from the hop before, so once dropped they stay dropped."""
    held = request.extensions.get(SECRETS_EXTENSION)
    if held is None:
        return
    origin, names = held
    if _origin(request.url) != origin:
        for name in names:
            request.headers.pop(name, None)


def guarded_client(guard: EgressGuard, *, verify: ssl.SSLContext | bool = True,
                   follow_redirects: bool = True,
                   limits: httpx.Limits | None = None) -> httpx.AsyncClient:
    """The HTTP client for actions: every connection checked, redirects followed (each hop
    checked again; ``follow_redirects=False`` for an API that never redirects), no proxy taken
    from the environment (it would bypass the guard), uncompressed answers asked for so
    ``read_capped`` bounds what is held in memory, secret headers dropped on a redirect to
    another origin (``redirect_secrets``), and no cookies kept: one client serves every
    user's runs, and a cookie one user's server sets must not travel with another user's
    request. ``limits``: the connection pool (the worker sizes it to its concurrency)."""
    return httpx.AsyncClient(transport=guarded_transport(guard, verify=verify, limits=limits),
                             follow_redirects=follow_redirects, max_redirects=MAX_REDIRECTS,
                             trust_env=False,
                             headers={"Accept-Encoding": "identity"},
                             event_hooks={"request": [_drop_secrets_across_origins]},
                             cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])))


@dataclass(frozen=True)
class CappedBody:
    data: bytes
    complete: bool  # False: the answer went on past the cap and the rest was not read


async def read_capped(response: httpx.Response, max_bytes: int = MAX_READ_BYTES) -> CappedBody:
    """Read at most ``max_bytes`` of a streamed answer. The caller closes the response (leaving
    ``client.stream(...)``), which drops the connection instead of downloading the rest.
    gzip/deflate are decoded here with a bound: a small compressed answer can be huge."""
    coding = response.headers.get("content-encoding", "").strip().lower()
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 32) if coding in ("gzip", "x-gzip",
                                                                    "deflate") else None
    data = bytearray()
    raw_bytes = 0
    async for chunk in response.aiter_raw():
        raw_bytes += len(chunk)
        if inflate is None:
            data += chunk
        else:
            try:
                data += inflate.decompress(chunk, max_bytes + 1 - len(data))
            except zlib.error:
                return CappedBody(bytes(data), complete=False)
        if len(data) > max_bytes or raw_bytes > max_bytes:
            return CappedBody(bytes(data[:max_bytes]), complete=False)
    return CappedBody(bytes(data), complete=True)


def body_text(response: httpx.Response, body: CappedBody) -> str:
    """The body as text, in the answer's charset (UTF-8 if none or unknown)."""
    try:
        return body.data.decode(response.charset_encoding or "utf-8", errors="replace")
    except LookupError:
        return body.data.decode("utf-8", errors="replace")
