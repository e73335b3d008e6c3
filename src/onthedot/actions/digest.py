"""Turning new items into the digest text a person reads, in the task's language.

The digest goes through a ``DigestWriter``. ``OfflineDigest`` needs no model: the items are
made into stories (``stories.py``: the same news from several feeds merged, the most important
first) and each story is told in a few sentences chosen from its articles, followed by every
source with its time (in the job's timezone) and link. ``ModelDigest`` (``model_digest.py``)
asks the configured model for a summary at the same place and falls back to this one; a
``Digest`` says which of them wrote it.

    Finance news: 3 new items from 2 sources.

    1. Fed leaves rates unchanged, signals patience
    The Federal Reserve held its benchmark interest rate at 4.25% on Monday, ...
    The Daily Ledger 06-22 07:20 https://...; Market Wire 06-22 07:35 https://...

    2. ...

    And 6 more: title (source); ...
    Could not read 1 feed: ...
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from onthedot.actions.catalog import TOPIC_NAMES, Topic
from onthedot.actions.feeds import FeedProblem, NewsItem
from onthedot.actions.stories import Story, build_stories
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
    # The main text of the items' article pages that could be read, by link.
    articles: Mapping[str, str] = field(default_factory=dict)


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
    """Stories summarised in their articles' own sentences, no model."""

    async def write(self, request: DigestRequest) -> Digest:
        return Digest(render_offline(request, await stories_for(request)), "offline")


async def stories_for(request: DigestRequest) -> list[Story]:
    """The request's stories (word segmentation and scoring run in a thread: CPU-bound)."""
    if not request.items:
        return []
    return await asyncio.to_thread(build_stories, request.items, request.articles)


def render_offline(request: DigestRequest, stories: Sequence[Story]) -> str:
    language = request.language
    topic = _topic_words(request.topic, language)
    blocks: list[str] = []
    if request.items:
        sources = {item.source for story in stories for item in story.items}
        blocks.append(_headline(language, topic, len(request.items), len(sources)))
        zone = zone_of(request.timezone)
        blocks += [_story(n, story, language, zone) for n, story in enumerate(stories, 1)]
    else:
        sentences = _NOTHING_FOUND if request.first else _NOTHING_NEW
        blocks.append(sentences[language].format(topic=topic))
    return "\n\n".join([*blocks, *closing_notes(request)])


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


def _story(number: int, story: Story, language: Language, zone: tzinfo) -> str:
    """``n. title``, the summary's sentences, then each source with its time and link."""
    lines = [f"{number}. {story.title}"]
    if story.sentences:
        lines.append(join_sentences(story.sentences))
    lines.append(_SEPARATOR[language].join(_sighting(item, zone) for item in story.items))
    return "\n".join(lines)


def join_sentences(sentences: Sequence[str]) -> str:
    """Sentences run on: no space after a Chinese full stop, one after anything else."""
    text = ""
    for sentence in sentences:
        if text and not text.endswith(_CJK_ENDS):
            text += " "
        text += sentence
    return text


_CJK_ENDS = ("。", "！", "？", "；", "」", "』", "”")


def _sighting(item: NewsItem, zone: tzinfo) -> str:
    when = None if item.published is None else \
        item.published.astimezone(zone).strftime(_TIME_FORMAT)
    return " ".join(part for part in (item.source, when, item.link) if part)


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
