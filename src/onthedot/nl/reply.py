"""The one-sentence answer a chat front door gives after scheduling a parsed request.

Without ``doing`` the sentence repeats the task text ("…（Asia/Taipei）總結財經新聞，下次執行 …");
with it, the sentence says what the job will do at each run: write a news digest, remind, or
carry out the task with a model ("…（Asia/Taipei）會為你整理財經新聞摘要，下次執行 …").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
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
_DOING_TEMPLATES: dict[tuple[str, Language], str] = {
    ("recurring", "zh-Hant"): "好的，已排定：{when}（{tz}）{doing}，下次執行 {next}。",
    ("recurring", "zh-Hans"): "好的，已安排：{when}（{tz}）{doing}，下次执行 {next}。",
    ("recurring", "en"): "OK, {doing} {when} ({tz}); next run {next}.",
    ("one-time", "zh-Hant"): "好的，已排定：{when}（{tz}）{doing}。",
    ("one-time", "zh-Hans"): "好的，已安排：{when}（{tz}）{doing}。",
    ("one-time", "en"): "OK, {doing} {at} {when} ({tz}).",
    ("immediate", "zh-Hant"): "好的，立即{doing}。",
    ("immediate", "zh-Hans"): "好的，立即{doing}。",
    ("immediate", "en"): "OK, {doing} now.",
}
DoingKind = Literal["prompt", "news_digest", "message"]
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
    text: str = ""  # the prompt (prompt) or the reminder (message)
    topic: str | None = None  # news_digest: finance | technology | world (None: any news)


def render_confirmation(result: ParseResult, now: datetime, language: str | None = None,
                        doing: Doing | None = None) -> str:
    """E.g. "好的，已排定：每天 08:00（Asia/Taipei）總結財經新聞，下次執行 2026-11-30 08:00。".

    ``language`` (en, zh, zh-TW, zh-Hant, zh-CN, zh-Hans ...) overrides the language of the text.
    ``doing`` says what the job does instead of repeating the task text: "…（Asia/Taipei）會為你
    整理財經新聞摘要，…", "OK, scheduled a reminder “call mom” for …", "OK, I will carry out
    “…” every day at 08:00 …".
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
        when = _local(datetime.fromisoformat(params.time), zone)
    if doing is not None:
        scheduled, at_once = _DOING[(doing.kind, lang)]
        phrase = at_once if params.type == "immediate" else scheduled
        topic = _TOPIC_WORDS.get(doing.topic or "", {}).get(lang, "")
        return _DOING_TEMPLATES[(params.type, lang)].format(
            when=when, tz=params.timezone, next=next_text,
            at="at" if doing.kind == "prompt" else "for",
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
