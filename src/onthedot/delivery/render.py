"""A run's output as people read it: plain text, HTML, a Slack message, a JSON payload.

Actions return JSON. The text of an output is its first non-empty ``text``, ``message``,
``summary``, ``digest``, ``answer`` or ``content`` string (what the built-in actions and model
answers put there), else the output as indented JSON.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from onthedot.domain.models import Job, JobRun

TEXT_KEYS = ("text", "message", "summary", "digest", "answer", "content")
MAX_TEXT_CHARS = 50_000  # what one inbox item, e-mail or message carries
SLACK_MAX_CHARS = 3_000  # Slack truncates long messages; a link to the rest is the user's inbox
# An http(s) URL in the text: the characters RFC 3986 allows in one but the apostrophe, so it
# ends at white space, a quote, a bracket of HTML or any non-ASCII letter ("見https://x.tw/a。");
# punctuation that ends a sentence is not part of it ("see https://x.example/a.").
_URL = re.compile(r"https?://[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]+", re.IGNORECASE)
_URL_TRAILING = ".,;:!?)]"


def wants_delivery(output: Any) -> bool:
    """An action says "nothing worth telling" with ``{"deliver": false}`` (issue 9 §3)."""
    return not (isinstance(output, dict) and output.get("deliver") is False)


def output_text(output: Any, limit: int = MAX_TEXT_CHARS) -> str:
    if isinstance(output, str):
        text = output
    else:
        found = None
        if isinstance(output, dict):
            found = next((output[k] for k in TEXT_KEYS
                          if isinstance(output.get(k), str) and output[k].strip()), None)
        text = found if found is not None else json.dumps(output, ensure_ascii=False, indent=2)
    return _cut(text, limit)


def subject_of(job: Job) -> str:
    """One line: a header value may hold no line break."""
    return " ".join(job.name.split())[:200] or "onthedot"


def html_of(job: Job, text: str) -> str:
    """The e-mail's HTML part: the text escaped, paragraphs kept, each http(s) URL a link."""
    paragraphs = "".join(f"<p>{linked(p).replace(chr(10), '<br>')}</p>"
                         for p in text.split("\n\n") if p.strip())
    return ("<!DOCTYPE html><html><body>"
            f"<h2>{html.escape(subject_of(job))}</h2>{paragraphs}"
            "</body></html>")


def linked(text: str) -> str:
    """``text`` as HTML: escaped, with every http(s) URL in it an ``<a href>`` to itself (the
    attribute escaped too, so a quote in the text cannot end it)."""
    parts: list[str] = []
    at = 0
    for match in _URL.finditer(text):
        url = match.group().rstrip(_URL_TRAILING)
        if url.count("(") > url.count(")") and match.group()[len(url):].startswith(")"):
            url += ")"  # a balanced parenthesis belongs to the URL (Wikipedia's, say)
        if len(url) <= len("https://"):
            continue
        start = match.start()
        parts.append(html.escape(text[at:start]))
        parts.append(f'<a href="{html.escape(url, quote=True)}">{html.escape(url)}</a>')
        at = start + len(url)
    parts.append(html.escape(text[at:]))
    return "".join(parts)


def slack_payload(job: Job, text: str) -> dict[str, Any]:
    """Slack's incoming-webhook shape; ``&``, ``<`` and ``>`` are escaped as Slack asks."""
    title = _slack_escape(subject_of(job))
    body = _slack_escape(_cut(text, SLACK_MAX_CHARS))
    return {"text": f"*{title}*\n{body}"}


def json_payload(job: Job, run: JobRun, output: Any, text: str) -> dict[str, Any]:
    return {"job_id": job.job_id, "job_name": job.name, "run_id": run.run_id,
            "scheduled_at": run.scheduled_at.isoformat(), "attempt": run.attempt,
            "text": text, "output": output}


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
