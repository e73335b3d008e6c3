"""``news_digest``: read a topic's feeds (or the job's own), keep what is new since the job's last
successful run, and write a digest in the task's language.

One attempt::

    states <- feed states written by the job's last SUCCEEDED run (ctx.previous), if any
    fetch_news(...)            every feed at once, conditional GETs from those states
      |-- every feed failed -> ActionError (retried by the worker; EgressRefusedError when
      |                        every failure was a refused address: retrying cannot help)
      v
    write this run's feed states, fenced by the attempt (the last succeeded run's are kept
    until another run succeeds)
    articles <- the ArticleReader: each digested item's page, through the guard, within
              ARTICLE_TIMEOUT_SHARE of the job's timeout (cached by URL across jobs)
    digest <- the DigestWriter: the model's summary when a model is configured (the offline
              digest when it fails or answers nothing), else the offline digest: stories
              summarised in sentences of their articles
    output {"digest", "written_by", "items", "new_items", "more_items", "more", "problems",
            "language", "deliver"}
              (+ "model" when the model wrote it, "model_error" when it failed)

``deliver`` is False when nothing is new and the job did not set ``deliver_empty``: the
delivery step skips such a run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from onthedot.actions.articles import ArticleReader, texts_by_link
from onthedot.actions.base import ActionContext
from onthedot.actions.cache import BoundedDict
from onthedot.actions.catalog import (
    LANGUAGES,
    MAX_FEEDS,
    MAX_TOPIC_CHARS,
    TOPICS_EXPECTED,
    FeedCatalog,
    Topic,
    feed_host,
    feed_url_problem,
    normalise_topic,
)
from onthedot.actions.digest import DigestRequest, DigestWriter, OfflineDigest
from onthedot.actions.egress import ALLOW_SETTING, EgressGuard
from onthedot.actions.feeds import (
    DEFAULT_MAX_ITEMS,
    FEED_TIMEOUT_SECONDS,
    MAX_ITEMS,
    FeedLimits,
    NewsResult,
    fetch_news,
)
from onthedot.domain.errors import ActionError, EgressRefusedError, ValidationError
from onthedot.nl.lang import detect
from onthedot.nl.parts import Language
from onthedot.store.base import FeedState, FeedStatesPut

LANGUAGES_EXPECTED = "en | zh-Hant | zh-Hans"
# Of the job's timeout, the share one feed may take, and the share the model may take to write
# the digest: what is left is for the store and, after a failed model, the offline digest.
FEED_TIMEOUT_SHARE = 0.5
MODEL_TIMEOUT_SHARE = 0.4
# Of the job's timeout, the share all article pages together may take (at most
# ARTICLES_MAX_SECONDS): a page not read by then is summarised from its feed's description.
ARTICLE_TIMEOUT_SHARE = 0.15
ARTICLES_MAX_SECONDS = 20.0
MAX_ERROR_CHARS = 1000  # of the feeds' reasons in a failed attempt's error
MORE_IN_OUTPUT = 50  # items past max_items listed in the output's "more" (all are counted)
FEED_TITLES_KEPT = 10_000  # feed titles remembered by URL, to name a feed that fails


class NewsDigestAction:
    name = "news_digest"
    uses_previous = True
    param_names: tuple[str, ...] = ("topic", "feeds", "language", "max_items", "deliver_empty")

    def __init__(self, guard: EgressGuard, catalog: FeedCatalog | None = None,
                 writer: DigestWriter | None = None,
                 reader: ArticleReader | None = None) -> None:
        self.guard = guard
        self.catalog = catalog or FeedCatalog.shipped()
        self.writer: DigestWriter = writer or OfflineDigest()
        # One per process: a page read for one job is not fetched again for another.
        self.reader = reader or ArticleReader(guard)
        # Each feed's title by URL, learnt from every job's reads in this process: a feed that
        # fails is named by it rather than by its address.
        self.feed_titles: BoundedDict[str, str] = BoundedDict(FEED_TITLES_KEPT)

    # --- at creation ---------------------------------------------------------------------
    def validate(self, params: dict[str, Any]) -> None:
        topic = self._validate_topic(params.get("topic"))
        feeds = params.get("feeds")
        if feeds is not None:
            self._validate_feeds(feeds)
        elif topic is None:
            raise ValidationError("a news_digest action needs a topic or its own feeds",
                                  code="missing_field", field="action.topic",
                                  expected=TOPICS_EXPECTED + ', or "feeds": [url, ...]')
        language = params.get("language")
        if language is not None and language not in LANGUAGES:
            raise ValidationError(f"unknown language {language!r}", field="action.language",
                                  expected=LANGUAGES_EXPECTED)
        max_items = params.get("max_items", DEFAULT_MAX_ITEMS)
        if isinstance(max_items, bool) or not isinstance(max_items, int) \
                or not 1 <= max_items <= MAX_ITEMS:
            raise ValidationError("max_items out of range", field="action.max_items",
                                  expected=f"an integer from 1 to {MAX_ITEMS}")
        if not isinstance(params.get("deliver_empty", False), bool):
            raise ValidationError("deliver_empty must be true or false",
                                  field="action.deliver_empty", expected="true | false")

    def _validate_topic(self, topic: object) -> Topic | None:
        if topic is None:
            return None
        if not isinstance(topic, str) or len(topic) > MAX_TOPIC_CHARS:
            raise ValidationError("the topic must be a short string", field="action.topic",
                                  expected=TOPICS_EXPECTED)
        known = normalise_topic(topic)
        if known is None:
            raise ValidationError(f"unknown news topic {topic!r}", code="unknown_topic",
                                  field="action.topic", expected=TOPICS_EXPECTED)
        return known

    def _validate_feeds(self, feeds: object) -> None:
        if not isinstance(feeds, list) or not 1 <= len(feeds) <= MAX_FEEDS:
            raise ValidationError("feeds must be a list of feed URLs", field="action.feeds",
                                  expected=f"1 to {MAX_FEEDS} http(s) URLs of RSS or Atom feeds")
        for i, url in enumerate(feeds):
            problem = feed_url_problem(url)
            if problem is not None:
                raise ValidationError(f"feed {i + 1} {problem}", field=f"action.feeds[{i}]",
                                      expected="an absolute http:// or https:// URL")
            host = feed_host(url)
            reason = self.guard.refusal_without_lookup(host)
            if reason is not None:
                raise ValidationError(
                    f"feed {i + 1} points at {host} ({reason} address), which onthedot does "
                    "not call", code="egress_refused", field=f"action.feeds[{i}]",
                    expected="an http(s) URL of a public host (an operator can allow private "
                             f"destinations with {ALLOW_SETTING})")

    # --- at fire time --------------------------------------------------------------------
    async def execute(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        topic_text = params.get("topic")
        topic = normalise_topic(topic_text) if isinstance(topic_text, str) else None
        language = _language(params, ctx, topic_text)
        previous = ctx.previous
        result = await fetch_news(
            ctx.http, topic=topic, language=language, feeds=params.get("feeds"),
            since=None if previous is None else previous.started_at or previous.scheduled_at,
            limits=_limits(params, ctx), states=await _remembered(ctx),
            now=ctx.run.started_at or datetime.now(UTC), guard=self.guard,
            catalog=self.catalog, titles=self.feed_titles)
        if result.all_failed:
            raise _every_feed_failed(result)
        await _remember(ctx, result)
        articles = await self.reader.read(
            ctx.http, result.items, budget_seconds=min(
                ARTICLES_MAX_SECONDS, ctx.timeout_seconds * ARTICLE_TIMEOUT_SHARE))
        digest = await self.writer.write(DigestRequest(
            topic=topic, language=language, items=result.items, problems=result.problems,
            more=result.more, articles=texts_by_link(articles),
            timezone=ctx.job.params.timezone, first=previous is None,
            idempotency_key=ctx.idempotency_key,
            time_budget_seconds=ctx.timeout_seconds * MODEL_TIMEOUT_SHARE))
        output: dict[str, Any] = {
            "digest": digest.text,
            "written_by": digest.written_by,
            "items": [item.to_dict() for item in result.items],
            "new_items": len(result.items),
            "more_items": len(result.more),
            "more": [item.to_dict() for item in result.more[:MORE_IN_OUTPUT]],
            "problems": [problem.to_dict() for problem in result.problems],
            "language": language,
            "deliver": bool(result.items) or params.get("deliver_empty") is True,
        }
        if digest.model is not None:
            output["model"] = digest.model
        if digest.model_error is not None:
            output["model_error"] = digest.model_error
        return output


def _limits(params: dict[str, Any], ctx: ActionContext) -> FeedLimits:
    return FeedLimits(max_items=int(params.get("max_items", DEFAULT_MAX_ITEMS)),
                      timeout_seconds=min(FEED_TIMEOUT_SECONDS,
                                          ctx.timeout_seconds * FEED_TIMEOUT_SHARE))


async def _remembered(ctx: ActionContext) -> dict[str, FeedState]:
    """The feed states of the job's last succeeded run, by feed URL."""
    if ctx.previous is None or ctx.feed_states is None:
        return {}
    states = await ctx.feed_states.feed_states_get(ctx.job.job_id, ctx.previous.run_id)
    return {state.feed_url: state for state in states}


async def _remember(ctx: ActionContext, result: NewsResult) -> None:
    if ctx.feed_states is None:
        return
    written = await ctx.feed_states.feed_states_put(FeedStatesPut(
        job_id=ctx.job.job_id, run_id=ctx.run.run_id, attempt=ctx.run.attempt,
        keep_run_id=None if ctx.previous is None else ctx.previous.run_id,
        states=tuple(result.states.values())))
    if not written:
        # Another attempt took the run over; its result, not this one's, will be recorded.
        raise ActionError("the run was taken over by another attempt")


def _language(params: dict[str, Any], ctx: ActionContext, topic_text: object) -> Language:
    """The job's ``language``, else the language its name (the task as the user said it) and
    topic are written in."""
    language = params.get("language")
    if language in LANGUAGES:
        return cast(Language, language)
    words = f"{ctx.job.name} {topic_text if isinstance(topic_text, str) else ''}"
    return detect(words, ctx.job.params.timezone)


def _every_feed_failed(result: NewsResult) -> ActionError:
    reasons = "; ".join(f"{p.url}: {p.reason}" for p in result.problems if p.fatal)
    if len(reasons) > MAX_ERROR_CHARS:
        reasons = reasons[:MAX_ERROR_CHARS - 1] + "…"
    message = f"no feed could be read ({reasons})"
    if all(p.kind == "refused" for p in result.problems if p.fatal):
        return EgressRefusedError(message)
    return ActionError(message)
