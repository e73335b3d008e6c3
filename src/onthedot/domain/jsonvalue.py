"""What a decoded JSON value must be before we store it or show it, shared by every edge, the
service and the store's codec.

Python's ``json`` accepts more than can be stored or sent on: lone surrogates (``"\\ud800"``)
that UTF-8 cannot encode, NUL characters that PostgreSQL text cannot hold, ``NaN`` and
``Infinity`` that JSON does not have, and nesting deep enough to exhaust a serialiser's
recursion limit. ``first_problem`` finds the first of these in a value, with the path to it, so
the caller can name the field. The walks are iterative: a hostile value cannot exhaust the stack.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

# Deepest nesting (objects and arrays, the outermost one included) accepted in a request body
# and shown in a response; far below the ~255 levels where pydantic's serialiser gives up.
MAX_JSON_DEPTH = 64
TEXT_EXPECTED = "UTF-8 text without unpaired surrogates (\\ud800-\\udfff) or NUL (\\u0000)"
_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")


@dataclass(frozen=True)
class JsonProblem:
    path: str  # dotted, with [i] for array items: "action.headers.X-Token", "body[3]"
    kind: str  # "text" | "number" | "depth"
    detail: str


def is_storable_text(text: str) -> bool:
    return _UNSTORABLE.search(text) is None


def is_finite_number(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def depth_of(value: Any) -> int:
    """How many containers (objects and arrays) nest at the deepest point; 0 for a scalar."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = _children(item)
        if children is None:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for _key, child in children)
    return deepest


def first_problem(value: Any, path: str, *, max_depth: int = MAX_JSON_DEPTH) -> JsonProblem | None:
    """The first thing in ``value`` that cannot be stored or shown, or None.

    A too-deep value is reported at the top-level member that holds the deep part
    (``action.body``), not at the full path, which would be as long as the nesting.
    """
    stack: list[tuple[Any, str, int, str]] = [(value, path, 1, path)]
    while stack:
        item, where, level, member = stack.pop()
        if isinstance(item, str):
            if not is_storable_text(item):
                return JsonProblem(where, "text", f"{where} holds an unpaired surrogate or a NUL")
            continue
        if not is_finite_number(item):
            return JsonProblem(where, "number", f"{where} is not a finite number")
        children = _children(item)
        if children is None:
            continue
        if level > max_depth:
            return JsonProblem(member, "depth", f"{member} is nested deeper than {max_depth} "
                                                f"levels")
        for key, child in reversed(children):
            if isinstance(key, str) and not is_storable_text(key):
                return JsonProblem(where, "text", f"a key in {where} holds an unpaired "
                                                  "surrogate or a NUL")
            child_path = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}"
            stack.append((child, child_path, level + 1, child_path if level == 1 else member))
    return None


def _children(value: Any) -> list[tuple[str | int, Any]] | None:
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list | tuple):
        return list(enumerate(value))
    return None


# What takes the place of a character that cannot be stored: U+FFFD, the replacement character
# a UTF-8 decoder writes for bytes it cannot read.
REPLACEMENT = "\ufffd"


def storable_text(text: str) -> str:
    """``text`` with every unpaired surrogate and NUL replaced by U+FFFD."""
    return text if is_storable_text(text) else _UNSTORABLE.sub(REPLACEMENT, text)


def storable(value: Any) -> Any:
    """``value`` with every string in it, keys included, made storable (``storable_text``), at
    any depth; containers are copied only where something changed. For what comes from outside
    (an endpoint's answer, a feed's titles, an error text quoting either): no byte of it may
    make recording a run's result fail. Iterative, like the walks above: a deep value cannot
    exhaust the stack."""
    if isinstance(value, str):
        return storable_text(value)
    if first_problem(value, "", max_depth=1 << 30) is None:
        return value  # the common case: nothing to copy
    root: list[Any] = [value]
    # (container to fill, its position in its parent, the original) — filled bottom-up.
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, slot, item = stack.pop()
        if isinstance(item, str):
            parent[slot] = storable_text(item)
        elif isinstance(item, dict):
            copy: dict[Any, Any] = {}
            for key, child in item.items():
                new_key = storable_text(key) if isinstance(key, str) else key
                copy[new_key] = child
                stack.append((copy, new_key, child))
            parent[slot] = copy
        elif isinstance(item, list | tuple):
            items = list(item)
            for index, child in enumerate(items):
                stack.append((items, index, child))
            parent[slot] = items
        else:
            parent[slot] = item
    # Tuples come back as lists: JSON has only arrays.
    return root[0]
