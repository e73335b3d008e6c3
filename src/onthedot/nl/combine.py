"""From recognised pieces to one consistent reading of the sentence.

Two steps: ``select`` decides which pieces are part of the time expression (weak pieces such as
the 一點 of 看一點書 or the "morning" of "the morning news" only count when they touch a strong
piece, or stand alone with nothing else saying the same thing), then ``merge`` folds them into a
``Spec``, refusing contradictions (明天 ... 每天, 早上 ... 8pm) instead of picking one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from onthedot.nl.parts import (
    Clock,
    Daily,
    DateRef,
    Daypart,
    Every,
    Offset,
    Piece,
    Problem,
    Recurrence,
    Weekly,
)

# What may sit between two pieces of one time expression: 明天 下午三點, "tomorrow, at 3pm".
_JOINER = re.compile(r"^(?:\s|[,，、]|的|在|於|于|\b(?:at|on|in|of|by)\b)*$", re.IGNORECASE)


class Unreadable(Exception):
    """Raised with the Problem to report; ``parse`` turns it into a ParseError in the user's
    language."""

    def __init__(self, found: Problem) -> None:
        super().__init__(found.key)
        self.problem = found


def fail(key: str, text: str, **params: object) -> Unreadable:
    return Unreadable(Problem(key, text, tuple((k, str(v)) for k, v in params.items())))


@dataclass
class Spec:
    recurrence: Recurrence | None = None
    date: DateRef | None = None
    offset: Offset | None = None
    daypart: Daypart | None = None
    clock: Clock | None = None
    immediate: bool = False
    pieces: list[Piece] = field(default_factory=list)
    matched: str = ""


def touching(a: Piece, b: Piece, text: str) -> bool:
    first, second = (a, b) if a.start <= b.start else (b, a)
    return first.end <= second.start and bool(_JOINER.match(text[first.end : second.start]))


def matched_text(text: str, kept: list[Piece]) -> str:
    """The recognised expression: runs of touching pieces as written, runs joined by a space."""
    runs: list[tuple[int, int]] = []
    previous: Piece | None = None
    for p in sorted(kept, key=lambda p: p.start):
        if previous is not None and touching(previous, p, text):
            runs[-1] = (runs[-1][0], p.end)
        else:
            runs.append((p.start, p.end))
        previous = p
    return " ".join(text[a:b].strip() for a, b in runs)


def select(pieces: list[Piece], text: str) -> tuple[list[Piece], list[Piece]]:
    """Split pieces into (kept, dropped); dropped ones are read as part of the task."""
    vague = [p for p in pieces if p.problem is not None and p.problem.key == "vague"]
    others = [p for p in pieces if p not in vague]
    kept = [p for p in others if not p.weak]
    weak = [p for p in others if p.weak]
    changed = True
    while changed:  # a weak piece touching a kept one joins it, and may bring its neighbour
        changed = False
        for p in list(weak):
            if any(touching(p, k, text) for k in kept):
                kept.append(p)
                weak.remove(p)
                changed = True
    strong = list(kept)
    for p in weak:
        if p.stands_alone and not _said_elsewhere(p, strong):
            kept.append(p)
    if not kept and vague:  # "later", 稍後: only an error when nothing else says when
        found = vague[0].problem
        assert found is not None
        raise Unreadable(found)
    kept.sort(key=lambda p: p.start)
    return kept, [p for p in pieces if p not in kept]


def _said_elsewhere(p: Piece, strong: list[Piece]) -> bool:
    if p.problem is not None:
        return bool(strong)
    if p.sets_clock and any(s.sets_clock for s in strong):
        return True
    return p.sets_day and any(s.sets_day for s in strong)


def merge(kept: list[Piece], text: str) -> Spec:
    spec = Spec(pieces=kept, matched=matched_text(text, kept))
    for p in kept:
        if p.problem is not None:
            raise Unreadable(p.problem)
    for p in kept:
        _merge_one(spec, p)
    return spec


def _merge_one(spec: Spec, p: Piece) -> None:
    if p.immediate:
        if spec.immediate:
            return
        spec.immediate = True
    if p.recurrence is not None:
        spec.recurrence = _merge_recurrence(spec.recurrence, p.recurrence, p)
    for name in ("date", "offset", "daypart", "clock"):
        value = getattr(p, name)
        if value is None:
            continue
        current = getattr(spec, name)
        if current is not None and current != value:
            raise fail("conflict", p.text)
        setattr(spec, name, value)
    # At most one of: now, a recurrence, a day, an offset; "now" takes no time of day either.
    kinds = [spec.recurrence, spec.date, spec.offset]
    used = sum(k is not None for k in kinds) + spec.immediate
    if used > 1 or (spec.immediate and (spec.clock or spec.daypart)):
        raise fail("conflict", p.text)


def _merge_recurrence(current: Recurrence | None, new: Recurrence, p: Piece) -> Recurrence:
    """每個工作日 + 每兩小時, 每天 + 週一到週五: compatible readings narrow each other."""
    if current is None or current == new:
        return new
    pair = (current, new)
    for a, b in (pair, pair[::-1]):
        if isinstance(a, Daily) and a.interval == 1 and isinstance(b, Weekly | Every):
            return b
        if isinstance(a, Every) and a.days is None and isinstance(b, Weekly) and b.interval == 1:
            return replace(a, days=b.days)
    raise fail("conflict", p.text)
