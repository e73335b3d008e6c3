"""Answers are streamed and capped: a huge body is not downloaded, a compressed one is not
inflated past the cap, and a failed call keeps the start of its answer in the run's error."""

from __future__ import annotations

import gzip
import json
import time
from http.server import BaseHTTPRequestHandler

from onthedot.actions.egress import MAX_READ_BYTES
from onthedot.actions.webhook import ERROR_PREVIEW_CHARS, RESPONSE_PREVIEW_CHARS
from onthedot.domain.models import RunStatus
from tests.actions.conftest import RigFactory, Servers
from tests.actions.servers import ScriptedServer, answer, endless

HUGE_BYTES = 200 * 1024 * 1024


async def test_a_200_mb_answer_is_cut_off_after_the_preview(make_rig: RigFactory,
                                                           serve: Servers) -> None:
    server = serve({"/hook": endless(HUGE_BYTES)})
    rig = await make_rig("127.0.0.1")
    job_id = await rig.create(server.url("/hook"))
    started = time.monotonic()
    run = await rig.fire(job_id)
    took = time.monotonic() - started
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output == {"status_code": 200, "body": "x" * RESPONSE_PREVIEW_CHARS}
    # The client hung up: the server's writes failed long before the end of the body.
    assert server.stream_ended.wait(timeout=30), "the server is still sending"
    assert server.bytes_sent < HUGE_BYTES // 4, f"{server.bytes_sent:,} bytes were sent"
    assert took < 10, f"took {took:.1f}s"


async def test_a_large_json_answer_is_kept_as_text(make_rig: RigFactory, serve: Servers) -> None:
    big = json.dumps({"items": list(range(50_000))}).encode()  # ~340 KB
    assert len(big) > MAX_READ_BYTES
    server = serve({"/hook": answer(200, big, "application/json")})
    rig = await make_rig("127.0.0.1")
    run = await rig.fire(await rig.create(server.url("/hook")))
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output["body"] == big[:RESPONSE_PREVIEW_CHARS].decode()


async def test_a_deeply_nested_json_answer_is_kept_as_text(make_rig: RigFactory,
                                                           serve: Servers) -> None:
    """A short answer can still nest past what the JSON reader (and the store) accept."""
    deep = ("[" * 990 + "]" * 990).encode()
    assert len(deep) <= RESPONSE_PREVIEW_CHARS
    server = serve({"/hook": answer(200, deep, "application/json")})
    rig = await make_rig("127.0.0.1")
    run = await rig.fire(await rig.create(server.url("/hook")))
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output == {"status_code": 200, "body": deep.decode()}


def _gzip_bomb(h: BaseHTTPRequestHandler, _s: ScriptedServer) -> None:
    body = gzip.compress(b"a" * (50 * 1024 * 1024))  # 50 MB of text in ~50 KB
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Encoding", "gzip")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


async def test_a_compressed_answer_is_inflated_only_up_to_the_cap(make_rig: RigFactory,
                                                                  serve: Servers) -> None:
    server = serve({"/hook": _gzip_bomb, "/small": answer(
        200, gzip.compress(b'{"n": 1}'), "application/json", {"Content-Encoding": "gzip"})})
    rig = await make_rig("127.0.0.1")
    run = await rig.fire(await rig.create(server.url("/hook")))
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output["body"] == "a" * RESPONSE_PREVIEW_CHARS
    run = await rig.fire(await rig.create(server.url("/small")))
    assert run.output == {"status_code": 200, "body": {"n": 1}}


async def test_a_failed_call_keeps_the_start_of_its_answer(make_rig: RigFactory,
                                                           serve: Servers) -> None:
    server = serve({
        "/down": answer(503, "upstream down\nretry later ✗".encode()),
        "/empty": answer(500),
        "/huge": endless(HUGE_BYTES, status=502),
    })
    rig = await make_rig("127.0.0.1")
    run = await rig.fire(await rig.create(server.url("/down")))
    assert run.status is RunStatus.RETRYING
    assert run.error == "webhook answered HTTP 503: upstream down retry later ✗"
    run = await rig.fire(await rig.create(server.url("/empty")))
    assert run.error == "webhook answered HTTP 500"
    run = await rig.fire(await rig.create(server.url("/huge")))
    assert run.error == "webhook answered HTTP 502: " + "x" * ERROR_PREVIEW_CHARS
    assert server.stream_ended.wait(timeout=30)
    assert server.bytes_sent < HUGE_BYTES // 4

