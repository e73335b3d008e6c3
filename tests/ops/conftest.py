"""The in-process engine of tests/engine (a fake clock, real backends) for the operator's
signals: SQLite with its table queue, and PostgreSQL with NATS JetStream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.engine.conftest import Engine, open_engine


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres,
                                                                   pytest.mark.nats])])
async def both(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    async with open_engine(request.param, tmp_path) as engine:
        yield engine
