"""The news topics a digest knows, the words that name them, and the feeds each one reads.

Three topics (``finance``, ``technology``, ``world``), each with a list of public RSS/Atom feeds
per language (``en``, ``zh-Hant``, ``zh-Hans``), shipped in ``news_feeds.json`` next to this
module. A deployment replaces lists with its own file (``ONTHEDOT_NEWS_FEEDS_FILE``, same format):
every (topic, language) list the file gives replaces the shipped one, the others stay. A job can
name its own feeds instead. A topic without feeds in the task's language reads those of another
language (English first) rather than nothing.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import httpx

from onthedot.config import Settings
from onthedot.domain.errors import ConfigError
from onthedot.nl.parts import Language

Topic = Literal["finance", "technology", "world"]
TOPICS: tuple[Topic, ...] = get_args(Topic)
LANGUAGES: tuple[Language, ...] = get_args(Language)
FEEDS_FILE_SETTING = "ONTHEDOT_NEWS_FEEDS_FILE"
MAX_FEEDS = 20  # per job, and per (topic, language) in a catalog: all are fetched at once
MAX_URL_CHARS = 2048
MAX_TOPIC_CHARS = 100

# What people call each topic, in English and Chinese (both scripts), after normalise_words.
_ALIASES: dict[Topic, tuple[str, ...]] = {
    "finance": (
        "finance", "financial", "finances", "business", "economy", "economic", "economics",
        "market", "markets", "money", "stock", "stocks", "stockmarket",
        "財經", "财经", "金融", "經濟", "经济", "商業", "商业", "股市", "財金", "理財", "理财",
    ),
    "technology": (
        "technology", "technologies", "tech", "scitech", "sciencetechnology", "it",
        "科技", "技術", "技术", "資訊科技", "信息技术", "数码", "數碼", "科技業", "科技业",
    ),
    "world": (
        "world", "international", "global", "foreign", "worldaffairs",
        "國際", "国际", "世界", "全球", "國外", "国外", "海外",
    ),
}
_TOPIC_OF = {alias: topic for topic, aliases in _ALIASES.items() for alias in aliases}
# Words that only say "news" around a topic: "finance news", "財經新聞", "科技资讯".
_NEWS_WORDS = re.compile(r"(news|headlines|新聞|新闻|資訊|资讯|消息|頭條|头条|要聞|要闻)$")

# How a digest names its topic, per language; None: feeds without a topic.
TOPIC_NAMES: dict[Topic | None, dict[Language, str]] = {
    "finance": {"en": "Finance", "zh-Hant": "財經", "zh-Hans": "财经"},
    "technology": {"en": "Technology", "zh-Hant": "科技", "zh-Hans": "科技"},
    "world": {"en": "World", "zh-Hant": "國際", "zh-Hans": "国际"},
    None: {"en": "", "zh-Hant": "", "zh-Hans": ""},
}
TOPICS_EXPECTED = ("finance | technology | world (also business, tech, international, "
                   "財經/财经, 科技, 國際/国际, ...)")


def normalise_topic(text: str) -> Topic | None:
    """``"Finance news"``, ``"財經新聞"``, ``"tech"`` -> the topic; None for anything else."""
    words = _normalise_words(text)
    topic = _TOPIC_OF.get(words)
    if topic is None and words:
        topic = _TOPIC_OF.get(_NEWS_WORDS.sub("", words))
    return topic


def _normalise_words(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if ch.isalnum())


def feed_url_problem(url: object) -> str | None:
    """Why ``url`` cannot be a feed address (not http(s), no host, too long), or None."""
    if not isinstance(url, str) or not url:
        return "is not a non-empty string"
    if len(url) > MAX_URL_CHARS:
        return f"is longer than {MAX_URL_CHARS} characters"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "is not an absolute http:// or https:// URL"
    if not feed_host(url):
        return "has no valid host"
    return None


def feed_host(url: str) -> str:
    """The host a request to ``url`` connects to, as the HTTP client parses it ("" if none)."""
    try:
        return httpx.URL(url).raw_host.decode("ascii")
    except (httpx.InvalidURL, UnicodeDecodeError):
        return ""


class FeedCatalog:
    """Default feeds per topic and language."""

    def __init__(self, feeds: Mapping[Topic, Mapping[Language, tuple[str, ...]]]) -> None:
        self._feeds = {topic: dict(by_language) for topic, by_language in feeds.items()}

    @classmethod
    def shipped(cls) -> FeedCatalog:
        text = files("onthedot.actions").joinpath("news_feeds.json").read_text("utf-8")
        return cls(_parse_catalog(json.loads(text), "the shipped news_feeds.json"))

    @classmethod
    def from_settings(cls, settings: Settings) -> FeedCatalog:
        catalog = cls.shipped()
        if settings.news_feeds_file:
            catalog = catalog.overridden_by(load_feeds_file(settings.news_feeds_file))
        return catalog

    def overridden_by(self, other: FeedCatalog) -> FeedCatalog:
        merged = {topic: dict(self._feeds.get(topic, {})) for topic in TOPICS}
        for topic, by_language in other._feeds.items():
            merged[topic].update(by_language)
        return FeedCatalog(merged)

    def feeds_for(self, topic: Topic, language: Language) -> tuple[str, ...]:
        """The topic's feeds in ``language``; else those of English, else of any language."""
        by_language = self._feeds.get(topic, {})
        for candidate in (language, "en", *LANGUAGES):
            feeds = by_language.get(candidate)
            if feeds:
                return feeds
        return ()


def load_feeds_file(path: str) -> FeedCatalog:
    """A deployment's feeds file; ConfigError (the process refuses to start) if unusable."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot read the news feeds file {path}: {exc}",
                          field="news_feeds_file", expected=_FILE_EXPECTED) from exc
    return FeedCatalog(_parse_catalog(data, path))


_FILE_EXPECTED = ('a JSON object like {"finance": {"en": ["https://...", ...], '
                  '"zh-Hant": [...]}}, topics finance | technology | world, languages '
                  'en | zh-Hant | zh-Hans')


def _parse_catalog(data: Any, origin: str) -> dict[Topic, dict[Language, tuple[str, ...]]]:
    def refuse(why: str) -> ConfigError:
        return ConfigError(f"{origin}: {why}", field="news_feeds_file", expected=_FILE_EXPECTED)

    if not isinstance(data, dict):
        raise refuse("not a JSON object")
    parsed: dict[Topic, dict[Language, tuple[str, ...]]] = {}
    for topic, by_language in data.items():
        if topic not in TOPICS:
            raise refuse(f"unknown topic {topic!r}")
        if not isinstance(by_language, dict):
            raise refuse(f"{topic}: not an object of languages")
        parsed[topic] = {}
        for language, urls in by_language.items():
            if language not in LANGUAGES:
                raise refuse(f"{topic}: unknown language {language!r}")
            if not isinstance(urls, list) or len(urls) > MAX_FEEDS:
                raise refuse(f"{topic}.{language}: not a list of at most {MAX_FEEDS} URLs")
            for url in urls:
                problem = feed_url_problem(url)
                if problem is not None:
                    raise refuse(f"{topic}.{language}: {url!r} {problem}")
            parsed[topic][language] = tuple(dict.fromkeys(urls))
    return parsed
