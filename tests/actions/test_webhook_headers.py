"""Webhook headers at fire time, against real loopback servers: secret headers never follow a
redirect to another origin, framing headers of an old job are not sent, and a secret value is
in no stored or logged text even when a server echoes it or a stored header cannot be sent."""

from __future__ import annotations

import json
import logging
import sqlite3
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from onthedot.domain.models import RunStatus
from tests.actions.conftest import RigFactory, Servers
from tests.actions.servers import Route, ScriptedServer, answer, redirect
from tests.api.test_token_scopes import mcp_call, mcp_client

SECRETS = {"Authorization": "Bearer auth-hush-1234", "X-Api-Key": "key-hush-1234",
           "X-Service-Token": "token-hush-1234", "X-Signed": "listed-hush-1234"}
PLAIN = {"X-Lang": "zh-TW"}


def recording(seen: list[dict[str, str]], then: Route) -> Route:
    def route(h: BaseHTTPRequestHandler, s: ScriptedServer) -> None:
        seen.append({k.lower(): v for k, v in h.headers.items()})
        then(h, s)
    return route


OK = answer(200, b'{"ok": true}', "application/json")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_secret_headers_are_dropped_on_a_cross_origin_redirect(
        make_rig: RigFactory, serve: Servers, status: int) -> None:
    seen_other: list[dict[str, str]] = []
    seen_same: list[dict[str, str]] = []
    other = serve({"/landing": recording(seen_other, OK)}, bind="127.0.0.2")
    origin = serve({"/same": recording(seen_same, OK)})
    origin.routes["/away"] = redirect(other.url("/landing"), status)
    origin.routes["/here"] = redirect(origin.url("/same"), status)
    rig = await make_rig("127.0.0.1,127.0.0.2")
    action: dict[str, Any] = {"headers": {**SECRETS, **PLAIN}, "secret_headers": ["X-Signed"]}

    away = await rig.fire(await rig.create(origin.url("/away"), **action))
    here = await rig.fire(await rig.create(origin.url("/here"), **action))

    assert away.status is RunStatus.SUCCEEDED, away.error
    assert here.status is RunStatus.SUCCEEDED, here.error
    [landed] = seen_other
    assert not {n.lower() for n in SECRETS} & landed.keys(), landed
    assert landed["x-lang"] == "zh-TW"
    [same] = seen_same  # the same origin keeps its credentials
    assert {n.lower(): v for n, v in SECRETS.items()}.items() <= same.items()


async def test_a_redirect_to_another_port_of_the_same_host_is_another_origin(
        make_rig: RigFactory, serve: Servers) -> None:
    seen: list[dict[str, str]] = []
    other = serve({"/landing": recording(seen, OK)})
    origin = serve({"/away": redirect(other.url("/landing"))})
    rig = await make_rig("127.0.0.1")
    run = await rig.fire(await rig.create(origin.url("/away"), headers=SECRETS,
                                          secret_headers=["X-Signed"]))
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert not {n.lower() for n in SECRETS} & seen[0].keys()


def _store_headers_unchecked(database_url: str, job_id: str, headers: dict[str, str]) -> None:
    """A job written before today's header rules: its action is changed in the file itself."""
    with sqlite3.connect(database_url.removeprefix("sqlite:///")) as db:
        [(text,)] = db.execute("SELECT action FROM jobs WHERE job_id = ?", (job_id,)).fetchall()
        action = json.loads(text)
        action["headers"] = headers
        db.execute("UPDATE jobs SET action = ? WHERE job_id = ?", (json.dumps(action), job_id))


async def test_an_old_job_with_an_unsendable_secret_fails_once_and_never_shows_it(
        make_rig: RigFactory, serve: Servers, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[dict[str, str]] = []
    server = serve({"/hook": recording(seen, OK)})
    rig = await make_rig("127.0.0.1")
    secret = "Bearer trailing-hush-5678"
    for value in (f"{secret}\n", f"{secret} ", f"{secret}\r\nX-Evil: 1"):
        job_id = await rig.create(server.url("/hook"), max_attempts=3)
        _store_headers_unchecked(rig.rt.settings.database_url, job_id,
                                 {"Authorization": value, "X-Api-Key": value})
        run = await rig.fire(job_id)

        assert run.status is RunStatus.FAILED, run
        assert run.attempt == 1, "a header that cannot be sent was retried"
        assert "header" in (run.error or ""), run.error
        _, attempts = await rig.rt.service.get_run_attempts("alice", run.run_id)
        letters = await rig.rt.service.list_dead_letters("alice")
        async with mcp_client(rig.rt) as mcp:
            got = await mcp_call(mcp, {}, "get_task", {"task_id": job_id})
        texts = [run.error or "", json.dumps([a.error for a in attempts]),
                 json.dumps([r.error for r in letters.items]), json.dumps(got), caplog.text]
        for text in texts:
            assert "trailing-hush" not in text, text
    assert seen == [], "a request with a header that cannot be sent went out"


async def test_framing_headers_of_an_old_job_are_not_sent(make_rig: RigFactory,
                                                         serve: Servers) -> None:
    seen: list[dict[str, str]] = []
    server = serve({"/hook": recording(seen, OK)})
    rig = await make_rig("127.0.0.1")
    job_id = await rig.create(server.url("/hook"), body={"a": 1})
    _store_headers_unchecked(rig.rt.settings.database_url, job_id,
                             {"Transfer-Encoding": "chunked", "Host": "evil.example",
                              "X-Lang": "en"})
    run = await rig.fire(job_id)
    # An old job's framing headers are refused like a new one's: no retry, nothing sent.
    assert run.status is RunStatus.FAILED, run
    assert run.attempt == 1
    assert seen == []


async def test_a_secret_echoed_by_the_endpoint_is_hidden(
        make_rig: RigFactory, serve: Servers, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    def echo(status: int) -> Route:
        def route(h: BaseHTTPRequestHandler, s: ScriptedServer) -> None:
            body = json.dumps({"you sent": h.headers.get("X-Api-Key"),
                               h.headers.get("Authorization") or "": "as a key"}).encode()
            answer(status, body, "application/json")(h, s)
        return route

    server = serve({"/ok": echo(200), "/bad": echo(401)})
    rig = await make_rig("127.0.0.1")
    headers = {"Authorization": "Bearer echoed-hush-9012", "X-Api-Key": "echoed-hush-3456"}
    good = await rig.fire(await rig.create(server.url("/ok"), headers=headers))
    bad = await rig.fire(await rig.create(server.url("/bad"), headers=headers, max_attempts=1))
    assert good.status is RunStatus.SUCCEEDED, good.error
    assert bad.status is RunStatus.FAILED
    assert "echoed-hush" not in json.dumps(good.output)
    assert "***" in json.dumps(good.output)
    assert "echoed-hush" not in (bad.error or "")
    assert "HTTP 401" in (bad.error or "")
    assert "echoed-hush" not in caplog.text
