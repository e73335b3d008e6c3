"""A news digest written by the configured model, in the task's language.

One call, no tools: the new items go in the request as stories (``stories.py``: the same news
from several feeds already merged, the most important first), each with its title, every
source's name, local time and link, and an excerpt of its article (the opening of the page's
main text, else the feed's description), and the model is asked for a short summary that keeps
each link and adds nothing that is not in them. The new items past max_items ("and N more")
and the feeds that could not be read are named after the model's text, in the same words as the
offline digest, so that part never depends on the model.

    no new items ---------------------------------------> offline ("nothing new"), no call
    model fails (down, 4xx, 5xx, timeout) or says nothing -> offline digest, and why
    otherwise -------------------------------------------> the model's text

A digest is never lost to a model outage: the run succeeds with the offline digest, and its
output says which one the person got (``written_by``) and why (``model_error``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from datetime import tzinfo
from typing import Any

from onthedot.actions.articles import excerpt
from onthedot.actions.digest import (
    Digest,
    DigestRequest,
    closing_notes,
    join_sentences,
    render_offline,
    stories_for,
    topic_words,
    zone_of,
)
from onthedot.actions.model import LANGUAGE_NAMES, ModelEndpoint
from onthedot.actions.stories import Story, sentences_of
from onthedot.domain.errors import ActionError
from onthedot.llm import LLM_TIMEOUT_SECONDS, ModelError

log = logging.getLogger("onthedot.actions.digest")

_TIME_FORMAT = "%Y-%m-%d %H:%M"
EXCERPT_CHARS = 1200  # of one story's article, at most
EXCERPTS_TOTAL_CHARS = 24_000  # of all stories' excerpts together (50 stories get 480 each)
EXCERPT_MIN_CHARS = 300


class ModelDigest:
    def __init__(self, endpoint: ModelEndpoint) -> None:
        self.endpoint = endpoint

    async def write(self, request: DigestRequest) -> Digest:
        stories = await stories_for(request)
        if not request.items:
            return Digest(render_offline(request, stories), "offline")
        budget = request.time_budget_seconds or LLM_TIMEOUT_SECONDS
        model = self.endpoint.model(timeout_seconds=min(budget, LLM_TIMEOUT_SECONDS))
        headers = {"Idempotency-Key": request.idempotency_key} if request.idempotency_key \
            else None
        try:
            async with asyncio.timeout(budget), self.endpoint.client() as http:
                completion = await model.complete(
                    http, digest_messages(request, stories), (), headers=headers)
        except TimeoutError:
            return _fallback(request, stories, f"the model did not answer within {budget:g}s")
        except (ModelError, ActionError) as exc:  # ActionError: the model's name did not resolve
            return _fallback(request, stories, exc.message)
        if not completion.content:
            return _fallback(request, stories, "the model answered with no text")
        text = "\n\n".join([completion.content, *closing_notes(request)])
        return Digest(text, "model", model=model.model)


def digest_messages(request: DigestRequest, stories: Sequence[Story]) -> list[dict[str, Any]]:
    """The system instructions and the stories, as the model receives them."""
    language = LANGUAGE_NAMES[request.language]
    topic = topic_words(request.topic, "en").lower()
    about = f"{topic} news" if topic else "news"
    system = (
        f"You write a short digest of {about} for one person, in {language}. Use only the "
        "stories you are given: for each, say what happened in one to three sentences, keeping "
        "its key facts (numbers, names, dates) from the excerpt, most important story first, "
        "and put its links right after the sentences that use them, as plain URLs. Name every "
        "source of a story. Add no facts, opinions or stories that are not given. Plain text: "
        "no Markdown headings or tables, no preamble, no closing remarks.")
    zone = zone_of(request.timezone)
    chars = max(EXCERPT_MIN_CHARS, min(EXCERPT_CHARS, EXCERPTS_TOTAL_CHARS // max(1, len(stories))))
    sent = [_story_json(story, request.articles, zone, chars) for story in stories]
    user = (f"{len(request.items)} new items in {len(sent)} stories, most important first "
            f"(times in {request.timezone}):\n" + json.dumps(sent, ensure_ascii=False, indent=1))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _story_json(story: Story, articles: Mapping[str, str], zone: tzinfo,
                chars: int) -> dict[str, Any]:
    # The prose of the longest text read among the story's pages (captions, datelines and
    # buttons left out); else the feeds' longest description.
    texts = [articles.get(item.link, "") for item in story.items]
    text = join_sentences(sentences_of(max(texts, key=len))) \
        or max((item.summary for item in story.items), key=len)
    return {"title": story.title,
            "sources": [{"source": item.source,
                         "published": None if item.published is None
                         else item.published.astimezone(zone).strftime(_TIME_FORMAT),
                         "link": item.link or None} for item in story.items],
            "excerpt": excerpt(text, chars) or None}


def _fallback(request: DigestRequest, stories: Sequence[Story], why: str) -> Digest:
    log.warning("the model could not write a digest, the offline one is used: %s", why)
    return Digest(render_offline(request, stories), "offline", model_error=why)
