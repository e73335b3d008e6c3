"""Which action a task's words ask for, when the caller gave only the words.

::

    task ─► asks for news? ── yes ─► asks for more than a digest does, and a model? ─ yes ─► prompt
             │ no                          │ no
             │                             ▼
             │                        news_digest  {"type": "news_digest", "topic", "language"}
             ▼
       the sentence asks to be reminded? ── yes ─► message  {"type": "message", "text": task}
             │ no
             ▼
       asks for something to be written or told, and a model? ── yes ─► prompt {"prompt": task}
             │ no
             ▼
          message

The choice is the same with and without a model, except where only a model can do the work:
a request for something written or told ("write me a haiku", "給我一句名言") is a ``prompt``
with a model and a reminder of those words without one; a news request that asks for more than
a digest ("translate the top story into French", "分析財經新聞") is a ``prompt`` with a model and
a digest without one. A reminder ("remind me to call mom", 提醒我, 叫我, 記得 …) is always a
``message``: the model is never asked to "carry out" "call mom". Everything else (an errand of
the person's own: "call mom", "去健身房", "send the standup notes") is a reminder too: a false
prompt makes the model answer a chore it cannot do, a false reminder still reminds.

The reminder words are read in ``said``, the person's whole sentence, because the parser
strips "remind me to" from the task ("call mom"); the rest is read in the task.

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
                  timezone: str = "UTC", said: str | None = None) -> Choice:
    """The action for the task ``text`` (see the module docstring). ``said`` is the person's
    whole sentence when the task was read out of one (its reminder words); None: ``text``.
    ``language`` is the task's language; None: detected from ``text`` (``timezone`` breaks a
    Traditional/Simplified tie)."""
    lang = language or detect(text, timezone)
    news = read_news_request(text)
    if news is not None:
        if model_configured and asks_more_than_a_digest(text):
            return action_of_kind("prompt", text, language=lang)
        return _digest(news.topic or DEFAULT_TOPIC, lang)
    if asks_to_be_reminded(said if said is not None else text) or asks_to_be_reminded(text):
        return action_of_kind("message", text, language=lang)
    if model_configured and asks_for_writing(text):
        return action_of_kind("prompt", text, language=lang)
    return action_of_kind("message", text, language=lang)


# --- reminders, writing, and news a digest cannot do ---------------------------------------
_EN_REMIND = re.compile(
    r"\b(?:remind|reminder|reminders|remember to|don't forget|do not forget|don't let me forget|"
    r"tell me to|alert me|notify me|ping me|nudge me|wake me)\b")
_ZH_REMIND = re.compile(r"提醒|叫我|記得|记得|別忘|别忘|不要忘|通知我|鬧鐘|闹钟|叫醒")
# A request addressed to the assistant: a verb of writing or telling, then "me" or what to make.
_EN_WRITING = re.compile(
    r"^(?:please\s+|can you\s+|could you\s+|i want you to\s+|help me\s+)*(?:"
    r"(?:write|compose|draft|generate|create|make|come up with|think of|suggest|recommend|give|"
    r"send|tell|teach|quiz|share with)\s+(?:me|us)\b"
    r"|(?:write|compose|draft|generate|come up with|think of|suggest|recommend)\s+"
    r"(?:a|an|some|one|two|three|five|ten|\d+)\s"
    r"|(?:translate|explain|brainstorm)\b"
    r"|(?:what|why|how|who|which)\b[^?]*\?$)")
_ZH_WRITING = re.compile(
    r"^(?:請|请|麻煩|麻烦|你)?(?:幫我|帮我|替我|為我|为我)?(?:"
    r"(?:寫|写|作|創作|创作|生成|編|编|想)(?:一|幾|几|個|个|首|篇|段|則|则|份|些|點|点|句)"
    r"|(?:給我|给我|告訴我|告诉我|講|讲|說|说)(?:一|幾|几|個|个|首|篇|段|則|则|句|些|點|点)"
    r"|推薦|推荐|建議|建议|翻譯|翻译|解釋|解释"
    # what was asked for, when the parser took 給我 off the task: 一句名言, 一首詩
    r"|(?:一|幾|几|兩|两|三|五)(?:首|篇|段|則|则|句))")
# What a news digest does not do: translate, analyse, explain, compare, predict, comment, write.
_EN_BEYOND_DIGEST = re.compile(
    r"\b(?:translate|translated|translation|into (?:french|german|spanish|japanese|korean|"
    r"italian|portuguese|russian|arabic|hindi|vietnamese|thai|indonesian|dutch)|analy[sz]e|"
    r"analysis|explain|compare|comparison|predict|prediction|forecast|opinion|comment on|"
    r"critique|poem|haiku|limerick|joke|why|implications?|what it means)\b")
_ZH_BEYOND_DIGEST = re.compile(
    r"翻譯|翻译|譯成|译成|翻成|[法德日韓韩西俄義义]文|分析|解釋|解释|比較|比较|預測|预测|評論|评论|"
    r"點評|点评|詩|诗|笑話|笑话|為什麼|为什么|影響|影响")


def asks_to_be_reminded(said: str) -> bool:
    """Whether the sentence asks to be reminded ("remind me to …", 提醒我, 叫我, 記得 …)."""
    folded = _fold(said)
    return bool(_EN_REMIND.search(folded) or _ZH_REMIND.search(folded))


def asks_for_writing(task: str) -> bool:
    """Whether the task asks for something written or told ("write me a haiku", "tell me a
    joke", "翻譯這句話", "給我一句名言"), which only a model produces."""
    folded = _fold(task).strip()
    return bool(_EN_WRITING.search(folded) or _ZH_WRITING.search(_SPACE.sub("", folded)))


def asks_more_than_a_digest(task: str) -> bool:
    """Whether a news request asks for what a digest does not do ("translate the top story
    into French", "分析財經新聞")."""
    folded = _fold(task)
    return bool(_EN_BEYOND_DIGEST.search(folded) or _ZH_BEYOND_DIGEST.search(folded))


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
    "updates", "highlights", "stories", "story", "headlines", "headline",
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
    # asking for more than a digest does (a prompt with a model, a digest without one)
    "translate", "analyze", "analyse", "explain", "compare", "critique",
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


# "把 <news> <verb>": the verb comes after the news ("把國際新聞翻譯成法文").
_ZH_BA = ("把", "將", "将")
_ZH_BA_VERBS = _words("翻譯 翻译 分析 解釋 解释 整理 總結 总结 摘要 彙整 汇整 點評 点评")
_ZH_NEWS = ("新聞", "新闻", "頭條", "头条", "要聞", "要闻", "快訊", "快讯", "時事", "时事")
_ZH_WEAK_NEWS = ("資訊", "资讯", "消息")  # news only right after a topic: "科技資訊"
_ZH_CONTINUE = (*_words(
    "摘要 重點 重点 要點 要点 標題 标题 簡報 简报 快報 快报 精選 "
    "精选 整理 總結 总结 報告 报告 懶人包 懒人包 一覽 一览 給 给 "
    "並 并 和 與 与 跟 及 然後 然后 再 吧 嗎 吗 呢 了 的 傳 传 寄 "
    "發給 发给 到"
), *_ZH_BA_VERBS, *_ZH_NEWS, *_ZH_WEAK_NEWS)
_ZH_MODIFIERS = _words(
    "的 最新 今日 今天 當日 当日 當天 当天 每日 每天 本日 早上 "
    "晚上 早間 早间 晚間 晚间 重要 熱門 热门 主要 重大 即時 即时 "
    "一下 和 與 与 跟 及 或 、 相關 相关 關於 关于 有關 有关 "
    "一些 最近 近期 重點 重点 本週 本周 這週 这周 這星期 这星期"
)
_ZH_VERBS = _words(
    "總結 总结 整理 摘要 彙整 汇整 匯總 汇总 歸納 归纳 看 讀 读 "
    "閱讀 阅读 瀏覽 浏览 查 查看 報告 报告 播報 播报 推送 推播 "
    "給我 给我 告訴我 告诉我 收集 蒐集 搜集 提供 列出 關注 关注 "
    "追蹤 追踪 簡報 简报 講 讲 說 说 唸 念 "
    "翻譯 翻译 分析 解釋 解释 點評 点评 評論 评论"
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
        if before and not before.endswith(_ZH_VERBS) and not rest.startswith(_ZH_TO_USER) and \
                not (before.endswith(_ZH_BA) and rest.startswith(_ZH_BA_VERBS)):
            continue  # 告訴媽媽新聞, 寄新聞給老闆 (but 把國際新聞翻譯成法文)
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
