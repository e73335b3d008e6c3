"""The phrase families of issue 11, judged by the next three fire times.

corpus_families.jsonl holds requests people type that the first parser refused or read wrongly:
several times a day, windows with a step, quarters and fortnights, intervals that do not divide
the clock, calendar dates with weekdays and slashes, idioms, task texts with time words in them,
holidays and lunar dates. Each line gives the job type, the task and the next fire times (one for
a one-time job, three for a recurring one), computed by hand from docs/natural-language.md; the
schedule text itself is not compared, so any representation that fires at those instants passes.
failures_families.jsonl holds what must be refused, and the fragment the error must name.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from onthedot.domain.errors import ParseError
from onthedot.nl import parse
from onthedot.nl.lang import has_cjk

HERE = Path(__file__).parent
DEFAULT_NOW = "2026-11-29T10:00:00+08:00"


def _load(name: str) -> list[dict[str, Any]]:
    lines = (HERE / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


CORPUS = _load("corpus_families.jsonl")
FAILURES = _load("failures_families.jsonl")


def test_families_are_covered() -> None:
    assert len(CORPUS) >= 150
    scripts = {"en": 0, "zh": 0}
    for row in CORPUS:
        scripts["zh" if has_cjk(row["text"]) else "en"] += 1
        assert len(row["next"]) == (3 if row["type"] == "recurring" else 1), row["text"]
    assert min(scripts.values()) >= 60, scripts


@pytest.mark.parametrize("row", CORPUS, ids=lambda r: f"{r['family']}:{r['text']}@{r['timezone']}")
def test_family_line(row: dict[str, Any]) -> None:
    now = datetime.fromisoformat(row["now"])
    result = parse(row["text"], now=now, timezone=row["timezone"])
    assert result.job_params.type == row["type"]
    assert result.job_params.timezone == row["timezone"]
    assert result.task == row["task"]
    assert result.matched
    expected = [datetime.fromisoformat(t) for t in row["next"]]
    got = result.next_runs(len(expected))
    assert got == expected, [t.astimezone(expected[0].tzinfo).isoformat() for t in got]
    # The offsets written in the corpus are the zone's own: a DST slip would show here too.
    assert [t.astimezone(result_zone(row)).isoformat() for t in got] == row["next"]


def result_zone(row: dict[str, Any]) -> Any:
    from zoneinfo import ZoneInfo

    return ZoneInfo(row["timezone"])


@pytest.mark.parametrize("row", FAILURES, ids=lambda r: f"{r['family']}:{r['text']}")
def test_family_refusal(row: dict[str, Any]) -> None:
    now = datetime.fromisoformat(row.get("now", DEFAULT_NOW))
    with pytest.raises(ParseError) as caught:
        parse(row["text"], now=now, timezone=row.get("timezone", "Asia/Taipei"))
    error = caught.value
    assert error.code == "could_not_understand"
    assert error.field is not None
    assert row["field"] in error.field, error.field
    assert error.expected
    assert has_cjk(error.message) == has_cjk(row["text"])
    if row.get("question"):
        assert error.message.rstrip().endswith(("?", "？")), error.message
