"""From new items and their articles' text to stories: the same news from several feeds merged
into one story naming every source, the stories ranked, and a few sentences chosen from the
articles to summarise each (extractive: the sentences are the articles' own, never rewritten).

    items (each with the feeds' sightings of the same link or title, ``NewsItem.also``)
      v
    merge: two groups whose title and opening sentences share enough weighted words
           (TF-IDF cosine >= MERGE_SIMILARITY, and MERGE_MIN_SHARED words at least) are
           one story
      v
    rank: more sources first; among equals the newest (undated last)
      v
    sentences: the first SENTENCES_READ sentences of each of the story's articles (else of
               its feeds' descriptions), scored by how central their words are to the story,
               how much of the title they cover, how early they come and whether they carry
               facts (numbers; names: capitalised words in Latin script, names jieba's
               dictionary tags in Chinese); the best taken, skipping near-repeats, within
               SUMMARY_WIDTH; shown in reading order

Words: Chinese runs are segmented with jieba (Traditional and Simplified alike); other text
is split into words; numbers are words of their own ("1,280" and "1280" are one word). Common
function words of either language are left out.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from onthedot.actions.feeds import NewsItem

# TF-IDF cosine of title + opening at which two items are one story. On the digest corpus
# (bench/corpus/digest) the same story from two outlets scores 0.25 to 0.54, different stories
# at most 0.09.
MERGE_SIMILARITY = 0.2
MERGE_MIN_SHARED = 3  # words two items must share besides: two short titles prove nothing
REPEAT_SIMILARITY = 0.5  # share of the shorter sentence's words already in a chosen one
OPENING_SENTENCES = 3  # of each article, compared when merging
MAX_SENTENCES = 3  # per story
# Sentences of one text considered: news says what matters first, and this bounds the work
# (50 items of 20,000 characters would otherwise be a million characters to segment).
SENTENCES_READ = 40
# Summary per story, in width units: a Chinese character counts CJK_WIDTH (it says about as
# much as two and a half Latin letters), anything else 1. 420 is about 170 Chinese characters.
SUMMARY_WIDTH = 420
CJK_WIDTH = 2.5
MIN_SENTENCE_CHARS = 12  # shorter lines are captions, datelines, buttons
# Weights of a sentence's score (each part scaled to 0..1).
W_CENTRAL, W_TITLE, W_EARLY, W_FACTS = 0.35, 0.25, 0.25, 0.15
FACTS_FULL = 3  # numbers and names in a sentence that earn the whole W_FACTS

_EN_STOP_WORDS = """a about after against all also an and any are as at be been before being
both but by can could did do does during each few for from had has have he her his how i if in
into is it its just more most my no nor not of off on once only or other our out over own said
same says she should so some such than that the their them then there these they this those
through to too under until up very was we were what when where which while who whom why will
with would you your mr ms monday tuesday wednesday thursday friday saturday sunday"""
_ZH_STOP_WORDS = """的 了 在 是 和 與 与 及 也 將 将 對 对 為 为 於 于 等 有 這 这 其
並 并 但 而 或 被 已 由 從 从 向 到 就 都 又 與其 以及 表示 指出 認為 认为 今天 今年
目前 此外 同時 同时 以來 以来 並且 并且 可能 可以 一個 一个 我們 我们 他們 他们
公司 記者 记者 報導 报道"""
_EN_STOP = frozenset(_EN_STOP_WORDS.split())
_ZH_STOP = frozenset(_ZH_STOP_WORDS.split())
_PIECES = re.compile(r"(?P<num>\d+(?:[.,]\d+)*%?)|(?P<cjk>[\u3400-\u9fff]+)"
                     r"|(?P<word>[^\W\d_\u3400-\u9fff]+)")
# Sentence ends: Chinese full stops (and a closing quote after one), or Western ones followed
# by a space and a capital, digit or opening quote.
_ZH_END = re.compile(r"(?<=[。！？；])(?![”」』])|(?<=[。！？][”」』])")
_EN_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“])|(?<=[.!?][\"”])\s+")
_PROSE_END = re.compile(r"[。！？.!?\"”」』]$")
_CJK = re.compile(r"[\u3400-\u9fff]")
# A capitalised word after the first of a sentence: a name, in Latin script (Chinese names
# are not told apart; numbers are, in every script).
_NAME = re.compile(r"(?<=\s)[A-Z][a-z]+")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_NAME_TAGS = frozenset({"nr", "ns", "nt", "nz"})  # jieba's person, place, organisation, other
_NEVER = datetime.min.replace(tzinfo=UTC)

_jieba_lock = threading.Lock()
_jieba_ready = False


@dataclass(frozen=True)
class Story:
    items: tuple[NewsItem, ...]  # the lead item first (its title is the story's), each source once
    sentences: tuple[str, ...]  # the summary, in reading order ("" none: the title is all)

    @property
    def title(self) -> str:
        return self.items[0].title

    @property
    def sources(self) -> list[str]:
        return list(dict.fromkeys(i.source for i in self.items))

    @property
    def newest(self) -> datetime | None:
        dated = [i.published for i in self.items if i.published is not None]
        return max(dated) if dated else None


def build_stories(items: Sequence[NewsItem], texts: Mapping[str, str]) -> list[Story]:
    """The stories of ``items`` (newest first, as fetch_news gives them), most important
    first. ``texts``: article text by link (one paragraph a line), for the items whose page
    was read. CPU-bound (jieba): call it in a thread."""
    groups = [[item, *item.also] for item in items]
    docs = [_Doc.of(group, texts) for group in groups]
    merged = _merge(docs)
    stories = [_summarise(group) for group in merged]
    return sorted(stories, key=_rank)


def _rank(story: Story) -> tuple[int, bool, float]:
    newest = story.newest
    return (-len(story.sources), newest is None, 0.0 if newest is None else -newest.timestamp())


# --- documents and merging --------------------------------------------------------------------
@dataclass
class _Doc:
    items: list[NewsItem]
    # Per source text: (item, sentences) in reading order.
    bodies: list[tuple[NewsItem, list[str]]]
    opening: Counter[str]  # words of the titles and the opening sentences

    @classmethod
    def of(cls, group: list[NewsItem], texts: Mapping[str, str]) -> _Doc:
        bodies = []
        opening: Counter[str] = Counter()
        for item in group:
            text = texts.get(item.link, "") or item.summary
            sentences = [s for s in sentences_of(text)
                         if not _same_as_title(s, item.title)][:SENTENCES_READ]
            bodies.append((item, sentences))
            opening.update(words(item.title))
            for sentence in sentences[:OPENING_SENTENCES]:
                opening.update(words(sentence))
        return cls(list(group), bodies, opening)


def _merge(docs: list[_Doc]) -> list[_Doc]:
    """Union of documents whose openings are similar (single link: A~B and B~C make one)."""
    idf = _idf([d.opening for d in docs])
    vectors = [_weigh(d.opening, idf) for d in docs]
    parent = list(range(len(docs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(docs)):
        for j in range(i + 1, len(docs)):
            shared = len(docs[i].opening.keys() & docs[j].opening.keys())
            if shared >= MERGE_MIN_SHARED and \
                    _cosine(vectors[i], vectors[j]) >= MERGE_SIMILARITY:
                parent[root(j)] = root(i)
    merged: dict[int, _Doc] = {}
    for i, doc in enumerate(docs):
        into = merged.get(root(i))
        if into is None:
            merged[root(i)] = _Doc(list(doc.items), list(doc.bodies), Counter(doc.opening))
        else:
            seen = {item.source for item in into.items}
            into.items += [item for item in doc.items if item.source not in seen]
            into.bodies += doc.bodies
            into.opening.update(doc.opening)
    return list(merged.values())


def _idf(bags: Sequence[Counter[str]]) -> dict[str, float]:
    df: Counter[str] = Counter()
    for bag in bags:
        df.update(set(bag))
    n = len(bags)
    return {word: math.log((1 + n) / (1 + count)) + 1 for word, count in df.items()}


def _weigh(bag: Counter[str], idf: Mapping[str, float]) -> dict[str, float]:
    return {word: count * idf.get(word, 1.0) for word, count in bag.items()}


def _cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    if not a or not b:
        return 0.0
    dot = sum(v * b[k] for k, v in a.items() if k in b)
    return dot / (math.sqrt(sum(v * v for v in a.values()))
                  * math.sqrt(sum(v * v for v in b.values())))


# --- choosing sentences -----------------------------------------------------------------------
@dataclass(frozen=True)
class _Candidate:
    text: str
    words: Counter[str]
    body: int  # which source's text
    position: int  # in that text


def _summarise(doc: _Doc) -> Story:
    items = tuple(sorted(doc.items, key=lambda i: i.published or _NEVER, reverse=True))
    lead = doc.items[0]  # the newest of the first group: the title fetch_news kept
    items = (lead, *[i for i in items if i is not lead])
    candidates = [_Candidate(text, Counter(words(text)), b, p)
                  for b, (_item, sentences) in enumerate(doc.bodies)
                  for p, text in enumerate(sentences)]
    if not candidates:
        return Story(items, ())
    story_words: Counter[str] = Counter()
    for candidate in candidates:
        story_words.update(set(candidate.words))
    title_words = set(words(" ".join(i.title for i in doc.items)))
    scores = {id(c): _score(c, story_words, title_words) for c in candidates}
    chosen: list[_Candidate] = []
    used = 0.0
    for candidate in sorted(candidates, key=lambda c: -scores[id(c)]):
        if len(chosen) >= MAX_SENTENCES:
            break
        width = _width(candidate.text)
        if chosen and used + width > SUMMARY_WIDTH:
            continue
        if any(_overlap(candidate.words, c.words) >= REPEAT_SIMILARITY for c in chosen):
            continue
        chosen.append(candidate)
        used += width
    chosen.sort(key=lambda c: (c.body, c.position))
    return Story(items, tuple(c.text for c in chosen))


def _score(candidate: _Candidate, story_words: Counter[str], title_words: set[str]) -> float:
    own = set(candidate.words)
    if not own:
        return 0.0
    top = max(story_words.values())
    central = sum(story_words[w] for w in own) / (top * math.sqrt(len(own)))
    title = len(own & title_words) / len(title_words) if title_words else 0.0
    early = 1.0 / (1 + candidate.position)
    facts = sum(1 for w in own if w[:1].isdigit()) + len(_NAME.findall(candidate.text)) \
        + _chinese_names(candidate.text)
    return (W_CENTRAL * min(1.0, central) + W_TITLE * title + W_EARLY * early
            + W_FACTS * min(1.0, facts / FACTS_FULL))


def _width(text: str) -> float:
    cjk = len(_CJK.findall(text))
    return cjk * CJK_WIDTH + len(text) - cjk


def _overlap(a: Counter[str], b: Counter[str]) -> float:
    small = min(len(a), len(b))
    return len(set(a) & set(b)) / small if small else 1.0


# --- text ---------------------------------------------------------------------------------------
def sentences_of(text: str) -> list[str]:
    """The sentences of a text of one paragraph a line; lines that are not prose (captions,
    datelines, share buttons: short, or without a closing full stop) are left out."""
    found: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not _is_prose(line):
            continue
        for part in _ZH_END.split(line):
            for sentence in _EN_END.split(part):
                sentence = sentence.strip()
                if len(sentence) >= MIN_SENTENCE_CHARS:
                    found.append(sentence)
    return found


def _is_prose(line: str) -> bool:
    if len(line) < MIN_SENTENCE_CHARS:
        return False
    return bool(_PROSE_END.search(line)) or len(line) >= 80


def _same_as_title(sentence: str, title: str) -> bool:
    return _fold(sentence) == _fold(title)


def _fold(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def _chinese_names(text: str) -> int:
    """How many names of people, places and organisations jieba's dictionary tags in the
    Chinese runs (a surname alone counts: names themselves are rarely in it)."""
    _segment("")  # loads the dictionary once
    import jieba.posseg

    # Dictionary tags only: jieba's HMM for unknown words costs tens of milliseconds on a
    # sentence of Traditional Chinese, whose characters its dictionary mostly lacks.
    return sum(1 for run in _CJK_RUN.findall(text) for pair in jieba.posseg.cut(run, HMM=False)
               if pair.flag in _NAME_TAGS)


def words(text: str) -> list[str]:
    """The content words of ``text``: jieba's words of its Chinese runs, the other words in
    lower case, numbers without thousands separators; function words left out."""
    out: list[str] = []
    for match in _PIECES.finditer(text):
        kind = match.lastgroup
        piece = match.group()
        if kind == "num":
            out.append(piece.replace(",", ""))
        elif kind == "cjk":
            out += [w for w in _segment(piece) if len(w) >= 2 and w not in _ZH_STOP]
        else:
            word = piece.casefold()
            if len(word) >= 2 and word not in _EN_STOP:
                out.append(word)
    return out


def _segment(run: str) -> Iterable[str]:
    global _jieba_ready
    import jieba

    if not _jieba_ready:
        with _jieba_lock:  # its dictionary is loaded once, by one thread
            if not _jieba_ready:
                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba_ready = True
    segmented: list[str] = jieba.lcut(run)
    return segmented
