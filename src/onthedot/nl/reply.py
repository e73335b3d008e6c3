"""The one-sentence answer a chat front door gives after scheduling a parsed request."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from onthedot.nl.describe import describe
from onthedot.nl.lang import normalise_language
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


def render_confirmation(result: ParseResult, now: datetime, language: str | None = None) -> str:
    """E.g. "好的，已排定：每天 08:00（Asia/Taipei）總結財經新聞，下次執行 2026-11-30 08:00。".

    ``language`` (en, zh, zh-TW, zh-Hant, zh-CN, zh-Hans ...) overrides the language of the text.
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
    template = _TEMPLATES[(params.type, lang)]
    return template.format(
        when=when, tz=params.timezone, task=_task(result.task, lang, params.type), next=next_text
    )


def _local(instant: datetime, zone: ZoneInfo) -> str:
    return instant.astimezone(zone).strftime("%Y-%m-%d %H:%M")


def _task(task: str, lang: Language, kind: str) -> str:
    if not task:
        return ""
    if lang == "en":
        return f" “{task}”"
    return f"：{task}" if kind == "immediate" else task
