"""Every tool's schema against each major client's published rules.

A client that cannot read a tool's schema refuses the whole request (OpenAI and Gemini answer
400 for one bad keyword in any tool), so each family's documented rules are encoded here as a
checker and every tool is checked as it is listed (``tools/list``) and as the chat front door
offers it to a model (``openai_tools``). Each checker is also shown to catch what its vendor
refuses, so that a check that cannot fail does not pass for one that holds.

Sources (read 2026; the rules only get looser over time, so a schema inside them stays valid):

* OpenAI strict function calling / Structured Outputs, "Supported schemas": types string,
  number, boolean, integer, object, array, enum, anyOf; root an object, not anyOf; every
  property in ``required``, optional ones as a union with null; ``additionalProperties: false``
  on every object; string ``pattern`` and ``format`` (date-time, time, date, duration, email,
  hostname, ipv4, ipv6, uuid); number ``multipleOf``, ``(exclusive)minimum/maximum``; array
  ``minItems``/``maxItems``; at most 5000 properties, 10 levels, 1000 enum values and 120,000
  characters of names and enum values. ``default``, ``minLength`` and ``maxLength`` are refused
  in strict mode (openai/openai-node#1988; "'default' is not permitted", dotnet/extensions#6196).
  An enum value must validate against its node's type (can1357/oh-my-pi#1835).
  Function names: a-z, A-Z, 0-9, underscores and dashes, at most 64.
* Anthropic tool use: ``name`` matches ``^[a-zA-Z0-9_-]{1,64}$``; ``input_schema`` is a JSON
  Schema object without oneOf/anyOf/allOf at the top level. Strict tool use (structured
  outputs, "JSON Schema limitations"): no numeric constraints (minimum, maximum, multipleOf),
  no string lengths, minItems only 0 or 1, ``additionalProperties`` false, enums of primitives,
  formats date-time, time, date, duration, email, hostname, uri, ipv4, ipv6, uuid.
* Gemini function declarations through ``parametersJsonSchema`` (the JSON-schema path MCP
  clients such as Gemini CLI use): "only the following properties are supported": $id, $defs,
  $ref, $anchor, type, format, title, description, enum, items, prefixItems, minItems,
  maxItems, minimum, maximum, anyOf, oneOf, properties, additionalProperties, required (and
  propertyOrdering); enums of strings and numbers. Whether ``type`` may be a list is not said,
  so it is held to one type name (null goes through anyOf, which Google announced with the
  JSON Schema support). Names start with a letter or underscore; letters, digits, underscores,
  dots, colons and dashes, at most 64.
* MCP (2025-11-25): tool names of 1-128 characters from A-Z a-z 0-9 _ - .; ``inputSchema`` and
  ``outputSchema`` are JSON Schema objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import pytest
from mcp.types import Tool

from onthedot.mcp.registry import Caller
from onthedot.mcp.server import mcp_tool
from onthedot.mcp.tools import build_registry
from onthedot.runtime import Runtime
from tests.mcp.conftest import TZ, memory_session, ok

Check = Callable[[str, dict[str, Any]], list[str]]
JSON_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}


Node = tuple[str, dict[str, Any], int]


def nodes(schema: Any, path: str = "$", depth: int = 1) -> Iterator[Node]:
    """Every schema node with its path and its object nesting depth."""
    if not isinstance(schema, dict):
        return
    yield path, schema, depth
    inner = depth + 1 if "properties" in schema else depth
    for name, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}", inner)
    for i, sub in enumerate(schema.get("anyOf", [])):
        yield from nodes(sub, f"{path}|{i}", depth)
    if "items" in schema:
        yield from nodes(schema["items"], f"{path}[]", depth)
    for name, sub in schema.get("$defs", {}).items():
        yield from nodes(sub, f"{path}$defs.{name}", depth)


def types_of(node: dict[str, Any]) -> list[str]:
    kind = node.get("type", [])
    return [kind] if isinstance(kind, str) else list(kind)


def enum_fits(value: Any, kinds: list[str]) -> bool:
    checks = {"string": lambda v: isinstance(v, str), "null": lambda v: v is None,
              "boolean": lambda v: isinstance(v, bool),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool)}
    return any(checks[k](value) for k in kinds if k in checks)


# --- OpenAI -------------------------------------------------------------------------------
OPENAI_KEYWORDS = {
    "type", "description", "enum", "properties", "required", "additionalProperties", "items",
    "anyOf", "$ref", "$defs", "pattern", "format", "multipleOf", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "minItems", "maxItems"}
OPENAI_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6",
                  "uuid"}


def openai_strict(name: str, schema: dict[str, Any]) -> list[str]:
    found: list[str] = []
    if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name):
        found.append(f"name {name!r}")
    if schema.get("type") != "object" or "anyOf" in schema:
        found.append("$: the root must be an object, not anyOf")
    properties = enums = chars = 0
    for path, node, depth in nodes(schema):
        if extra := set(node) - OPENAI_KEYWORDS:
            found.append(f"{path}: unsupported {sorted(extra)}")
        if not set(types_of(node)) <= JSON_TYPES:
            found.append(f"{path}: type {node['type']!r}")
        if "type" not in node and "anyOf" not in node and "$ref" not in node:
            found.append(f"{path}: no type")
        if "format" in node and node["format"] not in OPENAI_FORMATS:
            found.append(f"{path}: format {node['format']!r}")
        if "object" in types_of(node):
            if node.get("additionalProperties") is not False:
                found.append(f"{path}: additionalProperties must be false")
            if set(node.get("required", [])) != set(node.get("properties", {})):
                found.append(f"{path}: every property must be required")
            properties += len(node.get("properties", {}))
            chars += sum(len(k) for k in node.get("properties", {}))
        for value in node.get("enum", []):
            enums += 1
            chars += len(str(value))
            if not enum_fits(value, types_of(node)):
                found.append(f"{path}: enum value {value!r} is not a {node.get('type')}")
        if "null" in types_of(node) and "enum" in node and None not in node["enum"]:
            found.append(f"{path}: nullable, but its enum excludes null")
        if depth > 10:
            found.append(f"{path}: nested {depth} levels")
    if properties > 5000 or enums > 1000 or chars > 120_000:
        found.append("too large")
    return found


# --- Anthropic ----------------------------------------------------------------------------
ANTHROPIC_STRICT_REFUSED = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                            "multipleOf", "minLength", "maxLength", "maxItems",
                            "minProperties", "maxProperties"}
ANTHROPIC_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4",
                     "ipv6", "uuid"}


def anthropic(name: str, schema: dict[str, Any]) -> list[str]:
    found: list[str] = []
    if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name):
        found.append(f"name {name!r}")
    if schema.get("type") != "object":
        found.append("$: input_schema must be an object")
    if combinators := {"oneOf", "anyOf", "allOf"} & schema.keys():
        found.append(f"$: no {sorted(combinators)} at the top level")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        found.append(f"not JSON Schema: {exc.message}")
    return found


def anthropic_strict(name: str, schema: dict[str, Any]) -> list[str]:
    found = anthropic(name, schema)
    for path, node, _depth in nodes(schema):
        if refused := ANTHROPIC_STRICT_REFUSED & node.keys():
            found.append(f"{path}: unsupported {sorted(refused)}")
        if node.get("minItems", 0) not in (0, 1):
            found.append(f"{path}: minItems {node['minItems']}")
        if "format" in node and node["format"] not in ANTHROPIC_FORMATS:
            found.append(f"{path}: format {node['format']!r}")
        if "object" in types_of(node) and node.get("additionalProperties") is not False:
            found.append(f"{path}: additionalProperties must be false")
        if any(isinstance(v, dict | list) for v in node.get("enum", [])):
            found.append(f"{path}: enum values must be primitives")
        if str(node.get("$ref", "#")).startswith(("http:", "https:")):
            found.append(f"{path}: external $ref")
    return found


# --- Gemini -------------------------------------------------------------------------------
GEMINI_KEYWORDS = {
    "$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description", "enum",
    "items", "prefixItems", "minItems", "maxItems", "minimum", "maximum", "anyOf", "oneOf",
    "properties", "additionalProperties", "required", "propertyOrdering"}


def gemini(name: str, schema: dict[str, Any]) -> list[str]:
    found: list[str] = []
    if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}", name):
        found.append(f"name {name!r}")
    if schema.get("type") != "object":
        found.append("$: parameters must be an object")
    for path, node, _depth in nodes(schema):
        if extra := set(node) - GEMINI_KEYWORDS:
            found.append(f"{path}: unsupported {sorted(extra)}")
        if "type" in node and not (isinstance(node["type"], str) and node["type"] in JSON_TYPES):
            found.append(f"{path}: type {node['type']!r} (one type name; null through anyOf)")
        for value in node.get("enum", []):
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                found.append(f"{path}: enum value {value!r}")
    return found


# --- MCP ----------------------------------------------------------------------------------
def mcp_rules(tool: Tool) -> list[str]:
    found: list[str] = []
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", tool.name):
        found.append(f"name {tool.name!r}")
    for key, schema in (("inputSchema", tool.inputSchema), ("outputSchema", tool.outputSchema)):
        if not isinstance(schema, dict) or schema.get("type") != "object":
            found.append(f"{key} must be an object schema")
        else:
            jsonschema.Draft202012Validator.check_schema(schema)
    return found


CLIENTS: dict[str, Check] = {"openai_strict": openai_strict, "anthropic": anthropic,
                             "anthropic_strict": anthropic_strict, "gemini": gemini}
LISTED = [mcp_tool(t) for t in build_registry(TZ).tools]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("tool", LISTED, ids=[t.name for t in LISTED])
def test_every_listed_tool_meets_the_client_rules(tool: Tool, client: str) -> None:
    assert CLIENTS[client](tool.name, tool.inputSchema) == []


@pytest.mark.parametrize("tool", LISTED, ids=[t.name for t in LISTED])
def test_every_listed_tool_meets_the_mcp_rules(tool: Tool) -> None:
    assert mcp_rules(tool) == []


def test_the_chat_front_door_offers_strict_ready_functions() -> None:
    offered = build_registry(TZ).openai_tools()
    assert len(offered) == len(LISTED)
    for tool in offered:
        function = tool["function"]
        assert openai_strict(function["name"], function["parameters"]) == []
        assert gemini(function["name"], function["parameters"]) == []


async def test_the_schemas_listed_over_mcp_are_the_checked_ones(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        listed = (await session.list_tools()).tools
    assert [t.model_dump() for t in listed] == [t.model_dump() for t in LISTED]


# --- the checkers catch what their vendor refuses ----------------------------------------
def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


GOOD = _object(a={"type": "string", "description": "x"})


@pytest.mark.parametrize(("client", "name", "schema", "violation"), [
    ("openai_strict", "t", {**GOOD, "required": []}, "every property must be required"),
    ("openai_strict", "t", {**GOOD, "additionalProperties": True}, "additionalProperties"),
    ("openai_strict", "t", _object(a={"type": "string", "default": "x"}), "default"),
    ("openai_strict", "t", _object(a={"type": "string", "minLength": 1}), "minLength"),
    ("openai_strict", "t", _object(a={"type": "string", "format": "uri"}), "format"),
    ("openai_strict", "t", _object(a={"anyOf": [{"type": "string", "enum": ["x"]},
                                                {"type": "null", "enum": ["x"]}]}), "enum value"),
    ("openai_strict", "t", _object(a={"type": ["string", "null"], "enum": ["x"]}),
     "excludes null"),
    ("openai_strict", "t", {"anyOf": [GOOD]}, "root"),
    ("openai_strict", "task.create@v1", GOOD, "name"),
    ("anthropic", "t", {**GOOD, "anyOf": [GOOD]}, "top level"),
    ("anthropic", "t", {**GOOD, "type": "objekt"}, "not JSON Schema"),
    ("anthropic", "a" * 65, GOOD, "name"),
    ("anthropic_strict", "t", _object(a={"type": "integer", "maximum": 9}), "maximum"),
    ("anthropic_strict", "t", _object(a={"type": "string", "maxLength": 9}), "maxLength"),
    ("anthropic_strict", "t", {**GOOD, "additionalProperties": True}, "additionalProperties"),
    ("gemini", "t", _object(a={"type": ["string", "null"]}), "one type name"),
    ("gemini", "t", _object(a={"type": "string", "default": "x"}), "default"),
    ("gemini", "t", _object(a={"type": "string", "minLength": 1}), "minLength"),
    ("gemini", "t", _object(a={"type": "string", "const": "x"}), "const"),
    ("gemini", "1tool", GOOD, "name"),
])
def test_each_checker_catches_what_its_client_refuses(client: str, name: str,
                                                      schema: dict[str, Any],
                                                      violation: str) -> None:
    assert CLIENTS[client]("t", GOOD) == []
    found = CLIENTS[client](name, schema)
    assert any(violation in f for f in found), found


# --- what a strict client sends is accepted -----------------------------------------------
def strict_call(tool: Tool, **given: Any) -> dict[str, Any]:
    """The arguments of a strict client: every property present, the unused ones null."""
    arguments = {name: given.get(name) for name in tool.inputSchema["properties"]}
    jsonschema.validate(arguments, tool.inputSchema)
    return arguments


async def test_a_strict_client_calls_every_tool(rt: Runtime) -> None:
    by_name = {t.name: t for t in LISTED}
    async with memory_session(rt) as session:
        async def call(name: str, **given: Any) -> dict[str, Any]:
            return ok(await session.call_tool(name, strict_call(by_name[name], **given)))

        created = await call("create_task", when="every day at 9am", task="stand up")
        task = created["task"]
        assert task["job_params"]["timezone"] == TZ  # null timezone: the default
        assert task["action"] == {"type": "message", "text": "stand up"}  # null kind: auto
        assert task["misfire_policy"] == "run_late"  # null: the default
        assert task["notify"] == [{"channel": "inbox"}]  # null notify_inbox: the inbox
        # A nested object of nulls is not given either.
        nulls_in = {"days": None, "hours": None, "minutes": None, "seconds": None}
        soon = await call("create_task", task="tea", **{"in": {**nulls_in, "minutes": 5}})
        assert soon["task"]["next_run_at"] == "2026-06-22T02:05:00Z"
        later = await call("create_task", task="tea", when="in 1 hour", **{"in": nulls_in})
        assert later["task"]["next_run_at"] == "2026-06-22T03:00:00Z"
        task_id = task["job_id"]
        assert len((await call("list_tasks"))["tasks"]) == 3  # null page_size: 20
        await call("get_task", task_id=task_id)
        renamed = await call("update_task", task_id=task_id, title="standup")
        assert renamed["task"]["name"] == "standup"
        assert renamed["task"]["job_params"] == task["job_params"]  # nulls change nothing
        assert renamed["task"]["action"] == task["action"]
        await call("pause_task", task_id=task_id)
        await call("resume_task", task_id=task_id)
        await call("run_task_now", task_id=task_id)
        assert (await call("list_inbox"))["items"] == []
        await call("delete_task", task_id=task_id)


def test_strict_arguments_validate_against_every_listed_schema() -> None:
    for tool in LISTED:
        required = {k for k, v in tool.inputSchema["properties"].items() if "anyOf" not in v}
        strict_call(tool, **dict.fromkeys(required, "x"))
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({}, tool.inputSchema)  # a strict client cannot leave one out


async def test_the_registry_still_takes_arguments_left_out(rt: Runtime) -> None:
    """A client that is not strict sends only what it means: the published schema lists every
    argument as required, the server does not."""
    registry = build_registry(TZ)
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ)
    result = await registry.call("create_task", {"when": "now", "task": "ping"}, caller)
    assert result.payload["ok"] is True, result.payload
    assert json.loads(result.text)["task"]["job_params"]["type"] == "immediate"
