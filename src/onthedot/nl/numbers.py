"""Numbers as people type them: Arabic digits, Chinese numerals and English number words.

Chinese numerals cover what appears in times and dates (零..九十九, 百 for minute counts
such as 一百二十分鐘) plus digit-by-digit years (二〇二六). Anything else returns ``None`` so
that the caller can report the fragment instead of guessing a value.
"""

from __future__ import annotations

ZH_DIGITS: dict[str, int] = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "兩": 2, "两": 2, "三": 3, "四": 4,
    "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
ZH_UNITS: dict[str, int] = {"十": 10, "百": 100}

# Regex fragments (no groups) shared by the Chinese rules.
ZH_NUM = r"(?:\d{1,3}|[零〇一二兩两三四五六七八九十百]{1,4})"

EN_WORDS: dict[str, int] = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "ninety": 90, "a": 1, "an": 1, "couple": 2, "a couple of": 2,
}  # fmt: skip
EN_ORDINALS: dict[str, int] = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "fifteenth": 15,
    "twentieth": 20, "thirtieth": 30, "last": -1,
}  # fmt: skip

_EN_TENS = r"(?:twenty|thirty|forty|fifty)"
_EN_ONES = r"(?:one|two|three|four|five|six|seven|eight|nine)"
EN_NUM = (
    rf"(?:\d{{1,3}}|{_EN_TENS}(?:[\s-]{_EN_ONES})?|eleven|twelve|thirteen|fourteen|fifteen"
    rf"|sixteen|seventeen|eighteen|nineteen|ten|{_EN_ONES}|sixty|ninety|zero)"
)
EN_ORD = (
    r"(?:\d{1,2}(?:st|nd|rd|th)?|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth"
    r"|tenth|eleventh|twelfth|fifteenth|twentieth|thirtieth)"
)


def zh_to_int(text: str) -> int | None:
    """``"二十五"`` -> 25, ``"兩"`` -> 2, ``"08"`` -> 8, ``"二〇二六"`` -> 2026; else ``None``."""
    if not text:
        return None
    if text.isascii():
        return int(text) if text.isdigit() else None
    if not any(ch in ZH_UNITS for ch in text):
        # Digit-by-digit form (二〇二六, 零五): every character must be a digit.
        if not all(ch in ZH_DIGITS for ch in text):
            return None
        return int("".join(str(ZH_DIGITS[ch]) for ch in text))
    return _zh_positional(text)


def _zh_positional(text: str) -> int | None:
    total = 0
    pending: int | None = None
    last_unit = 1000
    for ch in text:
        if ch in ZH_DIGITS:
            if pending is not None and pending != 0:
                return None  # two digits in a row inside a positional numeral: 二三十
            pending = ZH_DIGITS[ch]
        elif ch in ZH_UNITS:
            unit = ZH_UNITS[ch]
            if unit >= last_unit:
                return None  # 十百, 十十
            total += (pending if pending else 1) * unit
            pending = None
            last_unit = unit
        else:
            return None
    return total + (pending or 0)


def en_to_int(text: str) -> int | None:
    """``"20"`` -> 20, ``"twenty-five"`` -> 25, ``"an"`` -> 1; ``None`` if not a number."""
    word = " ".join(text.lower().replace("-", " ").split())
    if word.isdigit():
        return int(word)
    if word in EN_WORDS:
        return EN_WORDS[word]
    parts = word.split(" ")
    if len(parts) == 2 and parts[0] in EN_WORDS and parts[1] in EN_WORDS:
        tens, ones = EN_WORDS[parts[0]], EN_WORDS[parts[1]]
        if tens % 10 == 0 and tens >= 20 and 1 <= ones <= 9:
            return tens + ones
    return None


def en_ordinal(text: str) -> int | None:
    """``"15th"`` -> 15, ``"first"`` -> 1, ``"last"`` -> -1; ``None`` otherwise."""
    word = text.lower().strip()
    if word in EN_ORDINALS:
        return EN_ORDINALS[word]
    digits = word.rstrip("stndrh")
    return int(digits) if digits.isdigit() else None
