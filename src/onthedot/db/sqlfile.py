"""A tiny loader for named queries kept in ``.sql`` files next to each backend.

A file holds blocks introduced by ``-- name: some_query``; the text up to the next such line is
the query. Keeping SQL in files (not assembled in Python) makes every statement readable and
greppable, and nothing user-supplied is ever spliced into it.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def parse_named_queries(text: str) -> dict[str, str]:
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    # parts = [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} defined twice")
        queries[name] = body.strip()
    return queries


@cache
def load_queries(package: str, filename: str) -> dict[str, str]:
    return parse_named_queries(files(package).joinpath(filename).read_text("utf-8"))


def load_migrations(package: str, folder: str) -> list[tuple[int, str]]:
    """Numbered migrations ``0001_name.sql`` in version order."""
    found = []
    for entry in files(package).joinpath(folder).iterdir():
        match = re.match(r"^(\d{4})_\w+\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text("utf-8")))
    return sorted(found)
