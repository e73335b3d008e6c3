"""Imports point one way: edges -> service -> engine roles -> store / queue -> domain.

The import graph is read from the source (every ``import`` and ``from ... import`` in
src/onthedot, at any depth, including those under ``TYPE_CHECKING`` and inside functions), per
top-level unit: a package (``api``, ``store``) or a module (``service``, ``config``). A unit may
import its own layer or a lower one, never a higher one; units of an isolated layer do not
import each other; no two units import each other through any chain; and no unit imports a
private (``_name``) member of another unit. docs/design.md#layers says why each unit sits where
it does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "onthedot"


@dataclass(frozen=True)
class Layer:
    name: str
    units: frozenset[str]
    isolated: bool = False  # its units may not import each other


def _layer(name: str, *units: str, isolated: bool = False) -> Layer:
    return Layer(name, frozenset(units), isolated)


# Top to bottom. Each edge is its own layer, in the order they host one another: the CLI starts
# the HTTP server and the MCP stdio server; the HTTP server serves /mcp and the chat route; the
# chat front door lets its model call the MCP tools.
LAYERS = [
    _layer("cli", "cli"),
    _layer("http edge", "api"),
    _layer("chat edge", "chat"),
    _layer("mcp edge", "mcp"),
    _layer("service", "runtime", "service", "views", "quotas"),
    _layer("engine roles", "watcher", "worker", "delivery", "actions"),
    _layer("store and queue", "store", "queue", isolated=True),
    _layer("database plumbing", "db"),
    _layer("libraries", "schedule", "nl", "llm", "metrics", "config", "logs",
           "supervisor"),
    _layer("domain", "domain", "web", "__init__"),
]
RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer.units}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. onthedot.mcp.tools
    line: int
    target: str  # the imported module, e.g. onthedot.api.models
    names: tuple[str, ...]  # what ``from target import`` names

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> tuple[str, str]:
    """(module, package) of a source file."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def imports() -> Iterator[Import]:
    for path in sorted(ROOT.rglob("*.py")):
        module, package = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(module, node.lineno, alias.name, ())
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                names = tuple(alias.name for alias in node.names)
                yield Import(module, node.lineno, target, names)
                if target == "onthedot":  # ``from onthedot import nl`` imports the unit nl
                    for name in names:
                        if (ROOT / name).is_dir() or (ROOT / f"{name}.py").is_file():
                            yield Import(module, node.lineno, f"onthedot.{name}", ())


def crossing() -> list[Import]:
    """Imports from one unit of onthedot into another."""
    return [i for i in imports() if i.target.split(".")[0] == "onthedot"
            and unit_of(i.source) != unit_of(i.target)]


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(_module_name(p)[0]) for p in ROOT.rglob("*.py")}
    assert units - RANK.keys() == set(), "give each new package or module a layer"


def test_imports_never_point_up() -> None:
    wrong = [f"{i}: {_where(i.source)} is below {_where(i.target)}" for i in crossing()
             if RANK[unit_of(i.target)] < RANK[unit_of(i.source)]]
    assert not wrong, "\n".join(wrong)


def _where(module: str) -> str:
    return f"{unit_of(module)} ({LAYERS[RANK[unit_of(module)]].name})"


def test_isolated_layers_do_not_import_each_other() -> None:
    wrong = [str(i) for i in crossing()
             if RANK[unit_of(i.target)] == RANK[unit_of(i.source)]
             and LAYERS[RANK[unit_of(i.source)]].isolated]
    assert not wrong, "\n".join(wrong)


def test_no_unit_reaches_into_another_units_private_names() -> None:
    wrong = [f"{i}: {name}" for i in crossing() for name in i.names
             if name.startswith("_") and not name.startswith("__")]
    assert not wrong, "\n".join(wrong)


def test_no_package_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for i in crossing():
        graph.setdefault(unit_of(i.source), set()).add(unit_of(i.target))
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1]
    assert not cycles, cycles


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: every set of units that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
