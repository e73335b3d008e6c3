"""What is left of the sentence once the time expression and polite filler are taken out."""

from __future__ import annotations

import re

from onthedot.nl.combine import touching
from onthedot.nl.parts import Piece
from onthedot.nl.scan import Tail

_ZH_LEAD = re.compile(
    r"^(?:[\s,，。、:：;；!！~～()（）]|請你|请你|請|请|麻煩你|麻烦你|麻煩|麻烦|幫忙|帮忙|幫我|帮我|替我|給我|给我"
    r"|提醒我|提醒一下|提醒|記得|记得|我想要|我想|我要|我希望|你要|你|要|的|在|於|于|就|都|再|準時|准时"
    r"|分別是|分别是|分別在|分别在|分別|分别"
    r"|定時|定时|自動|自动|能不能|可不可以|可以)+"
)
# Tails are stripped by walking back from the end (``_strip_tail``), not by a regex ending in
# ``+$``: such a regex is retried at every position of the text, and nested quantifiers made
# one ReDoS ("call mom,,,,,,,,,,,,,,,,,,,,,,,,x" took minutes).
_ZH_TAIL = Tail(chars=",，。、:：;；!！?？~～()（）",
                words=("吧", "喔", "哦", "啊", "呀", "哈", "好嗎", "好吗", "嗎", "吗", "謝謝",
                       "谢谢", "的時候", "的时候"), bounded=False)
_EN_LEAD = re.compile(
    r"^(?:[\s,.;:!\-]+|(?:please|pls|plz|kindly|hey|hi|ok(?:ay)?|can\s+you|could\s+you|would\s+you"
    r"|will\s+you|i\s+want\s+you\s+to|i'?d\s+like\s+you\s+to|i\s+need\s+you\s+to|remind\s+me\s+to"
    r"|remind\s+me\s+that|remind\s+me\s+about|remind\s+me|set\s+a\s+reminder\s+to"
    r"|set\s+a\s+reminder|don'?t\s+forget\s+to|make\s+sure\s+to|be\s+sure\s+to|help\s+me|to|and"
    r"|then|at|on|by)\b)+",
    re.IGNORECASE,
)
# The task text has its whitespace collapsed to single spaces before it is stripped.
_EN_TAIL = Tail(chars=",.;:!?-",
                words=("please", "thanks", "thank you", "at", "on", "by", "in", "and", "then",
                       "starting", "from"), bounded=True)
_CJK_GAP = re.compile(r"(?<=[\u3400-\u9fff，。、：；！？])\s+|\s+(?=[\u3400-\u9fff，。、：；！？])")


def task_text(text: str, kept: list[Piece], chinese: bool) -> str:
    parts: list[str] = []
    last = 0
    previous: Piece | None = None
    for p in sorted(kept, key=lambda p: p.start):
        # What joins two pieces of the time expression (和, 、, （）) is part of it, not the task.
        if previous is None or not touching(previous, p, text):
            parts.append(text[last : p.start])
        parts.append(" ")
        last = p.end
        previous = p
    parts.append(text[last:])
    rest = " ".join("".join(parts).split())
    if chinese:
        rest = _CJK_GAP.sub("", rest)
        return _strip(rest, _ZH_LEAD, _ZH_TAIL)
    return _strip(rest, _EN_LEAD, _EN_TAIL)


def _strip(text: str, lead: re.Pattern[str], tail: Tail) -> str:
    previous = None
    while previous != text:
        previous = text
        text = lead.sub("", text)
        text = tail.strip(text)
        text = text.strip()
    return text
