"""The parser's work is bounded by its input: the length cap, the cap on time words, and tails
stripped in linear time with the same result as the regular expressions they replace."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onthedot import nl
from onthedot.chat.intents import _strip_en_tail
from onthedot.domain.errors import ParseError
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
