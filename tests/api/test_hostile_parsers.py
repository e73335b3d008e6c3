"""No input stalls the server: every parser on the request path is fed 4-64 KB pathological
inputs (the grammar's own tokens repeated, separators, digits, nesting) through a real server
over a real socket, while a probe asks ``/healthz`` all along and every answer must come within
half a second. Each request gets a real answer (never a 5xx); the refusals are quick because
the work is bounded by a documented length (docs/api.md, "Limits of the parsers")."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.config import Settings
from tests.api.conftest import job_body
from tests.api.live import LiveServer, live_server
from tests.support.waiting import wait_until

HEALTHY = 0.5  # seconds: the longest a /healthz answer may take while the parsers work
SIZES = (4_096, 65_536)
IN_FLIGHT = 3  # hostile requests at once
ANSWERED = 20.0  # seconds for one hostile request, queued behind the others on 2 busy cores


def repeat(token: str, size: int, head: str = "", tail: str = "") -> str:
    body = (token * (size // len(token) + 1))[: max(0, size - len(head) - len(tail))]
    return head + body + tail


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    path: Path = tmp_path_factory.mktemp("hostile")
    settings = Settings(database_url=f"sqlite:///{path}/hostile.db", max_body_bytes=262_144,
                        parse_rate_per_minute=0, create_rate_per_minute=0, max_active_jobs=0)
    with live_server(settings) as live:
        yield live


@contextlib.contextmanager
def healthz_probe(url: str) -> Iterator[list[float]]:
    """``/healthz`` asked every 20 ms in a thread of its own; the latencies, checked at the
    end of the block."""
    done = threading.Event()
    latencies: list[float] = []
    failures: list[str] = []

    def probe() -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            while not done.is_set():
                began = time.perf_counter()
                answer = http.get("/healthz")
                latencies.append(time.perf_counter() - began)
                if answer.status_code != 200:
                    failures.append(answer.text)
                done.wait(0.02)

    thread = threading.Thread(target=probe, name="healthz-probe", daemon=True)
    thread.start()
    try:
        yield latencies
    finally:
        done.set()
        thread.join(timeout=60)
    assert not failures, failures[:3]
    assert max(latencies) < HEALTHY, sorted(latencies)[-5:]


Send = Callable[[httpx.Client], httpx.Response]


def hostile(server: LiveServer, sends: list[Send]) -> list[httpx.Response]:
    """Every request, IN_FLIGHT at a time, with the probe running; none may answer 5xx."""
    def one(send: Send) -> tuple[httpx.Response, float]:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            began = time.perf_counter()
            return send(http), time.perf_counter() - began

    with healthz_probe(server.url) as latencies:
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            answers = list(pool.map(one, sends))
        wait_until(lambda: len(latencies) >= 3, 30, "a few /healthz answers")
    for response, elapsed in answers:
        assert response.status_code < 500, response.text[:300]
        assert elapsed < ANSWERED
    return [response for response, _ in answers]


def post(path: str, body: dict[str, Any], **headers: str) -> Send:
    return lambda http: http.post(path, json=body, headers=headers)


# --- the sentences: /v1/parse and /v1/chat, English and Chinese ------------------------------
EN_TOKENS = ("every day at 8am ", "8:", "at ", "and ", ", ", "1st ", "mon,", "12/31 ",
             "remind me to ", " ", "8am and 9pm, ", "(", "in 5 minutes ")
ZH_TOKENS = ("每天早上八點", "週一", "下午", "八", "點", "，", "和", "1月", "每週一三五", "（")
SENTENCE_SHAPES = ("{}", "every day at 8am call mom{}x", "每天早上八點{}喝水")


def sentences() -> list[str]:
    found = [shape.format(repeat(token, size)) for token in EN_TOKENS + ZH_TOKENS
             for shape in SENTENCE_SHAPES for size in (3_900,)]
    # Longer than a request may be: refused by its length before any parsing.
    found += [repeat(token, size) for token in ("8:", "每天") for size in SIZES]
    return found


def test_phrases_on_parse_never_stall_the_server(server: LiveServer) -> None:
    answers = hostile(server, [post("/v1/parse", {"text": text, "timezone": "Asia/Taipei"})
                               for text in sentences()])
    assert {a.status_code for a in answers} <= {200, 422}


# What chat reads before the parser: the request's verb, the task's words, polite tails.
CHAT_TOKENS = (", ", "了", "吧了", "please ", "change to ", "刪除", "提醒", "把", "run ", "the ")
CHAT_SHAPES = ("{}x", "delete {}x", "pause {}", "刪除{}x", "change the news to {}8am")


def test_chat_never_stalls_the_server(server: LiveServer) -> None:
    messages = sentences()[::2] + [shape.format(repeat(token, 3_900)) for token in CHAT_TOKENS
                                   for shape in CHAT_SHAPES]
    answers = hostile(server, [post("/v1/chat", {"message": text, "dry_run": True})
                               for text in messages])
    assert {a.status_code for a in answers} <= {200, 422}


# --- schedules: cron, RRULE, VEVENT, timezone names ------------------------------------------
def schedules(size: int) -> list[str]:
    return [
        repeat("1,", size, tail=" * * * *"),
        repeat("1-59/2,", size, "0 ", " * * *"),
        "0" + " " * size + "8 * * *",
        repeat("MO,", size, "FREQ=WEEKLY;BYDAY="),
        repeat("-1MO,", size, "FREQ=MONTHLY;BYDAY="),
        repeat("1,", size, "FREQ=MONTHLY;BYDAY=MO,TU;BYSETPOS="),
        repeat("BYHOUR=8;", size, "FREQ=DAILY;"),
        repeat(";", size, "FREQ=DAILY"),
        repeat("X-A:b\n", size, "BEGIN:VEVENT\nRRULE:FREQ=DAILY\n", "END:VEVENT"),
        repeat(" X-A:b", size, "BEGIN:VEVENT RRULE:FREQ=DAILY", " END:VEVENT"),
        "RRULE:FREQ=DAILY" + " " * size + "X",
        "RRULE:FREQ=DAILY" + "\t" * size + "DTSTART:20270101T000000",
        repeat("\n ", size, "RRULE:FREQ=DAILY"),
        repeat('"', size, "DTSTART;TZID=", ":20270101T000000\nRRULE:FREQ=DAILY"),
        repeat(";A=b", size, "DTSTART", ":20270101T000000\nRRULE:FREQ=DAILY"),
        repeat("20270101T000000,", size, "DTSTART:20270101T000000\nRRULE:FREQ=DAILY\nEXDATE:"),
        repeat("BEGIN:VALARM\n", size, "BEGIN:VCALENDAR\n", "RRULE:FREQ=DAILY"),
        repeat("RRULE:FREQ=MINUTELY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=29;COUNT=10000\n", size,
               "BEGIN:VEVENT\nDTSTART:20260622T000000Z\n", "END:VEVENT"),
        repeat("1", size, "DTSTART:", "\nRRULE:FREQ=DAILY"),
    ]


def zone_names(size: int) -> list[str]:
    return [repeat("a", size), repeat("Asia/", size), repeat("../", size), repeat("/", size),
            repeat("right/", size, tail="UTC")]


def test_schedules_never_stall_the_server(server: LiveServer) -> None:
    sends = [post("/v1/jobs", job_body(job_params={"type": "recurring", "schedule": text,
                                                   "timezone": "UTC"}))
             for size in SIZES for text in schedules(size)]
    sends += [post("/v1/jobs", job_body(job_params={"type": "recurring",
                                                    "schedule": "0 8 * * *", "timezone": zone}))
              for size in SIZES for zone in zone_names(size)]
    sends += [post("/v1/jobs", job_body(job_params={"type": "one-time", "timezone": "UTC",
                                                    "time": repeat(token, size)}))
              for size in SIZES for token in ("2", "2026-", "T00:00", "+")]
    answers = hostile(server, sends)
    assert {a.status_code for a in answers} <= {201, 413, 422}


# --- what else reads a request: headers, tokens, URLs, page tokens ---------------------------
def test_headers_urls_and_tokens_never_stall_the_server(server: LiveServer) -> None:
    size = 8_000  # past this, uvicorn refuses the header block itself
    sends: list[Send] = [
        lambda http: http.get("/v1/jobs", headers={"Authorization": repeat("Bearer ", size)}),
        lambda http: http.get("/v1/jobs", headers={"Authorization": "Bearer " + "a" * size}),
        lambda http: http.get("/v1/jobs", params={"page_token": repeat("ab=", size)}),
        lambda http: http.get("/v1/jobs", params={"start_time": repeat("2026-", size)}),
        post("/v1/jobs", job_body(), **{"Idempotency-Key": repeat("k-", size)}),
    ]
    for url in (repeat("a.", 60_000, "http://", "/x"), repeat(":", 60_000, "http://[", "]/"),
                repeat("%41", 60_000, "http://example.com/"), repeat("@", 60_000, "http://")):
        sends.append(post("/v1/jobs", job_body(action={"type": "webhook", "url": url})))
    answers = hostile(server, sends)
    assert {a.status_code for a in answers} <= {201, 400, 401, 413, 422, 431}


# --- the same parsers behind MCP (Streamable HTTP, mounted in the API) ------------------------
def mcp_tool(tool: str, arguments: dict[str, Any]) -> Send:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}
    return post("/mcp", body, Accept="application/json, text/event-stream")


def test_mcp_tools_never_stall_the_server(server: LiveServer) -> None:
    sends = [mcp_tool("create_task", {"task": "x", "schedule": text[:4_000], "timezone": "UTC"})
             for text in schedules(4_000)]  # the tool's own cap on `schedule`
    sends += [mcp_tool("create_task", {"when": repeat(token, 490)})  # `when`: 500 at most
              for token in ("every day at 8am ", "8:", ", ", "每天早上八點", "週一", "了")]
    sends += [mcp_tool("create_task", {"task": "x", "schedule": "0 8 * * *", "timezone": zone})
              for zone in ("right/UTC", repeat("Asia/", 60))]
    answers = hostile(server, sends)
    for answer in answers:
        assert answer.status_code == 200, answer.text[:300]
        assert "internal_error" not in answer.text
