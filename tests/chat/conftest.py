"""Chat front door tests: the API in process (ASGI), a fresh SQLite file, a fake clock."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.runtime import Runtime

START = datetime(2026, 6, 22, 2, 0, tzinfo=UTC)  # Monday 10:00 in Taipei
TZ = "Asia/Taipei"
NEWS = "每天早上八點幫我總結財經新聞"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/chat.db"


@contextlib.asynccontextmanager
async def chat_client(db_url: str, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    runtime = await Runtime.open(Settings(database_url=db_url, **settings), FakeClock(START))
    try:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                                     timeout=30) as client:
            yield client
    finally:
        await runtime.close()


async def jobs_of(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/v1/jobs")
    assert response.status_code == 200, response.text
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return jobs
