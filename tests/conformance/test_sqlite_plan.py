"""The SQLite due-run query reads one (shard, time_bucket) partition through its index."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from onthedot.db.timestamps import ts
from onthedot.domain.ids import new_ulid, run_id_for, shard_of, time_bucket_of
from onthedot.store.sqlite import SqliteStore

NOW = datetime(2026, 6, 22, 8, 30, tzinfo=UTC)


def _fill(path: str, n: int) -> None:
    conn = sqlite3.connect(path)
    for i in range(n):
        job_id = new_ulid(NOW)
        at = NOW + timedelta(minutes=i % 5000 - 100)
        conn.execute(
            "INSERT INTO jobs (job_id, user_id, name, action, job_type, run_time, timezone,"
            " status, retry_policy, misfire_policy, timeout_seconds, created_at, updated_at)"
            " VALUES (?, 'u', 'n', '{}', 'one-time', ?, 'UTC', 'scheduled', '{}', 'run_late',"
            " 60, ?, ?)", (job_id, ts(at), ts(NOW), ts(NOW)))
        status = "SUCCEEDED" if i % 3 == 0 else "PENDING"
        conn.execute(
            "INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind,"
            " status, attempt, finished_at) VALUES (?, ?, ?, ?, ?, 'scheduled', ?, 0, ?)",
            (run_id_for(job_id, at), job_id, time_bucket_of(at), shard_of(job_id), ts(at),
             status, ts(at) if status == "SUCCEEDED" else None))
    conn.commit()
    conn.execute("ANALYZE")
    conn.close()


async def test_due_query_uses_the_partition_index_never_a_table_scan(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/plan.db")
    await store.migrate()
    _fill(store.path, 3000)
    try:
        plan = await store.explain_due_query(shard=7, bucket=time_bucket_of(NOW), now=NOW)
    finally:
        await store.close()
    text = "\n".join(plan)
    assert "USING INDEX job_runs_due (shard=? AND time_bucket=? AND scheduled_at<?)" in text, text
    assert not any(line.startswith("SCAN") for line in plan), text
