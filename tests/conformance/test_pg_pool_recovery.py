"""The pool after every session was cut (a restart, a failover, pg_terminate_backend): the next
checkout gets a working connection at once, not after trying the dead ones one by one."""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack

import psycopg
import pytest

from onthedot.db.pgpool import RECENTLY_USED_SECONDS, LazyPool
from tests.support.waiting import async_wait_until

from .conftest import PG_DSN

pytestmark = pytest.mark.postgres

POOL_SIZE = 5
CHECKOUT_TIMEOUT = 10.0


async def _sessions_of(app: str) -> int:
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
        cur = await admin.execute("SELECT count(*) FROM pg_stat_activity "
                                  "WHERE application_name = %s", (app,))
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def _cut_sessions_of(app: str) -> int:
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s", (app,))
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def test_a_pool_whose_sessions_were_all_cut_answers_at_once() -> None:
    schema = f"pool_{time.monotonic_ns()}"
    pool = LazyPool(PG_DSN, schema=schema, role="recovery", pool_min=POOL_SIZE,
                    pool_max=POOL_SIZE, timeout_seconds=CHECKOUT_TIMEOUT)
    app = f"onthedot/{schema}/recovery"
    try:
        # Every connection of the pool checked out at once, then given back: five idle ones.
        async with AsyncExitStack() as held:
            for _ in range(POOL_SIZE):
                await held.enter_async_context(pool.connection())
        assert await _sessions_of(app) == POOL_SIZE
        assert await _cut_sessions_of(app) == POOL_SIZE
        async def ended() -> bool:  # the server ends a terminated session asynchronously
            return await _sessions_of(app) == 0

        await async_wait_until(ended, 30, "the cut sessions to end")
        # A duration of the scenario, not a synchronisation: past the pool's "recently used"
        # window, every idle connection is pinged before it is handed out.
        await asyncio.sleep(RECENTLY_USED_SECONDS + 0.1)

        started = time.monotonic()
        async with pool.connection() as conn:
            assert await (await conn.execute("SELECT 1 AS one")).fetchone() == {"one": 1}
        took = time.monotonic() - started
        # psycopg_pool sleeps 1, 2, 4, 8 s between failed checks: five dead connections tried
        # one by one took past the 10 s timeout. Now one failed check replaces them all.
        assert took < 3.0, f"the first checkout after the cut took {took:.1f}s"
    finally:
        await pool.close()
