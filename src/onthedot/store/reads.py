"""Read queries that look the same on every backend: the same named query, parameters that
need no dialect conversion, rows that map through the shared codec."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from onthedot.domain.ids import ulid_floor
from onthedot.domain.models import Job, JobRun, RunEvent, RunStatus
from onthedot.store.base import JobListQuery, RunCounts
from onthedot.store.codec import Row, event_from_row, job_from_row, run_from_row


class SharedReads:
    """Mixed into each store; the store supplies its named queries and two primitives."""

    queries: ClassVar[dict[str, str]]

    async def _one(self, query: str, params: dict[str, Any]) -> Row | None:
        raise NotImplementedError

    async def _all(self, query: str, params: dict[str, Any]) -> Sequence[Row]:
        raise NotImplementedError

    async def job_get(self, user_id: str, job_id: str) -> Job | None:
        row = await self._one(self.queries["job_get"], {"user_id": user_id, "job_id": job_id})
        return None if row is None else job_from_row(row)

    async def job_get_any(self, job_id: str) -> Job | None:
        row = await self._one(self.queries["job_get_any"], {"job_id": job_id})
        return None if row is None else job_from_row(row)

    async def jobs_list(self, query: JobListQuery) -> list[Job]:
        rows = await self._all(self.queries["jobs_list"], {
            "user_id": query.user_id,
            "status": None if query.status is None else query.status.value,
            "job_id_from": None if query.created_from is None else ulid_floor(query.created_from),
            "job_id_to": None if query.created_to is None else ulid_floor(query.created_to),
            "before_job_id": query.before_job_id,
            "limit": query.limit,
        })
        return [job_from_row(r) for r in rows]

    async def shard_watermark(self, shard: int) -> int | None:
        row = await self._one(self.queries["watermark_get"], {"shard": shard})
        return None if row is None else int(row["bucket"])

    async def runs_dead_lettered(self, user_id: str, limit: int,
                                 before_run_id: str | None) -> list[JobRun]:
        rows = await self._all(self.queries["runs_dead_lettered"], {
            "user_id": user_id, "limit": limit, "before_run_id": before_run_id,
        })
        return [run_from_row(r) for r in rows]

    async def runs_count_by_status(self) -> dict[RunStatus, int]:
        rows = await self._all(self.queries["runs_count_by_status"], {})
        return {RunStatus(r["status"]): int(r["n"]) for r in rows}

    async def runs_count_capped(self, cap: int) -> RunCounts:
        row = await self._one(self.queries["runs_count_capped"], {"cap": cap})
        assert row is not None  # an aggregate always has a row
        return RunCounts(
            open={RunStatus.PENDING: int(row["pending"]), RunStatus.ENQUEUED: int(row["enqueued"]),
                  RunStatus.RUNNING: int(row["running"]), RunStatus.RETRYING: int(row["retrying"])},
            dead_lettered=int(row["dead_lettered"]))

    async def events_after(self, event_id: int, limit: int) -> list[RunEvent]:
        rows = await self._all(self.queries["events_after"], {"event_id": event_id, "limit": limit})
        return [event_from_row(r) for r in rows]

    async def cursor_get(self, consumer: str) -> int:
        row = await self._one(self.queries["cursor_get"], {"consumer": consumer})
        return 0 if row is None else int(row["position"])

    async def token_user(self, token_hash: str) -> str | None:
        row = await self._one(self.queries["token_user"], {"token_hash": token_hash})
        return None if row is None else str(row["user_id"])

    async def tokens_exist(self) -> bool:
        row = await self._one(self.queries["tokens_exist"], {})
        return bool(row and row["present"])
