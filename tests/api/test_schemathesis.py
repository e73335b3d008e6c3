"""Schemathesis against the real app: generated requests for every operation of /openapi.json,
valid (positive) and invalid (negative), over a real socket to a uvicorn server on a real
SQLite runtime, without tokens (local mode) and with a bearer token made in the store.

Every answer must be below 500, carry a status the OpenAPI document lists for the operation,
have the documented content type, and match the documented schema (problem+json included).
Invalid requests must be refused with a 4xx. Hypothesis runs derandomized, so a run in CI
generates the same cases every time.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from onthedot.api.auth import hash_token
from onthedot.config import Settings
from onthedot.runtime import build_store
from tests.api.conftest import job_body
from tests.api.live import LiveServer, live_server

# Cases per operation and auth mode; an operation without inputs stops after a few. The ones
# with a body have the most to explore.
EXAMPLES_PER_OPERATION = 60
EXAMPLES_WITH_A_BODY = 150
MIN_CASES_PER_MODE = 900  # both modes together: well over 1,000 generated requests
TOKEN = "otd_schemathesis-secret"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]
NEGATIVE_CHECKS = [*CHECKS, negative_data_rejection]
BATCH_PATH = "/v1/jobs:batch"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    # The per-user rates would answer most generated :run, parse and chat calls 429 (each
    # operation starts with a run now of its own); they are tested in test_rate_limits.py.
    settings = Settings(database_url=f"sqlite:///{tmp_path}/fuzz.db", run_rate_per_minute=0,
                        parse_rate_per_minute=0)
    with live_server(settings) as live:
        yield live


async def _add_token(settings: Settings) -> None:
    store = build_store(settings)
    try:
        await store.token_add(hash_token(TOKEN), "fuzzer", datetime.now(UTC))
    finally:
        await store.close()


def _existing_ids(http: httpx.Client) -> dict[str, str]:
    """A job with a run, so that generated calls also reach real rows, not only 404s."""
    job = http.post("/v1/jobs", json=job_body()).json()
    run = http.post(f"/v1/jobs/{job['job_id']}:run").json()
    return {"job_id": job["job_id"], "run_id": run["run_id"]}


def _strategy(operation: Any, ids: dict[str, str]) -> st.SearchStrategy[Case]:
    """Positive and negative cases, each with generated ids and with ids of real rows."""
    names = {p.name for p in operation.path_parameters}
    known = {name: ids[name] for name in names if name in ids}
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
    strategies = [operation.as_strategy(generation_mode=mode) for mode in modes]
    if known:
        strategies += [operation.as_strategy(generation_mode=mode, path_parameters=known)
                       for mode in modes]
    return st.one_of(strategies)


def _fuzz(server: LiveServer, headers: dict[str, str]) -> Counter[tuple[str, str]]:
    """Cases sent, by operation and generation mode."""
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    sent: Counter[tuple[str, str]] = Counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        with httpx.Client(base_url=server.url, headers=headers) as http:
            ids = _existing_ids(http)  # each operation gets rows no other one deleted

        def check(case: Case) -> None:
            negative = _is_negative(case)
            sent[case.operation.label, "negative" if negative else "positive"] += 1
            if negative and case.operation.path == BATCH_PATH:
                _check_batch_refusal(case.call_and_validate(
                    base_url=server.url, headers=headers, checks=CHECKS, timeout=30))
                return
            case.call_and_validate(base_url=server.url, headers=headers,
                                   checks=NEGATIVE_CHECKS if negative else CHECKS, timeout=30)

        examples = EXAMPLES_WITH_A_BODY if operation.body else EXAMPLES_PER_OPERATION
        _run(check, _strategy(operation, ids), examples)
    print("\n".join(f"{n:4} {mode:8} {label}" for (label, mode), n in sorted(sent.items())))
    return sent


def _check_batch_refusal(response: Any) -> None:
    """A batch answers an invalid job in its place (422 inside a 200) and creates the others,
    so schema-violating data is refused either for the request (4xx) or for an item."""
    if response.status_code >= 400:
        return
    statuses = [r["status"] for r in response.json()["results"]]
    assert 422 in statuses, f"schema-violating batch accepted: {statuses}"


def _run(check: Callable[[Case], None], strategy: st.SearchStrategy[Case],
         examples: int) -> None:
    @given(case=strategy)
    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate, Phase.shrink],
              suppress_health_check=list(HealthCheck))
    def run(case: Case) -> None:
        check(case)

    run()


def _is_negative(case: Case) -> bool:
    return case.meta is not None and case.meta.generation.mode is GenerationMode.NEGATIVE


def _operations(server: LiveServer) -> set[str]:
    document = httpx.get(f"{server.url}/openapi.json").json()
    return {f"{method.upper()} {path}" for path, item in document["paths"].items()
            for method in item}


def _check_coverage(server: LiveServer, sent: Counter[tuple[str, str]]) -> None:
    assert {label for label, _mode in sent} == _operations(server)
    assert sum(n for (_label, mode), n in sent.items() if mode == "negative") >= 100, sent
    assert sum(sent.values()) >= MIN_CASES_PER_MODE, sent


@pytest.mark.slow
def test_local_mode(server: LiveServer) -> None:
    _check_coverage(server, _fuzz(server, {}))


@pytest.mark.slow
def test_token_mode(server: LiveServer) -> None:
    asyncio.run(_add_token(server.settings))
    _check_coverage(server, _fuzz(server, {"Authorization": f"Bearer {TOKEN}"}))
