"""``POST /v1/chat``: one sentence in, a job (or a change to one) and an answer in the user's
language out.

The front door (``onthedot.chat``) decides with the offline parser or, when configured, a model
that calls the MCP tools; either way jobs are created and changed through the service as this
user. Deleting a task or moving its time is confirmed first: the answer carries a
``confirmation_token`` that the next call passes back as ``confirm``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header
from pydantic import BaseModel, ConfigDict, Field

from onthedot.api.jsonbody import StrictJsonRoute
from onthedot.api.models import Problem
from onthedot.api.problems import PROBLEM_MEDIA_TYPE
from onthedot.api.routes_jobs import COMMON_PROBLEMS, MAX_IDEMPOTENCY_KEY_CHARS, RuntimeDep, UserDep
from onthedot.chat import FrontDoor
from onthedot.chat.confirm import MAX_TOKEN_CHARS
from onthedot.chat.intents import IntentKind
from onthedot.views import JobOut, RunOut

MAX_MESSAGE_CHARS = 4000

router = APIRouter(prefix="/v1", responses=COMMON_PROBLEMS, route_class=StrictJsonRoute)


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"message": "每天早上八點幫我總結財經新聞", "timezone": "Asia/Taipei"},
        {"message": "remind me to call mom tomorrow at 3pm", "dry_run": True},
        {"message": "刪除每週的運動提醒", "timezone": "Asia/Taipei"},
        {"message": "yes", "confirm": "c1.eyJ1Ijoi….Qm9va3M"}]})

    message: str | None = Field(
        default=None, min_length=1, max_length=MAX_MESSAGE_CHARS,
        description="what the user said, in English or Chinese; may be left out only with "
                    "`confirm`")
    confirm: str | None = Field(
        default=None, min_length=1, max_length=MAX_TOKEN_CHARS,
        description="the `confirmation_token` of the previous answer: carries out the change "
                    "it asked about when `message` is left out or says yes (\"yes\", \"好\"), "
                    "drops it when `message` says no; after a \"which one?\" "
                    "(`needs_choice`), `message` picks a task by its number (\"2\", \"the "
                    "second one\", \"第二個\"); any other message is a new request")
    dry_run: bool = Field(default=False, description="understand and answer, create nothing")
    timezone: str | None = Field(default=None, description="the user's IANA timezone; default: "
                                 "the server's default_timezone", examples=["Asia/Taipei"])


class ToolCallOut(BaseModel):
    name: str
    arguments: Any
    ok: bool
    result: dict[str, Any]


class ChatResponse(BaseModel):
    reply: str = Field(description="the answer, in the user's language; for a new task: when, "
                       "what each run does and where each result goes",
                       examples=["好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，"
                                 "寄到收件匣，下次執行 2026-06-23 08:00。"])
    decided_by: Literal["parser", "model"]
    dry_run: bool
    jobs: list[JobOut] = Field(description="jobs created or changed by this message")
    language: str | None = Field(description="parser: en | zh-Hant | zh-Hans")
    understood: dict[str, Any] | None = Field(
        description="parser: job_params, task, matched and next_runs as `onthedot parse` "
                    "prints them")
    action: dict[str, Any] | None = Field(
        default=None, description="parser: the action chosen for the task (news_digest or "
        "message), also on a dry run", examples=[{"type": "news_digest", "topic": "finance",
                                                  "language": "zh-Hant"}])
    tool_calls: list[ToolCallOut] = Field(description="model: the tools it called, in order")
    intent: IntentKind | None = Field(
        default=None, description="parser (and confirmations): what the message asked for; "
        "null on the model path")
    candidates: list[JobOut] = Field(
        default_factory=list, description="tasks the answer is about and did not change: the "
        "list asked for, the tasks to choose between, the task awaiting confirmation, the task "
        "whose last result is shown")
    run: RunOut | None = Field(default=None, description="run_now: the run started; "
                               "last_result: the run whose result is shown")
    needs_confirmation: bool = Field(
        default=False, description="true when nothing was changed yet: pass "
        "`confirmation_token` back as `confirm` to carry out what `reply` asks about")
    needs_choice: bool = Field(
        default=False, description="true when several tasks matched and nothing was changed: "
        "`reply` lists them numbered; pass `confirmation_token` back as `confirm` with a "
        "number as `message` to go on with that task")
    confirmation_token: str | None = Field(
        default=None, description="bound to you, this intent, the task and its current "
        "version (or, with `needs_choice`, the tasks listed); expires at "
        "`confirmation_expires_at`")
    confirmation_expires_at: datetime | None = None


@router.post("/chat", response_model=ChatResponse, responses={
    404: {"model": Problem, "content": {PROBLEM_MEDIA_TYPE: {}}},
    409: {"model": Problem, "content": {PROBLEM_MEDIA_TYPE: {}}},
    429: {"model": Problem, "content": {PROBLEM_MEDIA_TYPE: {}}},
    503: {"model": Problem, "content": {PROBLEM_MEDIA_TYPE: {}}}})
async def chat(
    body: ChatRequest, rt: RuntimeDep, user: UserDep,
    idempotency_key: Annotated[str | None, Header(
        alias="Idempotency-Key", min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS,
        description="parser path: retrying with the same key returns the same job")] = None,
) -> ChatResponse:
    """Turn a sentence ("每天早上八點幫我總結財經新聞") into a job, or manage one ("刪除每週的運動
    提醒", "what tasks do I have?"). A sentence the parser cannot read exactly is a 422 whose
    `field` is the fragment it could not read. A `confirm` token that is not one this server
    gave you is a 422 `invalid_confirmation`, an old one `confirmation_expired`, and one whose
    task changed since (or that was used already) a 409 `confirmation_stale`."""
    answer = await FrontDoor(rt.service, rt.settings).answer(
        user, body.message, dry_run=body.dry_run, timezone=body.timezone,
        idempotency_key=idempotency_key, confirm=body.confirm)
    return ChatResponse(reply=answer.reply, decided_by=answer.decided_by,
                        dry_run=answer.dry_run,
                        jobs=[JobOut.model_validate(j) for j in answer.jobs],
                        language=answer.language, understood=answer.understood,
                        action=answer.action,
                        tool_calls=[ToolCallOut.model_validate(c) for c in answer.tool_calls],
                        intent=answer.intent,
                        candidates=[JobOut.model_validate(j) for j in answer.candidates],
                        run=None if answer.run is None else RunOut.model_validate(answer.run),
                        needs_confirmation=answer.needs_confirmation,
                        needs_choice=answer.needs_choice,
                        confirmation_token=answer.confirmation_token,
                        confirmation_expires_at=answer.confirmation_expires_at)
