"""Turning new items into the digest text a person reads, in the task's language.

The digest goes through a ``DigestWriter``. ``OfflineDigest`` is extractive and needs nothing
but the items: headlines grouped by source, each group in the order of its newest item, one line
per item with its time (in the job's timezone), its source and its link. ``ModelDigest``
(``model_digest.py``) asks the configured model for a summary at the same place and falls back
to this one; a ``Digest`` says which of them wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import tzinfo
from typing import Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from onthedot.actions.catalog import TOPIC_NAMES, Topic
from onthedot.actions.feeds import FeedProblem, NewsItem
from onthedot.nl.parts import Language


@dataclass(frozen=True)
class DigestRequest:
    topic: Topic | None
    language: Language
    items: Sequence[NewsItem]  # new, newest first
    problems: Sequence[FeedProblem]
    timezone: str  # IANA, the job's: times are shown in it
    first: bool  # no earlier digest of this job: "nothing found" rather than "nothing new"
    # For a writer that calls out: the run's idempotency key, and how long it may take.
    idempotency_key: str | None = None
    time_budget_seconds: float | None = None
    more: Sequence[NewsItem] = ()  # new items past max_items: named, not digested


WrittenBy = Literal["model", "offline"]


@dataclass(frozen=True)
class Digest:
    text: str
    written_by: WrittenBy
    model: str | None = None  # the model that wrote it
    model_error: str | None = None  # why a model writer fell back to the offline digest


class DigestWriter(Protocol):
    async def write(self, request: DigestRequest) -> Digest:
        """The digest; an empty item list gets a sentence saying there is nothing new."""
        ...


# --- the offline digest ------------------------------------------------------------------------
# Sentences per language. {topic}: the topic's name in that language ("" for own feeds).
_HEADLINE = {
    "en": "{topic}news: {n} new {items} from {k} {sources}.",
    "zh-Hant": "{topic}新聞：{k} 個來源共 {n} 則新消息。",
    "zh-Hans": "{topic}新闻：{k} 个来源共 {n} 条新消息。",
}
_NOTHING_NEW = {
    "en": "No new {topic}news since the last digest.",
    "zh-Hant": "自上次摘要以來沒有新的{topic}新聞。",
    "zh-Hans": "自上次摘要以来没有新的{topic}新闻。",
}
_NOTHING_FOUND = {
    "en": "No {topic}news found in the feeds.",
    "zh-Hant": "訂閱來源中沒有找到{topic}新聞。",
    "zh-Hans": "订阅来源中没有找到{topic}新闻。",
}
_UNREADABLE = {
    "en": "Could not read {n} {feeds}: {list}.",
    "zh-Hant": "有 {n} 個來源無法讀取：{list}。",
    "zh-Hans": "有 {n} 个来源无法读取：{list}。",
}
_PROBLEM_WORDS: dict[str, dict[Language, str]] = {
    "timeout": {"en": "timed out", "zh-Hant": "逾時", "zh-Hans": "超时"},
    "too_large": {"en": "too large", "zh-Hant": "內容過大", "zh-Hans": "内容过大"},
    "malformed": {"en": "malformed", "zh-Hant": "格式錯誤", "zh-Hans": "格式错误"},
    "not_a_feed": {"en": "not a feed", "zh-Hant": "不是 RSS 或 Atom 來源",
                   "zh-Hans": "不是 RSS 或 Atom 来源"},
    "refused": {"en": "address not allowed", "zh-Hant": "位址不允許連線",
                "zh-Hans": "地址不允许连接"},
    "unreachable": {"en": "unreachable", "zh-Hant": "無法連線", "zh-Hans": "无法连接"},
}
_MORE = {
    "en": "And {n} more: {list}.",
    "zh-Hant": "另有 {n} 則：{list}。",
    "zh-Hans": "另有 {n} 条：{list}。",
}
MORE_LISTED = 20  # headlines named in the "and N more" sentence; past that, "…"
_SEPARATOR = {"en": "; ", "zh-Hant": "；", "zh-Hans": "；"}
_TIME_FORMAT = "%m-%d %H:%M"


class OfflineDigest:
    """Grouped headlines, no model."""

    async def write(self, request: DigestRequest) -> Digest:
        return Digest(render_offline(request), "offline")


def render_offline(request: DigestRequest) -> str:
    language = request.language
    topic = _topic_words(request.topic, language)
    lines: list[str] = []
    if request.items:
        groups = _by_source(request.items)
        lines.append(_headline(language, topic, len(request.items), len(groups)))
        zone = zone_of(request.timezone)
        for source, items in groups.items():
            lines += ["", source]
            lines += [_line(item, language, zone) for item in items]
    else:
        sentences = _NOTHING_FOUND if request.first else _NOTHING_NEW
        lines.append(sentences[language].format(topic=topic))
    return "\n\n".join(["\n".join(lines), *closing_notes(request)])


def closing_notes(request: DigestRequest) -> list[str]:
    """The sentences every digest ends with, whoever wrote the rest: the new items past
    max_items ("and N more"), then the feeds that could not be read."""
    notes = [more_note(request), unreadable_note(request)]
    return [note for note in notes if note is not None]


def more_note(request: DigestRequest) -> str | None:
    """One sentence naming the new items past max_items (at most MORE_LISTED), or None."""
    if not request.more:
        return None
    language = request.language
    named = [f"{i.title} ({i.source})" if language == "en" else f"{i.title}（{i.source}）"
             for i in request.more[:MORE_LISTED]]
    if len(request.more) > MORE_LISTED:
        named.append("…")
    return _MORE[language].format(n=len(request.more),
                                  list=_SEPARATOR[language].join(named))


def unreadable_note(request: DigestRequest) -> str | None:
    """One sentence naming the feeds that could not be read, or None."""
    unreadable = [p for p in request.problems if p.fatal]
    return _unreadable(request.language, unreadable) if unreadable else None


def topic_words(topic: Topic | None, language: Language) -> str:
    """The topic's name as it stands inside a sentence of ``language`` ("" for own feeds)."""
    return _topic_words(topic, language).strip()


def _topic_words(topic: Topic | None, language: Language) -> str:
    name = TOPIC_NAMES[topic][language]
    if language == "en":
        # Lower case inside a sentence ("no new finance news"); _headline capitalises.
        return f"{name.lower()} " if name else ""
    return name


def _headline(language: Language, topic: str, n: int, k: int) -> str:
    text = _HEADLINE[language].format(
        topic=topic, n=n, k=k, items="item" if n == 1 else "items",
        sources="source" if k == 1 else "sources")
    return text[:1].upper() + text[1:]  # "News: ..." without a topic


def _by_source(items: Sequence[NewsItem]) -> dict[str, list[NewsItem]]:
    """Items are newest first, so each group's first item is its newest and groups come in
    the order of their newest item."""
    groups: dict[str, list[NewsItem]] = {}
    for item in items:
        groups.setdefault(item.source, []).append(item)
    return groups


def _line(item: NewsItem, language: Language, zone: tzinfo) -> str:
    when = "" if item.published is None else \
        item.published.astimezone(zone).strftime(_TIME_FORMAT) + " "
    source = f"（{item.source}）" if language != "en" else f" ({item.source})"
    link = f" {item.link}" if item.link else ""
    return f"- {when}{item.title}{source}{link}"


def _unreadable(language: Language, problems: Sequence[FeedProblem]) -> str:
    listed = _SEPARATOR[language].join(
        f"{p.label} ({_problem_words(p, language)})" if language == "en"
        else f"{p.label}（{_problem_words(p, language)}）" for p in problems)
    return _UNREADABLE[language].format(n=len(problems), list=listed,
                                        feeds="feed" if len(problems) == 1 else "feeds")


def _problem_words(problem: FeedProblem, language: Language) -> str:
    words = _PROBLEM_WORDS.get(problem.kind)
    return problem.reason if words is None else words[language]


def zone_of(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")
