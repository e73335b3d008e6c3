"""``onthedot mcp`` as a subprocess, driven by the SDK's stdio client."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from onthedot.config import Settings
from onthedot.runtime import Runtime
from tests.mcp.conftest import NEWS, TOOLS, TZ, ok


def _command() -> tuple[str, list[str]]:
    script = Path(sys.executable).parent / "onthedot"
    if script.exists():
        return str(script), ["mcp", "--user", "alice"]
    return sys.executable, ["-m", "onthedot.cli", "mcp", "--user", "alice"]


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "stderr.log", "w") as log:
        yield log


async def test_stdio_smoke(tmp_path: Path, errlog: TextIO) -> None:
    database_url = f"sqlite:///{tmp_path}/stdio.db"
    command, args = _command()
    env = {**os.environ, "ONTHEDOT_DATABASE_URL": database_url,
           "ONTHEDOT_DEFAULT_TIMEZONE": TZ}
    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(tmp_path))
    async with (stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session):
        init = await session.initialize()
        assert init.serverInfo.name == "onthedot"
        assert init.instructions is not None
        assert TZ in init.instructions
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        created = ok(await session.call_tool("create_task", {"when": NEWS}))
    errlog.flush()
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()
    runtime = await Runtime.open(Settings(database_url=database_url))
    try:
        view = await runtime.service.get_job("alice", created["task"]["job_id"])
    finally:
        await runtime.close()
    assert view.job.params.schedule == "0 8 * * *"
    assert view.job.params.timezone == TZ
    assert view.job.action == {"type": "news_digest", "topic": "finance", "language": "zh-Hant"}
