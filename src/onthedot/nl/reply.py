"""The one-sentence answer a chat front door gives after scheduling a parsed request.

Without ``doing`` the sentence repeats the task text ("…（Asia/Taipei）總結財經新聞，下次執行 …");
with it, the sentence says what the job will do at each run: write a news digest, remind, or
carry out the task with a model ("…（Asia/Taipei）會為你整理財經新聞摘要，下次執行 …").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from onthedot.nl.describe import describe
from onthedot.nl.lang import normalise_language
from onthedot.nl.messages import render_notes
from onthedot.nl.parts import Language
from onthedot.nl.result import ParseResult

_TEMPLATES: dict[tuple[str, Language], str] = {
    ("recurring", "zh-Hant"): "好的，已排定：{when}（{tz}）{task}，下次執行 {next}。",
    ("recurring", "zh-Hans"): "好的，已安排：{when}（{tz}）{task}，下次执行 {next}。",
    ("recurring", "en"): "OK, scheduled{task} {when} ({tz}); next run {next}.",
    ("one-time", "zh-Hant"): "好的，已排定：{when}（{tz}）{task}。",
    ("one-time", "zh-Hans"): "好的，已安排：{when}（{tz}）{task}。",
    ("one-time", "en"): "OK, scheduled{task} for {when} ({tz}).",
    ("immediate", "zh-Hant"): "好的，立即執行{task}。",
    ("immediate", "zh-Hans"): "好的，立即执行{task}。",
    ("immediate", "en"): "OK, running{task} now.",
}


# The same sentences when the confirmation says what the job does ({doing}, from _doing).
# {chan}: where each result goes (", delivered to your inbox"), or "" when not said.
_DOING_TEMPLATES: dict[tuple[str, Language], str] = {
    ("recurring", "zh-Hant"): "好的，已排定：{when}（{tz}）{doing}{chan}，下次執行 {next}。",
    ("recurring", "zh-Hans"): "好的，已安排：{when}（{tz}）{doing}{chan}，下次执行 {next}。",
    ("recurring", "en"): "OK, {doing} {when} ({tz}){chan}; next run {next}.",
    ("one-time", "zh-Hant"): "好的，已排定：{when}（{tz}）{doing}{chan}。",
    ("one-time", "zh-Hans"): "好的，已安排：{when}（{tz}）{doing}{chan}。",
    ("one-time", "en"): "OK, {doing} {at} {when} ({tz}){chan}.",
    ("immediate", "zh-Hant"): "好的，立即{doing}{chan}。",
    ("immediate", "zh-Hans"): "好的，立即{doing}{chan}。",
    ("immediate", "en"): "OK, {doing} now{chan}.",
}
# Each channel named: (English, Traditional, Simplified); {to} is the address or the host.
_CHANNEL_WORDS: dict[str, tuple[str, str, str]] = {
    "inbox": ("your inbox", "收件匣", "收件箱"),
    "email": ("e-mail to {to}", "e-mail（{to}）", "e-mail（{to}）"),
    "webhook": ("the webhook at {to}", "webhook（{to}）", "webhook（{to}）"),
}
_CHANNELS_LEAD: dict[Language, tuple[str, str]] = {  # (some channels, none)
    "en": (", delivered to {list}", ", delivered nowhere (the result stays in the task's runs)"),
    "zh-Hant": ("，寄到{list}", "，不寄到任何地方（結果只在執行紀錄裡）"),
    "zh-Hans": ("，发到{list}", "，不发到任何地方（结果只在执行记录里）"),
}
_CJK_LATIN = re.compile(r"([\u3400-\u9fff])([A-Za-z])")
_LANG_INDEX: dict[Language, int] = {"en": 0, "zh-Hant": 1, "zh-Hans": 2}
DoingKind = Literal["prompt", "news_digest", "message", "webhook"]
# (kind, language) -> (phrase for a scheduled run, phrase for a run now); {text}, {topic}.
_DOING: dict[tuple[DoingKind, Language], tuple[str, str]] = {
    ("news_digest", "zh-Hant"): ("會為你整理{topic}新聞摘要", "為你整理{topic}新聞摘要"),
    ("news_digest", "zh-Hans"): ("会为你整理{topic}新闻摘要", "为你整理{topic}新闻摘要"),
    ("news_digest", "en"): ("scheduled a {topic}news digest", "preparing a {topic}news digest"),
    ("message", "zh-Hant"): ("會提醒你「{text}」", "提醒你「{text}」"),
    ("message", "zh-Hans"): ("会提醒你「{text}」", "提醒你「{text}」"),
    ("message", "en"): ("scheduled a reminder “{text}”", "sending the reminder “{text}”"),
    ("prompt", "zh-Hant"): ("會為你執行「{text}」", "為你執行「{text}」"),
    ("prompt", "zh-Hans"): ("会为你执行「{text}」", "为你执行「{text}」"),
    ("prompt", "en"): ("I will carry out “{text}”", "carrying out “{text}”"),
    ("webhook", "zh-Hant"): ("會呼叫 {text}", "呼叫 {text}"),
    ("webhook", "zh-Hans"): ("会调用 {text}", "调用 {text}"),
    ("webhook", "en"): ("I will call {text}", "calling {text}"),
}
_TOPIC_WORDS: dict[str, dict[Language, str]] = {
    "finance": {"en": "finance ", "zh-Hant": "財經", "zh-Hans": "财经"},
    "technology": {"en": "technology ", "zh-Hant": "科技", "zh-Hans": "科技"},
    "world": {"en": "world ", "zh-Hant": "國際", "zh-Hans": "国际"},
}


@dataclass(frozen=True)
class Doing:
    """What each run of the job does, for the confirmation."""

    kind: DoingKind
    text: str = ""  # the prompt (prompt), the reminder (message) or the host (webhook)
    topic: str | None = None  # news_digest: finance | technology | world (None: any news)


def channel_words(notify: Sequence[Mapping[str, Any]], language: Language) -> str:
    """Where each result goes, as the confirmation says it: ", delivered to your inbox and
    e-mail to ann@example.com", "，寄到收件匣和 e-mail（ann@example.com）"."""
    some, none = _CHANNELS_LEAD[language]
    names = [_channel_name(c, language) for c in notify]
    if not names:
        return none
    if language == "en":
        joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        return some.format(list=joined)
    joined = ""
    for i, name in enumerate(names):
        joined += ("" if i == 0 else "和" if i == len(names) - 1 else "、") + name
    # A space between Chinese and a Latin word ("收件匣和 e-mail"), as the examples write it.
    return _CJK_LATIN.sub(r"\1 \2", some.format(list=joined))


def _channel_name(channel: Mapping[str, Any], language: Language) -> str:
    kind = str(channel.get("channel"))
    words = _CHANNEL_WORDS.get(kind, (kind, kind, kind))[_LANG_INDEX[language]]
    if kind == "email":
        return words.format(to=channel.get("to", ""))
    if kind == "webhook":
        return words.format(to=urlsplit(str(channel.get("url", ""))).hostname or "")
    return words


def render_confirmation(result: ParseResult, now: datetime, language: str | None = None,
                        doing: Doing | None = None,
                        notify: Sequence[Mapping[str, Any]] | None = None) -> str:
    """E.g. "好的，已排定：每天 08:00（Asia/Taipei）總結財經新聞，下次執行 2026-11-30 08:00。".

    ``language`` (en, zh, zh-TW, zh-Hant, zh-CN, zh-Hans ...) overrides the language of the text.
    ``doing`` says what the job does instead of repeating the task text: "…（Asia/Taipei）會為你
    整理財經新聞摘要，…", "OK, scheduled a reminder “call mom” for …", "OK, I will carry out
    “…” every day at 08:00 …". ``notify`` (with ``doing``) adds where each result goes:
    "…摘要，寄到收件匣和 e-mail（ann@example.com），下次執行 …".
    """
    lang = normalise_language(language, result.language)
    params = result.job_params
    zone = ZoneInfo(params.timezone)
    when = ""
    next_text = ""
    if params.type == "recurring" and params.schedule:
        when = describe(params.schedule, lang)
        upcoming = result.next_runs(1, after=now)
        next_text = _local(upcoming[0], zone) if upcoming else "-"
    elif params.type == "one-time" and params.time:
        at = datetime.fromisoformat(params.time)  # without an offset: wall time in the zone
        when = _local(at if at.tzinfo else at.replace(tzinfo=zone), zone)
    if doing is not None:
        scheduled, at_once = _DOING[(doing.kind, lang)]
        phrase = at_once if params.type == "immediate" else scheduled
        topic = _TOPIC_WORDS.get(doing.topic or "", {}).get(lang, "")
        return _DOING_TEMPLATES[(params.type, lang)].format(
            when=when, tz=params.timezone, next=next_text,
            at="at" if doing.kind in ("prompt", "webhook") else "for",
            chan="" if notify is None else channel_words(notify, lang),
            doing=phrase.format(text=doing.text, topic=topic)) + render_notes(result.notes, lang)
    template = _TEMPLATES[(params.type, lang)]
    return template.format(
        when=when, tz=params.timezone, task=_task(result.task, lang, params.type), next=next_text
    ) + render_notes(result.notes, lang)


def _local(instant: datetime, zone: ZoneInfo) -> str:
    return instant.astimezone(zone).strftime("%Y-%m-%d %H:%M")


def _task(task: str, lang: Language, kind: str) -> str:
    if not task:
        return ""
    if lang == "en":
        return f" “{task}”"
    return f"：{task}" if kind == "immediate" else task
