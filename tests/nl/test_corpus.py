"""The corpus: every line's JobParams, task and first fire time, plus texts that must fail.

Expected values in corpus.jsonl were written by hand from the documented rules (see
docs/natural-language.md); the first fire time is computed by onthedot.schedule from the parsed
JobParams, so a line checks the parser and the rules of time together.
"""

from __future__ import annotations

import json
from collections import Counter
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


CORPUS = _load("corpus.jsonl")
FAILURES = _load("failures.jsonl")


def _id(row: dict[str, Any]) -> str:
    return f"{row['text']}@{row.get('timezone', 'UTC')}"


def test_corpus_is_large_and_mixed() -> None:
    kinds = Counter(_script(row["text"]) for row in CORPUS)
    assert len(CORPUS) >= 300
    assert min(kinds.values()) >= 80, kinds
    assert {row["timezone"] for row in CORPUS} >= {
        "Asia/Taipei", "Asia/Shanghai", "America/New_York", "Europe/London", "UTC",
    }  # fmt: skip


def _script(text: str) -> str:
    if not has_cjk(text):
        return "en"
    simplified = set("点个号后时钟礼帮请这会开总结财经闻读发两们过给周")
    return "zh-Hans" if any(ch in simplified for ch in text) else "zh-Hant"


@pytest.mark.parametrize("row", CORPUS, ids=_id)
def test_corpus_line(row: dict[str, Any]) -> None:
    now = datetime.fromisoformat(row["now"])
    result = parse(row["text"], now=now, timezone=row["timezone"])
    params = result.job_params
    assert params.type == row["type"]
    assert params.timezone == row["timezone"]
    assert params.schedule == row.get("schedule")
    assert params.time == row.get("time")
    assert result.task == row["task"]
    assert result.matched
    assert all(word in row["text"] for word in result.matched.split())
    expected_next = datetime.fromisoformat(row["next"][0])
    assert result.next_runs(1) == [expected_next]


@pytest.mark.parametrize("row", FAILURES, ids=lambda r: r["text"])
def test_failure(row: dict[str, Any]) -> None:
    now = datetime.fromisoformat(row.get("now", DEFAULT_NOW))
    with pytest.raises(ParseError) as caught:
        parse(row["text"], now=now, timezone=row.get("timezone", "Asia/Taipei"))
    error = caught.value
    assert error.code == "could_not_understand"
    assert error.field is not None
    assert row["field"] in error.field
    assert error.expected
    # The message is in the language of the request.
    assert has_cjk(error.message) == has_cjk(row["text"])
