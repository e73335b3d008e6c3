"""``prompt``: the configured model carries out the task at fire time; its answer is the output.

One attempt::

    system:  this is one scheduled run of a task; the run's scheduled time in the job's
             timezone, that timezone, the language to answer in (the prompt's), the job's
             previous answer (its last succeeded run, cut to MAX_PREVIOUS_CHARS)
    user:    the prompt
    the model may call fetch_news(topic, language) (the news digest's feeds, through the
    worker's guarded client), at most MAX_TOOL_ROUNDS rounds and MAX_NEWS_CALLS calls
      |-- no answer, timeout, HTTP 5xx or 429 --> ActionError, retried by the worker
      |-- any other HTTP 4xx -------------------> ActionError, not retried (see model.py)
      |-- an answer without text ---------------> ActionError, retried
      v
    output {"text", "model", "language", "tool_calls", "deliver": true}

The model's own API is reached through the model endpoint's guard (trusted operator
configuration); the feeds through the worker's client, judged by ``ONTHEDOT_EGRESS_ALLOW`` like
every user-facing destination. Each request to the model carries an ``Idempotency-Key`` derived
from the run id (see ``llm.run_with_tools``).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, tzinfo
from typing import Any

from onthedot.actions.base import ActionContext
from onthedot.actions.catalog import (
    TOPICS,
    TOPICS_EXPECTED,
    FeedCatalog,
    Topic,
    feed_host,
    normalise_topic,
)
from onthedot.actions.digest import zone_of
from onthedot.actions.egress import EgressGuard
from onthedot.actions.feeds import FEED_TIMEOUT_SECONDS, FeedLimits, NewsResult, fetch_news
from onthedot.actions.model import (
    BASE_URL_SETTING,
    LANGUAGE_NAMES,
    ModelEndpoint,
    action_error,
)
from onthedot.domain.errors import ActionError, ValidationError
from onthedot.domain.models import JobRun
from onthedot.llm import LLM_TIMEOUT_SECONDS, ModelError, Sampling, run_with_tools
from onthedot.nl.lang import detect, normalise_language
from onthedot.nl.parts import Language

MAX_PROMPT_CHARS = 10_000
MAX_MODEL_CHARS = 200
MAX_TOKENS = 32_000
MAX_TEMPERATURE = 2.0
MAX_PREVIOUS_CHARS = 4_000  # of the previous answer, in the context of the next run
NEWS_ITEMS = 15  # per fetch_news call
MAX_NEWS_CALLS = 6  # per attempt; a model looping on the tool gets told to answer
NEWS_TIMEOUT_SHARE = 0.3  # of the job's timeout, for one fetch_news call's feeds
_TIME_FORMAT = "%Y-%m-%d %H:%M (%A)"

FETCH_NEWS = "fetch_news"
FETCH_NEWS_TOOL: dict[str, Any] = {"type": "function", "function": {
    "name": FETCH_NEWS,
    "description": ("The newest items of a news topic from the service's RSS/Atom feeds, "
                    "newest first: title, link, source and publication time. Use it for any "
                    "question about current news, and cite the links it returns."),
    "parameters": {
        "type": "object",
        "properties": {
            "topic": {"type": "string", "description": TOPICS_EXPECTED},
            "language": {"type": "string", "enum": list(LANGUAGE_NAMES),
                         "description": "the language of the feeds to read"},
        },
        "required": ["topic", "language"],
        "additionalProperties": False,
    },
}}


class PromptAction:
    name = "prompt"
    uses_previous = True
    param_names: tuple[str, ...] = ("prompt", "model", "max_tokens", "temperature")

    def __init__(self, guard: EgressGuard, endpoint: ModelEndpoint | None,
                 catalog: FeedCatalog | None = None) -> None:
        self.guard = guard  # the worker's: judges the feeds, as for a news digest
        self.endpoint = endpoint
        self.catalog = catalog or FeedCatalog.shipped()

    # --- at creation ---------------------------------------------------------------------
    def validate(self, params: dict[str, Any]) -> None:
        if self.endpoint is None:
            raise _not_configured()
        prompt = params.get("prompt")
        if prompt is None:
            raise ValidationError("a prompt action needs a prompt", code="missing_field",
                                  field="action.prompt", expected=_PROMPT_EXPECTED)
        if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS:
            raise ValidationError("the prompt must be a non-empty text of at most "
                                  f"{MAX_PROMPT_CHARS} characters", field="action.prompt",
                                  expected=_PROMPT_EXPECTED)
        model = params.get("model")
        if model is not None and not _is_model_name(model):
            raise ValidationError("model must be a model name", field="action.model",
                                  expected=f"a name of at most {MAX_MODEL_CHARS} characters "
                                           "without spaces, e.g. gpt-4o-mini or llama3.1:8b")
        max_tokens = params.get("max_tokens")
        if max_tokens is not None and (isinstance(max_tokens, bool)
                                       or not isinstance(max_tokens, int)
                                       or not 1 <= max_tokens <= MAX_TOKENS):
            raise ValidationError("max_tokens out of range", field="action.max_tokens",
                                  expected=f"an integer from 1 to {MAX_TOKENS}")
        temperature = params.get("temperature")
        if temperature is not None and (isinstance(temperature, bool)
                                        or not isinstance(temperature, int | float)
                                        or not math.isfinite(temperature)
                                        or not 0 <= temperature <= MAX_TEMPERATURE):
            raise ValidationError("temperature out of range", field="action.temperature",
                                  expected=f"a number from 0 to {MAX_TEMPERATURE:g}")

    # --- at fire time --------------------------------------------------------------------
    async def execute(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        if self.endpoint is None:  # the model was configured at creation, not any more
            raise ActionError(_not_configured().message, code="llm_not_configured",
                              retryable=False)
        prompt = str(params["prompt"])
        timezone = ctx.job.params.timezone
        language = detect(prompt, timezone)
        model = self.endpoint.model(params.get("model"),
                                    timeout_seconds=min(LLM_TIMEOUT_SECONDS, ctx.timeout_seconds))
        news = _NewsTool(self, ctx, language)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_message(ctx.run, timezone, language,
                                                         ctx.previous)},
            {"role": "user", "content": prompt},
        ]
        sampling = Sampling(max_tokens=params.get("max_tokens"),
                            temperature=params.get("temperature"))
        try:
            async with self.endpoint.client() as http:
                answer = await run_with_tools(model, messages, [FETCH_NEWS_TOOL], news.call,
                                              http=http, sampling=sampling,
                                              idempotency_key=ctx.idempotency_key)
        except ModelError as exc:
            raise action_error(exc) from exc
        if not answer:
            raise ActionError(f"the model {model.model} answered with no text",
                              code="llm_empty_answer")
        return {"text": answer, "model": model.model, "language": language,
                "tool_calls": news.calls, "deliver": True}


_PROMPT_EXPECTED = (f"what the model should do at each run, 1 to {MAX_PROMPT_CHARS} characters, "
                    "e.g. 總結今天的財經新聞")


def _not_configured() -> ValidationError:
    return ValidationError(
        f"a prompt action needs a model, and this deployment has none ({BASE_URL_SETTING} is "
        "not set)", code="llm_not_configured", field="action.type",
        expected=f"an operator setting {BASE_URL_SETTING} (an OpenAI-compatible API), or "
                 "another action: message | news_digest | webhook")


def _is_model_name(value: object) -> bool:
    return (isinstance(value, str) and 0 < len(value) <= MAX_MODEL_CHARS
            and value.isprintable() and not any(ch.isspace() for ch in value))


# --- the context ---------------------------------------------------------------------------
def system_message(run: JobRun, timezone: str, language: Language,
                   previous: JobRun | None) -> str:
    """What the model knows besides the prompt: when this run is, for whom, in which language,
    and what it answered last time."""
    zone = zone_of(timezone)
    lines = [
        "You carry out a task that a person scheduled; this is one scheduled run of it. Your "
        "answer is delivered to them as it is (inbox, e-mail or chat), so give the result "
        "itself, in plain text: not a plan, not a question back.",
        f"This run is scheduled for {_local(run.scheduled_at, zone)} in {timezone}.",
        f"The person's timezone: {timezone}.",
        f"Answer in {LANGUAGE_NAMES[language]}, the language of the task.",
        f"For anything about current news, call {FETCH_NEWS}(topic, language) and base what you "
        "say on the items it returns, with their links; never make up news.",
    ]
    if previous is not None:
        lines += [
            f"Your answer at the previous run (scheduled for "
            f"{_local(previous.scheduled_at, zone)}), for continuity; do not repeat what has "
            "not changed:",
            '"""', previous_text(previous.output), '"""',
        ]
    return "\n".join(lines)


def previous_text(output: Any) -> str:
    """The text of a previous run's output (a job whose action was changed may have had
    another action's output), cut to MAX_PREVIOUS_CHARS."""
    found = [output.get(k) for k in ("text", "digest", "message")] \
        if isinstance(output, dict) else [output]
    text = next((t for t in found if isinstance(t, str) and t.strip()), None) \
        or json.dumps(output, ensure_ascii=False)
    return text if len(text) <= MAX_PREVIOUS_CHARS else text[:MAX_PREVIOUS_CHARS - 1] + "…"


def _local(at: datetime, zone: tzinfo) -> str:
    return at.astimezone(zone).strftime(_TIME_FORMAT)


# --- the tool --------------------------------------------------------------------------------
class _NewsTool:
    """``fetch_news`` for one attempt: each (topic, language) read once, the calls counted and
    summarised for the output. A bad call is answered with an error the model can read."""

    def __init__(self, action: PromptAction, ctx: ActionContext, language: Language) -> None:
        self.action = action
        self.ctx = ctx
        self.language = language
        self.calls: list[dict[str, Any]] = []
        self._read: dict[tuple[str, Language], NewsResult] = {}

    async def call(self, name: str, raw_arguments: str) -> str:
        if name != FETCH_NEWS:
            self.calls.append({"name": name, "error": "unknown tool"})
            return _tool_error(f"there is no tool {name!r}; the only tool is {FETCH_NEWS}")
        if len(self.calls) >= MAX_NEWS_CALLS:
            return _tool_error(f"{FETCH_NEWS} was called {MAX_NEWS_CALLS} times already; "
                               "answer with what you have")
        try:
            arguments = json.loads(raw_arguments or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict) or not isinstance(arguments.get("topic"), str):
            self.calls.append({"name": name, "error": "bad arguments"})
            return _tool_error('the arguments must be a JSON object like {"topic": "finance", '
                               '"language": "en"}')
        topic_text = arguments["topic"]
        language_arg = arguments.get("language")
        language = normalise_language(language_arg if isinstance(language_arg, str) else None,
                                      self.language)
        topic = normalise_topic(topic_text)
        if topic is None:
            self.calls.append({"name": name, "topic": topic_text, "error": "unknown topic"})
            return _tool_error(f"unknown news topic {topic_text!r}; the topics are "
                               + ", ".join(TOPICS))
        result = self._read.get((topic, language))
        if result is None:
            result = self._read[(topic, language)] = await self._fetch(topic, language)
        self.calls.append({"name": name, "topic": topic, "language": language,
                           "items": len(result.items)})
        return _news_json(topic, language, result, zone_of(self.ctx.job.params.timezone))

    async def _fetch(self, topic: Topic, language: Language) -> NewsResult:
        ctx = self.ctx
        return await fetch_news(
            ctx.http, topic=topic, language=language,
            limits=FeedLimits(max_items=NEWS_ITEMS, timeout_seconds=min(
                FEED_TIMEOUT_SECONDS, ctx.timeout_seconds * NEWS_TIMEOUT_SHARE)),
            now=ctx.run.started_at or datetime.now(UTC), guard=self.action.guard,
            catalog=self.action.catalog)


def _news_json(topic: str, language: Language, result: NewsResult, zone: tzinfo) -> str:
    """Compact JSON: what the model needs to cite an item, nothing else."""
    items = [{"title": item.title, "link": item.link, "source": item.source,
              "published": None if item.published is None
              else item.published.astimezone(zone).isoformat(timespec="minutes")}
             for item in result.items]
    body: dict[str, Any] = {"topic": topic, "language": language, "items": items}
    unread = [{"feed": feed_host(p.url) or p.url, "reason": p.reason}
              for p in result.problems if p.fatal]
    if unread:
        body["unreadable_feeds"] = unread
    if result.all_failed:
        body["error"] = "no feed of this topic could be read; say so rather than guess"
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _tool_error(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False, separators=(",", ":"))
