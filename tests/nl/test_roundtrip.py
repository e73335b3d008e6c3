"""What the confirmation says reads back to the same schedule.

A confirmation that the parser itself would read differently is the worst kind of error: the
user sees a sentence, agrees, and gets another schedule. For every phrase the corpus accepts,
and for phrases generated from the grammar of the issue 21 families (exceptions, month ends and
working days, days around holidays, clock words, ordinal days), the words the confirmation uses
for the time are parsed again at the same instant and zone, and must give the same next fire
times, start dates included ("every 2 weeks on Friday at 15:00, starting 2026-12-04"). One
form says what no request can, a list of dates ("on 2027-05-07, 2028-05-12, … (73 dates)"):
read back, it must be refused, never read as another schedule.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onthedot.domain.errors import ParseError
from onthedot.nl import ParseResult, parse, render_confirmation
from onthedot.nl.describe import describe
from onthedot.nl.parts import Language

HERE = Path(__file__).parent
LANGUAGES: tuple[Language, ...] = ("en", "zh-Hant", "zh-Hans")
RUNS = 5


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in ("corpus.jsonl", "corpus_families.jsonl"):
        text = (HERE / name).read_text(encoding="utf-8")
        rows.extend(json.loads(line) for line in text.splitlines() if line.strip())
    return rows


def _said(result: ParseResult, language: Language) -> str:
    """The words the confirmation uses for the time, checked to be in the confirmation."""
    params = result.job_params
    if params.type == "recurring":
        assert params.schedule is not None
        when = describe(params.schedule, language)
    else:
        assert params.time is not None
        when = datetime.fromisoformat(params.time).strftime("%Y-%m-%d %H:%M")
    assert when in render_confirmation(result, result.now, language)
    return when


def _unsayable(schedule: str | None) -> bool:
    """A list of dates no rule states ("on 2027-05-07, 2028-05-12, … (73 dates)" for two days
    before Mother's Day): said as the dates, it may read back refused; a list of lunar dates or
    Easters is said by its name, and reads back."""
    return schedule is not None and "RDATE" in schedule


def _second_of_repeated_hour(result: ParseResult, zone: str) -> bool:
    """A one-time instant in the second pass of a repeated hour (01:30 after the clocks went
    back): its wall time, as the confirmation shows it, names the first pass. Not covered here
    (the confirmation does not show the offset yet)."""
    if result.job_params.time is None:
        return False
    instant = datetime.fromisoformat(result.job_params.time)
    wall = instant.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    return wall.replace(tzinfo=ZoneInfo(zone), fold=0) != instant


def assert_reads_back(result: ParseResult, zone: str) -> None:
    if _second_of_repeated_hour(result, zone):
        return
    for language in LANGUAGES:
        said = _said(result, language)
        try:
            again = parse(said, now=result.now, timezone=zone)
        except ParseError:
            assert _unsayable(result.job_params.schedule), (language, said)
            continue
        assert again.job_params.type == result.job_params.type, (language, said)
        assert again.next_runs(RUNS) == result.next_runs(RUNS), (language, said)


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['text']}@{r['timezone']}")
def test_a_corpus_confirmation_reads_back(row: dict[str, Any]) -> None:
    if row["type"] == "immediate":
        return  # "now" has no time to say back
    result = parse(row["text"], now=datetime.fromisoformat(row["now"]), timezone=row["timezone"])
    assert_reads_back(result, row["timezone"])


# Phrases generated from the grammar of the new families, in the three scripts.
EN_DAYS = ["Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays", "Sundays"]
HANT_DAYS = ["週一", "週二", "週三", "週四", "週五", "週六", "週日"]
HANS_DAYS = ["周一", "周二", "周三", "周四", "周五", "周六", "周日"]
ZONES = ["Asia/Taipei", "Asia/Shanghai", "America/New_York", "Europe/London"]


@st.composite
def exception_phrases(draw: st.DrawFn) -> tuple[str, frozenset[int], frozenset[int]]:
    """(phrase, the days of its base recurrence, the days it leaves out)."""
    script = draw(st.sampled_from(["en", "zh-Hant", "zh-Hans"]))
    base = draw(st.sampled_from(["daily", "weekdays"]))
    base_days = frozenset(range(7)) if base == "daily" else frozenset(range(5))
    gone = draw(st.sets(st.integers(0, 6), min_size=1, max_size=3))
    hour = draw(st.integers(0, 23))
    if script == "en":
        words = " and ".join(EN_DAYS[d] for d in sorted(gone))
        lead = draw(st.sampled_from(["except", "but not on", "excluding", "except on"]))
        every = "every day" if base == "daily" else "every weekday"
        text = f"{every} at {hour}:00 {lead} {words}"
    else:
        names = HANT_DAYS if script == "zh-Hant" else HANS_DAYS
        words = "、".join(names[d] for d in sorted(gone))
        every = "每天" if base == "daily" else "每個工作日" if script == "zh-Hant" else "每个工作日"
        form = draw(st.sampled_from(["post", "pre"]))
        text = (f"{every}{hour}:00，{words}除外" if form == "post"
                else f"除了{words}，{every}{hour}:00")
    return text, base_days, frozenset(gone)


@settings(max_examples=150, deadline=None)
@given(phrase=exception_phrases(), minutes=st.integers(0, 366 * 24 * 60),
       zone=st.sampled_from(ZONES))
def test_an_exception_is_never_dropped_or_inverted(
    phrase: tuple[str, frozenset[int], frozenset[int]], minutes: int, zone: str
) -> None:
    text, base, gone = phrase
    now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    if not base - gone:  # nothing is left: refused, naming the exception
        with pytest.raises(ParseError) as refused:
            parse(text, now=now, timezone=zone)
        assert refused.value.field
        return
    result = parse(text, now=now, timezone=zone)
    days = {t.astimezone(ZoneInfo(zone)).weekday() for t in result.next_runs(14)}
    assert days == base - gone, text
    assert_reads_back(result, zone)


@st.composite
def month_phrases(draw: st.DrawFn) -> str:
    script = draw(st.sampled_from(["en", "zh-Hant", "zh-Hans"]))
    period = draw(st.sampled_from(["month", "quarter"]))
    kind = draw(st.sampled_from(["workday", "back", "before", "ordinal"]))
    hour = draw(st.integers(0, 23))
    n = draw(st.integers(1, 5))
    if script == "en":
        ordinal = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}[n]
        last = draw(st.booleans())
        which = {
            "workday": f"the {'last' if last else ordinal} working day",
            "back": f"the {n}{'st' if n == 1 else 'nd' if n == 2 else 'rd' if n == 3 else 'th'}"
                    "-to-last day",
            "before": f"{n} days before the end",
            "ordinal": ordinal if period == "month" else "the last day",
        }[kind]
        tail = "of the month" if kind == "ordinal" and period == "month" else f"of every {period}"
        lead = "every " if kind == "ordinal" and period == "month" else ""
        return f"{lead}{which} {tail} at {hour}:00"
    hant = script == "zh-Hant"
    every = "每月" if period == "month" else "每季"
    numeral = "一二三四五"[n - 1]
    which = {
        "workday": (("最後一個" if hant else "最后一个") if draw(st.booleans())
                    else f"第{numeral}{'個' if hant else '个'}") + "工作日",
        "back": f"{'倒數' if hant else '倒数'}第{numeral}天",
        "before": f"{'月底' if period == 'month' else '季末'}前{numeral}天",
        "ordinal": f"第{numeral}天" if period == "month" else ("最後一天" if hant else "最后一天"),
    }[kind]
    return f"{every}{which}{hour}:00"


@settings(max_examples=150, deadline=None)
@given(text=month_phrases(), minutes=st.integers(0, 366 * 24 * 60),
       zone=st.sampled_from(ZONES))
def test_month_ends_and_working_days_read_back(text: str, minutes: int, zone: str) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    result = parse(text, now=now, timezone=zone)
    runs = [t.astimezone(ZoneInfo(zone)) for t in result.next_runs(6)]
    if "working" in text or "工作日" in text:
        assert all(t.weekday() < 5 for t in runs), text
    assert_reads_back(result, zone)
