"""Versioned tool definitions, their argument checks and their one result shape.

A tool is a name, a hand-written JSON Schema and a handler over the service layer. The registry
enforces what the MCP SDK's decorators do not: the schema is linted when a tool is registered
(every object closed with ``additionalProperties: false``, no ``$ref``/``$defs``, no
combinators) and every call's arguments are checked against it, so an unknown or mistyped
argument is a correctable error rather than a silently ignored value.

Two forms of each input schema exist. The hand-written one is the contract the server enforces:
its ``required`` lists what must be given, and it carries limits (``minLength``, ``maximum``
...). Clients see ``publish(schema)``: the subset that OpenAI strict function calling, Anthropic
(strict) tool use and Gemini's JSON-schema function declarations all accept (docs/mcp.md,
checked by tests/mcp/test_client_schemas.py). There every property is listed in ``required``,
an optional one also accepts ``null``, which means omitted, and the limits are left to the
descriptions and to the server's own check.

Versioning: a breaking schema change ships as ``<name>_v2`` (``_v3`` ...). Clients cache the tool
list for a whole conversation, so the older name keeps answering; registering the new version
marks the old one deprecated (its description points to the successor) without removing it.

Every call ends as a ``ToolResult``: ``{"ok": true, ...}`` or ``{"ok": false, "error": {"code",
"message", "field", "expected"}}``; the same payload is the structured content and, as JSON, the
text of the MCP result, and what the chat front door feeds back to a model.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mcp.types import ToolAnnotations

from onthedot.domain.errors import ForbiddenError, OnTheDotError
from onthedot.domain.history import acting_channel
from onthedot.domain.jsonvalue import TEXT_EXPECTED, is_finite_number, is_storable_text

if TYPE_CHECKING:
    from onthedot.service import JobService

log = logging.getLogger("onthedot.mcp")

# snake_case verb_noun, optionally _v<N>; the MCP spec allows more, several clients break on dots.
TOOL_NAME = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
VERSION_SUFFIX = re.compile(r"^(?P<base>.+)_v(?P<version>[2-9]|[1-9][0-9]+)$")
# The schema keywords our argument checker understands; anything else is refused at registration.
# No `default` and no `format`: OpenAI's strict mode refuses the first and most `format` values,
# so a default is said in the description (and null means it).
SCHEMA_KEYWORDS = frozenset({
    "type", "description", "properties", "required", "additionalProperties", "enum",
    "minimum", "maximum", "minLength", "maxLength",
})
# What publish() keeps: the keywords every client family accepts (the limits are checked here).
PUBLISHED_KEYWORDS = frozenset({"type", "description", "enum"})
COMBINATORS = ("oneOf", "anyOf", "allOf", "not")


@dataclass(frozen=True)
class Caller:
    """Who a tool call acts for: the same user as the REST API, through the same service."""

    service: JobService
    user_id: str
    timezone: str  # the user's default timezone (settings.default_timezone)
    dry_run: bool = False  # mutating tools describe what they would do and change nothing
    # The token's scopes (onthedot.api.auth): a tool that is not read-only needs "write".
    scopes: frozenset[str] = frozenset({"read", "write", "admin"})
    # The chat front door's model path: the person's sentence (its reminder and e-mail words
    # choose the action and channels of a new task, as on the parser path) and the channels
    # it asked for, used when the model passes no notify_* argument.
    said: str | None = None
    notify: tuple[dict[str, Any], ...] | None = None


Handler = Callable[[dict[str, Any], Caller], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class ToolDef:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]  # the enforced contract; clients see published_schema
    annotations: ToolAnnotations
    handler: Handler = field(compare=False)
    # The JSON Schema of the structured content, success and error (onthedot.mcp.results).
    output_schema: dict[str, Any] | None = None
    superseded_by: str | None = None

    @property
    def listed_description(self) -> str:
        if self.superseded_by is None:
            return self.description
        return f"Deprecated: use {self.superseded_by}. {self.description}"

    @property
    def published_schema(self) -> dict[str, Any]:
        return publish(self.input_schema)


@dataclass(frozen=True)
class ToolResult:
    payload: dict[str, Any]

    @property
    def is_error(self) -> bool:
        return self.payload.get("ok") is not True

    @property
    def text(self) -> str:
        return json.dumps(self.payload, ensure_ascii=False)

    @classmethod
    def failure(cls, error: OnTheDotError, **extra: Any) -> ToolResult:
        return cls({"ok": False, "error": {**error.to_dict(), **extra}})


class ToolError(OnTheDotError):
    """A correctable error of a tool call; ``extra`` members are added to the error object."""

    code = "invalid_argument"
    http_status = 422

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None,
                 expected: str | None = None, extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, code=code, field=field, expected=expected)
        self.extra = dict(extra or {})


class ArgumentError(ToolError):
    """A tool argument does not match the tool's schema (the field names the argument)."""


class ToolRegistry:
    def __init__(self, tools: list[ToolDef] | None = None) -> None:
        self._tools: dict[str, ToolDef] = {}
        for tool in tools or []:
            self.add(tool)

    def add(self, tool: ToolDef) -> None:
        """Register ``tool``; a ``<name>_vN`` deprecates the newest older version of ``name``."""
        if not TOOL_NAME.match(tool.name) or len(tool.name) > 64:
            raise ValueError(f"tool name {tool.name!r} is not snake_case verb_noun[_vN]")
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered already")
        lint_schema(tool.input_schema, tool.name)
        if tool.output_schema is not None and tool.output_schema.get("type") != "object":
            raise ValueError(f"{tool.name}: the output schema must be an object")
        match = VERSION_SUFFIX.match(tool.name)
        if match is not None:
            base, version = match["base"], int(match["version"])
            previous = base if version == 2 else f"{base}_v{version - 1}"
            if previous not in self._tools:
                raise ValueError(f"{tool.name} needs {previous} registered first")
            self._tools[previous] = replace(self._tools[previous], superseded_by=tool.name)
        self._tools[tool.name] = tool

    def get(self, name: str) -> ToolDef | None:
        return self._tools.get(name)

    @property
    def tools(self) -> list[ToolDef]:
        """Every tool that answers, older versions included (marked deprecated)."""
        return list(self._tools.values())

    def openai_tools(self) -> list[dict[str, Any]]:
        """The current versions as OpenAI chat-completions ``tools`` (function schemas)."""
        return [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.published_schema}}
            for t in self._tools.values() if t.superseded_by is None]

    async def call(self, name: str, arguments: Mapping[str, Any] | None,
                   caller: Caller) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:  # no tool, so no argument to name
            return ToolResult.failure(ArgumentError(
                f"there is no tool {name!r}", code="unknown_tool", field=None,
                expected="one of: " + ", ".join(self._tools)))
        # A job's history names the edge of each change: MCP, unless the chat endpoint (which
        # lends its tools to a model) said so first.
        channel = acting_channel.set(acting_channel.get() or "mcp")
        try:
            if not tool.annotations.readOnlyHint and "write" not in caller.scopes:
                raise ForbiddenError(f"{name} changes tasks and this token may only read",
                                     code="insufficient_scope", field=None,
                                     expected="a token with the write scope, or a read-only "
                                              "tool (list_tasks, get_task, ...)")
            args = check_arguments(tool.input_schema, arguments, tool.name)
            return ToolResult({"ok": True, **await tool.handler(args, caller)})
        except OnTheDotError as exc:
            if exc.http_status >= 500:
                log.error("%s: %s", type(exc).__name__, exc.message, exc_info=exc.__cause__)
            extra = dict(exc.extra) if isinstance(exc, ToolError) else {}
            exc.field, path = argument_field(exc.field, tool.input_schema, exc.code)
            if path is not None:
                extra.setdefault("path", path)
            return ToolResult.failure(exc, **extra)
        except Exception as exc:  # a bug: logged with its traceback, answered without one
            log.exception("tool %s failed", name)
            return ToolResult.failure(OnTheDotError(
                f"unexpected {type(exc).__name__}; it has been logged on the server",
                code="internal_error"))
        finally:
            acting_channel.reset(channel)


def argument_field(field: str | None, schema: Mapping[str, Any],
                   code: str) -> tuple[str | None, str | None]:
    """``field`` as the tool argument to fix, and the exact path when that differs.

    An error's ``field`` always names one of the tool's arguments (or is None), so that a model
    can act on it: ``in.minutes`` becomes ``in`` (path ``in.minutes``), an unknown argument
    ``schedual`` becomes None (path ``schedual``), anything else that is not an argument
    (``status`` of a job, ``arguments``) becomes None."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    if field is None or field in properties:
        return field, None
    head = re.split(r"[.\[]", field, maxsplit=1)[0]
    if head in properties:
        return head, field
    if code == "unknown_argument":
        return None, field
    log.debug("error field %r is not an argument; answered as None", field)
    return None, None


# --- schemas -----------------------------------------------------------------------------
def publish(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema clients see: every property required, the optional ones nullable through
    ``anyOf [..., {"type": "null"}]`` (the one nullable form all three client families are
    documented to accept), and only the keywords in ``PUBLISHED_KEYWORDS``."""
    out: dict[str, Any] = {k: v for k, v in schema.items() if k in PUBLISHED_KEYWORDS}
    if schema.get("type") != "object":
        return out
    required = set(schema.get("required", []))
    properties: dict[str, Any] = {}
    for name, sub in schema.get("properties", {}).items():
        published = publish(sub)
        properties[name] = published if name in required else _nullable(published)
    return {**out, "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in schema.items() if k != "description"}
    out: dict[str, Any] = {}
    if "description" in schema:
        out["description"] = schema["description"]
    return {**out, "anyOf": [body, {"type": "null"}]}


def lint_schema(schema: Mapping[str, Any], where: str) -> None:
    """Refuse what some clients cannot read or what ``check_arguments`` cannot enforce."""
    if schema.get("type") != "object":
        raise ValueError(f"{where}: the input schema must be an object")
    for keyword in COMBINATORS:
        if keyword in schema:
            raise ValueError(f"{where}: no top-level {keyword}")
    _lint(schema, where)


def _lint(schema: Mapping[str, Any], where: str) -> None:
    unknown = set(schema) - SCHEMA_KEYWORDS
    if unknown:
        raise ValueError(f"{where}: unsupported schema keywords {sorted(unknown)}")
    if schema.get("type") == "object":
        if schema.get("additionalProperties") is not False:
            raise ValueError(f"{where}: objects need additionalProperties: false")
        properties = schema.get("properties", {})
        for required in schema.get("required", []):
            if required not in properties:
                raise ValueError(f"{where}: required {required!r} is not a property")
        for name, sub in properties.items():
            _lint(sub, f"{where}.{name}")
    elif schema.get("type") not in ("string", "integer", "number", "boolean"):
        raise ValueError(f"{where}: unsupported type {schema.get('type')!r}")


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any] | None,
                    tool: str) -> dict[str, Any]:
    """The arguments, checked against ``schema``. ``null`` counts as omitted: strict clients
    send every argument, the unused ones as null. So does an object none of whose members is
    given (``{"in": {"days": null, "hours": null, ...}}``)."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ArgumentError("the arguments must be a JSON object", field="arguments",
                            expected="a JSON object")
    return _check_object(schema, arguments, "", tool)


def _check_object(schema: Mapping[str, Any], value: Mapping[str, Any], path: str,
                  tool: str) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not is_storable_text(str(key)):  # not echoed back: the answer could not be encoded
            raise ArgumentError(f"{tool} got an argument name that is not text",
                                code="invalid_text", field=path.rstrip(".") or "arguments",
                                expected=TEXT_EXPECTED)
        where = f"{path}{key}"
        if key not in properties:
            near = difflib.get_close_matches(str(key), list(properties), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ArgumentError(f"{tool} has no argument {where!r}{hint}",
                                code="unknown_argument", field=where,
                                expected="only: " + ", ".join(properties))
        if item is None:
            continue
        checked = _check_value(properties[key], item, where, tool)
        if properties[key]["type"] == "object" and not checked:
            continue  # nothing given inside: omitted
        out[key] = checked
    for key in schema.get("required", []):
        if key not in out:
            raise ArgumentError(f"{tool} needs {path}{key}", code="missing_argument",
                                field=f"{path}{key}",
                                expected=properties[key].get("description", "a value"))
    return out


def _check_value(schema: Mapping[str, Any], value: Any, where: str, tool: str) -> Any:
    kind = schema["type"]
    if kind == "object":
        if not isinstance(value, Mapping):
            raise _type_error(where, "a JSON object", value)
        return _check_object(schema, value, f"{where}.", tool)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _type_error(where, "true or false", value)
        return value
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error(where, f"a JSON {kind}", value)
        if not is_finite_number(value):
            raise ArgumentError(f"{where} must be a finite number", field=where,
                                expected=f"a finite JSON {kind}")
        if kind == "integer":
            if isinstance(value, float) and not value.is_integer():
                raise _type_error(where, "a whole number", value)
            value = int(value)
        _check_range(schema, value, where)
        return value
    if not isinstance(value, str):
        raise _type_error(where, "a string", value)
    if not is_storable_text(value):
        raise ArgumentError(f"{where} holds an unpaired surrogate or a NUL character",
                            code="invalid_text", field=where, expected=TEXT_EXPECTED)
    if "enum" in schema and value not in schema["enum"]:
        raise ArgumentError(f"{where} cannot be {value!r}", field=where,
                            expected="one of: " + ", ".join(schema["enum"]))
    if len(value.strip()) < schema.get("minLength", 0) or len(value) > schema.get(
            "maxLength", len(value)):
        raise ArgumentError(f"{where} has the wrong length", field=where,
                            expected=f"{schema.get('minLength', 0)} to "
                                     f"{schema.get('maxLength', 'any number of')} characters")
    return value


def _check_range(schema: Mapping[str, Any], value: float, where: str) -> None:
    low, high = schema.get("minimum"), schema.get("maximum")
    if (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            expected = f"a number from {low} to {high}"
        else:
            expected = f"a number >= {low}" if low is not None else f"a number <= {high}"
        raise ArgumentError(f"{where} is out of range", field=where, expected=expected)


def _type_error(where: str, expected: str, value: Any) -> ArgumentError:
    got = "null" if value is None else type(value).__name__
    return ArgumentError(f"{where} must be {expected}, not {got}", field=where,
                         expected=expected)
