"""The parser's work is bounded by its input: the length cap, the cap on time words, and tails
stripped in linear time with the same result as the regular expressions they replace."""

from __future__ import annotations

import contextlib
import re
import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onthedot import nl
from onthedot.chat.intents import _strip_en_tail
from onthedot.domain.errors import ParseError
from onthedot.nl import en, zh
from onthedot.nl.task import _EN_TAIL, _ZH_TAIL

NOW = datetime(2026, 6, 22, tzinfo=UTC)
QUICK = 2.0  # seconds; the work takes milliseconds, the rest is slack for a loaded machine

# The regular expressions the tails replaced: right, but quadratic or exponential in the
# length of what they strip (kept here as the reference on short inputs).
OLD_EN_TAIL = re.compile(
    r"(?:[\s,.;:!?\-]+|\b(?:please|thanks|thank\s+you|at|on|by|in|and|then|starting|from))+$",
    re.IGNORECASE)
OLD_ZH_TAIL = re.compile(
    r"(?:[\s,，。、:：;；!！?？~～]|吧|喔|哦|啊|呀|哈|好嗎|好吗|嗎|吗|謝謝|谢谢|的時候|的时候)+$")
OLD_CHAT_TAIL = re.compile(r"(?:[,\s]+(?:please|for me|thanks|thank you|thx|now please))+$")

EN_PIECES = ("x", "call", "mom", " ", ",", ".", "-", "please", "Please", "thank you", "at", "on",
             "in", "and", "then", "xplease", "from", "!", "?", "starting", "_", "é")
ZH_PIECES = ("喝水", "吧", "好", "好嗎", "嗎", "謝謝", "的時候", "的", "，", " ", "。", "哈", "x")
CHAT_PIECES = ("pause it", " ", ",", "please", "for me", "thank you", "thanks", "now please",
               "thx", "x", "please,")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(EN_PIECES), max_size=8))
def test_the_english_tail_strips_what_the_regex_stripped(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert _EN_TAIL.strip(text) == OLD_EN_TAIL.sub("", text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(ZH_PIECES), max_size=8))
def test_the_chinese_tail_strips_what_the_regex_stripped(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert _ZH_TAIL.strip(text) == OLD_ZH_TAIL.sub("", text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(CHAT_PIECES), max_size=8))
def test_the_chat_tail_strips_what_the_regex_stripped(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert _strip_en_tail(text) == OLD_CHAT_TAIL.sub("", text)


@pytest.mark.parametrize("tail", [",", ", ", " .", "-", "，", "吧", " please"])
def test_a_long_tail_is_read_quickly(tail: str) -> None:
    # 26 commas cost the old expression 50 s; here 3,900 characters of them.
    for head in ("every day at 8am call mom", "每天早上八點喝水"):
        text = head + (tail * 4000)[: 3_900] + "x"
        began = time.perf_counter()
        nl.parse(text, now=NOW, timezone="Asia/Taipei")
        assert time.perf_counter() - began < QUICK


def test_more_time_words_than_the_cap_are_refused() -> None:
    nl.parse("every day at 8am and 8pm drink water", now=NOW)  # a few words: read
    with pytest.raises(ParseError) as info:
        nl.parse("remind me " + ", ".join(["8am"] * (nl.MAX_PIECES + 1)), now=NOW)
    assert info.value.code == "could_not_understand"
    assert str(nl.MAX_PIECES) in info.value.message


def test_a_text_longer_than_the_cap_is_refused_before_it_is_read() -> None:
    with pytest.raises(ParseError) as info:
        nl.parse("every day at 8am " * 300, now=NOW)
    assert info.value.code == "could_not_understand"
    assert str(nl.MAX_TEXT_CHARS) in info.value.message


# Inputs built from the words of each rule added for issue 21 §1, repeated: a regex that is
# retried to the end of the text at each position (a list followed by a word it needs, an
# optional prefix before a long alternation) shows here as quadratic time.
PATHOLOGICAL = (
    "except ", "but not on ", "mondays and ", "saturdays and sundays ", "holidays ",
    "every day at 8 except mondays and tuesdays and ", "the last working day of ",
    "3 days before the ", "the day after ", "two days before ", "same time ", "this time ",
    "a quarter to ", "half past ", "every first of the ", "daily ", "quarterly figures ",
    "lunar 1/", "Founders Founders ", "at 8, ", "除了", "週六週日", "週六週日除外", "六日",
    "每月倒數第", "每月月底前", "聖誕節前", "聖誕節後一", "八點差", "差一刻", "這個時候",
    "下週同一", "每季最後一個", "但週末", "每月1、", "every year on day 1 of January and ",
    "the 1st and the ", "days 1 and ", "January, July and ", "1 January and ", "at 9am and ",
    "每年1月和", "一月及七月的", "1、4月的1、", "每年1月1日和", "九點和",
)


def _cpu(text: str) -> float:
    """The least CPU time of three parses (a loaded machine only adds to it)."""
    best = float("inf")
    for _ in range(3):
        began = time.process_time()
        with contextlib.suppress(ParseError):
            nl.parse(text, now=NOW, timezone="Asia/Taipei")
        best = min(best, time.process_time() - began)
    return best


@pytest.mark.parametrize("unit", PATHOLOGICAL)
@pytest.mark.parametrize("tail", ["", "x", " at 8"])
def test_repeated_words_are_read_in_linear_time(unit: str, tail: str) -> None:
    def text(length: int) -> str:
        return (unit * (length // len(unit) + 1))[: length - len(tail)] + tail

    short, long = _cpu(text(1000)), _cpu(text(4000))
    # Four times the text: about four times the work (quadratic would be sixteen), within a
    # bound that holds on a loaded machine (it takes ~3-12 ms per 1,000 characters).
    assert long < 8 * short + 0.005, (short, long)
    assert long < 0.4, long


# Each rule is searched through the text in one call of the regex engine, which holds the
# interpreter lock while it runs: one rule that is retried to the end of the text at every
# position ("\s*" before a required word in 3,900 spaces, "\d+\.\d+" in a run of digits took
# 0.5 s) would hold up every other request of the server (tests/api/test_hostile_parsers.py).
TOKENS = (
    " ", "\t", "8", "8 ", "8:", ":", ",", ", ", "and ", "at ", "the ", "on ", "every ", "a ",
    "A ", "day ", "mon ", "mondays ", "1st ", "1/", "-", "12", "daily ", "except ", "quarter ",
    "half ", "the day ", "2 days ", "lunar ", "Day ", "x", "每", "天", "點", "八", "週", "月", "日",
    "號", "前", "後", "除了", "，", "、", "和", "倒數第", "第", "一", "差", "這個", "同一",
    "從", "起", "2026-12-04 ", "January ", "January and ", "1st of ", "day 1 ", "1月", "及",
    "1月和", "1、",
)


@pytest.mark.parametrize("token", TOKENS)
def test_no_rule_is_retried_to_the_end_of_the_text(token: str) -> None:
    text = (token * (3_990 // len(token) + 1))[:3_990]
    slowest = 0.0
    for rule in (*en.RULES, *zh.RULES):
        began = time.process_time()
        rule.pattern.search(text)
        slowest = max(slowest, time.process_time() - began)
    assert slowest < 0.05, slowest  # linear rules take ~1-6 ms here; quadratic ones ~0.5 s
