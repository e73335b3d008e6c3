"""Figures as the median of several repetitions with their spread, and the rows of the table."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(p / 100 * len(ordered))))]


@dataclass
class Figure:
    """One measured quantity: every repetition's value; reported as median (min-max)."""

    values: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def text(self, digits: int = 0) -> str:
        if not self.values:
            return "n/a"
        med = _fmt(self.median, digits)
        if len(self.values) == 1:
            return med
        return f"{med} ({_fmt(min(self.values), digits)}-{_fmt(max(self.values), digits)})"


def _fmt(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


@dataclass
class Row:
    """One line of the results table: a figure of one system in one configuration."""

    section: str  # ingest, burst, dispatch, scan, rss, crash
    system: str  # "onthedot SQLite", "Procrastinate", ...
    case: str  # "1 caller", "2,000 webhooks", ...
    metric: str  # "jobs/s", "p99 s", ...
    figure: Figure | None = None  # None: not available (with ``note`` saying why)
    digits: int = 0
    ceiling: Figure | None = None  # ingest: the load generator's own rate on the same load
    note: str = ""
    extra: dict[str, Figure] = field(default_factory=dict)  # e.g. p50, max, missed

    def value_text(self) -> str:
        return "n/a" if self.figure is None else self.figure.text(self.digits)

    def to_json(self) -> dict[str, Any]:
        return {"section": self.section, "system": self.system, "case": self.case,
                "metric": self.metric, "values": None if self.figure is None else
                self.figure.values, "ceiling": None if self.ceiling is None else
                self.ceiling.values, "note": self.note,
                "extra": {k: v.values for k, v in self.extra.items()}}
