"""``onthedot mcp`` over stdio answers every line: one it cannot take (a lone surrogate, text
that is not JSON, JSON that is not a request) gets a JSON-RPC error instead of silence, and the
session goes on. Raw lines on a real subprocess's stdin."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from onthedot.mcp.server import refusal_line

PARSE_ERROR, INVALID_REQUEST = -32700, -32600


async def _answers(proc: asyncio.subprocess.Process, count: int) -> list[dict[str, Any]]:
    assert proc.stdout is not None
    found = []
    for _ in range(count):
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line, "the server closed stdout"
        found.append(json.loads(line))
    return found


async def test_lines_the_sdk_cannot_take_are_answered(tmp_path: Path) -> None:
    env = {**os.environ, "ONTHEDOT_DATABASE_URL": f"sqlite:///{tmp_path}/stdio.db"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from onthedot.cli import cli; cli()", "mcp", "--user", "alice",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=env)  # the test's cwd: PYTHONPATH may be relative
    assert proc.stdin is not None
    try:
        lines = [
            '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": '
            '{"name": "list_tasks", "arguments": {"x": "\\ud800"}}}',
            '{"jsonrpc": "2.0", "id": "\\udfff", "method": "ping"}',
            "{not json",
            '{"jsonrpc": "2.0", "id": "x", "nothing": true}',
            '[1, 2]',
            '{"jsonrpc": "2.0", "id": 9, "method": "ping"}',
        ]
        proc.stdin.write("".join(line + "\n" for line in lines).encode())
        await proc.stdin.drain()
        answers = await _answers(proc, len(lines))
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    assert [(a.get("id"), a.get("error", {}).get("code")) for a in answers] == [
        (7, PARSE_ERROR), (None, PARSE_ERROR), (None, PARSE_ERROR), ("x", INVALID_REQUEST),
        (None, INVALID_REQUEST), (9, None)], answers
    assert answers[-1]["result"] == {}  # the session went on
    assert all(a["jsonrpc"] == "2.0" for a in answers)


def test_a_line_the_sdk_takes_is_not_refused() -> None:
    assert refusal_line('{"jsonrpc": "2.0", "id": 1, "method": "ping"}') is None
    assert refusal_line('{"jsonrpc": "2.0", "method": "notifications/initialized"}') is None
