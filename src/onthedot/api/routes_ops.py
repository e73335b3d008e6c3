"""Operator endpoints: liveness, readiness and Prometheus metrics. They carry no user data and
need no token, so a load balancer or Prometheus can reach them."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from onthedot.api.models import Health, Problem
from onthedot.api.problems import PROBLEM_MEDIA_TYPE, problem
from onthedot.api.routes_jobs import RuntimeDep

log = logging.getLogger("onthedot.api")
router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process is alive (it answers HTTP)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {
    "model": Problem, "content": {PROBLEM_MEDIA_TYPE: {}},
    "description": "not ready: `checks` names what does not answer"}})
async def readyz(request: Request, rt: RuntimeDep) -> Response | Health:
    """The store and the queue answer."""
    checks: dict[str, str] = {}
    for name, ping in (("store", rt.store.ping), ("queue", rt.queue.ping)):
        try:
            await ping()
            checks[name] = "ok"
        except Exception as exc:
            log.warning("readiness: %s does not answer: %s", name, exc)
            checks[name] = "unavailable"
    failed = [name for name, state in checks.items() if state != "ok"]
    if failed:
        return problem(503, "not_ready", f"{' and '.join(failed)} not answering",
                       field=failed[0], expected="a reachable backend",
                       extra={"checks": checks})
    return Health(status="ready", checks=checks)


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(rt: RuntimeDep) -> Response:
    """Prometheus text format: this process's counters, and gauges of shared state (runs by
    status, dead letters, queue depth, event lag, oldest due run) read at scrape time."""
    return Response(await rt.metrics_text(), media_type=CONTENT_TYPE_LATEST)
