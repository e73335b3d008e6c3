"""Webhook headers that cannot be sent as given are refused when the job is written (create,
batch item, PATCH), with ``422 invalid_header`` naming the header and never echoing its value;
headers that can be sent are kept as given."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from onthedot.runtime import Runtime
from tests.api.conftest import assert_problem, job_body
from tests.api.test_token_scopes import mcp_call, mcp_client

URL = "http://127.0.0.1:9/hook"
VALUE_MARK = "sentinel-7f3a"  # in every bad value: it must appear in no answer or log line

BAD_NAMES = ["X Bad", "X:Colon", "Bad\r\nX-Injected", "X-\u00dc", "", "X\x7f", "X\tTab",
             "(paren)", "X" * 300]
FRAMING = ["Host", "Transfer-Encoding", "content-length", "Connection", "Upgrade", "TE",
           "Trailer", "Keep-Alive", "Proxy-Authorization", "Proxy-Anything"]
BAD_VALUES = [f"{VALUE_MARK}\r\nX-Evil: 1", f"Bearer {VALUE_MARK}\n", f"Bearer {VALUE_MARK} ",
              f" {VALUE_MARK}", f"{VALUE_MARK}\t", f"caf\u00e9 {VALUE_MARK}",
              f"\x01{VALUE_MARK}", f"{VALUE_MARK}\x7f", f"{VALUE_MARK}\u2028"]
# (header name, value) pairs that must be refused, and the name the answer's field carries.
CASES = ([(n, "ok", n[:256]) for n in BAD_NAMES] + [(n, "ok", n) for n in FRAMING]
         + [(name, v, name) for v in BAD_VALUES for name in ("X-Plain", "Authorization")])


def hook(headers: dict[str, str]) -> dict[str, Any]:
    return {"type": "webhook", "url": URL, "headers": headers}


def assert_refused(response: httpx.Response, field: str) -> None:
    assert_problem(response, 422, "invalid_header", field)
    assert VALUE_MARK not in response.text


@pytest.mark.parametrize(("name", "value", "shown"), CASES)
async def test_bad_headers_are_refused_on_create_batch_and_patch(
        client: httpx.AsyncClient, name: str, value: str, shown: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {name: value}
    assert_refused(await client.post("/v1/jobs", json=job_body(action=hook(headers))),
                   f"action.headers.{shown}")

    batch = await client.post("/v1/jobs:batch", json={"jobs": [
        job_body(), job_body(action=hook({"X-Fine": "yes", **headers}))]})
    assert batch.status_code == 200, batch.text
    first, second = batch.json()["results"]
    assert first["status"] == 201
    assert second["status"] == 422
    assert second["problem"]["code"] == "invalid_header"
    assert second["problem"]["field"] == f"jobs[1].action.headers.{shown}"
    assert VALUE_MARK not in batch.text

    created = await client.post("/v1/jobs", json=job_body(action=hook({"X-Fine": "yes"})))
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    assert_refused(await client.patch(f"/v1/jobs/{job_id}",
                                      json={"action": hook({"X-Fine": "yes", **headers})}),
                   f"action.headers.{shown}")
    assert VALUE_MARK not in caplog.text


async def test_headers_that_can_be_sent_are_kept(client: httpx.AsyncClient,
                                                 rt: Runtime) -> None:
    headers = {"X-Spaced": "a b\tc", "Authorization": "Bearer tok", "X-Empty": "",
               "x-lower_case.dots~": "!#$%&'*+-.^_`|~", "Idempotency-Key": "mine"}
    created = await client.post("/v1/jobs", json=job_body(action=hook(headers)))
    assert created.status_code == 201, created.text
    stored = await rt.store.job_get_any(created.json()["job_id"])
    assert stored is not None
    assert stored.action["headers"] == headers


async def test_a_secret_with_trailing_white_space_is_never_shown(
        client: httpx.AsyncClient, rt: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    """Refused, and neither the answer, MCP nor the log carries its value."""
    caplog.set_level(logging.DEBUG)
    for value in (f"Bearer {VALUE_MARK}\n", f"Bearer {VALUE_MARK} ", f"{VALUE_MARK}\r\n"):
        for name in ("Authorization", "X-Api-Key", "Cookie"):
            answer = await client.post("/v1/jobs", json=job_body(action=hook({name: value})))
            assert_refused(answer, f"action.headers.{name}")
    async with mcp_client(rt) as mcp:
        listed = await mcp_call(mcp, {}, "list_tasks", {})
    assert listed["structuredContent"]["tasks"] == []
    assert VALUE_MARK not in json.dumps(listed)
    assert VALUE_MARK not in caplog.text
