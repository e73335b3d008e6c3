"""A news digest written by the configured model, in the task's language.

One call, no tools: the new items go in the request (title, source, local time, link) and the
model is asked for a short summary that keeps each item's link and adds nothing that is not in
the items. The new items past max_items ("and N more") and the feeds that could not be read
are named after the model's text, in the same words as the offline digest, so that part never
depends on the model.

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
from typing import Any

from onthedot.actions.digest import (
    Digest,
    DigestRequest,
    closing_notes,
    render_offline,
    topic_words,
    zone_of,
)
from onthedot.actions.model import LANGUAGE_NAMES, ModelEndpoint
from onthedot.domain.errors import ActionError
from onthedot.llm import LLM_TIMEOUT_SECONDS, ModelError

log = logging.getLogger("onthedot.actions.digest")

_TIME_FORMAT = "%Y-%m-%d %H:%M"


class ModelDigest:
    def __init__(self, endpoint: ModelEndpoint) -> None:
        self.endpoint = endpoint

    async def write(self, request: DigestRequest) -> Digest:
        if not request.items:
            return Digest(render_offline(request), "offline")
        budget = request.time_budget_seconds or LLM_TIMEOUT_SECONDS
        model = self.endpoint.model(timeout_seconds=min(budget, LLM_TIMEOUT_SECONDS))
        headers = {"Idempotency-Key": request.idempotency_key} if request.idempotency_key \
            else None
        try:
            async with asyncio.timeout(budget), self.endpoint.client() as http:
                completion = await model.complete(http, digest_messages(request), (),
                                                  headers=headers)
        except TimeoutError:
            return _fallback(request, f"the model did not answer within {budget:g}s")
        except (ModelError, ActionError) as exc:  # ActionError: the model's name did not resolve
            return _fallback(request, exc.message)
        if not completion.content:
            return _fallback(request, "the model answered with no text")
        text = "\n\n".join([completion.content, *closing_notes(request)])
        return Digest(text, "model", model=model.model)


def digest_messages(request: DigestRequest) -> list[dict[str, Any]]:
    """The system instructions and the items, as the model receives them."""
    language = LANGUAGE_NAMES[request.language]
    topic = topic_words(request.topic, "en").lower()
    about = f"{topic} news" if topic else "news"
    system = (
        f"You write a short digest of {about} for one person, in {language}. Use only the "
        "items you are given: say what happened in a few lines, grouping items about the same "
        "story, and put each item's link right after the sentence that uses it, as a plain "
        "URL. Name the source. Add no facts, opinions or items that are not given. Plain text: "
        "no Markdown headings or tables, no preamble, no closing remarks.")
    zone = zone_of(request.timezone)
    items = [{"title": item.title, "source": item.source,
              "published": None if item.published is None
              else item.published.astimezone(zone).strftime(_TIME_FORMAT),
              "link": item.link or None}
             for item in request.items]
    user = (f"{len(items)} new items, newest first (times in {request.timezone}):\n"
            + json.dumps(items, ensure_ascii=False, indent=1))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _fallback(request: DigestRequest, why: str) -> Digest:
    log.warning("the model could not write a digest, the offline one is used: %s", why)
    return Digest(render_offline(request), "offline", model_error=why)
