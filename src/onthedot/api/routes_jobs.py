"""``/v1``: jobs, their runs and dead letters. Each endpoint translates HTTP to one service call
and back; the service holds every rule (and scopes every query by the caller's user id).

Custom methods follow the ``/v1/jobs/{job_id}:pause`` style: ``{job_id}:pause`` is an ordinary
route whose literal suffix is ``:pause``. Ids never hold a colon, so an id parameter matches
``[^/:]+`` (the ``id`` convertor): ``/v1/jobs/X:pause`` is the pause method and nothing else, a
GET on it is a 405 whose ``Allow`` says POST, and ``/v1/jobs/X:explode`` is a 404.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, cast

import pydantic
import pydantic_core
from fastapi import APIRouter, Depends, Header, Query, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AwareDatetime
from starlette.convertors import StringConvertor, register_url_convertor
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from onthedot.api.auth import Principal, check_user_id, resolve_request_principal
from onthedot.api.jsonbody import StrictJsonRoute
from onthedot.api.models import (
    MAX_IDEMPOTENCY_KEY_CHARS as MAX_IDEMPOTENCY_KEY_CHARS,  # routes_chat uses it too
)
from onthedot.api.models import (
    BackfilledRun,
    BackfillIn,
    BackfillOut,
    BatchOut,
    ChangeOut,
    DeadLetterList,
    HistoryList,
    JobBatch,
    JobBatchItem,
    JobCreate,
    JobList,
    JobUpdate,
    Problem,
    RunDetailOut,
    RunList,
    SkippedOut,
)
from onthedot.api.problems import PROBLEM_MEDIA_TYPE, error_body, validation_body
from onthedot.domain.history import acting_channel
from onthedot.runtime import Runtime
from onthedot.service import CreateOutcome, JobSpec
from onthedot.views import JobOut, RunOut, UserJobStatus


class IdConvertor(StringConvertor):
    """A job or run id in a path: anything but a slash or a colon (the custom-method mark)."""

    regex = "[^/:]+"


register_url_convertor("id", IdConvertor())


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": Problem, "content": {PROBLEM_MEDIA_TYPE: {}}} for s in statuses}


# 403: a token-less loopback server refuses a request addressed to another host (DNS
# rebinding); 503: the store or the queue does not answer.
COMMON_PROBLEMS = _problems(401, 403, 413, 422, 503)
router = APIRouter(prefix="/v1", responses=COMMON_PROBLEMS, route_class=StrictJsonRoute)
_bearer = HTTPBearer(auto_error=False, description="a token from `onthedot token create`")


async def runtime_of(request: Request) -> Runtime:
    # async: FastAPI runs a plain function dependency in its thread pool, a hand-off that
    # cost about a sixth of a create's CPU.
    return _runtime(request)


def _runtime(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


async def current_user(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> str:
    runtime = _runtime(request)
    principal = await resolve_request_principal(
        runtime.store, runtime.settings, authorization, request.url.hostname or "",
        request.headers.get("origin"), runtime.clock.now())
    if request.method not in READ_METHODS and request.url.path not in READ_ONLY_POSTS:
        principal.require("write", "change anything (it has the read scope only)")
    request.state.principal = principal
    return principal.user_id


READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
READ_ONLY_POSTS = frozenset({"/v1/parse"})  # a POST that computes and stores nothing


def principal_of(request: Request) -> Principal:
    """The caller as ``current_user`` resolved it (a route that takes this also takes
    ``UserDep``, which runs first)."""
    return cast(Principal, request.state.principal)


def acting_for(request: Request, user: str, other: str | None) -> str:
    """``other`` (an admin acting on another user's data) or the caller."""
    if other is None or other == user:
        return user
    principal_of(request).require("admin", "act for another user")
    return check_user_id(other)


RuntimeDep = Annotated[Runtime, Depends(runtime_of)]
UserDep = Annotated[str, Depends(current_user)]
PageSize = Annotated[int, Query(ge=1, le=100, description="1-100")]
PageToken = Annotated[str | None, Query(description="next_page_token of the previous page")]


# --- jobs ----------------------------------------------------------------------------------
@router.post("/jobs", status_code=status.HTTP_201_CREATED, response_model=JobOut,
             responses={200: {"model": JobOut, "description": "replay of an Idempotency-Key"},
                        **_problems(409, 429)})
async def create_job(
    body: JobCreate, rt: RuntimeDep, user: UserDep,
    idempotency_key: Annotated[str | None, Header(
        alias="Idempotency-Key", min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS,
        description="the same key with the same body returns the original job (200); with a "
                    "different body it is a 409")] = None,
) -> Response:
    """Create an immediate, one-time or recurring job."""
    spec = body.to_spec(rt.settings.default_timezone)
    view, created = await rt.service.create_job(user, spec, idempotency_key)
    # The JobOut we built is written as it is: FastAPI would validate it again against the
    # response model before writing it (the same bytes, about a tenth of a create's CPU).
    return Response(JobOut.of(view).model_dump_json().encode(), media_type="application/json",
                    status_code=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
                    headers={"Location": f"/v1/jobs/{view.job.job_id}"})


BATCH_PATH = "/v1/jobs:batch"


@router.post("/jobs:batch", response_model=BatchOut,
             responses={200: {"description": "one result per job, in request order"}})
async def create_jobs(
    body: JobBatch, rt: RuntimeDep, user: UserDep,
    idempotency_key: Annotated[str | None, Header(
        alias="Idempotency-Key", min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS,
        description="a key for the whole batch: job i without an idempotency_key of its own "
                    "gets the key `<Idempotency-Key>#i`, so the same batch sent again "
                    "creates nothing twice")] = None,
) -> Response:
    """Create up to 1,000 jobs in one request; every valid one is written in ONE
    transaction. Each job is judged as ``POST /v1/jobs`` would judge it, and answered in its
    place in ``results``: 201 created, 200 a replay of an earlier identical create with the
    same key, 409 the key was used for a different job, 422 invalid (the problem's field names
    the job: ``jobs[3].job_params.schedule``)."""
    results: list[dict[str, Any] | None] = [None] * len(body.jobs)  # a JobOut or a problem
    requests: list[tuple[JobSpec, str | None]] = []
    placed: list[tuple[int, str]] = []  # (index in the batch, field that holds the key)
    for index, raw in enumerate(body.jobs):
        try:
            item = JobBatchItem.model_validate(raw)
        except pydantic.ValidationError as exc:
            results[index] = {"status": 422, "problem": validation_body(
                [{**e, "loc": ("body", "jobs", index, *e["loc"])} for e in exc.errors()])}
            continue
        key, key_field = item.idempotency_key, f"jobs[{index}].idempotency_key"
        if key is None and idempotency_key is not None:
            key, key_field = f"{idempotency_key}#{index}", "Idempotency-Key"
        requests.append((item.to_spec(rt.settings.default_timezone), key))
        placed.append((index, key_field))
    outcomes = await rt.service.create_jobs(user, requests) if requests else []
    for (index, key_field), outcome in zip(placed, outcomes, strict=True):
        results[index] = _batch_result(outcome, f"jobs[{index}]", key_field)
    # pydantic-core writes the JobOut models straight to JSON bytes (what FastAPI does for a
    # response_model), without a dict per job and a second pass through the json module.
    return Response(pydantic_core.to_json({"results": results}), media_type="application/json")


def _batch_result(outcome: CreateOutcome, item: str, key_field: str) -> dict[str, Any]:
    if outcome.view is not None:
        return {"status": 201 if outcome.created else 200,
                "job": JobOut.of(outcome.view)}
    error = outcome.error
    assert error is not None
    if error.code == "idempotency_key_reused":
        field = key_field
    else:
        field = f"{item}.{error.field}" if error.field else item
    return {"status": error.http_status, "problem": error_body(error, field)}


@router.get("/jobs", response_model=JobList, responses={304: {
    "description": "the page is what the `If-None-Match` ETag names: nothing changed"}})
async def list_jobs(
    request: Request, rt: RuntimeDep, user: UserDep,
    status_filter: Annotated[UserJobStatus | None, Query(alias="status")] = None,
    start_time: Annotated[AwareDatetime | None, Query(
        description="only jobs created at or after this ISO 8601 instant")] = None,
    end_time: Annotated[AwareDatetime | None, Query(
        description="only jobs created before this ISO 8601 instant")] = None,
    page_size: PageSize = 20, page_token: PageToken = None,
) -> Response:
    """The caller's jobs, newest first; the cursor is stable while jobs are being created.
    The answer has an `ETag` (a digest of its body): sent back as `If-None-Match`, an
    unchanged page is a `304 Not Modified` with no body, which is how the Tasks page polls."""
    page = await rt.service.list_jobs(user, status=status_filter, start_time=start_time,
                                      end_time=end_time, page_size=page_size,
                                      page_token=page_token)
    listed = JobList(jobs=[JobOut.of(v) for v in page.items],
                     next_page_token=page.next_page_token)
    body = listed.model_dump_json().encode()
    etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if etag in _etags(request.headers.get("if-none-match", "")):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _etags(header: str) -> set[str]:
    """The entity tags of an If-None-Match header (weak ones compare as strong: RFC 9110
    weak comparison, which is what If-None-Match uses)."""
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}


@router.get("/jobs/{job_id:id}", response_model=JobOut, responses=_problems(404))
async def get_job(job_id: str, rt: RuntimeDep, user: UserDep) -> JobOut:
    return JobOut.of(await rt.service.get_job(user, job_id))


# 429: a new schedule bringing a finished job back past the active-job quota.
@router.patch("/jobs/{job_id:id}", response_model=JobOut, responses=_problems(404, 409, 429))
async def update_job(job_id: str, body: JobUpdate, rt: RuntimeDep, user: UserDep) -> JobOut:
    """Change a job; a changed ``job_params`` replaces its pending run."""
    current = await rt.service.get_job(user, job_id)
    patch = body.to_patch(current.job.retry_policy, rt.settings.default_timezone)
    return JobOut.of(await rt.service.update_job(user, job_id, patch))


@router.delete("/jobs/{job_id:id}", status_code=status.HTTP_204_NO_CONTENT,
               responses=_problems(404))
async def delete_job(job_id: str, rt: RuntimeDep, user: UserDep) -> Response:
    """Cancel the job and its pending runs. Deleting a cancelled job again is a no-op."""
    await rt.service.delete_job(user, job_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/jobs/{job_id:id}:pause", response_model=JobOut, responses=_problems(404, 409))
async def pause_job(job_id: str, rt: RuntimeDep, user: UserDep) -> JobOut:
    """Cancel the pending run; a paused job fires nothing until resumed."""
    return JobOut.of(await rt.service.pause_job(user, job_id))


@router.post("/jobs/{job_id:id}:resume", response_model=JobOut, responses=_problems(404, 409))
async def resume_job(job_id: str, rt: RuntimeDep, user: UserDep) -> JobOut:
    """Schedule the next occurrence again (missed occurrences of a recurring job are not made
    up)."""
    return JobOut.of(await rt.service.resume_job(user, job_id))


@router.post("/jobs/{job_id:id}:run", status_code=status.HTTP_201_CREATED, response_model=RunOut,
             responses=_problems(404, 409, 429))
async def run_job(job_id: str, response: Response, rt: RuntimeDep, user: UserDep) -> RunOut:
    """An extra run now, besides the schedule. More than `ONTHEDOT_RUN_RATE_PER_MINUTE` of
    them by one user in a minute: 429 `rate_limited` with Retry-After."""
    run = await rt.service.run_job_now(user, job_id)
    response.headers["Location"] = f"/v1/runs/{run.run_id}"
    return RunOut.of(run)


@router.post("/jobs/{job_id:id}:skip-next", response_model=SkippedOut,
             responses=_problems(404, 409))
async def skip_next(job_id: str, rt: RuntimeDep, user: UserDep) -> SkippedOut:
    """Skip the next occurrence of a recurring job: its run is marked SKIPPED and the
    occurrences after it stay. 409 `not_recurring` for a one-time or immediate job (pause or
    delete it), `not_skippable` for a job that is not scheduled, `run_started` when the next
    run has already started."""
    skipped = await rt.service.skip_next(user, job_id)
    return SkippedOut(skipped=RunOut.of(skipped.run), job=JobOut.of(skipped.view))


@router.post("/jobs/{job_id:id}:backfill", status_code=status.HTTP_201_CREATED,
             response_model=BackfillOut, responses=_problems(404, 409, 422, 429))
async def backfill(job_id: str, body: BackfillIn, rt: RuntimeDep, user: UserDep) -> BackfillOut:
    """Run now the occurrences of a recurring job scheduled in [start_time, end_time), both
    in the past, at most `max_runs` (≤ 100; more is a 422 `too_many_runs` and nothing runs).
    An instant that has a run already keeps it. The schedule is not touched."""
    done = await rt.service.backfill(user, job_id, body.start_time, body.end_time,
                                     max_runs=body.max_runs)
    return BackfillOut(runs=[BackfilledRun(created=c, run=RunOut.of(r))
                             for r, c in zip(done.runs, done.created, strict=True)])


# --- runs and dead letters -----------------------------------------------------------------
@router.get("/jobs/{job_id:id}/runs", response_model=RunList, responses=_problems(404))
async def list_runs(job_id: str, rt: RuntimeDep, user: UserDep, page_size: PageSize = 20,
                    page_token: PageToken = None) -> RunList:
    """A job's runs, newest scheduled first."""
    page = await rt.service.list_runs(user, job_id, page_size=page_size, page_token=page_token)
    return RunList(runs=[RunOut.of(r) for r in page.items], next_page_token=page.next_page_token)


@router.get("/runs/{run_id:id}", response_model=RunDetailOut, responses=_problems(404))
async def get_run(run_id: str, rt: RuntimeDep, user: UserDep) -> RunDetailOut:
    """A run, with every attempt it took (oldest first)."""
    run, attempts = await rt.service.get_run_attempts(user, run_id)
    return RunDetailOut.with_attempts(run, attempts)


AdminUser = Annotated[str | None, Query(
    alias="user", description="admin scope only: another user whose dead letters these are")]


@router.get("/dead-letters", response_model=DeadLetterList)
async def list_dead_letters(request: Request, rt: RuntimeDep, user: UserDep,
                            page_size: PageSize = 20, page_token: PageToken = None,
                            other: AdminUser = None) -> DeadLetterList:
    """The caller's runs that failed their last attempt (an admin token: ``?user=NAME``'s)."""
    page = await rt.service.list_dead_letters(acting_for(request, user, other),
                                              page_size=page_size, page_token=page_token)
    return DeadLetterList(dead_letters=[RunOut.of(r) for r in page.items],
                          next_page_token=page.next_page_token)


# 429: the redrive would bring a finished job back past the active-job quota.
@router.post("/dead-letters/{run_id:id}:redrive", response_model=RunOut,
             responses=_problems(404, 409, 429))
async def redrive(request: Request, run_id: str, rt: RuntimeDep, user: UserDep,
                  other: AdminUser = None) -> RunOut:
    """Send a dead-lettered run back to the queue with a fresh attempt count (an admin token:
    ``?user=NAME``'s run)."""
    return RunOut.of(await rt.service.redrive(acting_for(request, user, other), run_id))


# --- job history -----------------------------------------------------------------------------
CHANNEL_HEADER = "X-Onthedot-Channel"  # a client of the API that is an edge of its own (cli)
CLIENT_CHANNELS = frozenset({"cli"})


class ChannelMiddleware:
    """Names the edge of each ``/v1`` request for the history of the jobs it changes (the
    service reads ``acting_channel``): the chat endpoint, a client that names itself (the
    CLI), or the REST API. Other paths (the MCP endpoint) are left to their edge. Pure ASGI,
    so the value is set in the task that runs the endpoint, and reset after it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", "")) if scope["type"] == "http" else ""
        if not path.startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        token = acting_channel.set(_channel_of(path, Headers(scope=scope)))
        try:
            await self.app(scope, receive, send)
        finally:
            acting_channel.reset(token)


def _channel_of(path: str, headers: Headers) -> str:
    if path.startswith("/v1/chat"):
        return "chat"
    declared = headers.get(CHANNEL_HEADER, "").strip().lower()
    return declared if declared in CLIENT_CHANNELS else "api"


@router.get("/jobs/{job_id:id}/history", response_model=HistoryList, responses=_problems(404))
async def job_history(job_id: str, rt: RuntimeDep, user: UserDep, page_size: PageSize = 20,
                      page_token: PageToken = None) -> HistoryList:
    """Who changed the job, how and when, newest first; the last entry is its creation.
    Credential headers of a webhook action are shown as ``***``."""
    page = await rt.service.job_history(user, job_id, page_size=page_size,
                                        page_token=page_token)
    return HistoryList(changes=[ChangeOut.of(c) for c in page.items],
                       next_page_token=page.next_page_token)
