"""``POST /v1/parse``: what the offline parser reads in a sentence, and when it would run.

The Tasks page previews a sentence before saving it, then creates the job it previewed with
``POST /v1/jobs``, so what is saved is exactly what was shown. ``/v1/chat`` with ``dry_run``
cannot serve as that preview: with a model configured it is the model's answer, not the
parser's, and it refuses a sentence without a task where a form can still ask for one.

It creates nothing and reads nothing of the caller's; it needs a token like every ``/v1`` route
so that an open server is no free parsing service.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from onthedot import nl
from onthedot.actions.choice import choose_action
from onthedot.api.jsonbody import StrictJsonRoute
from onthedot.api.models import Problem
from onthedot.api.problems import PROBLEM_MEDIA_TYPE
from onthedot.api.routes_chat import MAX_MESSAGE_CHARS
from onthedot.api.routes_jobs import COMMON_PROBLEMS, RuntimeDep, UserDep
from onthedot.domain.models import JobParams
from onthedot.schedule import compile_schedule, run_bounded
from onthedot.schedule.local import load_timezone
from onthedot.views import JobParamsOut, schedule_words

PREVIEW_RUNS = 3  # fire times a preview shows

router = APIRouter(prefix="/v1", responses=COMMON_PROBLEMS, route_class=StrictJsonRoute)


class ParseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"text": "每天早上八點幫我總結財經新聞", "timezone": "Asia/Taipei"}]})

    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS,
                      description="a scheduling request in English or Chinese")
    timezone: str | None = Field(default=None, description="the user's IANA timezone; default: "
                                 "the server's default_timezone", examples=["Asia/Taipei"])


class ParseResponse(BaseModel):
    language: str = Field(description="language of the text: en | zh-Hant | zh-Hans")
    job_params: JobParamsOut = Field(description="the job_params POST /v1/jobs would take")
    schedule_words: dict[str, str] | None = Field(
        description="a recurring schedule in words by language (en, zh-Hant, zh-Hans); null for "
                    "one-time and immediate jobs")
    task: str = Field(description="what to do: the rest of the sentence; empty when the "
                      "sentence only says when")
    matched: str = Field(description="the time expression as written")
    action: dict[str, Any] | None = Field(
        description="the action POST /v1/jobs would take for the task, chosen from its words as "
                    "/v1/chat and MCP create_task choose it (prompt with a model configured, else "
                    "news_digest for a news request, else message); null without a task")
    next_runs: list[datetime] = Field(
        description=f"the next {PREVIEW_RUNS} fire times (one for a one-time or immediate job), "
                    "checked as creating the job would check them")


@router.post("/parse", response_model=ParseResponse, responses={
    429: {"model": Problem, "content": {PROBLEM_MEDIA_TYPE: {}}}})
async def parse(body: ParseRequest, rt: RuntimeDep, user: UserDep) -> ParseResponse:
    """Read a sentence ("every weekday at 9am stand up") without creating anything. A sentence
    the parser cannot read exactly is a 422 whose `field` is the fragment it could not read, as
    on `/v1/chat`. More than `ONTHEDOT_PARSE_RATE_PER_MINUTE` parse and chat requests of one
    user in a minute: 429 `rate_limited` with Retry-After."""
    rt.service.take_parse(user)
    tz = load_timezone(body.timezone or rt.settings.default_timezone, field="timezone").key
    now = rt.clock.now()
    result = await nl.parse_async(body.text, now=now, timezone=tz)
    params = result.job_params
    action = None
    if result.task:
        action = choose_action(result.task, model_configured=bool(rt.settings.llm_base_url),
                               language=result.language, timezone=tz, said=body.text).action
    return ParseResponse(
        language=result.language,
        job_params=JobParamsOut(type=params.type, time=params.time, schedule=params.schedule,
                                timezone=params.timezone,
                                flexible_window_seconds=params.flexible_window_seconds),
        schedule_words=schedule_words(params.schedule),
        task=result.task, matched=result.matched, action=action,
        next_runs=await _next_runs(params, now, rt.settings.min_interval))


async def _next_runs(params: JobParams, now: datetime, min_interval: float) -> list[datetime]:
    """Compiled with the limits of a new job (minimum interval, bounded work, off the event
    loop when not cheap), so a schedule that creating would refuse is refused here too."""
    if params.type == "immediate":
        return [now.astimezone(UTC)]
    # A one-time job's time may lie within the grace period before now: still its one run.
    start = datetime.min.replace(tzinfo=UTC) if params.type == "one-time" else now

    def upcoming() -> list[datetime]:
        schedule = compile_schedule(params, anchor=now, now=now,
                                    min_interval_seconds=min_interval)
        return [t.astimezone(UTC) for t in schedule.upcoming(start, PREVIEW_RUNS)]

    return await run_bounded(upcoming)
