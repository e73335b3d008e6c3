"""The MCP server: the tool registry behind the SDK's low-level ``Server``.

The low-level server is used (not FastMCP) so that the schemas clients see are ours (the
hand-written ones as ``registry.publish`` renders them, and the output schemas of
``onthedot.mcp.results``), and so that every outcome is one ``CallToolResult`` we build: success
or error, the payload is the structured content and its JSON is the text. Because the result is
built here, the SDK does not check it against the output schema; tests/mcp does, for every tool.

Identity is decided per call by a ``CallerResolver``: over stdio (and in tests) a fixed user;
over Streamable HTTP the bearer token of the HTTP request, exactly as for the REST API
(``onthedot.api.mcp_http``).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from onthedot import __version__
from onthedot.config import Settings
from onthedot.domain.errors import OnTheDotError
from onthedot.domain.jsonvalue import first_problem
from onthedot.mcp.registry import Caller, ToolDef, ToolRegistry, ToolResult
from onthedot.mcp.tools import build_registry
from onthedot.service import JobService

log = logging.getLogger("onthedot.mcp")

SERVER_NAME = "onthedot"
# The request of the call (a Starlette Request over HTTP, None in memory and over stdio).
CallerResolver = Callable[[Any], Awaitable[Caller]]


def server_instructions(default_timezone: str) -> str:
    """About 150 tokens: which tool for which intent, the default timezone, how to say when."""
    return (
        "onthedot runs tasks for the user at the right time: reminders, summaries, webhooks. "
        "create_task: anything to do later, repeatedly or now (\"remind me…\", \"every "
        "morning…\", \"每天早上八點…\"). list_tasks: what is scheduled. get_task: one task and "
        "the output of its recent runs. update_task: change its time, text or title. "
        "pause_task/resume_task: stop and restart it. delete_task: remove it for good. "
        "run_task_now: one extra run now, the schedule kept. skip_next_run: skip only the "
        "next occurrence of a recurring task. backfill_task: run the occurrences of a past "
        "range now.\n"
        "Time: pass the user's own words as `when` (English or Chinese; the server parses "
        "them), or `schedule` (cron \"0 8 * * *\" or RRULE), `time` (ISO 8601) or `in` "
        "({\"minutes\": 20}) - exactly one; null means not given. when=\"now\" runs it at "
        f"once. Default timezone: {default_timezone}; pass `timezone` as a region "
        "(America/New_York), not an abbreviation (EST), if the user lives elsewhere.\n"
        "Errors come back with ok=false and error.code, error.field, error.expected: fix that "
        "argument and call again."
    )


def fixed_caller(service: JobService, user_id: str, timezone: str) -> CallerResolver:
    """Every call acts as ``user_id`` (stdio: the user given by ``--user``)."""
    caller = Caller(service=service, user_id=user_id, timezone=timezone)

    async def resolve(_request: Any) -> Caller:
        return caller

    return resolve


def mcp_tool(tool: ToolDef) -> types.Tool:
    """As clients see it: the published input schema (registry.publish) and the output schema
    that its structured content follows."""
    return types.Tool(name=tool.name, title=tool.title, description=tool.listed_description,
                      inputSchema=tool.published_schema, outputSchema=tool.output_schema,
                      annotations=tool.annotations)


def build_server(default_timezone: str, resolve_caller: CallerResolver,
                 registry: ToolRegistry | None = None) -> Server[Any, Any]:
    tools = registry if registry is not None else build_registry(default_timezone)
    server: Server[Any, Any] = Server(SERVER_NAME, version=__version__,
                                      instructions=server_instructions(default_timezone))

    @server.list_tools()  # type: ignore[untyped-decorator, no-untyped-call]  # untyped in SDK
    async def list_tools() -> list[types.Tool]:
        return [mcp_tool(t) for t in tools.tools]

    # validate_input=False: the registry checks arguments and answers with a correctable error
    # object; the SDK's check would answer with free text.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            caller = await resolve_caller(server.request_context.request)
        except OnTheDotError as exc:
            result = ToolResult.failure(exc)
        else:
            result = await tools.call(name, arguments, caller)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)],
            structuredContent=result.payload, isError=result.is_error)

    return server


async def serve_stdio(settings: Settings, user_id: str) -> None:
    """``onthedot mcp``: the tools over stdin/stdout, acting as ``user_id``.

    Only the service is opened here (store and queue); runs are executed by a running
    ``onthedot serve`` (or watcher and worker processes) sharing the same database.
    """
    from onthedot.runtime import Runtime

    runtime = await Runtime.open(settings)
    try:
        tz = settings.default_timezone
        server = build_server(tz, fixed_caller(runtime.service, user_id, tz))
        async with stdio_transport() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await runtime.close()


# --- stdio ------------------------------------------------------------------------------------
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                MemoryObjectSendStream[SessionMessage]]


def refusal_line(line: str) -> str | None:
    """The JSON-RPC error answering a stdin line the SDK cannot take, or None when it can. The
    SDK's stdio transport drops such a line without a word (its JSON parser refuses a lone
    surrogate escape that Python's accepts), so the client waits for an answer that never
    comes. JSON-RPC 2.0: -32700 for text that is not JSON (or is JSON whose strings cannot be
    text), -32600 for JSON that is not a request; the request's id is echoed when it has one."""
    try:
        types.JSONRPCMessage.model_validate_json(line)
        return None
    except ValueError:
        pass
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return _error_line(None, types.PARSE_ERROR, "Parse error: the line is not JSON")
    raw_id = value.get("id") if isinstance(value, dict) else None
    usable = isinstance(raw_id, int | str) and not isinstance(raw_id, bool) \
        and first_problem(raw_id, "id") is None
    request_id = raw_id if usable else None
    if first_problem(value, "message", max_depth=1 << 30) is not None:
        return _error_line(request_id, types.PARSE_ERROR, "Parse error: the message holds an "
                           "unpaired surrogate or a NUL, or a non-finite number")
    return _error_line(request_id, types.INVALID_REQUEST,
                       "Invalid Request: not a JSON-RPC 2.0 message")


def _error_line(request_id: int | str | None, code: int, message: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id,
                       "error": {"code": code, "message": message}})


@asynccontextmanager
async def stdio_transport() -> AsyncIterator[Streams]:
    """stdin/stdout as the SDK's ``stdio_server`` carries them (one JSON-RPC message per
    line, UTF-8 with undecodable bytes replaced), except that a line it cannot take is
    answered with a JSON-RPC error (``refusal_line``) instead of being dropped."""
    stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8",
                                          errors="replace"))
    stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    to_server, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    writing = anyio.Lock()  # answers and refusals share stdout, one whole line at a time

    async def put(line: str) -> None:
        async with writing:
            await stdout.write(line + "\n")
            await stdout.flush()

    async def read_stdin() -> None:
        async with to_server:
            async for line in stdin:
                if not line.strip():
                    continue
                refusal = refusal_line(line)
                if refusal is not None:
                    await put(refusal)
                    continue
                await to_server.send(SessionMessage(types.JSONRPCMessage.model_validate_json(
                    line)))

    async def write_stdout() -> None:
        async with from_server:
            async for message in from_server:
                await put(message.message.model_dump_json(by_alias=True, exclude_none=True))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdin)
        tasks.start_soon(write_stdout)
        yield read, write
