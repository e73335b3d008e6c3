"""Every tool's structured content validates against its ``outputSchema``: the success of each
tool over a real SQLite runtime (a run executed by a real worker, its result delivered to the
inbox), the dry runs of the chat front door, and errors.

The SDK's client checks success results against the listed output schema on its own (every
memory-session test runs through it); these tests check with ``jsonschema`` directly, cover what
the client skips (error results), and show that the schemas can reject something."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import pytest

from onthedot.domain.clock import FakeClock
from onthedot.mcp.registry import Caller, ToolRegistry, ToolResult
from onthedot.mcp.tools import build_registry
from onthedot.runtime import Runtime
from onthedot.watcher import Watcher
from onthedot.worker import Worker
from tests.mcp.conftest import NEWS, TOOLS, TZ

Results = dict[str, list[dict[str, Any]]]


async def execute_due_runs(rt: Runtime, clock: FakeClock) -> None:
    """One pass of a real watcher and a real worker: due runs are executed and delivered."""
    dispatcher = Watcher(rt.store, rt.queue, clock, rt.settings, rt.metrics, "test")
    worker = Worker(rt.store, rt.queue, clock, rt.settings, rt.actions, rt.metrics)
    try:
        await dispatcher.refresh_shards()
        await dispatcher.run_once()
        await worker.run_once()
    finally:
        await worker.aclose()


async def every_success(rt: Runtime, clock: FakeClock) -> Results:
    """Each tool's successful results, in the shapes it has (empty and full lists, a task with
    a finished run, with and without `understood`)."""
    registry = build_registry(TZ)
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ)
    seen: Results = {name: [] for name in TOOLS}

    async def call(name: str, **arguments: Any) -> dict[str, Any]:
        result = await registry.call(name, arguments, caller)
        assert not result.is_error, result.payload
        seen[name].append(result.payload)
        return result.payload

    await call("list_tasks")
    await call("list_inbox")
    news = (await call("create_task", when=NEWS))["task"]["job_id"]
    await call("create_task", task="tea", schedule="0 15 * * *", title="tea")
    now = (await call("create_task", when="now", task="stand up"))["task"]["job_id"]
    await call("create_task", task="ping", when="in 5 minutes",
               webhook_url="https://example.com/hook", notify_email=None)
    await execute_due_runs(rt, clock)  # "stand up" runs and lands in the inbox
    await call("get_task", task_id=now)
    await call("get_task", task_id=news)
    await call("list_tasks", page_size=1)
    await call("list_tasks", status="completed")
    items = (await call("list_inbox"))["items"]
    assert items, "the reminder was delivered to the inbox"
    await call("mark_inbox_read", item_id=items[0]["item_id"])
    await call("update_task", task_id=news, when="every day at 9am", title="news")
    await call("pause_task", task_id=news)
    await call("resume_task", task_id=news)
    skipped = await call("skip_next_run", task_id=news)
    assert skipped["skipped"]["status"] == "SKIPPED"
    clock.advance(days=3)
    backfilled = await call("backfill_task", task_id=news,
                            start_time=(clock.now() - timedelta(days=3)).isoformat(),
                            end_time=clock.now().isoformat())
    # Tuesday's was skipped, Wednesday's waits to run; Thursday's is new.
    assert [(r["created"], r["run"]["kind"]) for r in backfilled["runs"]] == [
        (False, "scheduled"), (False, "scheduled"), (True, "manual")]
    await call("run_task_now", task_id=news)
    await call("delete_task", task_id=news)
    await call("delete_task", task_id=news)  # again: idempotent, same shape
    return seen


@pytest.fixture
def registry() -> ToolRegistry:
    return build_registry(TZ)


def schema_of(registry: ToolRegistry, name: str) -> dict[str, Any]:
    tool = registry.get(name)
    assert tool is not None
    assert tool.output_schema is not None
    jsonschema.Draft202012Validator.check_schema(tool.output_schema)
    return tool.output_schema


async def test_every_success_validates(rt: Runtime, clock: FakeClock,
                                       registry: ToolRegistry) -> None:
    seen = await every_success(rt, clock)
    for name, payloads in seen.items():
        assert payloads, f"{name} was not called"
        for payload in payloads:
            jsonschema.validate(payload, schema_of(registry, name))
    [run] = seen["get_task"][0]["recent_runs"]
    assert run["status"] == "SUCCEEDED"  # a finished run with its output and deliveries
    assert run["deliveries"]


async def test_every_dry_run_validates(rt: Runtime, registry: ToolRegistry) -> None:
    """What the chat front door's dry runs answer is in the same contract."""
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ)
    task_id = (await registry.call("create_task", {"when": NEWS}, caller)).payload["task"][
        "job_id"]
    dry = Caller(service=rt.service, user_id="alice", timezone=TZ, dry_run=True)
    calls = [("create_task", {"when": "every day at 7am", "task": "run"}),
             ("update_task", {"task_id": task_id, "title": "x"}),
             ("pause_task", {"task_id": task_id}), ("resume_task", {"task_id": task_id}),
             ("delete_task", {"task_id": task_id}), ("run_task_now", {"task_id": task_id}),
             ("skip_next_run", {"task_id": task_id}),
             ("backfill_task", {"task_id": task_id, "start_time": "2026-06-20T00:00:00Z",
                                "end_time": "2026-06-21T00:00:00Z"}),
             ("mark_inbox_read", {"item_id": "01NOPE"})]
    for name, arguments in calls:
        result = await registry.call(name, arguments, dry)
        assert result.payload.get("dry_run") is True, result.payload
        jsonschema.validate(result.payload, schema_of(registry, name))


async def test_errors_validate_too(rt: Runtime, registry: ToolRegistry) -> None:
    """Some clients validate error results as well; they must not break on ours."""
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ)
    for name in TOOLS:
        result: ToolResult = await registry.call(name, {"nonsense": 1}, caller)
        assert result.is_error
        jsonschema.validate(result.payload, schema_of(registry, name))
    parse = await registry.call("create_task", {"when": "每週八提醒我喝水"}, caller)
    jsonschema.validate(parse.payload, schema_of(registry, "create_task"))
    assert parse.payload["error"]["fragment"] == "每週八"


@pytest.mark.parametrize(("name", "payload"), [
    ("create_task", {"ok": True, "created": True, "kind": "message"}),  # no task
    ("create_task", {"ok": True, "created": True, "kind": "sms", "task": {}}),
    ("get_task", {"ok": True, "task": {"job_id": "x"}, "recent_runs": []}),  # not a task
    ("list_tasks", {"ok": True, "tasks": [], "next_page_token": 5}),
    ("run_task_now", {"ok": False, "run": {}}),  # an error without its error object
    ("delete_task", {"ok": False, "error": {"code": "not_found", "message": "m"}}),
])
def test_the_schemas_reject_what_is_not_a_result(registry: ToolRegistry, name: str,
                                                 payload: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(payload, schema_of(registry, name))
