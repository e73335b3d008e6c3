"""Versioning: a breaking change ships as <name>_v2 and the old name keeps answering.

No tool has needed a v2 yet, so the mechanism is proven with a test-only ``create_task_v2``
whose schema breaks the v1 contract (``when`` and ``task`` required, ``title`` renamed ``name``).
"""

from __future__ import annotations

from typing import Any

import pytest

from onthedot.mcp.registry import Caller, ToolDef, ToolRegistry, check_arguments
from onthedot.mcp.tools import build_registry
from onthedot.runtime import Runtime
from tests.mcp.conftest import NEWS, TZ, error, memory_session, ok


async def _create_v2(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    v1 = build_registry(caller.timezone).get("create_task")
    assert v1 is not None
    renamed = {("title" if k == "name" else k): v for k, v in args.items()}
    return await v1.handler(renamed, caller)


def registry_with_v2() -> ToolRegistry:
    registry = build_registry(TZ)
    v1 = registry.get("create_task")
    assert v1 is not None
    properties = {k: v for k, v in v1.input_schema["properties"].items()
                  if k in ("when", "task", "timezone")}
    properties["name"] = {"type": "string", "description": "A short name.", "maxLength": 200}
    registry.add(ToolDef(
        name="create_task_v2", title="Create a task", description="Schedule a task.",
        input_schema={"type": "object", "properties": properties, "required": ["when", "task"],
                      "additionalProperties": False},
        annotations=v1.annotations, handler=_create_v2))
    return registry


async def test_old_name_keeps_answering_after_v2(rt: Runtime) -> None:
    registry = registry_with_v2()
    async with memory_session(rt, registry=registry) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"create_task", "create_task_v2"} <= tools.keys()
        assert tools["create_task"].description is not None
        assert tools["create_task"].description.startswith("Deprecated: use create_task_v2.")
        # Published: everything listed as required, the optional ones nullable.
        v2_properties = tools["create_task_v2"].inputSchema["properties"]
        assert {k for k, v in v2_properties.items() if "anyOf" not in v} == {"when", "task"}
        old = ok(await session.call_tool("create_task", {"when": NEWS, "title": "news"}))
        new = ok(await session.call_tool("create_task_v2", {
            "when": "every day at 8am", "task": "summarize", "name": "news"}))
        error(await session.call_tool("create_task_v2", {"when": NEWS}),
              "missing_argument", "task")
        error(await session.call_tool("create_task_v2", {
            "when": NEWS, "task": "x", "title": "v1 spelling"}), "unknown_argument", None)
    assert old["task"]["name"] == new["task"]["name"] == "news"
    # A model offered tools afresh gets only the newest version of each.
    offered = [t["function"]["name"] for t in registry.openai_tools()]
    assert "create_task_v2" in offered
    assert "create_task" not in offered


def _tool(name: str, schema: dict[str, Any]) -> ToolDef:
    async def handler(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
        return {}

    return ToolDef(name=name, title=name, description=name, input_schema=schema,
                   annotations=build_registry(TZ).tools[0].annotations, handler=handler)


CLOSED = {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.mark.parametrize(("name", "schema", "message"), [
    ("task.create@v1", CLOSED, "snake_case"),
    ("echo_task", {"type": "object", "properties": {}}, "additionalProperties"),
    ("echo_task", {**CLOSED, "oneOf": [CLOSED]}, "top-level oneOf"),
    ("echo_task", {**CLOSED, "$defs": {}}, "unsupported schema keywords"),
    ("echo_task", {**CLOSED, "properties": {"x": {"$ref": "#/$defs/x"}}}, "unsupported"),
    ("echo_task", {**CLOSED, "properties": {"x": {"type": "object", "properties": {}}}},
     "additionalProperties"),
    ("echo_task", {**CLOSED, "required": ["x"]}, "not a property"),
    ("echo_task_v3", CLOSED, "needs echo_task_v2"),
])
def test_registry_refuses_bad_tools(name: str, schema: dict[str, Any], message: str) -> None:
    registry = ToolRegistry([_tool("other_task", CLOSED)])
    with pytest.raises(ValueError, match=message):
        registry.add(_tool(name, schema))


def test_versions_chain() -> None:
    registry = ToolRegistry([_tool("echo_task", CLOSED)])
    registry.add(_tool("echo_task_v2", CLOSED))
    registry.add(_tool("echo_task_v3", CLOSED))
    assert [(t.name, t.superseded_by) for t in registry.tools] == [
        ("echo_task", "echo_task_v2"), ("echo_task_v2", "echo_task_v3"), ("echo_task_v3", None)]
    with pytest.raises(ValueError, match="registered already"):
        registry.add(_tool("echo_task_v2", CLOSED))


def test_integers_accept_whole_floats_and_refuse_booleans() -> None:
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"n": {"type": "integer", "minimum": 1}}}
    assert check_arguments(schema, {"n": 3.0}, "t") == {"n": 3}
    for bad in (True, 2.5, "3"):
        with pytest.raises(Exception, match="must be"):
            check_arguments(schema, {"n": bad}, "t")
