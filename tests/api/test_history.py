"""``GET /v1/jobs/{id}/history`` (who changed a job, how, when) and the attempts of a run in
``GET /v1/runs/{id}``."""

from __future__ import annotations

from typing import Any

import httpx

from onthedot.domain.clock import FakeClock
from onthedot.runtime import Runtime
from onthedot.watcher import RecurringWatcher, Watcher
from onthedot.worker import Worker
from tests.api.conftest import add_token, assert_problem, job_body
from tests.mcp.conftest import memory_session, ok

SECRET_HEADERS = {"Authorization": "Bearer s3cret-one", "X-Api-Key": "k3y-one",
                  "X-Lang": "en"}


def webhook(headers: dict[str, str]) -> dict[str, Any]:
    return {"type": "webhook", "url": "http://127.0.0.1:9/hook", "headers": headers}


async def history(client: httpx.AsyncClient, job_id: str, headers: dict[str, str] | None = None,
                  **params: Any) -> dict[str, Any]:
    response = await client.get(f"/v1/jobs/{job_id}/history", headers=headers, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_every_change_is_recorded_with_who_how_and_when(
        client: httpx.AsyncClient, rt: Runtime, clock: FakeClock) -> None:
    alice = await add_token(rt, "alice", "secret-a")
    created = await client.post("/v1/jobs", headers=alice,
                                json=job_body(action=webhook(SECRET_HEADERS)))
    job_id = created.json()["job_id"]
    clock.advance(60)
    patched = await client.patch(f"/v1/jobs/{job_id}", headers=alice, json={
        "name": "renamed",
        "action": webhook({**SECRET_HEADERS, "Authorization": "Bearer s3cret-two",
                           "X-Lang": "zh-TW"})})
    assert patched.status_code == 200, patched.text
    for verb in ("pause", "resume", "run"):
        clock.advance(60)
        answer = await client.post(f"/v1/jobs/{job_id}:{verb}", headers=alice)
        assert answer.is_success
    run_id = answer.json()["run_id"]
    clock.advance(60)
    assert (await client.delete(f"/v1/jobs/{job_id}", headers=alice)).status_code == 204
    # A change that changes nothing (deleting again, pausing a paused job) is not recorded.
    assert (await client.delete(f"/v1/jobs/{job_id}", headers=alice)).status_code == 204

    response = await client.get(f"/v1/jobs/{job_id}/history", headers=alice)
    for secret in ("s3cret-one", "s3cret-two", "k3y-one"):
        assert secret not in response.text
    changes = response.json()["changes"]
    assert [c["action"] for c in changes] == [
        "delete", "run", "resume", "pause", "update", "create"]
    assert {c["actor"] for c in changes} == {"alice"}
    assert [c["channel"] for c in changes] == ["api"] * 5 + [None]
    times = [c["changed_at"] for c in changes]
    assert times == sorted(times, reverse=True)
    assert changes[-1]["changed_at"] == created.json()["created_at"]

    delete, run, resume, pause, update, _ = (c["details"] for c in changes)
    assert delete == {"status": {"old": "scheduled", "new": "cancelled"}}
    assert pause == {"status": {"old": "scheduled", "new": "paused"}}
    assert resume == {"status": {"old": "paused", "new": "scheduled"}}
    assert run == {"run_id": run_id}
    assert set(update) == {"name", "action"}
    assert update["name"] == {"old": "news", "new": "renamed"}
    assert update["action"]["old"]["headers"] == {
        "Authorization": "***", "X-Api-Key": "***", "X-Lang": "en"}
    assert update["action"]["new"]["headers"] == {
        "Authorization": "***", "X-Api-Key": "***", "X-Lang": "zh-TW"}


async def test_history_is_paged_newest_first_and_ends_with_the_creation(
        client: httpx.AsyncClient, clock: FakeClock) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    for _ in range(3):
        for verb in ("pause", "resume"):
            clock.advance(1)
            assert (await client.post(f"/v1/jobs/{job_id}:{verb}")).is_success
    whole = (await history(client, job_id, page_size=100))["changes"]
    assert len(whole) == 7
    assert whole[-1]["action"] == "create"
    assert whole[-1]["actor"] == "local"

    seen: list[dict[str, Any]] = []
    token: str | None = None
    for _ in range(10):
        page = await history(client, job_id, page_size=2,
                             **({} if token is None else {"page_token": token}))
        assert len(page["changes"]) <= 2
        seen += page["changes"]
        token = page["next_page_token"]
        if token is None:
            break
    assert seen == whole
    assert_problem(await client.get(f"/v1/jobs/{job_id}/history",
                                    params={"page_token": "bm90LWEtdG9rZW4"}),
                   422, "invalid_page_token", "page_token")
    assert_problem(await client.get(f"/v1/jobs/{job_id}/history", params={"page_size": 0}),
                   422, "invalid_value", "page_size")


async def test_only_the_owner_reads_a_jobs_history(client: httpx.AsyncClient,
                                                   rt: Runtime) -> None:
    alice = await add_token(rt, "alice", "secret-a")
    bob = await add_token(rt, "bob", "secret-b")
    job_id = (await client.post("/v1/jobs", headers=alice, json=job_body())).json()["job_id"]
    assert_problem(await client.get(f"/v1/jobs/{job_id}/history", headers=bob), 404,
                   "not_found", "job_id")
    assert_problem(await client.get("/v1/jobs/01NOSUCHJOB/history", headers=alice), 404,
                   "not_found", "job_id")
    assert_problem(await client.get(f"/v1/jobs/{job_id}/history"), 401, "missing_token")


async def test_the_channel_names_the_cli_and_mcp(client: httpx.AsyncClient,
                                                 rt: Runtime) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    assert (await client.post(f"/v1/jobs/{job_id}:pause",
                              headers={"X-Onthedot-Channel": "cli"})).is_success
    # Only known clients name themselves; anything else is the API.
    assert (await client.post(f"/v1/jobs/{job_id}:resume",
                              headers={"X-Onthedot-Channel": "mcp"})).is_success
    async with memory_session(rt, user="local") as session:
        ok(await session.call_tool("pause_task", {"task_id": job_id}))
    changes = (await history(client, job_id))["changes"]
    assert [(c["action"], c["channel"]) for c in changes] == [
        ("pause", "mcp"), ("resume", "api"), ("pause", "cli"), ("create", None)]


async def test_a_run_shows_its_attempts_and_a_redrive_is_recorded(
        client: httpx.AsyncClient, rt: Runtime, clock: FakeClock) -> None:
    # Port 9 (discard) on loopback is closed: the attempt fails at once.
    body = job_body(action=webhook({}), job_params={"type": "immediate"},
                    retry_policy={"max_attempts": 1})
    job_id = (await client.post("/v1/jobs", json=body)).json()["job_id"]
    dispatcher = Watcher(rt.store, rt.queue, clock, rt.settings, rt.metrics, "test")
    worker = Worker(rt.store, rt.queue, clock, rt.settings, rt.actions, rt.metrics)
    try:
        await dispatcher.refresh_shards()
        await dispatcher.run_once()
        await worker.run_once()
        await RecurringWatcher(rt.store, clock, rt.settings, "test").run_once()
    finally:
        await worker.aclose()

    run_id = (await client.get("/v1/dead-letters")).json()["dead_letters"][0]["run_id"]
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert run["status"] == "FAILED"
    [attempt] = run["attempts"]
    assert attempt["attempt"] == 1
    assert attempt["status"] == "failed"
    assert attempt["error"] == run["error"]
    assert attempt["started_at"] == run["started_at"]
    assert attempt["finished_at"] == run["finished_at"]
    assert attempt["preview"] is None
    # The list of runs stays as it was: attempts only with the run itself.
    listed = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"][0]
    assert "attempts" not in listed

    assert (await client.post(f"/v1/dead-letters/{run_id}:redrive")).is_success
    changes = (await history(client, job_id))["changes"]
    assert [(c["action"], c["details"]) for c in changes] == [
        ("redrive", {"run_id": run_id}), ("create", {})]
    assert (await client.get(f"/v1/runs/{run_id}")).json()["attempts"] == [attempt]


async def test_a_change_asked_for_in_chat_names_the_chat(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body(name="news digest"))).json()["job_id"]
    said = await client.post("/v1/chat", json={"message": "pause the news digest",
                                               "timezone": "Asia/Taipei"})
    assert said.status_code == 200, said.text
    changes = (await history(client, job_id))["changes"]
    assert [(c["action"], c["channel"]) for c in changes] == [
        ("pause", "chat"), ("create", None)]
