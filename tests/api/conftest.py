"""ASGI-level API tests: a fresh SQLite file per test, a fake clock, no background roles."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.api.app import create_app
from onthedot.api.auth import hash_token
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.runtime import Runtime
from tests.support.webhook import LOOPBACK_ALLOW

START = datetime(2026, 6, 22, 0, 0, 0, tzinfo=UTC)
PROBLEM = "application/problem+json"


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "news",
        "action": {"type": "message", "text": "summarize the news"},
        "job_params": {"type": "recurring", "schedule": "0 8 * * *", "timezone": "Asia/Taipei"},
    }
    body.update(overrides)
    return body


def assert_problem(response: httpx.Response, status: int, code: str,
                   field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["code"] == code, body
    assert body["type"].endswith(code)
    assert {"type", "title", "status", "detail", "code", "field", "expected"} <= body.keys()
    if field is not None:
        assert body["field"] == field, body
    assert "Traceback" not in response.text
    return body


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/api.db", egress_allow=LOOPBACK_ALLOW)


@pytest.fixture
async def rt(settings: Settings, clock: FakeClock) -> AsyncIterator[Runtime]:
    runtime = await Runtime.open(settings, clock)
    yield runtime
    await runtime.close()


@pytest.fixture
async def client(rt: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


async def add_token(rt: Runtime, user: str, token: str) -> dict[str, str]:
    await rt.store.token_add(hash_token(token), user, rt.clock.now())
    return {"Authorization": f"Bearer {token}"}
