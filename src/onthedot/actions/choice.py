"""Which action a task's words ask for, when the caller gave only the words.

::

    text ─► a model configured? ── yes ─► prompt       {"type": "prompt", "prompt": text}
                 │ no
                 ▼
            asks for news? ─────── yes ─► news_digest  {"type": "news_digest", "topic",
                 │ no                                   "language"}
                 ▼
               message                                 {"type": "message", "text": text}

With a model every task is a prompt: the model carries it out at fire time, whatever it is
("remind me to call mom" becomes a reminder the model writes). Without one, only news has an
offline action that does real work; everything else stays a reminder that repeats the words.

"Asks for news" is decided by a small, deliberately narrow reading, because a false digest
loses the user's reminder while a missed one still reminds them:

* a news word — news, headline(s); 新聞/新闻, 頭條/头条, 要聞/要闻, 快訊/快讯, 時事/时事; and
  資訊/资讯/消息 only right after a topic ("科技資訊"), since alone they mean "information" or
  "a message" —
* that is not the first half of a compound: "news team", "news desk", 新聞部, 新聞稿 and
  "newsletter" are not news requests (the word must be followed by the end of the clause or a
  word that continues a request: "news about …", "headlines and …", 新聞摘要, 新聞給我 …),
* reached from the start of the clause, or from a verb of getting or reading (summarize, read,
  send me, catch up on, 總結, 整理, 看, 給我 …), over nothing but determiners, time words and
  topics: "summarize the financial news", "remind me to read the news", "world headlines",
  "幫我總結財經新聞", "國際新聞摘要". "tell John the news", "watch the news" (the user's own
  act) and "email the news team" stay reminders.

The topic is the first topic word among those (or after "news about …"), read by
``catalog.normalise_topic``; a news request that names none gets ``DEFAULT_TOPIC`` (world
news: the closest the feeds come to general headlines).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal, get_args

from onthedot.actions.catalog import _ALIASES, TOPICS_EXPECTED, Topic, normalise_topic
from onthedot.domain.errors import ValidationError
from onthedot.nl.lang import detect
from onthedot.nl.parts import Language
from onthedot.nl.reply import Doing

Kind = Literal["prompt", "news_digest", "message"]
KINDS: tuple[Kind, ...] = get_args(Kind)
DEFAULT_TOPIC: Topic = "world"  # a news request without a topic: general (world) headlines


@dataclass(frozen=True)
class Choice:
    kind: Kind
    action: dict[str, Any]  # ready for JobSpec.action
    language: Language
    topic: Topic | None = None  # news_digest only

    @property
    def doing(self) -> Doing:
        """What the confirmation says each run does."""
        return Doing(self.kind, text=_action_text(self.action), topic=self.topic)


def choose_action(text: str, *, model_configured: bool, language: Language | None = None,
                  timezone: str = "UTC") -> Choice:
    """The action for ``text`` (see the module docstring). ``language`` is the task's language;
    None: detected from ``text`` (``timezone`` breaks a Traditional/Simplified tie)."""
    lang = language or detect(text, timezone)
    if model_configured:
        return action_of_kind("prompt", text, language=lang)
    news = read_news_request(text)
    if news is not None:
        return _digest(news.topic or DEFAULT_TOPIC, lang)
    return action_of_kind("message", text, language=lang)


def action_of_kind(kind: Kind, text: str, *, language: Language | None = None,
                   timezone: str = "UTC") -> Choice:
    """The action of an explicitly chosen ``kind`` for ``text``. A news digest takes its topic
    from the text: from a news request as in ``choose_action`` (world when it names none), else
    from any topic word in it ("stock market"); text with neither is a ValidationError
    ``unknown_topic`` (field ``text``): a digest of nothing would be a guess."""
    lang = language or detect(text, timezone)
    if kind == "prompt":
        return Choice("prompt", {"type": "prompt", "prompt": text}, lang)
    if kind == "message":
        return Choice("message", {"type": "message", "text": text}, lang)
    news = read_news_request(text)
    topic = (news.topic or DEFAULT_TOPIC) if news is not None else topic_in(text)
    if topic is None:
        raise ValidationError(f"{text[:80]!r} names no news topic", code="unknown_topic",
                              field="text", expected="a topic in the text, " + TOPICS_EXPECTED)
    return _digest(topic, lang)


def _digest(topic: Topic, language: Language) -> Choice:
    return Choice("news_digest", {"type": "news_digest", "topic": topic, "language": language},
                  language, topic)


def _action_text(action: dict[str, Any]) -> str:
    text = action.get("prompt") or action.get("text") or ""
    return text if isinstance(text, str) else ""


# --- is it a news request? -----------------------------------------------------------------
@dataclass(frozen=True)
class NewsRequest:
    topic: Topic | None  # None: news in general


def read_news_request(text: str) -> NewsRequest | None:
    """The news request in ``text`` (English or Chinese), or None when it does not ask for news."""
    return _english(_fold(text)) or _chinese(_fold(text))


def topic_in(text: str) -> Topic | None:
    """The first topic word anywhere in ``text``."""
    folded = _fold(text)
    found: list[tuple[int, Topic]] = []
    tokens = _tokens(folded)
    for i, (start, _) in enumerate(tokens):
        topic = _token_topic(tokens, i)
        if topic is not None:
            found.append((start, topic))
    for alias, topic in _ZH_ALIASES:
        at = folded.find(alias)
        if at >= 0:
            found.append((at, topic))
    return min(found)[1] if found else None


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().replace("’", "'")


# English: tokens with their offsets; "today's" is one token.
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_EN_NEWS = frozenset({"news", "headlines", "headline"})
# Words after a news word that keep it a request ("news about …", "headlines and …").
_EN_CONTINUE = frozenset({
    "about", "on", "from", "for", "in", "of", "regarding", "concerning", "around", "across",
    "and", "then", "or", "but", "so", "to", "with", "at", "before", "after", "by", "via", "as",
    "today", "tonight", "this", "every", "each", "daily", "please", "me", "us",
    "summary", "summaries", "digest", "briefing", "brief", "roundup", "recap", "update",
    "updates", "highlights", "stories", "headlines", "headline",
})
# After these, a topic may follow: "news about the stock market".
_EN_ABOUT = frozenset({"about", "on", "from", "in", "of", "regarding", "concerning", "around"})
# What may stand between the verb and the news word (topic words too).
_EN_MODIFIERS = frozenset({
    "the", "a", "an", "my", "our", "your", "me", "us", "all", "some", "any", "and", "or",
    "today's", "todays", "today", "this", "tonight's", "morning", "morning's", "evening",
    "evening's", "daily", "weekly", "day's", "week's", "overnight", "latest", "top", "breaking",
    "important", "key", "main", "major", "big", "biggest", "recent", "current", "up", "on",
    "in", "with", "of",
})
_EN_VERBS = frozenset({
    "summarize", "summarise", "sum", "digest", "recap", "read", "get", "fetch", "brief",
    "check", "catch", "collect", "gather", "compile", "prepare", "round", "list", "follow",
    "track", "monitor", "scan", "review", "skim", "browse", "what's", "whats",
    # nouns that head a request: "a summary of the news"
    "summary", "summaries", "briefing", "roundup", "rundown", "overview",
})
# Verbs that pass the news on: a request only when it goes to the user ("send me the news";
# "send the news to the team" is a reminder of the user's own errand).
_EN_PASS_ON = frozenset({"send", "give", "bring", "show", "tell", "email", "mail", "text",
                         "deliver", "forward"})
_EN_TO_USER = frozenset({"me", "us"})
# "it" is a technology alias in a catalog, but in a sentence it is a pronoun.
_EN_NOT_TOPICS = frozenset({"it"})
_CLAUSE_BREAKS = frozenset({"and", "then", "but", "so", "before", "after"})
_ABOUT_WINDOW = 6  # tokens after "news about" searched for the topic


def _tokens(folded: str) -> list[tuple[int, str]]:
    return [(m.start(), m.group()) for m in _WORD.finditer(folded)]


def _token_topic(tokens: list[tuple[int, str]], i: int) -> Topic | None:
    word = tokens[i][1]
    if word in _EN_NOT_TOPICS or not word.isascii():
        return None
    if i + 1 < len(tokens):  # "stock market", "world affairs"
        pair = normalise_topic(word + tokens[i + 1][1])
        if pair is not None:
            return pair
    return normalise_topic(word)


def _english(folded: str) -> NewsRequest | None:
    tokens = _tokens(folded)
    words = [w for _, w in tokens]
    for i, word in enumerate(words):
        if word not in _EN_NEWS:
            continue
        if i + 1 < len(words) and words[i + 1] not in _EN_CONTINUE:
            continue  # "news team", "headline writer"
        j = i - 1
        topics: list[Topic] = []
        while j >= 0 and (words[j] in _EN_MODIFIERS or _token_topic(tokens, j) is not None):
            topic = _token_topic(tokens, j)
            if topic is not None:
                topics.insert(0, topic)
            j -= 1
        if j >= 0 and not (words[j] in _EN_VERBS or (
                words[j] in _EN_PASS_ON and _EN_TO_USER & set(words[j + 1:i]))):
            continue  # "tell John the news", "watch the news", "send the news to the team"
        if i + 1 < len(words) and words[i + 1] in _EN_ABOUT:
            for k in range(i + 2, min(len(words), i + 2 + _ABOUT_WINDOW)):
                if words[k] in _CLAUSE_BREAKS:
                    break
                topic = _token_topic(tokens, k)
                if topic is not None:
                    topics.append(topic)
                    break
        return NewsRequest(topics[0] if topics else None)
    return None


# Chinese: no spaces, so the words are found by matching around each news word.
def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_ZH_NEWS = ("新聞", "新闻", "頭條", "头条", "要聞", "要闻", "快訊", "快讯", "時事", "时事")
_ZH_WEAK_NEWS = ("資訊", "资讯", "消息")  # news only right after a topic: "科技資訊"
_ZH_CONTINUE = (*_words(
    "摘要 重點 重点 要點 要点 標題 标题 簡報 简报 快報 快报 精選 "
    "精选 整理 總結 总结 報告 报告 懶人包 懒人包 一覽 一览 給 给 "
    "並 并 和 與 与 跟 及 然後 然后 再 吧 嗎 吗 呢 了 的 傳 传 寄 "
    "發給 发给 到"
), *_ZH_NEWS, *_ZH_WEAK_NEWS)
_ZH_MODIFIERS = _words(
    "的 最新 今日 今天 當日 当日 當天 当天 每日 每天 本日 早上 "
    "晚上 早間 早间 晚間 晚间 重要 熱門 热门 主要 重大 即時 即时 "
    "一下 和 與 与 跟 及 或 、 相關 相关 關於 关于 有關 有关 "
    "一些 最近 近期 重點 重点"
)
_ZH_VERBS = _words(
    "總結 总结 整理 摘要 彙整 汇整 匯總 汇总 歸納 归纳 看 讀 读 "
    "閱讀 阅读 瀏覽 浏览 查 查看 報告 报告 播報 播报 推送 推播 "
    "給我 给我 告訴我 告诉我 收集 蒐集 搜集 提供 列出 關注 关注 "
    "追蹤 追踪 簡報 简报 講 讲 說 说 唸 念"
)
# Sending (發, 傳, 寄 ...) is a request only when the news goes to the user: "發新聞給我".
_ZH_TO_USER = ("給我", "给我")
# Chinese topic words, longest first so "資訊科技" wins over "科技".
_ZH_ALIASES: tuple[tuple[str, Topic], ...] = tuple(sorted(
    ((alias, topic) for topic, aliases in _ALIASES.items() for alias in aliases
     if not alias.isascii()),
    key=lambda pair: -len(pair[0])))
_ZH_CLAUSE = re.compile(r"[，。！？；：,.!?;:\n]")
_SPACE = re.compile(r"\s+")


def _chinese(folded: str) -> NewsRequest | None:
    for clause in _ZH_CLAUSE.split(_SPACE.sub("", folded)):
        found = _chinese_clause(clause)
        if found is not None:
            return found
    return None


def _chinese_clause(clause: str) -> NewsRequest | None:
    for at in range(len(clause)):
        word = _word_at(clause, at, _ZH_NEWS + _ZH_WEAK_NEWS)
        if word is None:
            continue
        rest = clause[at + len(word):]
        if rest and not rest.startswith(_ZH_CONTINUE):
            continue  # 新聞部, 新聞稿, 新聞聯播
        before, topics = _strip_modifiers(clause[:at])
        if word in _ZH_WEAK_NEWS and not _ends_with_topic(clause[:at]):
            continue  # 回覆他的消息, 整理資訊
        if before and not before.endswith(_ZH_VERBS) and not rest.startswith(_ZH_TO_USER):
            continue  # 告訴媽媽新聞, 寄新聞給老闆
        return NewsRequest(topics[0] if topics else None)
    return None


def _word_at(text: str, at: int, words: tuple[str, ...]) -> str | None:
    for word in words:
        if text.startswith(word, at):
            return word
    return None


def _ends_with_topic(text: str) -> bool:
    return any(text.endswith(alias) for alias, _ in _ZH_ALIASES)


def _strip_modifiers(before: str) -> tuple[str, list[Topic]]:
    """``before`` without the topics and modifiers at its end, and those topics in text order."""
    topics: list[Topic] = []
    while before:
        for alias, topic in _ZH_ALIASES:
            if before.endswith(alias):
                topics.insert(0, topic)
                before = before[:-len(alias)]
                break
        else:
            modifier = next((m for m in _ZH_MODIFIERS if before.endswith(m)), None)
            if modifier is None:
                break
            before = before[:-len(modifier)]
    return before, topics
