"""The ``outputSchema`` of each tool: what its structured content looks like.

A result is ``{"ok": true, ...}`` or ``{"ok": false, "error": {...}}`` (``registry.ToolResult``).
The schema admits both, told apart by ``ok``: the MCP specification asks clients to validate
structured content against the output schema and some do so for error results too, so an
error must not break a client that does. The chat front door's dry runs (changing tools that
describe what they would do) are a third shape; they never happen over MCP but are part of
the same contract, so they are admitted too.

Tasks, runs and inbox items are rendered by the models the REST API returns too (``views.py``;
``GET /v1/jobs/{id}``), so their schemas are derived from those models, with references inlined:
some clients resolve no ``$ref``. Those objects stay open (no ``additionalProperties: false``)
because a new member in a result is a compatible change (docs/mcp.md#versioning).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from onthedot.views import InboxItemOut, JobOut, RunOut

STRING = {"type": "string"}
NULLABLE_STRING = {"type": ["string", "null"]}


def _inline(schema: Any, defs: Mapping[str, Any]) -> Any:
    """``schema`` with every local ``$ref`` replaced by its definition, without pydantic's
    generated titles."""
    if isinstance(schema, list):
        return [_inline(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return _inline(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    return {key: _inline(value, defs) for key, value in schema.items()
            if key not in ("$defs", "title")}


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of what ``model.model_dump(mode="json")`` produces, self-contained."""
    schema = model.model_json_schema(mode="serialization")
    inlined: dict[str, Any] = _inline(schema, schema.get("$defs", {}))
    return inlined


TASK = model_schema(JobOut)
RUN = model_schema(RunOut)
INBOX_ITEM = model_schema(InboxItemOut)

ERROR = {
    "type": "object",
    "properties": {
        "ok": {"const": False},
        "error": {
            "type": "object",
            "description": "code: what went wrong (docs/mcp.md#errors); field: the argument "
                           "to fix, or null; expected: what would be accepted",
            "properties": {"code": STRING, "message": STRING, "field": NULLABLE_STRING,
                           "expected": NULLABLE_STRING, "path": STRING, "fragment": STRING,
                           "candidates": {"type": "array", "items": STRING}},
            "required": ["code", "message", "field", "expected"],
        },
    },
    "required": ["ok", "error"],
}


def _branch(ok: bool, members: Mapping[str, Any], required: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "object", "properties": {"ok": {"const": ok}, **members},
            "required": ["ok", *required]}


def result_schema(members: Mapping[str, Any], required: tuple[str, ...],
                  dry_run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A tool's output schema: success with ``members`` (``required`` always present), the
    error shape, and, for a changing tool, its dry-run shape."""
    branches = [_branch(True, members, required)]
    if dry_run is not None:
        branches.append(_branch(True, {"dry_run": {"const": True}, **dry_run},
                                ("dry_run",)))
    branches.append(ERROR)
    return {"type": "object", "anyOf": branches}


PAGE_TOKEN = {"type": ["string", "null"], "description": "pass as page_token for the next page"}
# Every changing tool's dry run (chat front door) says what it would do to which task. It never
# travels over MCP, so its task is not spelled out again (tools/list stays smaller).
ANY_OBJECT = {"type": "object"}
WOULD = {"would": STRING, "task": ANY_OBJECT, "item_id": STRING}

CREATE = result_schema(
    {"created": {"type": "boolean", "description": "false: an idempotency_key returned the "
                 "task created the first time"},
     "task": TASK,
     "kind": {"enum": ["prompt", "news_digest", "message", "webhook"]},
     "understood": {"type": "object", "description": "what the parser read in `when`",
                    "properties": {"matched": STRING, "task": STRING,
                                   "job_params": {"type": "object"}},
                    "required": ["matched", "task", "job_params"]},
     "confirmation": {"type": "string", "description": "one sentence for the user, in their "
                      "language: when, what each run does, where results go"}},
    ("created", "task", "kind", "confirmation"),
    dry_run={"created": {"const": False}, "kind": STRING, "understood": {"type": "object"},
             "confirmation": STRING,
             "would_create": {"type": "object", "properties": {
                 "next_runs": {"type": "array", "items": STRING}}}})
LIST_TASKS = result_schema({"tasks": {"type": "array", "items": TASK},
                            "next_page_token": PAGE_TOKEN}, ("tasks", "next_page_token"))
GET_TASK = result_schema({"task": TASK, "recent_runs": {"type": "array", "items": RUN}},
                         ("task", "recent_runs"))
TASK_ONLY = result_schema({"task": TASK}, ("task",), dry_run=WOULD)
UPDATE = result_schema({"task": TASK}, ("task",),
                       dry_run={"task": ANY_OBJECT, "would_change": ANY_OBJECT})
DELETE = result_schema({"deleted": {"const": True}, "task": TASK}, ("deleted", "task"),
                       dry_run=WOULD)
RUN_NOW = result_schema({"run": RUN}, ("run",), dry_run=WOULD)
BACKFILL = result_schema({"runs": {"type": "array", "items": {
    "type": "object", "properties": {"created": {"type": "boolean"}, "run": RUN},
    "required": ["created", "run"]}}}, ("runs",), dry_run=WOULD)
SKIP_NEXT = result_schema({"skipped": RUN, "task": TASK}, ("skipped", "task"), dry_run=WOULD)
LIST_INBOX = result_schema({"items": {"type": "array", "items": INBOX_ITEM},
                            "next_page_token": PAGE_TOKEN}, ("items", "next_page_token"))
MARK_READ = result_schema({"item": INBOX_ITEM}, ("item",), dry_run=WOULD)
