"""Natural-language schedules: "每天早上八點幫我總結財經新聞" -> a recurring job at 08:00.

``parse(text, now=..., timezone=...)`` reads Traditional Chinese, Simplified Chinese and English
and returns a ``ParseResult`` (JobParams, the task text and the matched expression), or raises
``ParseError`` naming the fragment it could not read; it never guesses. The rules are documented
in docs/natural-language.md and implemented language-neutrally in ``resolve``.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from onthedot.domain.errors import ScheduleError, ValidationError
from onthedot.nl import en, zh
from onthedot.nl.combine import (
    Unreadable,
    fail,
    guard_exceptions,
    guard_leftovers,
    merge,
    select,
)
from onthedot.nl.lang import detect, has_cjk
from onthedot.nl.messages import to_error
from onthedot.nl.offload import off_loop
from onthedot.nl.reply import Doing, render_confirmation
from onthedot.nl.resolve import to_params
from onthedot.nl.result import ParseResult
from onthedot.nl.scan import normalise, scan
from onthedot.nl.task import task_text
from onthedot.schedule.local import load_timezone

__all__ = ["MAX_PIECES", "MAX_TEXT_CHARS", "Doing", "ParseResult", "off_loop", "parse",
           "parse_async", "render_confirmation"]

# The parser's work is bounded by its input: at most MAX_TEXT_CHARS characters are read (every
# front door already caps a message at this), each position is tried against a fixed set of
# anchored rules, and a sentence recognising more than MAX_PIECES time words is refused before
# they are combined (a real request has a handful; combining is quadratic in their number).
MAX_TEXT_CHARS = 4000
MAX_PIECES = 32


def parse(text: str, *, now: datetime, timezone: str = "UTC") -> ParseResult:
    """Read a scheduling request relative to the aware instant ``now`` in IANA ``timezone``."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("parse() needs a timezone-aware 'now'")
    zone = _zone(timezone)
    language = detect(text[:MAX_TEXT_CHARS], timezone)
    try:
        if len(text) > MAX_TEXT_CHARS:
            raise fail("too_long", text[:40], length=len(text), limit=MAX_TEXT_CHARS)
        return _parse(text, now, zone, zone.key, language)
    except Unreadable as exc:
        raise to_error(exc.problem, language) from None


async def parse_async(text: str, *, now: datetime, timezone: str = "UTC") -> ParseResult:
    """:func:`parse` in the parser thread, off the event loop (``offload``)."""
    return await off_loop(lambda: parse(text, now=now, timezone=timezone))


def _parse(text: str, now: datetime, zone: ZoneInfo, tz: str, language: str) -> ParseResult:
    normal = normalise(text)
    chinese = has_cjk(normal)
    pieces = scan(normal, zh.RULES if chinese else en.RULES, limit=MAX_PIECES + 1)
    if len(pieces) > MAX_PIECES:
        raise fail("too_many_words", pieces[-1].text, limit=MAX_PIECES)
    kept, dropped = select(pieces, normal)
    if not kept:
        raise fail("no_time", text.strip() or text)
    guard_exceptions(dropped, kept, normal)
    guard_leftovers(kept, normal)
    spec = merge(kept, text)
    params, notes = to_params(spec, now, zone, tz)
    return ParseResult(
        job_params=params,
        task=task_text(text, kept, chinese),
        matched=spec.matched,
        now=now,
        language=detect(text, tz),
        notes=notes,
    )


def _zone(timezone: str) -> ZoneInfo:
    try:
        return load_timezone(timezone, field="timezone")
    except ScheduleError:
        raise ValidationError(
            f"Unknown timezone {timezone[:80]!r}.",
            code="invalid_timezone",
            field="timezone",
            expected="an IANA timezone such as Asia/Taipei or America/New_York",
        ) from None
