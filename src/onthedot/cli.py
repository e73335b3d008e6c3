"""The ``onthedot`` command line: one entry point for the server roles, administration and a
small client of the REST API.

Server side: ``serve`` (API + every background role), ``api``, ``watcher``, ``worker``,
``recurring``, ``rescuer``, ``migrate``, ``token create``, ``webhook-secret create``, ``mcp``
(MCP over stdio). Offline: ``parse``.
Client side: ``jobs create|update|list|get|pause|resume|delete|run [--wait]|runs|import``,
``dead-letters list|redrive``, ``inbox`` (and ``inbox read ID``) and ``chat`` against a running
server; each takes ``--json`` for the API's own JSON.

Every error ends here as ONE line on stderr and exit code 2 (``main`` is the single handler);
tracebacks go to the log only for unexpected server-side failures. Adding a command is one
decorated function on ``cli`` (or on a group below).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click
import httpx
import pydantic

from onthedot import __version__, logs
from onthedot.config import Settings, load_settings
from onthedot.domain.errors import ConfigError, OnTheDotError
from onthedot.store.base import ApiToken, Migrated, Store

log = logging.getLogger("onthedot")

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
DEFAULT_URL = "http://127.0.0.1:8080"
CLIENT_TIMEOUT_SECONDS = 30.0
LISTEN_BACKLOG = 2048  # uvicorn's default
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


# --- entry point -----------------------------------------------------------------------------
@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="onthedot")
def cli() -> None:
    """onthedot: scheduled tasks that fire on time, are never lost and are safe to retry."""


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``onthedot``: run the CLI and map every error to one line + exit 2."""
    try:
        result = cli.main(args=None if argv is None else list(argv), prog_name="onthedot",
                          standalone_mode=False)
    except click.ClickException as exc:
        return _fail(exc.format_message())
    except click.Abort:
        return _fail("aborted", EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except OnTheDotError as exc:
        return _fail(_error_line(exc))
    except pydantic.ValidationError as exc:
        return _fail(_settings_error_line(exc))
    except Exception as exc:  # the promise: never a traceback on the terminal
        log.debug("unexpected error", exc_info=exc)
        return _fail(f"unexpected {type(exc).__name__}: {exc}")
    return result if isinstance(result, int) else 0


def _fail(message: str, code: int = EXIT_ERROR) -> int:
    click.echo(f"onthedot: error: {' '.join(message.split())}", err=True)
    return code


def _error_line(exc: OnTheDotError) -> str:
    line = exc.message
    if exc.field:
        line += f" (field {exc.field}"
        line += f"; expected {exc.expected})" if exc.expected else ")"
    return line


def _settings_error_line(exc: pydantic.ValidationError) -> str:
    first = exc.errors()[0]
    name = ".".join(str(p) for p in first["loc"]) or "settings"
    return f"invalid setting {name} (ONTHEDOT_{name.upper()}): {first['msg']}"


# --- settings and server processes -----------------------------------------------------------
def _default(name: str) -> object:
    """A setting's default as config.py declares it: the help texts quote it from there, so
    they cannot drift from it (tests/cli/test_help_defaults.py)."""
    return Settings.model_fields[name].default


def _store_options(fn: F) -> F:
    fn = click.option("--queue-url", default=None, help="nats://host:4222 (default: a table "
                      "queue in the store's own database, SQLite or PostgreSQL) "
                      "[env ONTHEDOT_QUEUE_URL]")(fn)
    return click.option("--database-url", default=None, help="sqlite:///path.db or "
                        f"postgresql://user@host/db (default {_default('database_url')}) "
                        "[env ONTHEDOT_DATABASE_URL]")(fn)


def _http_options(fn: F) -> F:
    fn = click.option("--port", type=int, default=None, help=f"port (default "
                      f"{_default('port')}; 0 picks a free one) [env ONTHEDOT_PORT]")(fn)
    return click.option("--host", default=None, help=f"bind address (default "
                        f"{_default('host')}) [env ONTHEDOT_HOST]")(fn)


def _workers_option(fn: F) -> F:
    return click.option("--workers", type=int, default=None, help="runs executed concurrently "
                        f"by this process (default {_default('workers')}) "
                        "[env ONTHEDOT_WORKERS]")(fn)


def _processes_option(fn: F) -> F:
    return click.option("--processes", type=int, default=None, help="processes sharing the "
                        "work (and the API port): a supervisor starts this many and restarts "
                        "one that dies; default: the cores this process may use, at most 2 "
                        "on SQLite [env ONTHEDOT_PROCESSES]")(fn)


def _settings(**flags: Any) -> Settings:
    settings = load_settings(**flags)
    # ONTHEDOT_LOG_FORMAT, and httpx/httpcore held at WARNING: see onthedot/logs.py
    logs.configure(settings.log_level, settings.log_format, settings.log_quiet,
                   settings.log_repeat_seconds)
    return settings


@cli.command()
@_http_options
@_store_options
@_workers_option
@_processes_option
def serve(**flags: Any) -> int:
    """Run the API and every background role (watcher, workers, recurring, rescuer): in one
    process, or in --processes copies sharing the API port."""
    from onthedot.runtime import ROLES

    return _run_server(_settings(**flags), ROLES, http=True)


@cli.command()
@_http_options
@_store_options
@_processes_option
def api(**flags: Any) -> int:
    """Run the REST API only (background roles run elsewhere)."""
    return _run_server(_settings(**flags), (), http=True)


def serve_roles(settings: Settings, roles: Sequence[str]) -> Coroutine[Any, Any, None]:
    """Role-only processes: run until SIGTERM/SIGINT, then stop with the grace period."""
    from onthedot.runtime import serve_roles as run

    return run(settings, roles)


@cli.command()
@_store_options
def watcher(**flags: Any) -> None:
    """Run the watcher only: publish due runs of the shards it owns."""
    asyncio.run(serve_roles(_settings(**flags), ("watcher",)))


@cli.command()
@_store_options
@_workers_option
@_processes_option
def worker(**flags: Any) -> int:
    """Run a worker only: execute runs from the queue (in --processes processes)."""
    return _run_server(_settings(**flags), ("worker",), http=False)


@cli.command()
@_store_options
def recurring(**flags: Any) -> None:
    """Run the recurring watcher only: schedule the next occurrence of recurring jobs."""
    asyncio.run(serve_roles(_settings(**flags), ("recurring",)))


@cli.command()
@_store_options
def rescuer(**flags: Any) -> None:
    """Run the rescuer only: hand back stranded runs (retries that fell due, runs whose worker
    or message was lost) and prune history past retention."""
    asyncio.run(serve_roles(_settings(**flags), ("rescuer",)))


@cli.command()
@_store_options
def migrate(**flags: Any) -> None:
    """Create or upgrade the database schema, then exit."""
    settings = _settings(**flags)
    done = asyncio.run(_migrate(settings))
    click.echo(migrated_words(done, settings.database_url))


def migrated_words(done: Migrated, database_url: str) -> str:
    """'schema version 3 -> 5 (applied 4, 5)', or that it already was up to date."""
    if not done.applied:
        return f"database is up to date at schema version {done.after}: {database_url}"
    versions = ", ".join(f"{v:04d}" for v in done.applied)
    return (f"database migrated from schema version {done.before} to {done.after} "
            f"(applied {versions}): {database_url}")


@cli.group()
def token() -> None:
    """API tokens (only their SHA-256 is stored)."""


@token.command("create")
@click.option("--user", "user_id", required=True, help="the user this token acts as")
@click.option("--scope", "scopes", multiple=True, default=("write",), show_default=True,
              type=click.Choice(["read", "write", "admin"]), help="read; write (implies "
              "read); admin (implies both; reads other users' dead letters). Repeatable")
@click.option("--expires-in", metavar="DURATION", help="the token stops working after this "
              "long: 90m, 12h, 30d, 8w")
@click.option("--expires-at", metavar="ISO", help="the token stops working at this time "
              "(ISO 8601; without an offset: UTC)")
@_store_options
def token_create(user_id: str, scopes: tuple[str, ...], expires_in: str | None,
                 expires_at: str | None, **flags: Any) -> None:
    """Print a new token for USER; it cannot be shown again. Its id (for `token list`,
    `revoke`, `rotate`) is printed on stderr."""
    from onthedot.api.auth import check_scopes, check_user_id, new_token_id

    check_user_id(user_id)
    now = datetime.now(UTC)
    made = ApiToken(token_id=new_token_id(), user_id=user_id, scopes=check_scopes(scopes),
                    created_at=now, expires_at=_expiry(now, expires_in, expires_at))
    secret, local_jobs = asyncio.run(_token_create(_settings(**flags), made))
    click.echo(secret)
    expiry = f", expires {_when(made.expires_at)}" if made.expires_at else ""
    click.echo(f"token {made.token_id} for user {user_id!r} created (scopes: "
               f"{' '.join(made.scopes)}{expiry}); store it now, it cannot be shown again",
               err=True)
    if local_jobs:
        click.echo(f"note: {local_jobs} job(s) on this database belong to the user 'local' "
                   f"(made without a token) and {user_id!r} will not see them; to keep them, "
                   f"use a token made with --user local, or move them with `onthedot jobs "
                   f"reassign --from local --to {user_id}`", err=True)


@token.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@_store_options
def token_list(as_json: bool, **flags: Any) -> None:
    """Every token (revoked ones too): id, user, scopes, dates. Never a secret."""
    async def listed(store: Store) -> list[ApiToken]:
        return await store.tokens_list()

    now = datetime.now(UTC)
    tokens = asyncio.run(_with_store(_settings(**flags), listed))
    if as_json:
        _echo_json([{"token_id": t.token_id, "user": t.user_id, "scopes": list(t.scopes),
                     "created_at": _when(t.created_at), "expires_at": _when(t.expires_at),
                     "last_used_at": _when(t.last_used_at),
                     "revoked_at": _when(t.revoked_at), "status": _token_status(t, now)}
                    for t in tokens])
        return
    _echo_table([[t.token_id, t.user_id, " ".join(t.scopes), _when(t.created_at) or "-",
                  _when(t.expires_at) or "never", _when(t.last_used_at) or "-",
                  _token_status(t, now)] for t in tokens],
                ["TOKEN_ID", "USER", "SCOPES", "CREATED", "EXPIRES", "LAST_USED", "STATUS"])


@token.command("revoke")
@click.argument("token_id")
@_store_options
def token_revoke(token_id: str, **flags: Any) -> None:
    """Revoke TOKEN_ID: the very next request with it is answered 401."""
    async def revoke(store: Store) -> bool:
        return await store.token_revoke(token_id, datetime.now(UTC))

    if not asyncio.run(_with_store(_settings(**flags), revoke)):
        raise _no_live_token(token_id)
    click.echo(f"token {token_id} revoked")


@token.command("rotate")
@click.argument("token_id")
@_store_options
def token_rotate(token_id: str, **flags: Any) -> None:
    """Give TOKEN_ID a new secret (same id, user, scopes and expiry) and print it once; the
    old secret stops working at once."""
    from onthedot.api.auth import hash_token, new_token

    secret = new_token()

    async def rotate(store: Store) -> ApiToken | None:
        return await store.token_rotate(token_id, hash_token(secret))

    rotated = asyncio.run(_with_store(_settings(**flags), rotate))
    if rotated is None:
        raise _no_live_token(token_id)
    click.echo(secret)
    click.echo(f"token {token_id} of user {rotated.user_id!r} rotated: the old secret no "
               "longer works; store the new one now, it cannot be shown again", err=True)


EXPIRY_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}  # seconds per unit


def _expiry(now: datetime, expires_in: str | None, expires_at: str | None) -> datetime | None:
    if expires_in is not None and expires_at is not None:
        raise click.UsageError("give --expires-in or --expires-at, not both")
    if expires_in is not None:
        text = expires_in.strip().lower()
        unit = EXPIRY_UNITS.get(text[-1:])
        if unit is None or not text[:-1].isdigit() or int(text[:-1]) <= 0:
            raise click.BadParameter(f"{expires_in!r} is not a duration; expected a whole "
                                     "number and m, h, d or w: 90m, 12h, 30d, 8w",
                                     param_hint="--expires-in")
        try:
            return now + timedelta(seconds=int(text[:-1]) * unit)
        except OverflowError:
            raise click.BadParameter(f"{expires_in!r} is too far away",
                                     param_hint="--expires-in") from None
    if expires_at is not None:
        try:
            at = datetime.fromisoformat(expires_at)
        except ValueError:
            raise click.BadParameter(f"{expires_at!r} is not an ISO 8601 time; expected e.g. "
                                     "2027-01-01T00:00:00+00:00", param_hint="--expires-at"
                                     ) from None
        at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
        if at <= now:
            raise click.BadParameter(f"{expires_at} is not in the future",
                                     param_hint="--expires-at")
        return at
    return None


def _when(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(UTC).isoformat(timespec="seconds")


def _token_status(token: ApiToken, now: datetime) -> str:
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "expired"
    return "active"


def _no_live_token(token_id: str) -> OnTheDotError:
    from onthedot.domain.errors import NotFoundError

    return NotFoundError(f"no token {token_id} that is not revoked", field="TOKEN_ID",
                         expected="an id listed by `onthedot token list` with status active "
                                  "or expired")


async def _token_create(settings: Settings, made: ApiToken) -> tuple[str, int]:
    """Store the token; the secret, and the number of jobs of ``local`` when this is the
    database's first token for another user (their owner then stops being reachable)."""
    from onthedot.api.auth import LOCAL_USER, hash_token, new_token

    secret = new_token()

    async def create(store: Store) -> int:
        first = not await store.tokens_exist()
        await store.token_create(made, hash_token(secret))
        if not first or made.user_id == LOCAL_USER:
            return 0
        return await store.jobs_count_of_user(LOCAL_USER)

    return secret, await _with_store(settings, create)


async def _with_store(settings: Settings, use: Callable[[Store], Coroutine[Any, Any, T]]) -> T:
    """Run ``use`` with the configured store, migrated (administration commands talk to the
    database directly, not to a server)."""
    from onthedot.runtime import build_store

    store = build_store(settings)
    try:
        await store.migrate()
        return await use(store)
    finally:
        await store.close()


@cli.group("webhook-secret")
def webhook_secret() -> None:
    """Secrets that sign the webhooks sent for a user (X-Onthedot-Signature)."""


@webhook_secret.command("create")
@click.option("--user", "user_id", required=True, help="the user whose webhooks it signs")
@_store_options
def webhook_secret_create(user_id: str, **flags: Any) -> None:
    """Print a new signing secret for USER; it signs from now on (the previous one also signs
    for 24 hours, so receivers can switch). It cannot be shown again."""
    from onthedot.api.auth import check_user_id

    check_user_id(user_id)
    secret = asyncio.run(_webhook_secret_add(_settings(**flags), user_id))
    click.echo(secret)
    click.echo(f"webhook secret for user {user_id!r} created; store it now, it cannot be shown "
               "again", err=True)


@cli.command("mcp")
@click.option("--user", "user_id", envvar="ONTHEDOT_MCP_USER", default="local",
              show_default=True, show_envvar=True, help="the user every tool call acts as")
@_store_options
def mcp_stdio(user_id: str, **flags: Any) -> None:
    """Serve the MCP tools over stdin/stdout for a local MCP client. Only the service runs
    here: jobs are executed by `onthedot serve` (or watcher + worker) on the same database."""
    from onthedot.api.auth import check_user_id
    from onthedot.mcp.server import serve_stdio

    check_user_id(user_id)
    settings = _settings(**flags)
    if settings.log_level.upper() != "DEBUG":
        logging.getLogger("mcp").setLevel(logging.WARNING)  # one INFO line per request
    asyncio.run(serve_stdio(settings, user_id))


@cli.command("parse")
@click.argument("text")
@click.option("--now", "now_text", metavar="ISO", help="read TEXT as if it were this instant "
              "(default: now); without an offset it is read in --timezone")
@click.option("--timezone", metavar="TZ", help="the user's IANA timezone (default: "
              "ONTHEDOT_DEFAULT_TIMEZONE, else UTC)")
@click.option("--json", "as_json", is_flag=True, help="print JSON (the only form it prints; "
              "accepted like on every command)")
def parse(text: str, now_text: str | None, timezone: str | None, as_json: bool) -> None:
    """Read a scheduling request offline ("每天早上八點幫我總結財經新聞", "every weekday at 9am")
    and print the job it means as JSON, with its next three runs."""
    from onthedot import nl

    tz = timezone or load_settings().default_timezone
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"unknown timezone {tz!r}; expected an IANA name such as "
                                 "Asia/Taipei", param_hint="--timezone") from None
    if now_text is None:
        now = datetime.now(UTC)
    else:
        try:
            now = datetime.fromisoformat(now_text)
        except ValueError:
            raise click.BadParameter(f"{now_text!r} is not an ISO 8601 time; expected e.g. "
                                     "2026-06-22T08:00 or 2026-06-22T08:00:00+08:00",
                                     param_hint="--now") from None
        if now.tzinfo is None:
            now = now.replace(tzinfo=zone)
    _echo_json(nl.parse(text, now=now, timezone=tz).to_dict())


def _run_server(settings: Settings, roles: Sequence[str], *, http: bool) -> int:
    """``serve``, ``api`` or ``worker``: in this process when ONTHEDOT_PROCESSES resolves to 1
    (no supervisor), otherwise as a supervisor of that many processes."""
    from onthedot.runtime import process_count

    count = process_count(settings)
    if count == 1:
        if http:
            asyncio.run(_serve(settings, roles))
        else:
            asyncio.run(serve_roles(settings, roles))
        return 0
    return _supervise(settings, roles, count, http=http)


def _supervise(settings: Settings, roles: Sequence[str], count: int, *, http: bool) -> int:
    """Check in the parent what would fail in every child (the bind, the runtime, the metrics
    ports), so that a bad setting is one line and exit 2 before any child starts; then run
    ``count`` children on the one listening socket (docs/deploy.md, "Cores")."""
    from onthedot.supervisor import Supervisor

    if settings.metrics_port and settings.metrics_port + count - 1 > 65535:
        raise ConfigError(f"ONTHEDOT_METRICS_PORT={settings.metrics_port} leaves no room for "
                          f"{count} processes (each serves on that port plus its index)",
                          field="metrics_port", expected=f"at most {65536 - count}")
    sock = _bind(settings.host, settings.port) if http else None
    try:
        asyncio.run(_prepare_children(settings, count, http=http))
        if sock is not None:
            host, port = sock.getsockname()[:2]
            log.info("onthedot %s: %d processes will share http://%s:%d", __version__, count,
                     f"[{host}]" if ":" in host else host, port)
        # A child takes the HTTP drain and then the roles' grace, each up to shutdown_grace.
        supervisor = Supervisor(count, _child_main, (settings, tuple(roles), sock),
                                stop_seconds=2 * settings.shutdown_grace)
        code = supervisor.run()
    finally:
        if sock is not None:
            sock.close()
    log.info("onthedot stopped")
    return code


async def _prepare_children(settings: Settings, count: int, *, http: bool) -> None:
    """Open and close what every child opens, once: the runtime (migrations, the shard count
    pinned in the database, the queue, the actions' settings such as the news feeds file), the
    metrics port of each child, and the rule against a public bind without tokens. A child
    therefore fails at start only on what changed since."""
    from onthedot.api.auth import check_bind_allowed
    from onthedot.metrics import MetricsServer
    from onthedot.runtime import Runtime

    runtime = await Runtime.open(settings)
    try:
        if http:
            check_bind_allowed(settings.host, await runtime.store.tokens_exist())
        if settings.metrics_port:  # 0: each child picks a free port
            for index in range(count):
                probe = MetricsServer(runtime.metrics_text)
                await probe.start(settings.metrics_host, settings.metrics_port + index)
                await probe.close()
    finally:
        await runtime.close()


def _child_main(settings: Settings, roles: tuple[str, ...], sock: socket.socket | None,
                index: int, notify_ready: Callable[[], None]) -> int:
    """One child of the supervisor (a fresh interpreter): what a single process runs, on the
    inherited socket, with its own metrics port. An error is one log line and exit code 2;
    the supervisor decides whether to try again."""
    logs.configure(settings.log_level, settings.log_format, settings.log_quiet,
                   settings.log_repeat_seconds)
    if settings.metrics_port:  # 0 (any free port) stays 0
        settings = settings.model_copy(update={"metrics_port": settings.metrics_port + index})
    try:
        if sock is not None:
            asyncio.run(_serve(settings, roles, sock=sock, on_ready=notify_ready))
        else:
            from onthedot.runtime import serve_roles as run

            asyncio.run(run(settings, roles, on_ready=notify_ready))
    except OnTheDotError as exc:
        log.error("process %d: %s", index, _error_line(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return 0


async def _serve(settings: Settings, roles: Sequence[str], *, sock: socket.socket | None = None,
                 on_ready: Callable[[], None] | None = None) -> None:
    """Bind (unless handed a listening socket), open the runtime, start the roles, serve until
    SIGTERM/SIGINT, then stop the roles with the grace period and close. Binding and starting
    happen before uvicorn so that every start-up failure is one clean line. ``on_ready`` is
    called once uvicorn accepts connections."""
    import uvicorn

    from onthedot.api.app import create_app
    from onthedot.api.auth import AccessLogRedactor, check_bind_allowed
    from onthedot.api.connections import ConnectionLimits, guarded_protocol
    from onthedot.runtime import Runtime

    if sock is None:
        sock = _bind(settings.host, settings.port)
    try:
        runtime = await Runtime.open(settings)
    except BaseException:
        sock.close()
        raise
    try:
        check_bind_allowed(settings.host, await runtime.store.tokens_exist())
        await runtime.serve_metrics()  # only when ONTHEDOT_METRICS_PORT is set
        if roles:
            await runtime.start(roles)
        # Its own logger (uvicorn logs each request there directly): a credential sent in
        # the query string is refused, and must not be kept in the log either.
        logging.getLogger("uvicorn.access").addFilter(AccessLogRedactor())
        limits = ConnectionLimits(max_connections=_fit_connection_bound(settings.max_connections),
                                  header_timeout_seconds=settings.header_timeout_seconds,
                                  keep_alive_seconds=settings.keep_alive_seconds)
        config = uvicorn.Config(create_app(runtime), lifespan="on", log_config=None,
                                log_level=settings.log_level.lower(),
                                access_log=settings.access_log,
                                http=guarded_protocol(limits),
                                timeout_keep_alive=max(1, round(limits.keep_alive_seconds)),
                                timeout_graceful_shutdown=max(1, int(settings.shutdown_grace)))
        server = _ready_server(config, on_ready)
        host, port = sock.getsockname()[:2]
        log.info("onthedot %s listening on http://%s:%d (roles: %s)", __version__,
                 f"[{host}]" if ":" in host else host, port, ", ".join(roles) or "none")
        with _absorb_reraised_signals():
            await server.serve(sockets=[sock])
            await runtime.stop()  # says how many runs it waits for, when it runs a worker
    finally:
        sock.close()
        await runtime.close()
    log.info("onthedot stopped")


def _ready_server(config: Any, on_ready: Callable[[], None] | None) -> Any:
    """A uvicorn server that calls ``on_ready`` once its start-up accepts connections. Given
    ``on_ready`` (a supervisor's child), SIGINT counts as SIGTERM: a terminal's Ctrl-C reaches
    the children too, beside the SIGTERM their supervisor passes on, and the two together must
    be one graceful stop, not uvicorn's forced one on a second SIGINT (the supervisor forces,
    when a child overstays its time)."""
    import uvicorn

    class ReadyServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_ready is not None:
                on_ready()

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(signal.SIGTERM if on_ready is not None else sig, frame)

    return ReadyServer(config)


async def _migrate(settings: Settings) -> Migrated:
    from onthedot.domain.clock import SystemClock
    from onthedot.runtime import build_queue, build_store, pin_shard_count

    store = build_store(settings)
    try:
        done = await store.migrate()
        await pin_shard_count(store, settings)
        queue = build_queue(settings, SystemClock())
        await queue.open()  # the table queue's tables (SQLite, PostgreSQL), or NATS streams
        await queue.close()
        return done
    finally:
        await store.close()


async def _webhook_secret_add(settings: Settings, user_id: str) -> str:
    from onthedot.actions.signing import create_secret
    from onthedot.runtime import build_store

    store = build_store(settings)
    try:
        await store.migrate()
        return await create_secret(store, user_id, datetime.now(UTC))
    finally:
        await store.close()


# File descriptors a process keeps beside its HTTP connections: database and queue
# connections, outbound calls of in-flight runs, log files.
FD_RESERVE = 256


def _fit_connection_bound(max_connections: int) -> int:
    """The connection bound this process can keep: the soft RLIMIT_NOFILE is raised toward the
    hard one when the bound needs it, and a bound above what the limit allows is lowered (one
    warning), so that the bound, not EMFILE on accept, is what refuses a connection."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft != resource.RLIM_INFINITY and soft < wanted:
        fitted = max(1, soft - FD_RESERVE)
        log.warning("ONTHEDOT_MAX_CONNECTIONS=%d does not fit the file descriptor limit %d; "
                    "using %d", max_connections, soft, fitted)
        return fitted
    return max_connections


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says it is TCP; without it every keep-alive answer waits ~40 ms for the
    # client's delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                          field="port", expected="a free port and a local address") from exc
    sock.listen(LISTEN_BACKLOG)  # connections wait in the backlog until uvicorn accepts them
    return sock


@contextlib.contextmanager
def _absorb_reraised_signals() -> Iterator[None]:
    """uvicorn handles SIGTERM/SIGINT while it serves, then re-raises the signal it caught
    against the handler that was installed before it. Installing a no-op one here turns that
    re-raise into nothing, so a graceful shutdown ends with exit code 0 (and the roles still get
    their grace period afterwards)."""
    previous = {sig: signal.signal(sig, lambda _s, _f: None)
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# --- client of the REST API ------------------------------------------------------------------
class ApiClient:
    """A thin synchronous client: one request per command, server problems as one line."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._headers["X-Onthedot-Channel"] = "cli"  # a job's history names where changes came from

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            with httpx.Client(base_url=self.url, headers=self._headers,
                              timeout=CLIENT_TIMEOUT_SECONDS) as http:
                response = http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise click.ClickException(
                f"cannot connect to {self.url} ({exc}); is `onthedot serve` running?") from exc
        except httpx.HTTPError as exc:
            raise click.ClickException(f"request to {self.url} failed: {exc}") from exc
        if response.status_code >= 400:
            raise click.ClickException(_problem_line(response))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()


def _problem_line(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return f"server answered HTTP {response.status_code}: {response.text[:200]}"
    line = f"{body.get('detail') or body.get('title')} [{response.status_code} " \
           f"{body.get('code', 'error')}]"
    if body.get("field"):
        line += f" (field {body['field']}"
        line += f"; expected {body['expected']})" if body.get("expected") else ")"
    return line


def _client_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Adds --url and --token and hands the command an ``ApiClient`` as ``client``."""

    def wrapper(url: str, token: str | None, **kwargs: Any) -> Any:
        return fn(client=ApiClient(url, token), **kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper = click.option("--token", envvar="ONTHEDOT_TOKEN", default=None, show_envvar=True,
                           help="API token (default: none, for a loopback server without "
                                "tokens)")(wrapper)
    return click.option("--url", envvar="ONTHEDOT_URL", default=DEFAULT_URL, show_default=True,
                        show_envvar=True, help="base URL of the onthedot server")(wrapper)


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _echo_table(rows: list[list[str]], header: list[str]) -> None:
    if sys.stdout.isatty():
        _echo_rich_table(rows, header)
        return
    # Not a terminal (a pipe, a file, a test): plain columns that `awk`/`cut` can read.
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                   .rstrip())


def _echo_more(next_page_token: str | None) -> None:
    """Where the next page starts, on stderr, so stdout stays the table."""
    if next_page_token:
        click.echo(f"(more: --page-token {next_page_token})", err=True)


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


FREE_TEXT_COLUMNS = frozenset({"NAME", "SCHEDULE", "LAST_RESULT", "RESULT", "ERROR", "TITLE",
                               "TEXT"})


def _echo_rich_table(rows: list[list[str]], header: list[str]) -> None:
    """On a terminal: a table that fits its width (long cells fold instead of wrapping the
    whole line)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in header:
        if name in FREE_TEXT_COLUMNS:
            table.add_column(name, overflow="fold", ratio=1, min_width=len(name))
        else:  # an id or a time broken over two lines cannot be copied
            table.add_column(name, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    Console(highlight=False).print(table)


def _json_option(fn: F) -> F:
    """``--json``: print the API's JSON instead of the words or table meant for people."""
    return click.option("--json", "as_json", is_flag=True,
                        help="print the API's JSON answer (machine-readable)")(fn)


# Options shared by `jobs create` and `jobs update`.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 9110 token
DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
WEBHOOK_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")  # what the webhook action sends


def _action_options(fn: F) -> F:
    for option in reversed((
        click.option("--message", metavar="TEXT", help="action: record this message as the "
                     "output"),
        click.option("--webhook", metavar="URL", help="action: call this URL (POST unless "
                     "--method)"),
        click.option("--method", type=click.Choice(WEBHOOK_METHODS, case_sensitive=False),
                     help="webhook: the HTTP method (default POST)"),
        click.option("--header", "headers", metavar="'NAME: VALUE'", multiple=True,
                     help="webhook: a request header (repeatable)"),
        click.option("--body", "body_text", metavar="JSON|@FILE", help="webhook: the JSON "
                     "body, inline or read from FILE (default: the run's identity)"),
    )):
        fn = option(fn)
    return fn


def _policy_options(*, update: bool) -> Callable[[F], F]:
    """--retries, --timeout, --misfire. Left out, ``jobs create`` gets the API's defaults
    (quoted from the domain model) and ``jobs update`` keeps the job's own."""
    from onthedot.domain.models import OVERLAP_POLICIES, Job, RetryPolicy

    def left_out(default: str) -> str:
        return "unchanged when left out" if update else f"default {default}"

    def decorate(fn: F) -> F:
        for option in reversed((
            click.option("--retries", type=click.IntRange(0, 99), metavar="N", help="retries "
                         "after a failed first attempt, with exponential backoff (retry_policy."
                         f"max_attempts = N + 1; {left_out(str(RetryPolicy().max_attempts - 1))}"
                         ")"),
            click.option("--timeout", "timeout_seconds", type=click.FloatRange(0, min_open=True),
                         metavar="SECONDS", help="how long one attempt may take "
                         f"({left_out(f'{Job.timeout_seconds:g}')})"),
            click.option("--misfire", type=click.Choice(("run_late", "skip")), help="a run "
                         "missed while the service was down: run_late runs it late, skip "
                         f"skips it ({left_out(Job.misfire_policy)})"),
            click.option("--overlap", type=click.Choice(OVERLAP_POLICIES), help="a recurring "
                         "job's time that comes while its previous run still runs: skip it, "
                         "buffer_one (run the latest such time when the run ends) or "
                         f"allow_all (run each at its time) ({left_out(Job.overlap_policy)})"),
        )):
            fn = option(fn)
        return fn
    return decorate


def _schedule_choice(*, cron: str | None, rrule: str | None, at: str | None,
                     in_: str | None, now: bool) -> dict[str, Any] | None:
    """job_params of the one schedule flag given (without timezone), None if none was;
    more than one is a usage error."""
    chosen = [flag for flag, value in (("--cron", cron), ("--rrule", rrule), ("--at", at),
                                       ("--in", in_), ("--now", now or None))
              if value is not None]
    if len(chosen) > 1:
        raise click.UsageError("give exactly one of --cron EXPR, --rrule RULE, --at ISO, "
                               f"--in DURATION or --now (got {', '.join(chosen)})")
    if at is not None:
        try:
            datetime.fromisoformat(at)
        except ValueError:
            raise click.BadParameter(f"{at!r} is not an ISO 8601 time; expected e.g. "
                                     "2026-06-22T08:00 or 2026-06-22T08:00:00+08:00",
                                     param_hint="--at") from None
        return {"type": "one-time", "time": at}
    if in_ is not None:
        return {"type": "one-time", "time": _from_now(in_).isoformat(timespec="seconds")}
    if now:
        return {"type": "immediate"}
    if cron is not None or rrule is not None:
        return {"type": "recurring", "schedule": cron if cron is not None else rrule}
    return None


def _from_now(text: str) -> datetime:
    """The UTC instant '90s', '10m', '1h30m', '2d' (or bare seconds, '45') from now."""
    plain = text.strip().lower()
    found = DURATION.fullmatch(plain)
    if plain.isdigit():
        days, hours, minutes, seconds = 0, 0, 0, int(plain)
    elif found and any(found.groups()):
        days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    else:
        raise click.BadParameter(f"{text!r} is not a duration; expected e.g. 10s, 5m, 1h30m "
                                 "or 2d", param_hint="--in")
    try:
        return datetime.now(UTC) + timedelta(days=days, hours=hours, minutes=minutes,
                                             seconds=seconds)
    except OverflowError:  # past the year 9999
        raise click.BadParameter(f"{text!r} is too far ahead", param_hint="--in") from None


def _check_timezone(timezone: str | None) -> None:
    if timezone is None:
        return
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"unknown timezone {timezone!r}; expected an IANA name "
                                 "such as Asia/Taipei", param_hint="--timezone") from None


def _action_of(*, message: str | None, webhook: str | None, method: str | None,
               headers: tuple[str, ...], body_text: str | None,
               required: bool) -> dict[str, Any] | None:
    """The action the flags describe (None when none is given and none is required). An
    action is sent whole, as the API replaces it whole: webhook details need --webhook."""
    if (message is not None and webhook is not None) or (
            required and message is None and webhook is None):
        raise click.UsageError("give exactly one of --message TEXT or --webhook URL")
    details = [flag for flag, value in (("--method", method), ("--header", headers or None),
                                        ("--body", body_text)) if value is not None]
    if details and webhook is None:
        raise click.UsageError(f"{', '.join(details)} describe a webhook: give --webhook URL "
                               "with them (the action is sent as a whole)")
    if message is not None:
        return {"type": "message", "text": message}
    if webhook is None:
        return None
    action: dict[str, Any] = {"type": "webhook", "url": webhook}
    if method is not None:
        action["method"] = method.upper()
    if headers:
        action["headers"] = _header_map(headers)
    if body_text is not None:
        action["body"] = _json_body(body_text)
    return action


def _header_map(given: tuple[str, ...]) -> dict[str, str]:
    headers: dict[str, str] = {}
    seen: set[str] = set()
    for item in given:
        name, colon, value = item.partition(":")
        name = name.strip()
        if not colon or not HEADER_NAME.fullmatch(name):
            raise click.BadParameter(f"{item!r} is not a header; expected 'Name: value', e.g. "
                                     "'X-Api-Key: abc'", param_hint="--header")
        if name.lower() in seen:
            raise click.BadParameter(f"header {name} is given twice", param_hint="--header")
        seen.add(name.lower())
        headers[name] = value.strip()
    return headers


def _json_body(text: str) -> Any:
    """--body: inline JSON, or @FILE; read as strictly as the server reads a request."""
    from onthedot.api.jsonbody import parse_json

    source, raw = "--body", text.encode()
    if text.startswith("@"):
        source = text[1:]
        try:
            with open(source, "rb") as file:
                raw = file.read()
        except OSError as exc:
            raise click.BadParameter(f"cannot read {source}: {exc.strerror or exc}",
                                     param_hint="--body") from None
    try:
        return parse_json(raw)
    except json.JSONDecodeError as exc:
        where = "" if source == "--body" else f" in {source}"
        raise click.BadParameter(f"not valid JSON{where}: {exc.msg}",
                                 param_hint="--body") from None


def _policy_fields(*, retries: int | None, timeout_seconds: float | None,
                   misfire: str | None, overlap: str | None) -> dict[str, Any]:
    """The job fields the policy flags set; retry_policy fields left out keep their value."""
    fields: dict[str, Any] = {}
    if retries is not None:
        fields["retry_policy"] = {"max_attempts": retries + 1}
    if timeout_seconds is not None:
        fields["timeout_seconds"] = timeout_seconds
    if misfire is not None:
        fields["misfire_policy"] = misfire
    if overlap is not None:
        fields["overlap_policy"] = overlap
    return fields


@cli.group()
def jobs() -> None:
    """Create and manage jobs on a running server (--url, token from ONTHEDOT_TOKEN)."""


@jobs.command("create")
@click.option("--name", help="a name to recognise the job by")
@click.option("--cron", metavar="EXPR", help="recurring, 5-field cron, e.g. '0 8 * * *'")
@click.option("--rrule", metavar="RULE", help="recurring, RFC 5545, e.g. "
              "'FREQ=DAILY;BYHOUR=8;BYMINUTE=0'")
@click.option("--at", "at", metavar="ISO", help="one time, ISO 8601, e.g. 2026-06-22T08:00 "
              "(read in --timezone unless it has an offset)")
@click.option("--in", "in_", metavar="DURATION", help="one time, this long from now: 10s, 5m, "
              "1h30m, 2d")
@click.option("--now", "now", is_flag=True, help="run once, immediately")
@click.option("--timezone", "timezone", metavar="TZ", help="IANA timezone, e.g. Asia/Taipei "
              "(default: the server's)")
@_action_options
@_policy_options(update=False)
@click.option("--notify-email", "emails", metavar="ADDR", multiple=True,
              help="also e-mail each result to ADDR (repeatable)")
@click.option("--notify-webhook", "hooks", metavar="URL", multiple=True,
              help="also POST each result to URL as JSON, signed (repeatable)")
@click.option("--notify-slack", "slack_hooks", metavar="URL", multiple=True,
              help="also post each result to a Slack incoming-webhook URL (repeatable)")
@click.option("--no-inbox", is_flag=True, help="do not put results in your inbox")
@click.option("--idempotency-key", help="retrying with the same key returns the same job")
@click.option("-q", "--quiet", is_flag=True, help="print only the job id")
@_json_option
@_client_options
def jobs_create(client: ApiClient, name: str | None, cron: str | None, rrule: str | None,
                at: str | None, in_: str | None, now: bool, timezone: str | None,
                message: str | None, webhook: str | None, method: str | None,
                headers: tuple[str, ...], body_text: str | None, retries: int | None,
                timeout_seconds: float | None, misfire: str | None, overlap: str | None,
                emails: tuple[str, ...],
                hooks: tuple[str, ...], slack_hooks: tuple[str, ...], no_inbox: bool,
                idempotency_key: str | None, quiet: bool, as_json: bool) -> None:
    """Create a job: one of --cron/--rrule/--at/--in/--now, one of --message/--webhook. Results
    go to your inbox (see `onthedot inbox`) unless --no-inbox, and to each --notify-* given.
    Prints the job as JSON (-q: only its id)."""
    params = _job_params(cron=cron, rrule=rrule, at=at, in_=in_, now=now, timezone=timezone)
    action = _action_of(message=message, webhook=webhook, method=method, headers=headers,
                        body_text=body_text, required=True)
    body: dict[str, Any] = {"action": action, "job_params": params,
                            **_policy_fields(retries=retries, timeout_seconds=timeout_seconds,
                                             misfire=misfire, overlap=overlap)}
    if emails or hooks or slack_hooks or no_inbox:
        body["notify"] = [*([] if no_inbox else [{"channel": "inbox"}]),
                          *({"channel": "email", "to": a} for a in emails),
                          *({"channel": "webhook", "url": u} for u in hooks),
                          *({"channel": "webhook", "url": u, "format": "slack"}
                            for u in slack_hooks)]
    if name is not None:
        body["name"] = name
    headers_out = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    job = client.call("POST", "/v1/jobs", json=body, headers=headers_out)
    if quiet and not as_json:
        click.echo(job["job_id"])
    else:
        _echo_json(job)


def _job_params(*, cron: str | None, rrule: str | None, at: str | None, in_: str | None,
                now: bool, timezone: str | None) -> dict[str, Any]:
    params = _schedule_choice(cron=cron, rrule=rrule, at=at, in_=in_, now=now)
    if params is None:
        raise click.UsageError("give exactly one of --cron EXPR, --rrule RULE, --at ISO, "
                               "--in DURATION or --now")
    _check_timezone(timezone)
    if timezone is not None:
        params["timezone"] = timezone
    return params


@jobs.command("list")
@click.option("--status", help="scheduled | running | completed | failed | paused | cancelled")
@click.option("--page-size", type=click.IntRange(1, 100), default=20, show_default=True)
@click.option("--page-token", help="next_page_token of a previous page")
@click.option("--all", "all_pages", is_flag=True, help="follow next_page_token to the end")
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON page(s)")
@_client_options
def jobs_list(client: ApiClient, status: str | None, page_size: int, page_token: str | None,
              all_pages: bool, as_json: bool) -> None:
    """Your jobs, newest first."""
    found: list[dict[str, Any]] = []
    token = page_token
    while True:
        query: dict[str, Any] = {"page_size": page_size}
        if status:
            query["status"] = status
        if token:
            query["page_token"] = token
        page = client.call("GET", "/v1/jobs", params=query)
        found.extend(page["jobs"])
        token = page["next_page_token"]
        if not (all_pages and token):
            break
    if as_json:
        _echo_json({"jobs": found, "next_page_token": token})
        return
    _echo_table([[j["job_id"], _short(j["name"], 30), j["status"], _schedule_text(j),
                  j["next_run_at"] or "-", _last_result(j["last_run"])] for j in found],
                ["JOB_ID", "NAME", "STATUS", "SCHEDULE", "NEXT_RUN_AT", "LAST_RESULT"])
    _echo_more(token)


def _schedule_text(job: dict[str, Any]) -> str:
    """When the job runs, in words: the server's description of a recurring schedule (or the
    schedule itself where it has none), the instant of a one-time job."""
    params = job["job_params"]
    if params["type"] == "immediate":
        return "right away"
    if params["type"] == "one-time":
        return f"once at {params['time']}"
    words = (job.get("schedule_words") or {}).get("en") or params["schedule"]
    return _short(f"{words} ({params['timezone']})", 50)


def _last_result(run: dict[str, Any] | None) -> str:
    if run is None:
        return "-"
    detail = run["error"] if run["error"] else run["output"]
    return _short(run["status"] if detail is None else f"{run['status']}: {_short(detail)}", 40)


@jobs.command("get")
@click.argument("job_id")
@_json_option
@_client_options
def jobs_get(client: ApiClient, job_id: str, as_json: bool) -> None:
    """Show one job, as JSON."""
    _echo_json(client.call("GET", f"/v1/jobs/{job_id}"))


@jobs.command("pause")
@click.argument("job_id")
@_json_option
@_client_options
def jobs_pause(client: ApiClient, job_id: str, as_json: bool) -> None:
    """Pause a scheduled job (its pending run is cancelled); prints the job as JSON."""
    _echo_json(client.call("POST", f"/v1/jobs/{job_id}:pause"))


@jobs.command("resume")
@click.argument("job_id")
@_json_option
@_client_options
def jobs_resume(client: ApiClient, job_id: str, as_json: bool) -> None:
    """Resume a paused job; prints the job as JSON."""
    _echo_json(client.call("POST", f"/v1/jobs/{job_id}:resume"))


@jobs.command("skip-next")
@click.argument("job_id")
@_json_option
@_client_options
def jobs_skip_next(client: ApiClient, job_id: str, as_json: bool) -> None:
    """Skip only the next run of a recurring job (it is marked SKIPPED, the runs after it
    stay); prints the skipped run and the job as JSON."""
    _echo_json(client.call("POST", f"/v1/jobs/{job_id}:skip-next"))


@jobs.command("backfill")
@click.argument("job_id")
@click.option("--from", "start_time", required=True, metavar="ISO", help="the first instant of "
              "the range (included), with an offset or Z")
@click.option("--to", "end_time", required=True, metavar="ISO", help="the end of the range "
              "(excluded), not after now")
@click.option("--max-runs", type=click.IntRange(1, 100), default=100, show_default=True,
              help="refuse a range with more occurrences than this")
@_json_option
@_client_options
def jobs_backfill(client: ApiClient, job_id: str, start_time: str, end_time: str,
                  max_runs: int, as_json: bool) -> None:
    """Run now the occurrences of a recurring job scheduled in a past range (POST
    /v1/jobs/{id}:backfill); prints one line per occurrence: its run id, status and whether
    it is new (--json: the answer)."""
    answer = client.call("POST", f"/v1/jobs/{job_id}:backfill", json={
        "start_time": start_time, "end_time": end_time, "max_runs": max_runs})
    if as_json:
        _echo_json(answer)
        return
    for item in answer["runs"]:
        run = item["run"]
        click.echo(f"{run['run_id']}  {run['status']}  "
                   f"{'new' if item['created'] else 'had a run already'}")
    if not answer["runs"]:
        click.echo("no occurrence in that range")


@jobs.command("delete")
@click.argument("job_id")
@_json_option
@_client_options
def jobs_delete(client: ApiClient, job_id: str, as_json: bool) -> None:
    """Cancel a job and its pending runs (--json: print the cancelled job)."""
    client.call("DELETE", f"/v1/jobs/{job_id}")
    if as_json:  # the DELETE answers 204; the job as it is now is what a script wants
        _echo_json(client.call("GET", f"/v1/jobs/{job_id}"))
    else:
        click.echo(f"deleted {job_id}")


EXIT_RUN_FAILED = 1  # jobs run --wait: the run failed, was skipped or cancelled
EXIT_WAIT_TIMEOUT = 124  # jobs run --wait: still going after --timeout (as timeout(1) exits)
WAIT_TIMEOUT_SECONDS = 300.0
WAIT_POLL_SECONDS = (0.1, 1.0)  # first and longest pause between two looks at the run
TERMINAL_RUN_STATUSES = frozenset({"SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED"})


@jobs.command("run")
@click.argument("job_id")
@click.option("--wait", is_flag=True, help="wait for the run to end and print its output "
              "(exit 0) or error (exit 1)")
@click.option("--timeout", "wait_seconds", type=click.FloatRange(0, min_open=True),
              metavar="SECONDS", help=f"with --wait: give up waiting after this long "
              f"(default {WAIT_TIMEOUT_SECONDS:g}; exit {EXIT_WAIT_TIMEOUT})")
@_json_option
@_client_options
def jobs_run(client: ApiClient, job_id: str, wait: bool, wait_seconds: float | None,
             as_json: bool) -> int:
    """Run a job now, in addition to its schedule. Prints the new run as JSON; with --wait,
    waits for it to end and prints its result (--json: the finished run)."""
    if wait_seconds is not None and not wait:
        raise click.UsageError("--timeout goes with --wait")
    run = client.call("POST", f"/v1/jobs/{job_id}:run")
    if not wait:
        _echo_json(run)
        return 0
    limit = WAIT_TIMEOUT_SECONDS if wait_seconds is None else wait_seconds
    finished = _await_run(client, run, limit)
    if finished is None:
        return _fail(f"run {run['run_id']} has not ended after {limit:g}s; it goes on (see "
                     f"`onthedot jobs runs {job_id}`)", EXIT_WAIT_TIMEOUT)
    if as_json:
        _echo_json(finished)
    elif finished["status"] == "SUCCEEDED":
        output = finished["output"]
        if output is not None:
            click.echo(output if isinstance(output, str)
                       else json.dumps(output, indent=2, ensure_ascii=False))
    else:
        reason = f": {' '.join(str(finished['error']).split())}" if finished["error"] else ""
        click.echo(f"run {finished['run_id']} {finished['status']} (attempt "
                   f"{finished['attempt']}){reason}", err=True)
    return 0 if finished["status"] == "SUCCEEDED" else EXIT_RUN_FAILED


def _await_run(client: ApiClient, run: dict[str, Any], limit: float) -> dict[str, Any] | None:
    """The run once it is terminal, or None when ``limit`` seconds pass first. Polls with a
    growing pause: a message run ends in well under a second, a webhook may take minutes."""
    deadline = time.monotonic() + limit
    pause, longest = WAIT_POLL_SECONDS
    while run["status"] not in TERMINAL_RUN_STATUSES:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(pause, left))
        pause = min(pause * 1.5, longest)
        run = client.call("GET", f"/v1/runs/{run['run_id']}")
    return run


@jobs.command("runs")
@click.argument("job_id")
@click.option("--page-size", type=click.IntRange(1, 100), default=20, show_default=True)
@click.option("--page-token", help="next_page_token of a previous page")
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON page")
@_client_options
def jobs_runs(client: ApiClient, job_id: str, page_size: int, page_token: str | None,
              as_json: bool) -> None:
    """A job's runs, newest first."""
    query: dict[str, Any] = {"page_size": page_size}
    if page_token:
        query["page_token"] = page_token
    page = client.call("GET", f"/v1/jobs/{job_id}/runs", params=query)
    if as_json:
        _echo_json(page)
        return
    _echo_table([[r["run_id"], r["scheduled_at"], r["status"], str(r["attempt"]),
                  _short(r["error"] if r["error"] else r["output"] or "")]
                 for r in page["runs"]], ["RUN_ID", "SCHEDULED_AT", "STATUS", "ATTEMPT", "RESULT"])
    _echo_more(page["next_page_token"])


@jobs.command("update")
@click.argument("job_id")
@click.option("--name", help="a new name")
@click.option("--cron", metavar="EXPR", help="new schedule: recurring, 5-field cron")
@click.option("--rrule", metavar="RULE", help="new schedule: recurring, RFC 5545")
@click.option("--at", "at", metavar="ISO", help="new schedule: one time, ISO 8601")
@click.option("--in", "in_", metavar="DURATION", help="new schedule: one time, this long from "
              "now (10s, 5m, 1h30m, 2d)")
@click.option("--timezone", "timezone", metavar="TZ", help="a new IANA timezone (default: "
              "the job keeps its own)")
@_action_options
@_policy_options(update=True)
@_json_option
@_client_options
def jobs_update(client: ApiClient, job_id: str, name: str | None, cron: str | None,
                rrule: str | None, at: str | None, in_: str | None, timezone: str | None,
                message: str | None, webhook: str | None, method: str | None,
                headers: tuple[str, ...], body_text: str | None, retries: int | None,
                timeout_seconds: float | None, misfire: str | None, overlap: str | None,
                as_json: bool) -> None:
    """Change a job: only what is given is sent (PATCH). A new schedule replaces the pending
    run and keeps the job's timezone unless --timezone; a new action replaces the old one
    whole. Prints the job as JSON."""
    schedule = _schedule_choice(cron=cron, rrule=rrule, at=at, in_=in_, now=False)
    _check_timezone(timezone)
    body: dict[str, Any] = _policy_fields(retries=retries, timeout_seconds=timeout_seconds,
                                          misfire=misfire, overlap=overlap)
    action = _action_of(message=message, webhook=webhook, method=method, headers=headers,
                        body_text=body_text, required=False)
    if action is not None:
        body["action"] = action
    if name is not None:
        body["name"] = name
    if schedule is not None or timezone is not None:
        body["job_params"] = _new_params(client, job_id, schedule, timezone)
    if not body:
        raise click.UsageError("nothing to change: give --name, a schedule, --timezone, an "
                               "action, --retries, --timeout or --misfire")
    _echo_json(client.call("PATCH", f"/v1/jobs/{job_id}", json=body))


def _new_params(client: ApiClient, job_id: str, schedule: dict[str, Any] | None,
                timezone: str | None) -> dict[str, Any]:
    """The API replaces job_params whole and fills a missing timezone with the server's
    default, so what the user left alone is copied from the job as it is."""
    current = client.call("GET", f"/v1/jobs/{job_id}")["job_params"]
    params = schedule if schedule is not None else {
        key: current[key] for key in ("type", "time", "schedule") if current[key] is not None}
    params["timezone"] = timezone if timezone is not None else current["timezone"]
    if current.get("flexible_window_seconds") and params["type"] != "immediate":
        params["flexible_window_seconds"] = current["flexible_window_seconds"]
    return params


@cli.group("dead-letters")
def dead_letters() -> None:
    """Runs that failed their last attempt: list them, send one back to the queue."""


@dead_letters.command("list")
@click.option("--page-size", type=click.IntRange(1, 100), default=20, show_default=True)
@click.option("--page-token", help="next_page_token of a previous page")
@_json_option
@_client_options
def dead_letters_list(client: ApiClient, page_size: int, page_token: str | None,
                      as_json: bool) -> None:
    """Your dead-lettered runs, newest first, with their error."""
    query: dict[str, Any] = {"page_size": page_size}
    if page_token:
        query["page_token"] = page_token
    page = client.call("GET", "/v1/dead-letters", params=query)
    if as_json:
        _echo_json(page)
        return
    _echo_table([[r["run_id"], r["job_id"], r["finished_at"] or "-", str(r["attempt"]),
                  _short(r["error"] or "")] for r in page["dead_letters"]],
                ["RUN_ID", "JOB_ID", "FINISHED_AT", "ATTEMPTS", "ERROR"])
    _echo_more(page["next_page_token"])


@dead_letters.command("redrive")
@click.argument("run_id")
@_json_option
@_client_options
def dead_letters_redrive(client: ApiClient, run_id: str, as_json: bool) -> None:
    """Send a dead-lettered run back to the queue with a fresh attempt count."""
    run = client.call("POST", f"/v1/dead-letters/{run_id}:redrive")
    if as_json:
        _echo_json(run)
    else:
        click.echo(f"redriven {run['run_id']} (job {run['job_id']}): {run['status']}")


IMPORT_BATCH_JOBS = 1000  # the most POST /v1/jobs:batch takes
IMPORT_TIMEOUT_SECONDS = 300.0  # one batch of 1,000 jobs on a busy server


@jobs.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--batch-size", type=click.IntRange(1, IMPORT_BATCH_JOBS),
              default=IMPORT_BATCH_JOBS, show_default=True, help="jobs per request")
@click.option("--idempotency-prefix", metavar="TEXT", help="a line without an "
              "idempotency_key gets the key TEXT:LINE, so importing the file again creates "
              "nothing twice")
@_json_option
@_client_options
def jobs_import(client: ApiClient, file: str, batch_size: int,
                idempotency_prefix: str | None, as_json: bool) -> int:
    """Create the jobs of FILE, a JSON Lines file: one job per line as POST /v1/jobs takes
    it, with an optional idempotency_key. Every line is checked to be a JSON object before
    anything is sent; then the jobs go in batches (each batch one transaction). Prints a line
    per refused job and a summary (--json: one JSON object with both); exits 1 if any job was
    refused."""
    total = sum(1 for _ in _jsonl_objects(file))  # a bad line stops us before any request
    tally: dict[str, int] = {"created": 0, "existed": 0, "refused": 0}
    refused: list[dict[str, Any]] | None = [] if as_json else None
    batch: list[tuple[int, dict[str, Any]]] = []
    for numbered in _jsonl_objects(file):
        batch.append(numbered)
        if len(batch) == batch_size:
            _import_batch(client, batch, idempotency_prefix, tally, refused)
            batch = []
    if batch:
        _import_batch(client, batch, idempotency_prefix, tally, refused)
    if refused is not None:
        _echo_json({"file": file, "total": total, **tally, "problems": refused})
    else:
        click.echo(f"{total} jobs in {file}: {_tally_text(tally)}")
    return 1 if tally["refused"] else 0


def _jsonl_objects(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, job) for every non-blank line; a line that is not a JSON object (read as
    strictly as the server reads a body) stops everything with its line number."""
    from onthedot.api.jsonbody import parse_json

    try:
        with open(path, "rb") as lines:
            for number, raw in enumerate(lines, start=1):
                if not raw.strip():
                    continue
                try:
                    value = parse_json(raw)
                except json.JSONDecodeError as exc:
                    raise click.ClickException(
                        f"{path}, line {number}: not valid JSON: {exc.msg}") from None
                if not isinstance(value, dict):
                    raise click.ClickException(f"{path}, line {number}: expected a JSON "
                                               "object (one job per line)")
                yield number, value
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror or exc}") from None


def _import_batch(client: ApiClient, batch: list[tuple[int, dict[str, Any]]],
                  prefix: str | None, tally: dict[str, int],
                  refused: list[dict[str, Any]] | None = None) -> None:
    jobs = [{"idempotency_key": f"{prefix}:{number}", **job}
            if prefix is not None and "idempotency_key" not in job else job
            for number, job in batch]
    first, last = batch[0][0], batch[-1][0]
    try:
        answer = client.call("POST", "/v1/jobs:batch", json={"jobs": jobs},
                             timeout=IMPORT_TIMEOUT_SECONDS)
    except click.ClickException as exc:
        done = f"; before line {first}: {_tally_text(tally)}" if any(tally.values()) else ""
        raise click.ClickException(f"lines {first}-{last} were not imported: "
                                   f"{exc.message}{done}") from None
    for index, ((number, _job), result) in enumerate(zip(batch, answer["results"],
                                                         strict=True)):
        status = result["status"]
        if status == 201:
            tally["created"] += 1
        elif status == 200:
            tally["existed"] += 1
        else:
            tally["refused"] += 1
            if refused is not None:  # --json: the server's problem, as it answered it
                refused.append({"line": number, "problem": result["problem"]})
                continue
            click.echo(f"line {number}: {_item_problem_line(result['problem'], index)}",
                       err=True)


def _item_problem_line(problem: dict[str, Any], index: int) -> str:
    """A batch problem about the line's own fields: jobs[7].job_params.schedule (the 8th job
    of its request) is the line's job_params.schedule."""
    def own(text: str) -> str:
        return text.replace(f"jobs[{index}].", "").replace(f"jobs[{index}]", "the job")

    line = f"{own(str(problem.get('detail')))} [{problem.get('status')} {problem.get('code')}]"
    if problem.get("field"):
        line += f" (field {own(problem['field'])}"
        line += f"; expected {problem['expected']})" if problem.get("expected") else ")"
    return " ".join(line.split())


def _tally_text(tally: dict[str, int]) -> str:
    return (f"{tally['created']} created, {tally['existed']} already there (same "
            f"idempotency key), {tally['refused']} refused")


@cli.group(invoke_without_command=True)
@click.option("--unread", is_flag=True, help="only results not read yet")
@click.option("--page-size", type=click.IntRange(1, 100), default=20, show_default=True)
@click.option("--page-token", help="next_page_token of a previous page")
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON page")
@_client_options
@click.pass_context
def inbox(ctx: click.Context, client: ApiClient, unread: bool, page_size: int,
          page_token: str | None, as_json: bool) -> None:
    """Results delivered to your inbox, unread first (`onthedot inbox read ID` marks one)."""
    if ctx.invoked_subcommand is not None:
        return
    query: dict[str, Any] = {"page_size": page_size}
    if unread:
        query["unread"] = "true"
    if page_token:
        query["page_token"] = page_token
    page = client.call("GET", "/v1/inbox", params=query)
    if as_json:
        _echo_json(page)
        return
    _echo_table([[i["item_id"], "" if i["read"] else "*", i["delivered_at"],
                  _short(i["title"], 30), _short(i["text"], 50)] for i in page["items"]],
                ["ITEM_ID", "NEW", "DELIVERED_AT", "TITLE", "TEXT"])
    _echo_more(page["next_page_token"])


@inbox.command("read")
@click.argument("item_id")
@_json_option
@_client_options
def inbox_read(client: ApiClient, item_id: str, as_json: bool) -> None:
    """Show an inbox item in full and mark it read."""
    item = client.call("POST", f"/v1/inbox/{item_id}:read")
    if as_json:
        _echo_json(item)
        return
    click.echo(f"{item['title']}  ({item['delivered_at']}, run {item['run_id']})")
    click.echo(item["text"])


CHAT_TIMEOUT_SECONDS = 300.0  # a model may take several tool-calling rounds


@cli.command("chat")
@click.argument("message", required=False)
@click.option("--dry-run", is_flag=True, help="say what would be scheduled or changed, change "
              "nothing")
@click.option("--timezone", metavar="TZ", help="your IANA timezone (default: the server's)")
@click.option("-y", "--yes", is_flag=True, help="confirm a deletion or a new time without "
              "asking")
@click.option("--confirm", "confirm_token", metavar="TOKEN", help="answer yes to an earlier "
              "question: its confirmation_token (then MESSAGE may be left out)")
@click.option("--json", "as_json", is_flag=True, help="print the whole JSON answer(s)")
@_client_options
def chat(client: ApiClient, message: str | None, dry_run: bool, timezone: str | None,
         yes: bool, confirm_token: str | None, as_json: bool) -> None:
    """Say what to schedule or change, in English or Chinese: onthedot chat
    "每天早上八點幫我總結財經新聞", "what tasks do I have?", "刪除每週的運動提醒". A deletion or a
    new time is asked about first (y/N), unless --yes; when several tasks match, which one
    (its number)."""
    if message is None and confirm_token is None:
        raise click.UsageError("give MESSAGE (or --confirm TOKEN)")
    body: dict[str, Any] = {"dry_run": dry_run}
    for name, value in (("message", message), ("timezone", timezone),
                        ("confirm", confirm_token)):
        if value is not None:
            body[name] = value
    answer = client.call("POST", "/v1/chat", json=body, timeout=CHAT_TIMEOUT_SECONDS)
    _echo_chat(answer, as_json)
    for _ in range(CHAT_QUESTIONS):
        again: dict[str, Any] = {"confirm": answer.get("confirmation_token")}
        if answer.get("needs_choice"):
            pick = _ask_which()
            if pick is None:
                return
            again["message"] = pick
        elif answer.get("needs_confirmation"):
            # The server answers "no" too, in the language of the question.
            if not (yes or _ask_yes_no("Confirm?")):
                again["message"] = "no"
        else:
            return
        answer = client.call("POST", "/v1/chat", json=again, timeout=CHAT_TIMEOUT_SECONDS)
        _echo_chat(answer, as_json)


CHAT_QUESTIONS = 2  # which one, then yes or no (a deletion picked from a list)


def _ask_which() -> str | None:
    """The number picked from the reply's list; None when nothing (or end of input) is given."""
    try:
        picked: str = click.prompt("Which one? (its number; empty for none)", default="",
                                   show_default=False, err=True)
    except click.Abort:
        click.echo("", err=True)
        return None
    return picked.strip() or None


def _ask_yes_no(question: str) -> bool:
    """y/N on the terminal; no answer at all (end of input) is no."""
    try:
        return click.confirm(question, default=False, err=True)
    except click.Abort:
        click.echo("", err=True)
        return False


def _echo_chat(answer: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _echo_json(answer)
        return
    click.echo(answer["reply"])
    for job in answer["jobs"]:
        click.echo(f"  {job['job_id']}  {job['status']}  {job['action']['type']}  "
                   f"next run {job['next_run_at'] or '-'}")
    run = answer.get("run")
    if run and answer.get("intent") == "run_now":
        click.echo(f"  run {run['run_id']}  {run['status']}")


# --- jobs reassign: store-direct, like token create ------------------------------------------
@jobs.command("reassign")
@click.option("--from", "from_user", required=True, metavar="USER", help="the jobs' owner now "
              "(e.g. local, the user of a server without tokens)")
@click.option("--to", "to_user", required=True, metavar="USER", help="their new owner")
@_store_options
def jobs_reassign(from_user: str, to_user: str, **flags: Any) -> None:
    """Give every job of one user (with its runs and inbox results) to another, in one
    transaction, directly in the database. Prints how many jobs moved."""
    from onthedot.api.auth import check_user_id

    check_user_id(from_user)
    check_user_id(to_user)
    if from_user == to_user:
        raise click.UsageError("--from and --to name the same user")

    async def reassign(store: Store) -> int:
        return await store.jobs_reassign(from_user, to_user, datetime.now(UTC))

    moved = asyncio.run(_with_store(_settings(**flags), reassign))
    click.echo(f"moved {moved} job(s) from {from_user!r} to {to_user!r}")


if __name__ == "__main__":
    sys.exit(main())
