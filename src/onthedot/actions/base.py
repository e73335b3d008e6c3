"""The Action protocol: what a run does when it fires.

Actions never retry on their own: one ``execute`` call is one attempt, and the worker decides
about retries. Every call carries the run's idempotency key (the run id) so the receiving side
can drop a duplicate of an attempt that succeeded but was not recorded (at-least-once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from onthedot.domain.models import Job, JobRun
from onthedot.store.base import FeedStateStore


@dataclass(frozen=True)
class ActionContext:
    job: Job
    run: JobRun  # this attempt: ``started_at`` is when it began (the worker's clock)
    idempotency_key: str
    timeout_seconds: float
    http: httpx.AsyncClient
    # The job's last SUCCEEDED run before this one (its scheduled_at, finished_at, output);
    # always None for an action whose ``uses_previous`` is false.
    previous: JobRun | None = None
    # Per-job state an action keeps between runs (the news digest's feed validators).
    feed_states: FeedStateStore | None = None


class Action(Protocol):
    name: str
    # Every parameter the action reads besides ``type``; any other key is refused at validation
    # (a typo such as "heders" would otherwise be stored and silently ignored at run time).
    param_names: tuple[str, ...]
    # Whether ``execute`` reads ``ctx.previous``: the worker looks the previous run up only for
    # the actions that use it (one store read per run saved for webhooks and messages).
    uses_previous: bool

    def validate(self, params: dict[str, Any]) -> None:
        """Raise ValidationError (field ``action.<key>``) for parameters that can never work."""
        ...

    async def execute(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        """Do one attempt; return a JSON-serialisable output or raise ActionError."""
        ...
